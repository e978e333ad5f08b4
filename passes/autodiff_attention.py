"""Differentiation rules of `ttensor.flash_attention` (passes/autodiff.py's tables hold them).

Reverse mode: the forward's copy gains one `attention_lse` beside it (the row log-sum-exp of scale·Q Kᵀ, the
only residual the backward needs besides Q, K, V and O); ``delta = rowsum(dO ∘ O)`` in f32 is a cast, a mul
and a sum (they fuse); then one `attention_grad` per wanted operand. Targets with fused kernels run the lse
in the forward's kernel and the gradients in one backward kernel that recomputes P block by block, never
writing the S×S matrix; elsewhere passes/decompose.py rewrites them into GEMMs (the fallback).

Forward mode is written in primitives: with P = softmax(S), S = scale · Q Kᵀ (masked for `causal`),
Ṡ = scale · (Q̇ Kᵀ + Q K̇ᵀ), Ṗ = P ∘ (Ṡ − rowsum(P ∘ Ṡ)) and Ȯ = Ṗ V + P V̇ — P and Ṗ are materialised.
"""

from __future__ import annotations

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import decompose


def _elt(v):
    return ir.RankedTensorType(v.type).element_type


def _compute(*values):
    """The element type attention's arithmetic runs in: f32, or f64 where an operand is f64 (the f64
    interpreter runs of the tests), as the GEMM accumulators do."""
    f64 = ir.F64Type.get()
    return f64 if any(_elt(v) == f64 for v in values) else ir.F32Type.get()


def _rows(q) -> ir.RankedTensorType:
    """An f32 value per query row: [..., SQ]."""
    shape = ttensor.shape_of(ir.RankedTensorType(q.type))[:-1]
    return ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size() if d is None else d for d in shape],
                                   ir.F32Type.get())


def _f32(e, x):
    if _elt(x) == ir.F32Type.get():
        return x
    t = ir.RankedTensorType(x.type)
    shape = [ir.ShapedType.get_dynamic_size() if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]
    return e._at(lambda: ttensor.CastOp(x, accum=ir.TypeAttr.get(ir.F32Type.get()),
                                        result=ir.RankedTensorType.get(shape, ir.F32Type.get())).result)


def vjp(e, op, cts, want):
    (do,) = cts
    q, k, v = op.operands
    o = op.results[0]
    causal, scale = op.attributes["causal"], op.attributes["scale"]
    # beside the forward (q and k are defined before it): the fusion phase joins it to the forward's kernel
    with e.loc, ir.InsertionPoint(op):
        lse = create(ttensor.AttentionLseOp, q, k, causal=causal, scale=scale, result=_rows(q)).result
    rank = ir.RankedTensorType(o.type).rank
    delta = e.reduce("sum", e.mul(_f32(e, do), _f32(e, o)), [rank - 1], False)
    return [e._at(lambda x=x, w=w: create(ttensor.AttentionGradOp, q, k, v, do, lse, delta, causal=causal, scale=scale,
                                          wrt=ir.StringAttr.get(w), result=x.type).result)
            if wanted else None for x, w, wanted in zip((q, k, v), ttensor.ATTENTION_WRT, want)]


def jvp(e, op, ts):
    tq, tk, tv = ts
    q, k, v = op.operands
    o = op.results[0]
    causal = ir.BoolAttr(op.attributes["causal"]).value
    scale = ir.FloatAttr(op.attributes["scale"]).value
    element = _compute(q, k, v)
    accum = ir.TypeAttr.get(element)
    dims = e.dims(q)
    rows = dims[-2] if dims and dims[-2] is not None else str(ttensor.shape_of(ir.RankedTensorType(q.type))[-2])
    with e.loc:
        _, p = decompose.probabilities(q, k, causal, scale, rows, element)
    terms = []
    if tq is not None or tk is not None:
        parts = ([e.matmul(tq, e.swap_last(k), accum, element)] if tq is not None else []) + \
            ([e.matmul(q, e.swap_last(tk), accum, element)] if tk is not None else [])
        ds = e.scale(parts[0] if len(parts) == 1 else e.add(parts[0], parts[1], p.type), scale)
        # softmax's tangent along the keys; a masked key has P = 0, so its (finite) Ṡ drops out
        last = ir.RankedTensorType(p.type).rank - 1
        dp = e.mul(p, e.sub(ds, e.reduce("sum", e.mul(ds, p, p.type), [last], True), p.type), p.type)
        terms.append(e.matmul(dp, v, accum, _elt(o)))
    if tv is not None:
        terms.append(e.matmul(p, tv, accum, _elt(o)))
    return [terms[0] if len(terms) == 1 else e.add(terms[0], terms[1], o.type)]
