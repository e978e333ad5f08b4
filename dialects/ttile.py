"""``ttile``: Tile IR — the operations a kernel runs per thread, warp and block.

The SIMT part (thread and block indices, lanes and warps, warp shuffles) is what `@kernel` functions
written in the CUDA style lower to. The tile-level part, in ``ttile_tile``, is what Schedule IR lowers to:
warp fragments and tensor-core MMA, fragment loads from shared memory, async copies into it, barriers,
reductions over lanes and cooperative groups; memory itself comes from ``tmem``. Warp width is never written
into the IR: ``warp_size`` asks the target, fragments leave the lane layout to it, and reductions name group
sizes, not warps.
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import typing

from ..mlir import ext, ir
from .support import Invalid, constant_int, int_attr, verifier


class TTile(ext.Dialect, name="ttile"):
    pass


class _LaunchIndexOp(TTile.Operation):
    """Base of the index queries along one launch axis (x=0, y=1, z=2)."""

    @verifier
    def verify_invariants(self):
        d = int_attr(self.dim)
        if d not in (0, 1, 2):
            raise Invalid(f"axis must be 0 (x), 1 (y) or 2 (z), got {d}")


class ThreadIdOp(_LaunchIndexOp, name="thread_id", traits=[ext.Pure]):
    """Index of the calling thread in the whole grid along `dim` (block_id * block_dim + local id)."""

    dim: ir.IntegerAttr
    result: ext.Result[ir.IndexType]


class LocalIdOp(_LaunchIndexOp, name="local_id", traits=[ext.Pure]):
    """Index of the calling thread inside its block along `dim`."""

    dim: ir.IntegerAttr
    result: ext.Result[ir.IndexType]


class BlockIdOp(_LaunchIndexOp, name="block_id", traits=[ext.Pure]):
    dim: ir.IntegerAttr
    result: ext.Result[ir.IndexType]


class BlockDimOp(_LaunchIndexOp, name="block_dim", traits=[ext.Pure]):
    dim: ir.IntegerAttr
    result: ext.Result[ir.IndexType]


class GridDimOp(_LaunchIndexOp, name="grid_dim", traits=[ext.Pure]):
    dim: ir.IntegerAttr
    result: ext.Result[ir.IndexType]


class LaneIdOp(TTile.Operation, name="lane_id", traits=[ext.Pure]):
    """Position of the calling thread inside its warp, in [0, warp_size)."""

    result: ext.Result[ir.IndexType]


class WarpIdOp(TTile.Operation, name="warp_id", traits=[ext.Pure]):
    """Index of the calling thread's warp in the grid: the block's linear index times its warps, plus
    the warp's index inside the block — distinct across blocks, so per-warp results never collide."""

    result: ext.Result[ir.IndexType]


class WarpSizeOp(TTile.Operation, name="warp_size", traits=[ext.Pure]):
    """Lanes per warp on the target (32 on NVIDIA and the CPU backend, 64 on AMD CDNA)."""

    result: ext.Result[ir.IndexType]


class _ShuffleOp(TTile.Operation):
    """Base of the warp shuffles: a scalar value, a warp-uniform index operand, the value's type back."""

    @verifier
    def verify_invariants(self):
        if self.value.type != self.result.type:
            raise Invalid(f"result type {self.result.type} must equal the shuffled value's type {self.value.type}")
        t = self.value.type
        if not isinstance(t, (ir.IntegerType, ir.FloatType)):
            raise Invalid(f"shuffled value must be a scalar integer or float, got {t}")
        k = constant_int(self.operands[1])
        if k is not None and k < 0:
            raise Invalid(f"{self._index_name} must be non-negative, got {k}")


class ShuffleDownOp(_ShuffleOp, name="shuffle_down", traits=[ext.Pure]):
    """Value held by lane ``lane_id + offset`` of the same warp; a lane whose source is past the end of
    the warp gets its own value back (CUDA's ``__shfl_down_sync`` over the full warp)."""

    _index_name = "offset"
    value: ext.Operand[typing.Any]
    offset: ext.Operand[ir.IndexType]
    result: ext.Result[typing.Any]


class ShuffleXorOp(_ShuffleOp, name="shuffle_xor", traits=[ext.Pure]):
    """Value held by lane ``lane_id ^ mask`` (a butterfly step: after log2(warp_size) steps with masks
    warp_size/2 … 1, every lane holds the warp's reduction); a source outside the warp gives the lane's
    own value (CUDA's ``__shfl_xor_sync`` over the full warp)."""

    _index_name = "mask"
    value: ext.Operand[typing.Any]
    mask: ext.Operand[ir.IndexType]
    result: ext.Result[typing.Any]


class PhiloxUniformOp(TTile.Operation, name="philox_uniform", traits=[ext.Pure]):
    """A uniform number in [0, 1) from Philox-4x32-10: counter `counter` (its low and high 32-bit words,
    then 0, 0), key (`seed` low word, high word); the first output word's top 24 bits times 2^-24 — the
    dropout mask's bits on every backend (tessera/numerics/philox.py)."""

    counter: ext.Operand[ir.IndexType]
    seed: ir.IntegerAttr
    result: ext.Result[ir.F32Type]

    @verifier
    def verify_invariants(self):
        seed = ir.IntegerAttr(self.attributes["seed"])
        if ir.IntegerType(seed.type).width > 64 or seed.value < 0:
            raise Invalid(f"seed must be a 64-bit unsigned integer, got {seed}")
