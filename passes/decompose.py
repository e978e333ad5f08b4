"""Decompositions of Graph IR ops a target runs as several kernels.

`flash_attention` on the CPU: rewritten as ``softmax(Q Kᵀ · scale) V`` (the softmax masked for `causal`,
top-left aligned: query i sees keys 0..i), with f32 scores and probabilities rounded to V's type for the
second product, as FlashAttention does. In f32 the fusion phase groups the chain back into one attention
kernel (backends/cpu/attention.py) that never writes the probabilities; in other types it runs as two GEMMs
(the packed, multi-threaded ones) and a row softmax.
"""

from __future__ import annotations

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import graph_shapes
from .schedule_ir import graph_ops


def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def attention(fn) -> int:
    """Rewrites every flash_attention of `fn`; returns how many."""
    targets = [op for op in graph_ops(fn) if op.operation.name == "ttensor.flash_attention"]
    if not targets:
        return 0
    dims = graph_shapes.infer(fn)
    for op in targets:
        _rewrite(op, dims)
    return len(targets)


def _rewrite(op, dims: dict) -> None:
    q, k, v = op.operands[0], op.operands[1], op.operands[2]
    qt, kt_, vt = (ir.RankedTensorType(x.type) for x in (q, k, v))
    rank = qt.rank
    f32 = ir.F32Type.get()

    def shape(t):
        return [t.get_dim_size(i) if not t.is_dynamic_dim(i) else ir.ShapedType.get_dynamic_size()
                for i in range(t.rank)]

    qs, ks = shape(qt), shape(kt_)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    with op.location, ir.InsertionPoint(op):
        k_t = ttensor.TransposeOp(k, perm=ir.ArrayAttr.get([_i64(p) for p in perm]),
                                  result=ir.RankedTensorType.get([ks[p] for p in perm], kt_.element_type)).result
        scores_t = ir.RankedTensorType.get(qs[:-1] + [ks[-2]], f32)
        scores = ttensor.MatmulOp(q, k_t, accum=ir.TypeAttr.get(f32), result=scores_t).result
        scale = ttensor.ConstantOp(value=ir.FloatAttr.get(f32, ir.FloatAttr(op.attributes["scale"]).value),
                                   result=ir.RankedTensorType.get([], f32)).result
        scaled = ttensor.BinaryOp(scores, scale, fn=ir.StringAttr.get("mul"), result=scores_t).result
        soft = ttensor.SoftmaxOp(scaled, axis=_i64(rank - 1), result=scores_t)
        if ir.BoolAttr(op.attributes["causal"]).value:
            soft.attributes["tessera.causal"] = ir.StringAttr.get(dims[q][-2])  # the query count, per row
        probs = soft.result
        if vt.element_type != f32:
            probs = create(ttensor.CastOp, probs, accum=ir.TypeAttr.get(f32),
                           result=ir.RankedTensorType.get(shape(scores_t), vt.element_type)).result
        out = ttensor.MatmulOp(probs, v, accum=ir.TypeAttr.get(f32), result=op.results[0].type).result
    op.results[0].replace_all_uses_with(out)
    op.operation.erase()
