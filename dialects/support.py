"""Helpers shared by the dialect definitions: verifier diagnostics and attribute reading."""

from __future__ import annotations

from ..mlir import ir


def int_attr(attr) -> int:
    return ir.IntegerAttr(attr).value


def constant_int(value) -> int | None:
    """The integer an SSA value is known to hold when an ``arith.constant`` defines it, else None."""
    owner = value.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "arith.constant":
        return int_attr(owner.attributes["value"])
    return None


class Diagnose:
    """Emits a verifier error at the op's location (which the frontend set to the user's file:line:col)
    and names the op, so a message reads ``kernel.py:7:9: error: 'ttile.thread_id' axis must be …``."""

    def __init__(self, op):
        self.op = op

    def fail(self, message: str) -> bool:
        self.op.location.emit_error(f"'{self.op.operation.name}' {message}")
        return False


def create(op_cls, *args, **kwargs):
    """Builds a Python-defined op. ext's builders drop attribute values that are falsy in Python, which a
    false ``BoolAttr`` is; such attributes are set after creation instead."""
    falsy = {k: v for k, v in kwargs.items() if isinstance(v, ir.BoolAttr) and not v.value}
    kwargs.update({k: ir.BoolAttr.get(True) for k in falsy})
    op = op_cls(*args, **kwargs)
    for k, v in falsy.items():
        op.attributes[k] = v
    return op
