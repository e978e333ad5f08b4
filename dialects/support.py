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
