"""Derivatives of `@function`s as a transformation of the Graph IR (``tessera-autodiff``).

The frontend declares each derivative (`g = grad(loss, argnums=(1, 2))`, tessera/frontend/derivatives.py) as
a body-less ``func.func private @g`` with a ``tessera.derivative`` attribute naming its kind, its primal and
the parameters it differentiates. This pass writes its body, in Graph IR, so that a derivative is a function
like any other from here on: calls of it are inlined, it fuses, is planned, compiled and interpreted.

The body is the primal's ops copied (calls of other @functions inlined on the way, layernorm and rmsnorm
expanded into the primitives they are defined by) followed by
  - reverse mode (grad, value_and_grad, vjp): the ops in reverse order, each op's cotangent rule (`_VJP`)
    turning its results' cotangents into its operands', summed where a value has several uses;
  - forward mode (jvp): the ops in order, each op's tangent rule (`_JVP`) turning its operands' tangents
    into its results'.
Every residual the backward ops read is a value of the forward copy, saved, except inside the calls of
`@function(checkpoint=True)`s, whose values the backward recomputes (the memory policy: autodiff_policy.py).
An op without a rule on the path from the differentiated parameters to the results is an error at the op's
own line (its location is the user's), naming it.

A rule is one small function of the op and the emitter (`_Emit`), whose helpers build ttensor ops at the
op's location. Zero cotangents and tangents are None and never built, except where a result needs one.
"""

from __future__ import annotations

import json
import math

from ..diagnostics import LoweringError
from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import autodiff_attention, autodiff_conv, autodiff_operators, autodiff_policy, graph_shapes

def _name(op) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _shape(t) -> list:
    return ttensor.shape_of(ir.RankedTensorType(t))


def _type(shape: list, element) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size() if d is None else d for d in shape], element)


def _elt(v):
    return ir.RankedTensorType(v.type).element_type


def _is_float(v) -> bool:
    if not isinstance(v.type, ir.RankedTensorType):   # an operator or a factorization (autodiff_operators.py)
        return autodiff_operators.differentiable(v)
    return isinstance(_elt(v), ir.FloatType)


def _str(op, attr: str) -> str:
    return ir.StringAttr(op.attributes[attr]).value


def _int(op, attr: str) -> int:
    return ir.IntegerAttr(op.attributes[attr]).value


def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _largest(element) -> float:
    """The largest finite value of a float type: `_Emit.step` scales by it so that every nonzero normal
    number saturates to ±1."""
    width = ir.FloatType(element).width
    return {16: 65504.0 if str(element) == "f16" else 3.3895313892515355e38, 32: 3.4028234663852886e38,
            64: 1.7976931348623157e308}.get(width, 448.0)


def what(op) -> str:
    """An op as the user wrote it: `op.tanh` for a `ttensor.unary {fn = "tanh"}`."""
    name = op.operation.name
    if name in ("ttensor.unary", "ttensor.binary"):
        return f"op.{_str(op, 'fn')}"
    if name == "ttensor.reduce":
        return f"op.{_str(op, 'kind')}"
    return "op." + name.split(".", 1)[1] if name.startswith(("ttensor.", "tdist.", "tod.")) else f"'{name}'"


