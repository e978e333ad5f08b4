"""Which tensor accesses of a SIMT kernel are provably within the tensor's extents.

simt_to_warps checks every other access at run time (docs/robustness.md, "Out-of-bounds accesses"); the
proofs here are what lets the common kernels pay nothing. An index is in bounds for dimension k of a tensor
when it is non-negative and below the tensor's extent k. The facts come from the guards kernels already
write: inside ``if i < X.shape[0]`` (``arith.cmpi slt|ult`` of i and ``memref.dim X, k``, or a conjunction of
such) i is below X's extent 0, and so is the induction variable of ``for j in range(..., X.shape[0])``.
Extents are named as the kernel's signature names them (``tessera.dims``), so a fact about X holds for every
tensor declared with the same dimension name; static extents compare by value.
"""

from __future__ import annotations

from ..diagnostics import parse_location
from ..mlir import ir

# Ops whose index results are never negative (launch geometry, extents).
_NONNEG_SOURCES = ("ttile.thread_id", "ttile.local_id", "ttile.block_id", "ttile.block_dim", "ttile.grid_dim",
                   "ttile.lane_id", "ttile.warp_id", "ttile.warp_size", "ttile.thread_rank", "memref.dim")
# Index arithmetic that keeps non-negative operands non-negative.
_NONNEG_CLOSED = ("arith.addi", "arith.muli", "arith.divui", "arith.remui", "arith.ceildivui", "arith.minui",
                  "arith.maxui", "arith.shrui", "arith.select", "arith.minsi", "arith.divsi", "arith.remsi")
# arith.cmpi predicates that bound an index from above -> whether the operands are swapped (b > a).
_BELOW = {"slt": False, "ult": False, "sgt": True, "ugt": True}
_PREDICATES = {2: "slt", 6: "ult", 4: "sgt", 8: "ugt"}  # arith::CmpIPredicate's values


