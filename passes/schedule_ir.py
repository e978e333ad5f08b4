"""The Graph IR phases' decisions, as their ops state them: `tsched.schedule` (schedule and vectorize phases),
`tmem.stage` and `tmem.slot` (memory phase) stand right before the Graph IR op they decide for. Every
reader of a decision and every walk over a function's Graph IR ops goes through here."""

from __future__ import annotations

from ..dialects.tsched import DECISION_OPS
from ..mlir import ir

_VECTOR_KEYS = ("lanes", "warp")


def graph_ops(fn) -> list:
    """The ops of `fn`'s body in order, without the decision ops."""
    return [op for op in fn.entry_block.operations if op.operation.name not in DECISION_OPS]


def decisions(op) -> list:
    """The decision ops of Graph IR op `op`: those right before it in its block."""
    found = []
    for other in op.operation.block.operations:
        if other.operation == op.operation:
            return found
        found = found + [other] if other.operation.name in DECISION_OPS else []
    return found


def decision(op, name: str):
    """`op`'s decision op called `name`, or None."""
    return next((d for d in decisions(op) if d.operation.name == name), None)


def _ints(d, keys=None) -> dict:
    if d is None:
        return {}
    return {k: ir.IntegerAttr(d.attributes[k]).value for k in d.attributes if keys is None or k in keys}


def schedule_of(op) -> dict:
    """The schedule phase's launch geometry for `op` (tsched.ScheduleOp's names), {} when it has none."""
    s = _ints(decision(op, "tsched.schedule"))
    return {k: v for k, v in s.items() if k not in _VECTOR_KEYS}


def vector_of(op) -> dict:
    """The vectorize phase's `lanes` and `warp` for `op`, {} when it has none."""
    return _ints(decision(op, "tsched.schedule"), _VECTOR_KEYS)


def buffer_of(value) -> int | None:
    """The memory phase's buffer slot for the result `value` of a Graph IR op, None when it has none."""
    owner = value.owner
    slot = decision(owner, "tmem.slot") if isinstance(owner, ir.OpView) else None
    return None if slot is None else ir.IntegerAttr(slot.attributes["slot"]).value


def staging_of(op) -> dict | None:
    """The memory phase's staging buffers for matmul `op`: name -> (shape, copies); None when it planned none."""
    stages = [d for d in decisions(op) if d.operation.name == "tmem.stage"]
    if not stages:
        return None
    return {ir.StringAttr(d.attributes["buffer"]).value:
            ([ir.IntegerAttr(a).value for a in ir.ArrayAttr(d.attributes["shape"])],
             ir.IntegerAttr(d.attributes["copies"]).value) for d in stages}


def transpose_perm(v: ir.Value) -> list[int] | None:
    """The permutation of the `ttensor.transpose` defining `v`, else None."""
    owner = v.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "ttensor.transpose":
        return None
    return [ir.IntegerAttr(p).value for p in ir.ArrayAttr(owner.attributes["perm"])]


def swapped_input(v: ir.Value):
    """The input of the `ttensor.transpose` defining `v` when it swaps exactly the last two axes, else None."""
    perm = transpose_perm(v)
    rank = len(perm or ())
    return v.owner.operands[0] if rank >= 2 and perm == list(range(rank - 2)) + [rank - 1, rank - 2] else None
