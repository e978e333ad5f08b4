"""Differentiation rules of `ttensor.flash_attention` (passes/autodiff.py's tables hold them).

Reverse mode: the forward's copy gains one `attention_lse` beside it (the row log-sum-exp of scale·Q Kᵀ, the
only residual the backward needs besides Q, K, V and O); ``delta = rowsum(dO ∘ O)`` in f32 is a cast, a mul
and a sum (an elementwise and a row kernel, or, on targets whose backward kernels compute delta, joined to
the gradients' group by `join_delta`); then one `attention_grad` per wanted operand. Targets with fused kernels run the lse
in the forward's kernel and the gradients in one backward kernel that recomputes P block by block, never
writing the S×S matrix; elsewhere passes/decompose.py rewrites them into GEMMs (the fallback).

Forward mode is written in primitives: with P = softmax(S), S = scale · Q Kᵀ (masked for `causal`),
Ṡ = scale · (Q̇ Kᵀ + Q K̇ᵀ), Ṗ = P ∘ (Ṡ − rowsum(P ∘ Ṡ)) and Ȯ = Ṗ V + P V̇ — P and Ṗ are materialised.
"""

from __future__ import annotations

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import decompose, graph_shapes
from .schedule_ir import graph_ops


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


def _group(op):
    return ir.IntegerAttr(op.attributes["tessera.group"]).value if "tessera.group" in op.attributes else None


def _delta_chain(grad, dims: dict, dtypes: frozenset) -> list | None:
    """The ops computing attention_grad `grad`'s delta as `vjp` writes it — rowsum over the last axis of
    cast(A, f32) · cast(B, f32), A and B in Q's dtype and dO's extents (dO and O) — each value read by
    the next alone and delta by attention_grad ops of `grad`'s group alone; None where it is not so."""
    q, delta, do = grad.operands[0], grad.operands[5], grad.operands[3]
    if str(_elt(q)) not in dtypes or not isinstance(delta.owner, ir.OpView):
        return None
    red = delta.owner
    if red.operation.name != "ttensor.reduce" or ir.StringAttr(red.attributes["kind"]).value != "sum" or \
            ir.BoolAttr(red.attributes["keepdims"]).value:
        return None
    rank = ir.RankedTensorType(red.operands[0].type).rank
    if [ir.IntegerAttr(a).value for a in ir.ArrayAttr(red.attributes["axes"])] not in ([rank - 1], [-1]):
        return None
    users = [getattr(u.owner, "operation", u.owner).opview for u in delta.uses]
    if any(u.operation.name != "ttensor.attention_grad" or _group(u) != _group(grad) for u in users):
        return None
    mul = red.operands[0].owner
    if not isinstance(mul, ir.OpView) or mul.operation.name != "ttensor.binary" or \
            ir.StringAttr(mul.attributes["fn"]).value != "mul" or len(list(mul.results[0].uses)) != 1:
        return None
    casts = [x.owner for x in mul.operands]
    for c in casts:
        if not isinstance(c, ir.OpView) or c.operation.name != "ttensor.cast" or len(list(c.results[0].uses)) != 1 \
                or _elt(c.results[0]) != ir.F32Type.get() or _elt(c.operands[0]) != _elt(q) \
                or dims.get(c.operands[0]) != dims.get(do):
            return None
    return casts + [mul, red]


def join_delta(fn, dtypes: frozenset) -> None:
    """Joins each delta of `vjp` (`_delta_chain`) to the "attention_bwd" group of its attention_grad ops, on
    targets whose backward kernels compute it (TargetFacts.attention_delta: one kernel reading dO and O once
    instead of an elementwise kernel and a row reduction). Only where the fusion phase gave those ops groups of
    their own (a cast of dO shared with other work keeps its kernel, and delta then its three)."""
    ops = graph_ops(fn)
    members: dict = {}
    for op in ops:
        if _group(op) is not None:
            members.setdefault(_group(op), []).append(op.results[0])
    dims = graph_shapes.infer(fn)
    for grad in ops:
        if grad.operation.name != "ttensor.attention_grad" or _group(grad) is None:
            continue
        chain = _delta_chain(grad, dims, dtypes)
        if chain is None or _group(chain[-1]) == _group(grad):
            continue
        mine = {op.results[0] for op in chain}
        if any(not set(members.get(_group(op), [])) <= mine for op in chain):
            continue
        for op in chain:
            op.attributes["tessera.group"] = grad.attributes["tessera.group"]
            op.attributes["tessera.group_kind"] = grad.attributes["tessera.group_kind"]


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