class Facts:
    """The in-bounds facts of one kernel at the current point of its lowering: `assume` on entering a
    guarded region or a loop body, `forget` on leaving it."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.below: list[tuple[ir.Value, tuple]] = []  # (index, extent key): index < that extent
        self._nonneg: dict = {}

    # -- extents ------------------------------------------------------------------------------------------
    def extent_key(self, mem: ir.Value, k: int) -> tuple:
        size = ir.MemRefType(mem.type).shape[k]
        if size != ir.ShapedType.get_dynamic_size():
            return ("static", size)
        attrs = self._arg_attrs(mem)
        if "tessera.dims" in attrs:
            d = ir.ArrayAttr(attrs["tessera.dims"])[k]
            if isinstance(d, ir.StringAttr):
                return ("dim", d.value)
        return ("value", mem, k)

    def tensor_name(self, mem: ir.Value) -> str:
        attrs = self._arg_attrs(mem)
        if "tessera.name" not in attrs and isinstance(mem.owner, ir.OpView):
            attrs = mem.owner.attributes   # a named local buffer: a shared array (tile.alloc_shared)
        return ir.StringAttr(attrs["tessera.name"]).value if "tessera.name" in attrs else "a local buffer"

    def report(self, op, mem: ir.Value) -> str:
        """What a failed check of `op`'s access of `mem` reports (after the kernel's name and block)."""
        where = parse_location(str(op.location))
        at = f" at {where[0]}:{where[1]}" if where else ""
        return f"tensor '{self.tensor_name(mem)}' accessed outside its extents{at}"

    def _arg_attrs(self, mem: ir.Value) -> ir.DictAttr | dict:
        """The kernel argument attributes of `mem`, empty when it is no argument (a local buffer)."""
        if "arg_attrs" not in self.kernel.attributes:
            return {}
        for a, attrs in zip(self.kernel.arguments, ir.ArrayAttr(self.kernel.attributes["arg_attrs"])):
            if a == mem:
                return ir.DictAttr(attrs)
        return {}

    def _bound_key(self, v: ir.Value) -> tuple | None:
        """The extent key `v` is, when it is one: ``memref.dim T, k`` or a constant."""
        op = _defining_op(v)
        if op is None:
            return None
        if op.operation.name == "memref.dim":
            k = _constant(op.operands[1])
            return None if k is None else self.extent_key(op.operands[0], k)
        c = _constant(v)
        return None if c is None else ("static", c)

    # -- facts --------------------------------------------------------------------------------------------
    def assume(self, cond: ir.Value) -> int:
        """Records what `cond` (an i1, true in the region entered) says of indices; returns the count to
        `forget` on leaving."""
        op = _defining_op(cond)
        if op is None:
            return 0
        if op.operation.name == "arith.andi":
            return self.assume(op.operands[0]) + self.assume(op.operands[1])
        if op.operation.name == "scf.if" and len(op.regions[1].blocks):  # `a and b`, b evaluated only if a
            k = cond.result_number
            then_yield, else_yield = (_terminator(r.blocks[0]) for r in op.regions)
            if _constant(else_yield.operands[k]) == 0:
                return self.assume(op.operands[0]) + self.assume(then_yield.operands[k])
        if op.operation.name != "arith.cmpi":
            return 0
        pred = _PREDICATES.get(ir.IntegerAttr(op.attributes["predicate"]).value)
        if pred is None:
            return 0
        a, b = op.operands[0], op.operands[1]
        if _BELOW[pred]:
            a, b = b, a
        return self.assume_below(a, b, unsigned=pred.startswith("u"))

    def assume_below(self, index: ir.Value, bound: ir.Value, unsigned: bool = False) -> int:
        key = self._bound_key(bound)
        if key is None:
            return 0
        self.below.append((index, key))
        if unsigned:  # index <u extent: also index >= 0
            self._nonneg[index] = True
        return 1

    def forget(self, n: int) -> None:
        del self.below[len(self.below) - n:]

    # -- queries ------------------------------------------------------------------------------------------
    def in_bounds(self, mem: ir.Value, indices: list[ir.Value]) -> bool:
        return all(self._index_in_bounds(i, self.extent_key(mem, k)) for k, i in enumerate(indices))

    def _index_in_bounds(self, index: ir.Value, key: tuple) -> bool:
        if not self.nonneg(index):
            return False
        c = _constant(index)
        if c is not None and key[0] == "static" and c < key[1]:
            return True
        for v, k in self.below:
            if v == index and (k == key or (k[0] == key[0] == "static" and k[1] <= key[1])):
                return True
        return False

    def nonneg(self, v: ir.Value) -> bool:
        if v in self._nonneg:
            return self._nonneg[v]
        self._nonneg[v] = False  # cycles (loop-carried values) are not provably non-negative
        self._nonneg[v] = self._compute_nonneg(v)
        return self._nonneg[v]

    def _compute_nonneg(self, v: ir.Value) -> bool:
        c = _constant(v)
        if c is not None:
            return c >= 0
        op = _defining_op(v)
        if op is None:
            return self._induction_nonneg(v)
        if op.operation.name in _NONNEG_SOURCES:
            return True
        if op.operation.name in _NONNEG_CLOSED:
            operands = list(op.operands)[1:] if op.operation.name == "arith.select" else list(op.operands)
            return all(self.nonneg(o) for o in operands)
        return False

    def _induction_nonneg(self, v: ir.Value) -> bool:
        """A for loop's induction variable with a non-negative lower bound and a positive step."""
        if not isinstance(v, ir.BlockArgument):
            return False
        arg = v
        owner = arg.owner.owner
        if owner is None or owner.operation.name != "scf.for" or arg.arg_number != 0:
            return False
        step = _constant(owner.operands[2])
        return self.nonneg(owner.operands[0]) and step is not None and step > 0


def loop_bounds(loop) -> tuple[ir.Value, ir.Value] | None:
    """(induction variable, upper bound) of an `scf.for` whose step is a positive constant: inside its body the
    variable is below the bound."""
    step = _constant(loop.operands[2])
    if step is None or step <= 0:
        return None
    return loop.regions[0].blocks[0].arguments[0], loop.operands[1]


def _terminator(block: ir.Block):
    return block.operations[len(block.operations) - 1]


def _defining_op(v: ir.Value):
    return None if isinstance(v, ir.BlockArgument) else v.owner


def _constant(v: ir.Value) -> int | None:
    op = _defining_op(v)
    if op is None or op.operation.name != "arith.constant" or not isinstance(v.type,
                                                                                 (ir.IndexType, ir.IntegerType)):
        return None
    try:
        return ir.IntegerAttr(op.attributes["value"]).value
    except (ValueError, TypeError):
        return None
