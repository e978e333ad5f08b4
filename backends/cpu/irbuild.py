"""Building blocks for the CPU backend's generated tile kernels (gemm.py, attention.py): index arithmetic,
constants and loops, each op created at the current insertion point.

Index operands may be Python ints: they become `arith.constant`s of index type where they are used.
"""

from __future__ import annotations

from ...mlir import arith, ir, scf, vector

# The launch arguments every per-block kernel takes after its own parameters (docs/image-format.md, "The CPU
# code section"): block id, block size and grid size, x, y, z.
LAUNCH_ARGS = ("bid_x", "bid_y", "bid_z", "bdim_x", "bdim_y", "bdim_z", "gdim_x", "gdim_y", "gdim_z")


def f32() -> ir.Type:
    return ir.F32Type.get()


def elem_type(dtype: str) -> ir.Type:
    return {"f32": ir.F32Type.get, "f16": ir.F16Type.get, "bf16": ir.BF16Type.get}[dtype]()


def zeros(t: ir.Type) -> ir.Value:
    """0.0 of a float type, or a vector of them."""
    elem = t.element_type if isinstance(t, ir.VectorType) else t
    zero = ir.FloatAttr.get(elem, 0.0)
    if isinstance(t, ir.VectorType):
        return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, zero)).result
    return arith.ConstantOp(t, zero).result


def idx(v) -> ir.Value:
    return arith.ConstantOp.create_index(v).result if isinstance(v, int) else v


def add(a, b):
    return arith.AddIOp(idx(a), idx(b)).result


def sub(a, b):
    return arith.SubIOp(idx(a), idx(b)).result


def mul(a, b):
    return arith.MulIOp(idx(a), idx(b)).result


def smin(a, b):
    return arith.MinSIOp(idx(a), idx(b)).result


def lt(a, b):
    return arith.CmpIOp(arith.CmpIPredicate.slt, idx(a), idx(b)).result


def scf_for(lb, ub, step=1, iter_args=()):
    return scf.ForOp(idx(lb), idx(ub), idx(step), list(iter_args))


def transpose_vectors(vecs: list) -> list:
    """The vw x vw block whose rows are `vecs` (vw vectors of vw lanes, vw a power of two), transposed in
    registers: log2(vw) rounds of shuffles, each pairing rows `half` apart (result k holds lane k of every row)."""
    vw = len(vecs)
    half = vw // 2
    while half:
        out = list(vecs)
        for i in range(vw):
            if not i & half:
                lo = [j if not j & half else vw + j - half for j in range(vw)]
                hi = [j + half if not j & half else vw + j for j in range(vw)]
                out[i] = vector.ShuffleOp(vecs[i], vecs[i + half], lo).result
                out[i + half] = vector.ShuffleOp(vecs[i], vecs[i + half], hi).result
        vecs = out
        half //= 2
    return vecs
