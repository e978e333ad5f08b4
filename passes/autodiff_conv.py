"""Differentiation rules of ``ttensor.conv`` (passes/autodiff.py's tables hold them).

A conv is linear in each operand, y = conv(x, w), so its tangent is conv(ẋ, w) + conv(x, ẇ). Its
cotangents are written in the GEMM form the compiler runs the forward in (passes/convolution.py): with the
patches cols = im2col(x) [N·P, C·K], the cotangent ȳ viewed as the GEMM's result ȳ₂ [N·P, O] (a transpose
of the last two axes of ȳ [N, O, P]) and the weight as w₂ [O, C·K],

    w̄ = reshape(ȳ₂ᵀ cols)            a GEMM over the N·P positions
    x̄ = col2im(ȳ₂ w₂)                a GEMM, then im2col's adjoint: each patch element added back where it
                                      was read (a gather over the taps, no atomics)

so the backward runs on every target that runs the forward, on the same GEMMs.
"""

from __future__ import annotations

import math

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import graph_shapes


def _shape(v) -> list[int]:
    t = ir.RankedTensorType(v.type)
    return [ir.ShapedType.get_dynamic_size() if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]


def _elt(v):
    return ir.RankedTensorType(v.type).element_type


def _accum(v) -> ir.TypeAttr:
    return ir.TypeAttr.get(_elt(v) if str(_elt(v)) == "f64" else ir.F32Type.get())


def _geometry(op) -> dict:
    return {a: op.attributes[a] for a in ("stride", "padding", "dilation")}


def vjp(e, op, cts, want):
    (ct,) = cts
    x, w = op.operands
    (n, c), (o, _), out = _shape(x)[:2], _shape(w)[:2], _shape(op.results[0])[2:]
    kernel = _shape(w)[2:]
    p, ck = math.prod(out), c * math.prod(kernel)
    batch = (e.dims(x) or [None])[0]
    rows = n * p if n != ir.ShapedType.get_dynamic_size() else n
    named = None if batch is None else graph_shapes.product([batch, str(p)])
    ct3 = e.reshape(ct, ir.RankedTensorType.get([n, o, p], _elt(ct)), [batch, str(o), str(p)])
    ct2 = e.reshape(e.swap_last(ct3), ir.RankedTensorType.get([rows, o], _elt(ct)), [named, str(o)])
    kernel_attr = ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k) for k in kernel])
    grads = [None, None]
    if want[0]:
        w2 = e.reshape(w, ir.RankedTensorType.get([o, ck], _elt(w)), [str(o), str(ck)])
        patches = e.matmul(ct2, w2, _accum(x), _elt(x))
        grads[0] = e._at(lambda: ttensor.Col2imOp(patches, x, kernel=kernel_attr, **_geometry(op),
                                                  result=x.type).result)
    if want[1]:
        cols = e._at(lambda: create(ttensor.Im2colOp, x, kernel=kernel_attr, **_geometry(op),
                                    circular=ir.BoolAttr.get(False), flip=ir.BoolAttr.get(False),
                                    result=ir.RankedTensorType.get([rows, ck], _elt(x))).result)
        grads[1] = e.reshape(e.matmul(e.swap_last(ct2), cols, _accum(w), _elt(w)), w.type)
    return grads


def jvp(e, op, ts):
    tx, tw = ts
    x, w = op.operands
    t = op.results[0].type
    terms = [e._at(lambda a=a, b=b: ttensor.ConvOp(a, b, **_geometry(op), result=t).result)
             for a, b, tangent in ((tx, w, tx), (x, tw, tw)) if tangent is not None]
    return [terms[0] if len(terms) == 1 else e.add(terms[0], terms[1], t)]


VJP = {"ttensor.conv": vjp}
JVP = {"ttensor.conv": jvp}