class _Emit:
    """Builds ttensor ops at the end of the derivative's body, at the location of the op being differentiated
    (set by the walk), so that the derivative's ops point at the user's line of the op they come from."""

    def __init__(self):
        self.loc = None
        self.known: dict = {}   # value -> its extents as the launch plan names them (graph_shapes), or None

    def dims(self, v) -> list | None:
        """v's extents in the derivative's symbols (`"M"`, `"(M*N)//(4)"`, digits), from its parameters'
        `tessera.dims` through graph_shapes' rules; None where they cannot tell. A reshape whose result has
        extents known only at run time names them by these (`tessera.result_dims`), as the frontend's do."""
        stack = [v]
        while stack:
            w = stack[-1]
            if w in self.known:
                stack.pop()
                continue
            owner = w.owner
            if isinstance(owner, ir.Block):
                self.known[w] = None
                continue
            pending = [o for o in owner.operands if o not in self.known]
            if pending:
                stack.extend(pending)
                continue
            ins = [self.known[o] for o in owner.operands]
            outs = [None] * len(owner.results)
            if all(d is not None for d in ins):
                try:
                    outs = graph_shapes._rule(owner, ins)
                except (LoweringError, IndexError, KeyError, ValueError):
                    pass
            for r, d in zip(owner.results, outs):
                self.known[r] = d
        return self.known[v]

    def _at(self, build):
        with self.loc:
            return build()

    def const(self, value: float, like) -> ir.Value:
        et = _elt(like)
        return self._at(lambda: ttensor.ConstantOp(value=ir.FloatAttr.get(et, float(value)),
                                                   result=_type([], et)).result)

    def bin(self, fn: str, a, b, result_type=None) -> ir.Value:
        if result_type is None:
            result_type = _type(ttensor.broadcast(_shape(a.type), _shape(b.type)), _elt(a))
        return self._at(lambda: ttensor.BinaryOp(a, b, fn=ir.StringAttr.get(fn), result=result_type).result)

    def add(self, a, b, t=None):
        return self.bin("add", a, b, t)

    def sub(self, a, b, t=None):
        return self.bin("sub", a, b, t)

    def mul(self, a, b, t=None):
        return self.bin("mul", a, b, t)

    def div(self, a, b, t=None):
        return self.bin("div", a, b, t)

    def scale(self, x, c: float):
        return self.mul(x, self.const(c, x), x.type)

    def shift(self, x, c: float):
        return self.add(x, self.const(c, x), x.type)

    def un(self, fn: str, x) -> ir.Value:
        return self._at(lambda: ttensor.UnaryOp(x, fn=ir.StringAttr.get(fn), result=x.type).result)

    def zeros_like(self, v) -> ir.Value:
        # a 0 broadcast to v's type and run-time extents: v's values are not read (v * 0 would keep v
        # computed, and is NaN where v is infinite)
        return self.broadcast_like(self.const(0.0, v), v)

    def step(self, x) -> ir.Value:
        """1 where x > 0, else 0 (so relu'(0) = 0, as JAX has it): min(max(x * largest, 0), 1), exact for
        every x but positive subnormals below 1/largest, which flush to 0 on the CPU anyway."""
        big = self.mul(x, self.const(_largest(_elt(x)), x), x.type)
        return self.bin("min", self.bin("max", big, self.const(0.0, x), x.type), self.const(1.0, x), x.type)

    def reduce(self, kind: str, x, axes: list, keepdims: bool, result_type=None) -> ir.Value:
        shape = _shape(x.type)
        if result_type is None:
            kept = [1 if i in axes else d for i, d in enumerate(shape)] if keepdims else \
                [d for i, d in enumerate(shape) if i not in axes]
            result_type = _type(kept, _elt(x))
        # any axes, in place: a bias's gradient sums over leading ones, which kernels reduce without moving
        # them last (kernelgen._strided_reduce)
        return self._at(lambda: create(ttensor.ReduceOp, x, kind=ir.StringAttr.get(kind),
                                       axes=ir.ArrayAttr.get([_i64(a) for a in axes]),
                                       keepdims=ir.BoolAttr.get(keepdims), result=result_type).result)

    def sum_to(self, x, target) -> ir.Value:
        """x summed over the axes along which a value of type `target` was broadcast to x's shape."""
        if x.type == target:
            return x
        xs, ts = _shape(x.type), _shape(ir.RankedTensorType(target))
        lead = len(xs) - len(ts)
        if lead:
            x = self.reduce("sum", x, list(range(lead)), False, target if len(ts) == 0 else None)
        xs = _shape(x.type)
        ones = [i for i, (a, b) in enumerate(zip(xs, ts)) if b == 1 and a != 1]
        if ones:
            x = self.reduce("sum", x, ones, True, target)
        return x

    def broadcast_like(self, x, like) -> ir.Value:
        """x (extents of 1 where `like` has more) stretched to like's type and run-time extents. It reads
        only like's extents, never its values: a value computed only to be broadcast over (the last layer's
        forward under a loss's sum) is left unread, and the canonical stage's cleanup removes it."""
        return self._name_extents(self._at(lambda: ttensor.BroadcastOp(x, result=like.type).result),
                                  self.dims(like))

    def matmul(self, a, b, accum, element=None) -> ir.Value:
        """a @ b, its result of `element` (a's by default). Operands of two dtypes (a cotangent of an
        `out_dtype=f32` GEMM times a bf16 operand) are multiplied in the narrower one's: a's converted to b's
        dtype when b is the narrower, as autocast's backward GEMMs do, so that a backward GEMM runs on the
        same tensor cores as its forward (the ptx GEMMs take operands of one dtype)."""
        if _elt(a) != _elt(b):
            if ir.FloatType(_elt(a)).width > ir.FloatType(_elt(b)).width:
                a = _cast(self, a, _type(_shape(a.type), _elt(b)))
            else:
                b = _cast(self, b, _type(_shape(b.type), _elt(a)))
        sa, sb = _shape(a.type), _shape(b.type)
        shape = ttensor.broadcast(sa[:-2], sb[:-2]) + [sa[-2], sb[-1]]
        result = _type(shape, element or _elt(a))
        return self._at(lambda: ttensor.MatmulOp(a, b, accum=accum, result=result).result)

    def transpose(self, x, perm: list) -> ir.Value:
        shape = _shape(x.type)
        return self._at(lambda: ttensor.TransposeOp(x, perm=ir.ArrayAttr.get([_i64(p) for p in perm]),
                                                    result=_type([shape[p] for p in perm], _elt(x))).result)

    def swap_last(self, x) -> ir.Value:
        r = len(_shape(x.type))
        return self.transpose(x, list(range(r - 2)) + [r - 1, r - 2])

    def reshape(self, x, t, dims: list | None = None) -> ir.Value:
        """x reshaped to type t; `dims` (the result's extents as `dims` names them) name those t leaves
        `?`, so that a reshape with several extents known only at run time can be run and planned."""
        return self._name_extents(self._at(lambda: ttensor.ReshapeOp(x, result=t).result), dims)

    @staticmethod
    def _name_extents(r, dims: list | None) -> ir.Value:
        """Result r of a reshape or broadcast with the extents its type leaves `?` named by `dims`."""
        t = ir.RankedTensorType(r.type)
        named = ["?" if dims is None or dims[i] is None or "?" in dims[i] else dims[i] for i in range(t.rank)]
        named = [str(t.get_dim_size(i)) if not t.is_dynamic_dim(i) else n for i, n in enumerate(named)]
        if any(t.is_dynamic_dim(i) and n != "?" for i, n in enumerate(named)):
            r.owner.attributes["tessera.result_dims"] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in named])
        return r

    def reshape_like(self, x, like) -> ir.Value:
        """x reshaped to the type and run-time extents of `like`."""
        return self.reshape(x, like.type, self.dims(like))

    def keepdims(self, ct, op) -> ir.Value:
        """A reduction's cotangent with its reduced axes back, as extent 1."""
        if ir.BoolAttr(op.attributes["keepdims"]).value or not _shape(ct.type):
            return ct   # a 0-d cotangent broadcasts as it is
        axes = _axes(op)
        x = op.operands[0]
        xs, names = _shape(x.type), self.dims(x)
        return self.reshape(ct, _type([1 if i in axes else d for i, d in enumerate(xs)], _elt(ct)),
                            names and ["1" if i in axes else d for i, d in enumerate(names)])


