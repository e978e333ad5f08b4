"""Integer attributes: Python's integers are unbounded, MLIR's integer attributes hold 64 bits.

The frontend's compile-time integers are 64-bit (signed, or unsigned for the seeds of random numbers);
`FunctionBuilder.expr` refuses others where they are written. These build the attributes, and an integer no
check stopped raises OverflowError rather than reaching MLIR's bindings (which abort the cast)."""

from __future__ import annotations

from ..mlir import ir

INT64_MIN, INT64_MAX, UINT64_MAX = -2 ** 63, 2 ** 63 - 1, 2 ** 64 - 1


def i64(v: int) -> ir.IntegerAttr:
    if not INT64_MIN <= v <= INT64_MAX:
        raise OverflowError(f"{v} does not fit in a signed 64-bit integer")
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def u64(v: int) -> ir.IntegerAttr:
    """An unsigned 64-bit attribute (the bindings take its bits as a signed integer)."""
    if not 0 <= v <= UINT64_MAX:
        raise OverflowError(f"{v} does not fit in an unsigned 64-bit integer")
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), v - 2 ** 64 if v > INT64_MAX else v)