def _axes(op) -> list:
    rank = len(_shape(op.operands[0].type))
    return sorted(ir.IntegerAttr(a).value % rank for a in ir.ArrayAttr(op.attributes["axes"]))


# -- elementwise derivatives: f'(x) given the operand x and the result y --------------------------------

def _d_gelu(e, x, y):
    # d/dx x Φ(x) = Φ(x) + x φ(x)
    cdf = e.scale(e.shift(e.un("erf", e.scale(x, 1 / math.sqrt(2))), 1.0), 0.5)
    pdf = e.scale(e.un("exp", e.scale(e.un("square", x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return e.add(cdf, e.mul(x, pdf))


def _d_gelu_tanh(e, x, y):
    # y = x/2 (1 + tanh u), u = c (x + k x³): y' = (1 + t)/2 + x/2 (1 - t²) c (1 + 3 k x²)
    c, k = math.sqrt(2 / math.pi), 0.044715
    x2 = e.un("square", x)
    t = e.un("tanh", e.scale(e.mul(x, e.shift(e.scale(x2, k), 1.0)), c))
    du = e.scale(e.shift(e.scale(x2, 3 * k), 1.0), c)
    sech2 = e.sub(e.const(1.0, x), e.un("square", t), x.type)
    return e.add(e.scale(e.shift(t, 1.0), 0.5), e.mul(e.scale(x, 0.5), e.mul(sech2, du)))


# The derivatives a target's GEMM epilogue may compute from the activation's operand (TargetFacts.gemm_epilogue
# "gelu_grad", "gelu_tanh_grad"): passes/fusion.py matches these formulas' ops to fuse dH ∘ gelu'(Z) into the
# GEMM that computes dH.
GELU_DERIVATIVES = {"gelu": _d_gelu, "gelu_tanh": _d_gelu_tanh}


def _d_silu(e, x, y):
    s = e.un("sigmoid", x)
    return e.mul(s, e.shift(e.mul(x, e.sub(e.const(1.0, x), s, x.type)), 1.0))


def _d_sign(e, x, y):
    # abs'(x): -1, 0 or 1 (0 at 0)
    return e.sub(e.step(x), e.step(e.un("neg", x)))


_UNARY = {
    "relu": lambda e, x, y: e.step(x),
    "gelu": _d_gelu,
    "gelu_tanh": _d_gelu_tanh,
    "silu": _d_silu,
    "sigmoid": lambda e, x, y: e.mul(y, e.sub(e.const(1.0, y), y, y.type)),
    "tanh": lambda e, x, y: e.sub(e.const(1.0, y), e.un("square", y), y.type),
    "exp": lambda e, x, y: y,
    "log": lambda e, x, y: e.un("reciprocal", x),
    "sqrt": lambda e, x, y: e.scale(e.un("reciprocal", y), 0.5),
    "rsqrt": lambda e, x, y: e.scale(e.mul(y, e.un("square", y)), -0.5),
    "neg": None,
    "abs": _d_sign,
    "erf": lambda e, x, y: e.scale(e.un("exp", e.un("neg", e.un("square", x))), 2 / math.sqrt(math.pi)),
    "square": lambda e, x, y: e.scale(x, 2.0),
    "reciprocal": lambda e, x, y: e.un("neg", e.un("square", y)),
    "round": lambda e, x, y: e.zeros_like(y),   # a step function: 0 wherever it is differentiable
}


def _unary_linear(e, op, d):
    """d * f'(x): the cotangent and the tangent rule of an elementwise function are the same product."""
    fn = _str(op, "fn")
    x, y = op.operands[0], op.results[0]
    if fn == "neg":
        return e.un("neg", d)
    return e.mul(d, _UNARY[fn](e, x, y), y.type)


# -- binary: the partial derivatives (∂c/∂a, ∂c/∂b), each None where it is 1 -----------------------------

def _partials(e, op, want):
    """Built only for the operands `want` names (the active ones): pow's ∂/∂b takes log(a), which a
    constant exponent must not pay for, nor turn into NaN for a negative base."""
    a, b, c = op.operands[0], op.operands[1], op.results[0]
    fn = _str(op, "fn")
    if fn == "add":
        return None, None
    if fn == "sub":
        return None, -1.0
    if fn == "mul":
        return b, a
    if fn == "div":
        inv = e.un("reciprocal", b)
        return inv, e.un("neg", e.mul(c, inv, c.type)) if want[1] else None
    if fn == "pow":   # a^b: b a^(b-1), and log(a) a^b
        return (e.mul(b, e.div(c, a, c.type), c.type) if want[0] else None,
                e.mul(e.un("log", a), c, c.type) if want[1] else None)
    if fn in ("max", "min"):   # the operand chosen gets it all; ties go to b, as to one side only
        sel = e.step(e.sub(a, b, c.type) if fn == "max" else e.sub(b, a, c.type))
        return sel, e.sub(e.const(1.0, sel), sel, sel.type)
    raise AssertionError(fn)


def _times(e, d, partial, t):
    if partial is None:
        return d
    if isinstance(partial, float):
        return e.un("neg", d) if partial == -1.0 else e.scale(d, partial)
    return e.mul(d, partial, t)


def _vjp_binary(e, op, cts, want):
    (ct,) = cts
    pa, pb = _partials(e, op, want)
    return [e.sum_to(_times(e, ct, p, ct.type), v.type) if w else None
            for v, p, w in zip(op.operands, (pa, pb), want)]


def _jvp_binary(e, op, ts):
    ta, tb = ts
    pa, pb = _partials(e, op, (ta is not None, tb is not None))
    c = op.results[0]
    terms = [_times(e, t, p, c.type) for t, p in ((ta, pa), (tb, pb)) if t is not None]
    out = terms[0] if len(terms) == 1 else e.add(terms[0], terms[1], c.type)
    return [e.broadcast_like(out, c) if out.type != c.type else out]


def _vjp_matmul(e, op, cts, want):
    (ct,) = cts
    a, b = op.operands
    accum = op.attributes["accum"]
    # each cotangent in its operand's dtype (a bf16 operand's is bf16, cast back by the cast that made it)
    return [e.sum_to(e.matmul(ct, e.swap_last(b), accum, _elt(a)), a.type) if want[0] else None,
            e.sum_to(e.matmul(e.swap_last(a), ct, accum, _elt(b)), b.type) if want[1] else None]


def _jvp_matmul(e, op, ts):
    ta, tb = ts
    a, b = op.operands
    accum = op.attributes["accum"]
    out = _elt(op.results[0])
    terms = ([e.matmul(ta, b, accum, out)] if ta is not None else []) + \
        ([e.matmul(a, tb, accum, out)] if tb is not None else [])
    return [terms[0] if len(terms) == 1 else e.add(terms[0], terms[1], op.results[0].type)]


def _bias_axis(op) -> int:
    return _int(op, "axis") % len(_shape(op.operands[0].type))


def _vjp_bias_add(e, op, cts, want):
    (ct,) = cts
    axis, rank = _bias_axis(op), len(_shape(ct.type))
    return [ct, e.reduce("sum", ct, [i for i in range(rank) if i != axis], False, op.operands[1].type)
            if want[1] else None]


def _jvp_bias_add(e, op, ts):
    tx, tb = ts
    if tb is None:
        return [tx]
    base = tx if tx is not None else e.zeros_like(op.results[0])
    return [e._at(lambda: ttensor.BiasAddOp(base, tb, axis=op.attributes["axis"], result=base.type).result)]


def _vjp_transpose(e, op, cts):
    perm = [ir.IntegerAttr(p).value for p in ir.ArrayAttr(op.attributes["perm"])]
    inverse = sorted(range(len(perm)), key=perm.__getitem__)
    return [e.transpose(cts[0], inverse)]


def _jvp_transpose(e, op, ts):
    return [e.transpose(ts[0], [ir.IntegerAttr(p).value for p in ir.ArrayAttr(op.attributes["perm"])])]


def _vjp_reduce(e, op, cts):
    x = op.operands[0]
    ct = e.keepdims(cts[0], op)
    if _str(op, "kind") == "mean":
        ct = e.div(ct, _count(e, op), ct.type)
    return [e.broadcast_like(ct, x)]


def _jvp_reduce(e, op, ts):
    return [e.reduce(_str(op, "kind"), ts[0], _axes(op), ir.BoolAttr(op.attributes["keepdims"]).value,
                     op.results[0].type)]


def _extreme_mask(e, op, x, m):
    """1 where x attains its reduction's max (min), else 0: with m (the result, its reduced axes back as 1)
    never below (above) x, m - x (x - m) is 0 exactly at the ties and positive elsewhere."""
    gap = e.sub(m, x, x.type) if _str(op, "kind") == "max" else e.sub(x, m, x.type)
    return e.sub(e.const(1.0, x), e.step(gap), x.type)


def _vjp_extreme(e, op, cts):
    # The subgradient convention: tied extremes split the cotangent equally (each gets ct / ties), so that
    # the rule is symmetric in the tied elements and agrees with the jvp below, which averages them.
    x = op.operands[0]
    mask = _extreme_mask(e, op, x, e.keepdims(op.results[0], op))
    ties = e.reduce("sum", mask, _axes(op), True)
    return [e.mul(e.div(e.keepdims(cts[0], op), ties), mask, x.type)]


def _jvp_extreme(e, op, ts):
    x, y = op.operands[0], op.results[0]
    mask = _extreme_mask(e, op, x, e.keepdims(y, op))
    keep = ir.BoolAttr(op.attributes["keepdims"]).value
    total = e.reduce("sum", e.mul(ts[0], mask, x.type), _axes(op), keep, y.type)
    return [e.div(total, e.reduce("sum", mask, _axes(op), keep, y.type), y.type)]


def _vjp_reduce_any(e, op, cts):
    kind = _str(op, "kind")
    if kind == "prod":
        return [e.mul(e.keepdims(cts[0], op), _prod_others(e, op), op.operands[0].type)]
    return _vjp_extreme(e, op, cts) if kind in ("max", "min") else _vjp_reduce(e, op, cts)


def _jvp_reduce_any(e, op, ts):
    kind = _str(op, "kind")
    if kind == "prod":
        y = op.results[0]
        return [e.reduce("sum", e.mul(ts[0], _prod_others(e, op), ts[0].type), _axes(op),
                         ir.BoolAttr(op.attributes["keepdims"]).value, y.type)]
    return _jvp_extreme(e, op, ts) if kind in ("max", "min") else _jvp_reduce(e, op, ts)


def _cast(e, v, to):
    """v converted to the tensor type `to`, accumulating as the frontend's op.cast does by default (the
    element type itself from 32 bits up, f32 below)."""
    element = ir.RankedTensorType(to).element_type
    if not isinstance(element, ir.FloatType):
        return None   # a tangent of an integer result is no tangent
    acc = element if ir.FloatType(element).width >= 32 else ir.F32Type.get()
    return e._at(lambda: ttensor.CastOp(v, accum=ir.TypeAttr.get(acc), result=to).result)


def _dropout(e, op, d):
    """Dropout is linear in its input: the cotangent (tangent) goes through the same mask and 1/(1-p) scale.
    The mask is a function of the seed, the offset and each element's linear index only (Philox, the same
    on every backend), so the same attributes on a tensor of the same shape replay the forward's stream."""
    return e._at(lambda: ttensor.DropoutOp(d, p=op.attributes["p"], seed=op.attributes["seed"],
                                           offset=op.attributes["offset"], result=d.type).result)


def _count(e, op):
    """How many elements a mean reduces: a constant, or counted at run time where an extent is dynamic."""
    x = op.operands[0]
    shape = _shape(x.type)
    sizes = [shape[a] for a in _axes(op)]
    if None not in sizes:
        return e.const(float(math.prod(sizes)), x)
    return e.reduce("sum", e.shift(e.zeros_like(x), 1.0), _axes(op), False, _type([], _elt(x)))


def _softmax_linear(e, op, d):
    # J = diag(y) - y yᵀ along the axis is symmetric: the cotangent and the tangent rule are one
    y = op.results[0]
    axis = _int(op, "axis") % len(_shape(y.type))
    inner = e.reduce("sum", e.mul(d, y, y.type), [axis], True)
    return e.mul(y, e.sub(d, inner, y.type), y.type)


def _log_softmax_vjp(e, op, ct):
    # y = x - logsumexp(x) along the axis, J = I - softmax(x) 1ᵀ: dx = dy - exp(y) Σ dy
    y = op.results[0]
    axis = _int(op, "axis") % len(_shape(y.type))
    return e.sub(ct, e.mul(e.un("exp", y), e.reduce("sum", ct, [axis], True), y.type), y.type)


def _log_softmax_jvp(e, op, t):
    # J u = u - Σ softmax(x) u, the sum broadcast back along the axis
    y = op.results[0]
    axis = _int(op, "axis") % len(_shape(y.type))
    return e.sub(t, e.reduce("sum", e.mul(e.un("exp", y), t, y.type), [axis], True), y.type)


def _prod_others(e, op):
    """For each element x_i, the product of the other elements of its reduced slice, without dividing by
    zero: with z the slice's zeros (1 there) and p the product of its nonzero elements (x + z: zeros as 1),
    it is p / x_i in a slice without a zero, p at a slice's only zero and 0 beside it, and 0 everywhere in a
    slice of two zeros or more — the exact products, the zeros counted instead of divided by."""
    x = op.operands[0]
    axes = _axes(op)
    z = e.sub(e.const(1.0, x), e.step(e.un("abs", x)), x.type)
    nonzero = e.add(x, z, x.type)
    p = e.reduce("prod", nonzero, axes, True)
    zeros = e.reduce("sum", z, axes, True)
    none = e.sub(e.const(1.0, zeros), e.step(zeros), zeros.type)
    one = e.sub(e.step(zeros), e.step(e.shift(zeros, -1.0)), zeros.type)
    return e.mul(p, e.add(e.div(none, nonzero), e.mul(one, z)), x.type)


# op name -> rule(emitter, op, its results' cotangents, which operands are active) -> cotangent per operand
# (None: not active, or zero); a one-operand op is only reached with its operand active
_VJP = {
    "ttensor.unary": lambda e, op, cts, want: [_unary_linear(e, op, cts[0])],
    "ttensor.binary": _vjp_binary,
    "ttensor.matmul": _vjp_matmul,
    "ttensor.bias_add": _vjp_bias_add,
    "ttensor.transpose": lambda e, op, cts, want: _vjp_transpose(e, op, cts),
    "ttensor.reshape": lambda e, op, cts, want: [e.reshape_like(cts[0], op.operands[0])],
    "ttensor.broadcast": lambda e, op, cts, want: [e.sum_to(cts[0], op.operands[0].type)],
    "ttensor.reduce": lambda e, op, cts, want: _vjp_reduce_any(e, op, cts),
    "ttensor.softmax": lambda e, op, cts, want: [_softmax_linear(e, op, cts[0])],
    "ttensor.log_softmax": lambda e, op, cts, want: [_log_softmax_vjp(e, op, cts[0])],
    # a dtype conversion's cotangent is converted back to the operand's dtype (f32 from a bf16 GEMM operand)
    "ttensor.cast": lambda e, op, cts, want: [_cast(e, cts[0], op.operands[0].type)],
    "ttensor.dropout": lambda e, op, cts, want: [_dropout(e, op, cts[0])],
    "ttensor.flash_attention": autodiff_attention.vjp,
    "tensor.cast": lambda e, op, cts, want: [e._at(lambda: ir.Operation.create(
        "tensor.cast", results=[op.operands[0].type], operands=[cts[0]]).result)],
}

_JVP = {
    "ttensor.unary": lambda e, op, ts: [_unary_linear(e, op, ts[0])],
    "ttensor.binary": _jvp_binary,
    "ttensor.matmul": _jvp_matmul,
    "ttensor.bias_add": _jvp_bias_add,
    "ttensor.transpose": _jvp_transpose,
    "ttensor.reshape": lambda e, op, ts: [e.reshape_like(ts[0], op.results[0])],
    "ttensor.broadcast": lambda e, op, ts: [e.broadcast_like(ts[0], op.results[0])],
    "ttensor.reduce": _jvp_reduce_any,
    "ttensor.softmax": lambda e, op, ts: [_softmax_linear(e, op, ts[0])],
    "ttensor.log_softmax": lambda e, op, ts: [_log_softmax_jvp(e, op, ts[0])],
    "ttensor.cast": lambda e, op, ts: [_cast(e, ts[0], op.results[0].type)],
    "ttensor.dropout": lambda e, op, ts: [_dropout(e, op, ts[0])],
    "ttensor.flash_attention": autodiff_attention.jvp,
    "tensor.cast": lambda e, op, ts: [e._at(lambda: ir.Operation.create(
        "tensor.cast", results=[op.results[0].type], operands=[ts[0]]).result)],
}
_VJP.update(autodiff_operators.VJP)   # the operator algebra's rules
_JVP.update(autodiff_operators.JVP)
_VJP.update(autodiff_conv.VJP)        # conv's (as GEMMs, im2col and its adjoint)
_JVP.update(autodiff_conv.JVP)


# -- expansions: ops differentiated through their definition ---------------------------------------------

def _normalize(e, op, x, centered: bool):
    eps = ir.FloatAttr(op.attributes["eps"]).value
    last = len(_shape(x.type)) - 1
    if centered:
        x = e.sub(x, e.reduce("mean", x, [last], True), x.type)
    var = e.reduce("mean", e.un("square", x), [last], True)
    return e.mul(x, e.un("rsqrt", e.shift(var, eps)), x.type)


def _expand_layernorm(e, op, ins):
    gamma, beta = _mapped_params(op, ins)
    y = _normalize(e, op, ins[0], True)
    y = e.mul(y, gamma, y.type) if gamma is not None else y
    return [e.add(y, beta, y.type) if beta is not None else y]


def _expand_rmsnorm(e, op, ins):
    (gamma,) = _mapped_params(op, ins)
    y = _normalize(e, op, ins[0], False)
    return [e.mul(y, gamma, y.type) if gamma is not None else y]


def _mapped_params(op, ins) -> list:
    """The optional scale and shift, as values of the derivative's body (`ins` are the mapped operands)."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    out, pos = [], 1
    for n in sizes[1:]:
        out.append(ins[pos] if n else None)
        pos += n
    return out


_EXPAND = {"ttensor.layernorm": _expand_layernorm, "ttensor.rmsnorm": _expand_rmsnorm}


# -- the transformation -----------------------------------------------------------------------------------

def _has_rule(op, table) -> bool:
    return op.operation.name in table


def _refuse(op, derived: str, mode: str):
    return LoweringError(op, f"{what(op)} has no {mode} differentiation rule yet (needed by '{derived}'); "
                             f"differentiable ops: matmul, elementwise ops, bias_add, transpose, reshape, "
                             f"broadcast_to, sum, mean, max, min, prod, softmax, log_softmax, layernorm, rmsnorm, "
                             f"cast, dropout, flash_attention, conv1d, conv2d, and the operator algebra's ops "
                             f"(real operators)")


class _Copier:
    """The primal's body copied into the derivative's: calls of @functions inlined, expansions applied."""

    def __init__(self, functions: dict, emit: _Emit, derived: str):
        self.functions, self.e, self.derived = functions, emit, derived
        self.recompute = autodiff_policy.Recompute()   # the inlined calls of checkpointed functions

    def copy(self, fn, mapping: dict, stack: tuple) -> list:
        # `fn`'s extent symbols -> their extents in the derivative's: a reshape's `tessera.result_dims`
        # renamed by it, as passes/inline_functions.py renames an inlined one
        rename: dict = {}
        for arg, names in graph_shapes.arg_dims(fn).items():
            for n, d in zip(names, self.e.dims(mapping[arg]) or []):
                if n.isidentifier() and d is not None and "?" not in d:
                    rename.setdefault(n, d)
        for op in fn.regions[0].blocks[0].operations:
            name = op.operation.name
            ins = [mapping[o] for o in op.operands]
            if name == "func.return":
                return ins
            if name == "func.call":
                callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                target = self.functions.get(callee)
                if target is None or not target.regions[0].blocks or callee in stack:
                    raise LoweringError(op, f"'{self.derived}' differentiates through a call of '{callee}', "
                                            f"which has no body to differentiate (an imported function, or a "
                                            f"derivative: higher-order derivatives are not supported yet)")
                block = ir.InsertionPoint.current.block
                start = len(block.operations)
                outs = self.copy(target, dict(zip(target.regions[0].blocks[0].arguments, ins)), stack + (callee,))
                if "tessera.checkpoint" in target.attributes:
                    self.recompute.mark(list(block.operations)[start:])
            elif name in _EXPAND:
                self.e.loc = op.location
                outs = _EXPAND[name](self.e, op, ins)
            else:
                attrs = {a: op.attributes[a] for a in op.attributes}
                if "tessera.result_dims" in attrs:
                    attrs["tessera.result_dims"] = ir.ArrayAttr.get([ir.StringAttr.get(graph_shapes.rename(
                        ir.StringAttr(a).value, rename)) for a in ir.ArrayAttr(attrs["tessera.result_dims"])])
                outs = list(ir.Operation.create(name, results=[r.type for r in op.results], operands=ins,
                                                attributes=attrs, loc=op.location).results)
            for r, v in zip(op.results, outs):
                mapping[r] = v
        raise LoweringError(fn, f"'{_name(fn)}' has no return")


def _accumulate(e, table: dict, value, d) -> None:
    if d is None or not _is_float(value):
        return
    have = table.get(value)
    if have is None:
        table[value] = d
    elif isinstance(value.type, ir.RankedTensorType):
        table[value] = e.add(have, d, value.type)
    else:   # an operator's (a matrix) or a factorization's
        table[value] = autodiff_operators.accumulate(e, have, d)


def _active(ops: list, inputs: list) -> set:
    """The values that depend on the differentiated parameters: only they get cotangents, so an op off
    that path (a dropout of a constant input, an exponent) needs no rule."""
    active = set(inputs)
    for op in ops:
        if any(v in active for v in op.operands):
            active.update(r for r in op.results if _is_float(r))
    return active


def _reverse(e, ops: list, cts: dict, active: set, derived: str, recompute) -> None:
    for op in reversed(ops):
        outs = [cts.get(r) for r in op.results]
        want = [v in active for v in op.operands]
        if all(d is None for d in outs) or not any(want):
            continue
        if not _has_rule(op, _VJP):
            raise _refuse(op, derived, "reverse-mode")
        e.loc = op.location
        # the rule reads the op's operands and results as the policy has them: saved, or recomputed here
        for value, d, w in zip(op.operands, _VJP[op.operation.name](e, recompute.op(op), outs, want), want):
            if w:
                _accumulate(e, cts, value, d)


def _forward(e, ops: list, ts: dict, derived: str) -> None:
    for op in ops:
        ins = [ts.get(v) for v in op.operands]
        if all(t is None for t in ins):
            continue
        if not _has_rule(op, _JVP):
            raise _refuse(op, derived, "forward-mode")
        e.loc = op.location
        for r, t in zip(op.results, _JVP[op.operation.name](e, op, ins)):
            if t is not None and _is_float(r):
                ts[r] = t


def _or_zeros(e, d, like):
    """A derivative the walk never reached (a result independent of the input) is zero."""
    return e.zeros_like(like) if d is None else d


def _name_cotangent_extents(fn, e, cotangents: list, results: list) -> None:
    """A vjp's cotangent parameter has its result's extents. Where the frontend could not name one (a fresh
    `?k`: `op.reshape(X, (-1,))` of X [M, N, 3] is M*N*3 to graph_shapes, not to the frontend's unifier), it
    is declared here as the result's extent over the parameters' symbols, so that a launch plan can size it
    and the runtime check the argument against it."""
    attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"]))
    first = len(attrs) - len(cotangents)
    for k, (ct, r) in enumerate(zip(cotangents, results)):
        have, want = e.dims(ct), e.dims(r)
        if have is None or want is None or not any(h.startswith("?") for h in have):
            continue
        dims = [w if h.startswith("?") and w is not None and "?" not in w else h for h, w in zip(have, want)]
        e.known[ct] = dims
        d = ir.DictAttr(attrs[first + k])
        named = {a.name: a.attr for a in d}
        named["tessera.dims"] = ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(x))
                                                  if x.isdigit() else ir.StringAttr.get(x) for x in dims])
        attrs[first + k] = ir.DictAttr.get(named)
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def derive(fn, functions: dict) -> None:
    """Writes the body of the declared derivative `fn` (a body-less func.func with `tessera.derivative`)."""
    spec = json.loads(ir.StringAttr(fn.attributes["tessera.derivative"]).value)
    kind, argnums, derived = spec["kind"], spec["argnums"], _name(fn)
    primal = functions.get(spec["of"])
    if primal is None or not primal.regions[0].blocks:
        raise LoweringError(fn, f"'{derived}' differentiates '{spec['of']}', which has no body here")
    arg_types = list(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs)
    with fn.location:
        block = fn.regions[0].blocks.append(*arg_types)
    n = len(primal.regions[0].blocks[0].arguments)
    params, extra = list(block.arguments)[:n], list(block.arguments)[n:]
    e = _Emit()
    e.known.update((block.arguments[i], d) for i, d in enumerate(
        graph_shapes.arg_dims(fn).get(a) for a in fn.regions[0].blocks[0].arguments))
    with fn.location, ir.InsertionPoint(block):   # the location: types built outside any op's want one
        copier = _Copier(functions, e, derived)
        results = copier.copy(primal, dict(zip(primal.regions[0].blocks[0].arguments, params)), (spec["of"],))
        ops = list(block.operations)
        e.loc = fn.location
        if kind == "jvp":
            ts = {params[i]: t for i, t in zip(argnums, extra)}
            _forward(e, ops, ts, derived)
            out = results + [_or_zeros(e, ts.get(r), r) for r in results if _is_float(r)]
        else:
            if kind == "vjp":
                seeds = extra
                _name_cotangent_extents(fn, e, extra, results)
            else:   # grad: d loss / d loss = 1 (the loss is 0-d: the frontend checked)
                seeds = [e.const(1.0, results[0])]
            cts: dict = {}
            for r, s in zip(results, seeds):
                _accumulate(e, cts, r, s)
            _reverse(e, ops, cts, _active(ops, [params[i] for i in argnums]), derived, copier.recompute)
            copier.recompute.erase_unread()
            e.loc = fn.location
            grads = [_or_zeros(e, cts.get(params[i]), params[i]) for i in argnums]
            out = (results if kind in ("vjp", "value_and_grad") else []) + grads
        with fn.location:
            ir.Operation.create("func.return", operands=out)
    del fn.attributes["sym_visibility"]


def run(module) -> None:
    """Writes the body of every declared derivative of `module` (an Operation); one with a body is done."""
    body = module.regions[0].blocks[0]
    functions = {_name(op): op for op in body.operations if op.operation.name == "func.func"}
    for fn in functions.values():
        if "tessera.derivative" in fn.attributes and not fn.regions[0].blocks:
            derive(fn, functions)
