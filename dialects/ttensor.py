"""``ttensor``: Graph IR — whole-tensor operations on builtin ``tensor<…>`` values.

What `@tessera.function` programs lower to first: matmuls, elementwise math with numpy broadcasting,
normalizations, reductions, layout changes, casts with an accumulation policy, dropout with a fixed Philox
seed, and attention. Each op is pure; its verifier checks the shapes and dtypes the spec's semantics need.
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import typing

from ..mlir import ext, ir
from .support import Invalid, create, declared_attributes, int_attr, positional_groups, verifier

UNARY_FNS = ("relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg",
             "abs", "erf", "square", "reciprocal", "round", "invert")
COMPARE_FNS = ("lt", "le", "gt", "ge", "eq", "ne")
# numpy's bitwise_and/or/xor (of bool tensors: logical and/or/xor) and left/right_shift (docs/language.md)
BITWISE_FNS = ("and", "or", "xor")
SHIFT_FNS = ("shl", "shr")
BINARY_FNS = ("add", "sub", "mul", "div", "max", "min", "pow", "floordiv", "mod", *COMPARE_FNS, *BITWISE_FNS,
              *SHIFT_FNS)
# the functions of one kind of element only: true division and powers of floats; Python's floor division and
# modulo (the divisor's sign) of integers (docs/language.md, "Integer tensors")
FLOAT_ONLY = ("div", "pow")
INT_ONLY = ("floordiv", "mod")
REDUCE_KINDS = ("sum", "mean", "max", "min", "prod")


class TTensor(ext.Dialect, name="ttensor"):
    pass


# -- helpers for verifiers --------------------------------------------------------------------------------

def ranked(v) -> ir.RankedTensorType | None:
    t = v.type
    return t if isinstance(t, ir.RankedTensorType) else None


def shape_of(t: ir.RankedTensorType) -> list[int | None]:
    """Static extents, None for a dynamic one."""
    return [None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]


def broadcast(a: list, b: list) -> list | None:
    """numpy broadcasting of two shapes with unknown (None) extents; None when they cannot broadcast."""
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        else:
            return None
        # a dynamic extent against a static one is checked at run time
    return list(reversed(out))


def compatible(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _floats(*types) -> bool:
    return all(isinstance(t.element_type, ir.FloatType) for t in types)


def _bool(t) -> bool:
    """Is `t` (an element type) i1? Compared by width, not against a constructed type: a verifier may run with
    no MLIR context current (a module parsed with context=)."""
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1


def _i4(t) -> bool:
    """Is `t` (an element type) i4, by width as `_bool`?"""
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 4


def _str(attr) -> str:
    return ir.StringAttr(attr).value


def _ints(attr) -> list[int]:
    return [int_attr(a) for a in ir.ArrayAttr(attr)]


def _float(attr) -> float:
    return ir.FloatAttr(attr).value


def _axis(axis: int, rank: int) -> int | None:
    a = axis + rank if axis < 0 else axis
    return a if 0 <= a < rank else None


class _TensorOp(TTensor.Operation):
    """Base: every operand and result must be a ranked tensor; then the op's own `rules(*types)` (operand
    types, then result types, in order) raise `Invalid` for what they refuse. An i4 tensor is quantize's
    result and dequantize's input and nothing else's: the schedule stage packs it two per byte between those
    two (passes/decompose.py), which no other op reads or writes."""

    holds_i4 = False

    @verifier
    def verify_invariants(self):
        with declared_attributes(self):
            ts = []
            for v in list(self.operands) + list(self.results):
                t = ranked(v)
                if t is None:
                    raise Invalid(f"operands and results must be ranked tensors, got {v.type}")
                ts.append(t)
                if _i4(t.element_type) and not self.holds_i4:
                    raise Invalid("an i4 tensor is only quantize's result or dequantize's input; dequantize it "
                                  "first")
            self.rules(*ts)


# -- ops --------------------------------------------------------------------------------------------------

TRANSPOSE_A, TRANSPOSE_B = "tessera.transpose_a", "tessera.transpose_b"
# flash_attention's Q, K, V and result are laid out [..., S, H, D], the heads inside the sequence (passes/
# fold_transposes.attention: the ptx kernels read and write that layout in place instead of through copies)
SEQ_HEADS = "tessera.seq_heads"


def matmul_transposes(op) -> tuple[bool, bool]:
    """Whether a ttensor.matmul reads its lhs, rhs transposed (passes/fold_transposes.py sets the unit
    attributes `tessera.transpose_a` / `tessera.transpose_b`): the operand is stored with its last two axes
    swapped, and the product uses it as if a `ttensor.transpose` had swapped them back."""
    attrs = op.operation.attributes
    return TRANSPOSE_A in attrs, TRANSPOSE_B in attrs


def as_read(shape: list, transposed: bool) -> list:
    """The extents of a matmul operand as the product reads it, from those it is stored with."""
    return shape[:-2] + [shape[-1], shape[-2]] if transposed else shape


class MatmulOp(_TensorOp, name="matmul", traits=[ext.Pure]):
    """``C = A @ B`` over the last two axes, with numpy broadcasting of leading (batch) axes. `accum` names the
    accumulation type (default f32 for floating inputs, i32 for integer ones); the result's element type may
    be narrower than the accumulator. The unit attributes `tessera.transpose_a` / `tessera.transpose_b` say
    an operand is stored transposed (last two axes swapped): ``C = Aᵀ @ B`` etc. (the schedule stage folds a
    `ttensor.transpose` into its matmul so that the GEMM reads the operand in place, without a copy)."""

    lhs: ext.Operand[typing.Any]
    rhs: ext.Operand[typing.Any]
    accum: ir.TypeAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        a, b, c = ts
        if a.rank < 2 or b.rank < 2:
            raise Invalid(f"operands must have rank >= 2, got {a.rank} and {b.rank}")
        for name in (TRANSPOSE_A, TRANSPOSE_B):
            if name in self.operation.attributes and not isinstance(self.operation.attributes[name], ir.UnitAttr):
                raise Invalid(f"attribute '{name}' must be a unit attribute, got {self.operation.attributes[name]}")
        ta, tb = matmul_transposes(self)
        sa, sb, sc = as_read(shape_of(a), ta), as_read(shape_of(b), tb), shape_of(c)
        if sa[-1] is not None and sb[-2] is not None and sa[-1] != sb[-2]:
            raise Invalid(f"contracting dimensions must match: lhs has {sa[-1]}, rhs has {sb[-2]}")
        batch = broadcast(sa[:-2], sb[:-2])
        if batch is None:
            raise Invalid(f"batch dimensions {sa[:-2]} and {sb[:-2]} do not broadcast")
        if not compatible(sc, batch + [sa[-2], sb[-1]]):
            raise Invalid(f"result shape {sc} does not match {batch + [sa[-2], sb[-1]]}")
        acc = ir.TypeAttr(self.accum).value
        ints = [isinstance(t.element_type, ir.IntegerType) for t in (a, b)]
        if any(ints) != all(ints):
            raise Invalid("operands must both be floating point or both integer")
        if all(ints) and not isinstance(acc, ir.IntegerType) or not any(ints) and not isinstance(acc, ir.FloatType):
            raise Invalid(f"accumulator type {acc} must be of the operands' kind (float or integer)")


class UnaryOp(_TensorOp, name="unary", traits=[ext.Pure]):
    """Elementwise `fn` (relu, gelu, silu, …) of a floating tensor; the result has the operand's type."""

    input: ext.Operand[typing.Any]
    fn: ir.StringAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        fn = _str(self.fn)
        if fn not in UNARY_FNS:
            raise Invalid(f"unknown function '{fn}' (known: {', '.join(UNARY_FNS)})")
        if ts[0] != ts[1]:
            raise Invalid(f"result type {ts[1]} must equal the operand type {ts[0]}")
        if fn == "invert":  # numpy's invert: ~x of an integer, logical not of a bool
            if not isinstance(ts[0].element_type, ir.IntegerType):
                raise Invalid(f"'invert' needs an integer or bool (i1) tensor, got {ts[0].element_type}")
        elif fn not in ("neg", "abs", "relu", "square") and not _floats(ts[0]):
            raise Invalid(f"'{fn}' needs a floating-point tensor, got {ts[0].element_type}")


class BinaryOp(_TensorOp, name="binary", traits=[ext.Pure]):
    """Elementwise `fn` (add, sub, mul, div, max, min, pow, floordiv, mod) with numpy broadcasting; operands
    share a dtype, which the result has, except that a comparison (lt, le, gt, ge, eq, ne: numpy's, NaN
    unordered) returns a bool (i1) tensor."""

    lhs: ext.Operand[typing.Any]
    rhs: ext.Operand[typing.Any]
    fn: ir.StringAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        a, b, c = ts
        fn = _str(self.fn)
        if fn not in BINARY_FNS:
            raise Invalid(f"unknown function '{fn}' (known: {', '.join(BINARY_FNS)})")
        if fn in COMPARE_FNS:
            if a.element_type != b.element_type or not _bool(c.element_type):
                raise Invalid(f"a comparison's operand element types must match and its result be i1, got "
                              f"{a.element_type}, {b.element_type} -> {c.element_type}")
        elif a.element_type != b.element_type or c.element_type != a.element_type:
            raise Invalid(f"operand and result element types must match, got {a.element_type}, "
                          f"{b.element_type} -> {c.element_type}")
        if fn in FLOAT_ONLY and not _floats(a) or fn in INT_ONLY and not isinstance(a.element_type, ir.IntegerType):
            kind = "floating-point" if fn in FLOAT_ONLY else "integer"
            raise Invalid(f"'{fn}' needs {kind} tensors, got {a.element_type}")
        if fn in BITWISE_FNS and not isinstance(a.element_type, ir.IntegerType) or fn in SHIFT_FNS and (
                not isinstance(a.element_type, ir.IntegerType) or _bool(a.element_type)):
            kind = "integer or bool (i1)" if fn in BITWISE_FNS else "integer (not i1)"
            raise Invalid(f"'{fn}' needs {kind} tensors, got {a.element_type}")
        shape = broadcast(shape_of(a), shape_of(b))
        if shape is None:
            raise Invalid(f"shapes {shape_of(a)} and {shape_of(b)} do not broadcast")
        if not compatible(shape_of(c), shape):
            raise Invalid(f"result shape {shape_of(c)} does not match the broadcast shape {shape}")


class SelectOp(_TensorOp, name="select", traits=[ext.Pure]):
    """numpy's where(cond, on_true, on_false): `cond` a bool (i1) tensor, the two values of one dtype, the
    three broadcast together."""

    cond: ext.Operand[typing.Any]
    on_true: ext.Operand[typing.Any]
    on_false: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        c, a, b, r = ts
        if not _bool(c.element_type):
            raise Invalid(f"the condition must be a bool (i1) tensor, got {c.element_type}")
        if a.element_type != b.element_type or r.element_type != a.element_type:
            raise Invalid(f"the values' and the result's element types must match, got {a.element_type}, "
                          f"{b.element_type} -> {r.element_type}")
        shape = broadcast(shape_of(c), shape_of(a))
        shape = None if shape is None else broadcast(shape, shape_of(b))
        if shape is None:
            raise Invalid(f"shapes {shape_of(c)}, {shape_of(a)} and {shape_of(b)} do not broadcast")
        if not compatible(shape_of(r), shape):
            raise Invalid(f"result shape {shape_of(r)} does not match the broadcast shape {shape}")


class BiasAddOp(_TensorOp, name="bias_add", traits=[ext.Pure]):
    """``x + bias`` where `bias` is 1-D along `axis` of `x` — a GEMM epilogue the fusion phase recognizes."""

    input: ext.Operand[typing.Any]
    bias: ext.Operand[typing.Any]
    axis: ir.IntegerAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, b, r = ts
        if b.rank != 1:
            raise Invalid(f"bias must be 1-D, got rank {b.rank}")
        axis = _axis(int_attr(self.axis), x.rank)
        if axis is None:
            raise Invalid(f"axis {int_attr(self.axis)} is out of range for rank {x.rank}")
        if not compatible([shape_of(x)[axis]], shape_of(b)):
            raise Invalid(f"bias length {shape_of(b)[0]} must equal extent {shape_of(x)[axis]} of axis {axis}")
        if r != x or b.element_type != x.element_type:
            raise Invalid("bias and result must have the input's element type and the result its type")


class _AlongAxisOp(_TensorOp):
    def rules(self, *ts) -> None:
        if _axis(int_attr(self.axis), ts[0].rank) is None:
            raise Invalid(f"axis {int_attr(self.axis)} is out of range for rank {ts[0].rank}")
        if ts[0] != ts[1] or not _floats(ts[0]):
            raise Invalid("input and result must be the same floating-point tensor type")


class SoftmaxOp(_AlongAxisOp, name="softmax", traits=[ext.Pure]):
    """Softmax along `axis`, computed stably (the row maximum is subtracted before exponentiation)."""

    input: ext.Operand[typing.Any]
    axis: ir.IntegerAttr
    result: ext.Result[typing.Any]


class LogSoftmaxOp(_AlongAxisOp, name="log_softmax", traits=[ext.Pure]):
    """``x - max - log(sum(exp(x - max)))`` along `axis`: the log of softmax without forming it, so that
    rows whose probabilities underflow keep finite logs (a cross-entropy's input)."""

    input: ext.Operand[typing.Any]
    axis: ir.IntegerAttr
    result: ext.Result[typing.Any]


class _NormOp(_TensorOp):
    def rules(self, *ts) -> None:
        x, r = ts[0], ts[-1]
        if x != r or not _floats(x):
            raise Invalid("input and result must be the same floating-point tensor type")
        if _float(self.eps) <= 0:
            raise Invalid(f"eps must be positive, got {_float(self.eps)}")
        for p in ts[1:-1]:  # the optional scale and shift present
            if p.rank != 1 or not compatible(shape_of(p), shape_of(x)[-1:]):
                raise Invalid(f"scale and shift must be 1-D of the last extent {shape_of(x)[-1]}, got {shape_of(p)}")


class LayerNormOp(_NormOp, name="layernorm", traits=[ext.Pure]):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis; gamma and beta are optional."""

    input: ext.Operand[typing.Any]
    eps: ir.FloatAttr
    result: ext.Result[typing.Any]
    gamma: typing.Optional[ext.Operand[typing.Any]] = None
    beta: typing.Optional[ext.Operand[typing.Any]] = None


class RMSNormOp(_NormOp, name="rmsnorm", traits=[ext.Pure]):
    """``x / sqrt(mean(x^2) + eps) * gamma`` over the last axis; gamma is optional."""

    input: ext.Operand[typing.Any]
    eps: ir.FloatAttr
    result: ext.Result[typing.Any]
    gamma: typing.Optional[ext.Operand[typing.Any]] = None


class ReduceOp(_TensorOp, name="reduce", traits=[ext.Pure]):
    """Reduces `axes` with `kind`; `keepdims` keeps them as extent 1."""

    input: ext.Operand[typing.Any]
    kind: ir.StringAttr
    axes: ir.ArrayAttr
    keepdims: typing.Any  # BoolAttr (ext cannot constrain to it)
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        kind = _str(self.kind)
        if kind not in REDUCE_KINDS:
            raise Invalid(f"unknown reduction '{kind}' (known: {', '.join(REDUCE_KINDS)})")
        axes = [_axis(a, x.rank) for a in _ints(self.axes)]
        if not axes or None in axes or len(set(axes)) != len(axes):
            raise Invalid(f"axes {_ints(self.axes)} must be distinct and within rank {x.rank}")
        keep = ir.BoolAttr(self.keepdims).value
        shape = shape_of(x)
        want = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
            [d for i, d in enumerate(shape) if i not in axes]
        if not compatible(shape_of(r), want) or r.element_type != x.element_type:
            raise Invalid(f"result must be tensor of shape {want} and element type {x.element_type}")
        if kind == "mean" and not _floats(x):
            raise Invalid(f"'mean' needs a floating-point tensor, got {x.element_type}")
        if _bool(x.element_type):
            raise Invalid(f"'{kind}' of a bool (i1) tensor has no numpy meaning in its own type; cast it first")


class TransposeOp(_TensorOp, name="transpose", traits=[ext.Pure]):
    input: ext.Operand[typing.Any]
    perm: ir.ArrayAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        perm = _ints(self.perm)
        if sorted(perm) != list(range(x.rank)):
            raise Invalid(f"perm {perm} must be a permutation of 0..{x.rank - 1}")
        if not compatible(shape_of(r), [shape_of(x)[p] for p in perm]) or r.element_type != x.element_type:
            raise Invalid(f"result shape {shape_of(r)} does not match the permuted input")


class ReshapeOp(_TensorOp, name="reshape", traits=[ext.Pure]):
    """Row-major reshape; the static element counts must agree when both are known. It also views complex
    values as their parts and back: a ``complex<T>`` tensor is stored as numpy stores one, real and imaginary
    part side by side, so ``tensor<[...]xcomplex<T>>`` and ``tensor<[...]x2xT>`` are one storage (the
    compiler's complex results: passes/fourier.py)."""

    input: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        scale = complex_view(x.element_type, r.element_type)
        if scale is None:
            raise Invalid("reshape keeps the element type, or views complex<T> as pairs of T (and back)")
        if scale != (1, 1) and (not x.has_static_shape or not r.has_static_shape):
            raise Invalid("a complex view has static extents")
        if x.has_static_shape and r.has_static_shape:
            nx, nr = _count(shape_of(x)) * scale[0], _count(shape_of(r)) * scale[1]
            if nx != nr:
                raise Invalid(f"element counts differ: {nx} vs {nr}" +
                              (" (a complex element counts as two)" if scale != (1, 1) else ""))


def complex_view(a: ir.Type, b: ir.Type) -> tuple[int, int] | None:
    """How many scalars of the part type an element of `a` and of `b` hold, where a reshape may view one as the
    other: (1, 1) for one type, (2, 1) complex<T> as T, (1, 2) T as complex<T>; None otherwise."""
    if a == b:
        return 1, 1
    if isinstance(a, ir.ComplexType) and ir.ComplexType(a).element_type == b:
        return 2, 1
    if isinstance(b, ir.ComplexType) and ir.ComplexType(b).element_type == a:
        return 1, 2
    return None


class BroadcastOp(_TensorOp, name="broadcast", traits=[ext.Pure]):
    """numpy ``broadcast_to`` of the input to the result's shape."""

    input: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        if r.rank < x.rank or broadcast(shape_of(x), shape_of(r)) is None or x.element_type != r.element_type:
            raise Invalid(f"{shape_of(x)} cannot be broadcast to {shape_of(r)}")


class CastOp(_TensorOp, name="cast", traits=[ext.Pure]):
    """Converts elements to the result's dtype (round to nearest even, saturating for fp8). `accum` is the
    accumulation policy later arithmetic on the result uses (``fp8_e4m3 @ accum(fp32)``)."""

    input: ext.Operand[typing.Any]
    accum: ir.TypeAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        if not compatible(shape_of(x), shape_of(r)):
            raise Invalid(f"cast keeps the shape: {shape_of(x)} vs {shape_of(r)}")
        acc = ir.TypeAttr(self.accum).value
        if _width(acc) < _width(r.element_type):
            raise Invalid(f"accumulator {acc} must be at least as wide as the element type {r.element_type}")


# the types (a byte or narrower) a tensor is quantized to, with the largest value each holds (values saturate to it)
QUANTIZED = {"i8": 127.0, "f8E4M3FN": 448.0, "f8E5M2": 57344.0, "i4": 7.0}
GRANULARITIES = ("tensor", "channel", "block")


def _check_scale(op, x, s) -> None:
    """The scale's shape for the op's granularity: per tensor a 0-d tensor, per channel one value per
    extent of `axis` [C], per block one value per `block` elements of the last axis [..., N/block]; f32."""
    if not isinstance(s.element_type, ir.F32Type):
        raise Invalid(f"the scale must be an f32 tensor, got {s.element_type}")
    g = _str(op.granularity)
    if g not in GRANULARITIES:
        raise Invalid(f"unknown granularity '{g}' (known: {', '.join(GRANULARITIES)})")
    axis, block, sx = int_attr(op.axis), int_attr(op.block), shape_of(x)
    if g == "tensor":
        want = []
    elif g == "channel":
        a = _axis(axis, x.rank)
        if a is None:
            raise Invalid(f"axis {axis} is out of range for rank {x.rank}")
        want = [sx[a]]
    else:
        if block < 1 or x.rank < 1:
            raise Invalid(f"blocks of {block} along the last axis need a positive block and rank >= 1")
        if sx[-1] is not None and sx[-1] % block:
            raise Invalid(f"the last extent {sx[-1]} is not a multiple of the block {block}")
        want = sx[:-1] + [None if sx[-1] is None else sx[-1] // block]
    if not compatible(shape_of(s), want):
        raise Invalid(f"a per-{g} scale must have shape {want}, got {shape_of(s)}")


def _check_quantized(op, x, s, r, quantized) -> None:
    """quantize's (`quantized` is the result) or dequantize's (the input) types: one side one byte or less
    wide, the other floating point, one shape, and the scale's rules. An i4 side has a static even last extent
    (its pairs along the last axis are its bytes)."""
    for t, side in ((x, "input"), (r, "result")):
        if t is quantized and str(t.element_type) not in QUANTIZED:
            raise Invalid(f"the {side} must be i8, i4, f8E4M3FN or f8E5M2, got {t.element_type}")
        if t is quantized and _i4(t.element_type) and (t.rank < 1 or t.is_dynamic_dim(t.rank - 1)
                                                        or t.get_dim_size(t.rank - 1) % 2):
            raise Invalid(f"an i4 {side} needs a static even last extent (two elements a byte), got shape "
                          f"{shape_of(t)}")
        if t is not quantized and not _floats(t):
            raise Invalid(f"the {side} must be floating point, got {t.element_type}")
    if not compatible(shape_of(x), shape_of(r)):
        raise Invalid(f"the result must have the input's shape {shape_of(x)}, got {shape_of(r)}")
    _check_scale(op, x, s)


class _ScaledOp(_TensorOp):
    """The operands and attributes quantize and dequantize share."""

    holds_i4 = True

    input: ext.Operand[typing.Any]
    scale: ext.Operand[typing.Any]
    granularity: ir.StringAttr
    axis: ir.IntegerAttr
    block: ir.IntegerAttr
    result: ext.Result[typing.Any]


class QuantizeOp(_ScaledOp, name="quantize", traits=[ext.Pure]):
    """``saturate(round_half_even(f32(x) / scale))`` in the result's type: i8 saturates to [-128, 127], i4
    to [-8, 7], fp8 rounds to its grid and saturates at its largest finite value. `granularity` "tensor"
    (a 0-d scale), "channel" (a [C] scale along `axis`) or "block" (one scale per `block` consecutive
    elements of the last axis); `axis` and `block` are ignored where the granularity does not use them."""

    def rules(self, *ts) -> None:
        _check_quantized(self, *ts, quantized=ts[2])


class DequantizeOp(_ScaledOp, name="dequantize", traits=[ext.Pure]):
    """``f32(q) * scale``, rounded to the result's floating-point type; the scale as quantize's."""

    def rules(self, *ts) -> None:
        _check_quantized(self, *ts, quantized=ts[0])


class PushOp(_TensorOp, name="push", traits=[ext.Pure]):
    """A history kept as a value: `history` [H] shifted one place, `value` (0-d) first, the oldest entry
    dropped — ``[value, history[0], …, history[H-2]]``. An amax history for delayed scaling
    (op.amax_scale) is passed in and returned this way, as functional programs keep state."""

    value: ext.Operand[typing.Any]
    history: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        v, h, r = ts
        if v.rank != 0 or h.rank != 1:
            raise Invalid(f"pushes a 0-d value onto a 1-D history, got ranks {v.rank} and {h.rank}")
        if v.element_type != h.element_type or r != h:
            raise Invalid(f"the value, the history and the result must share the history's type {h}, got "
                          f"{v.element_type} and {r}")


class DropoutOp(_TensorOp, name="dropout", traits=[ext.Pure]):
    """Zeroes each element with probability `p` and scales the rest by 1/(1-p). The mask comes from
    Philox-4x32-10 keyed by `seed` and counted by the element's linear index plus `offset`: the same seed
    gives the same mask on every backend."""

    input: ext.Operand[typing.Any]
    p: ir.FloatAttr
    seed: ir.IntegerAttr
    offset: ir.IntegerAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        p = _float(self.p)
        if not 0.0 <= p < 1.0:
            raise Invalid(f"probability p must be in [0, 1), got {p}")
        if ts[0] != ts[1] or not _floats(ts[0]):
            raise Invalid("input and result must be the same floating-point tensor type")


class FlashAttentionOp(_TensorOp, name="flash_attention", traits=[ext.Pure]):
    """``softmax(Q K^T * scale [+ causal mask]) V`` over [..., S, D] tensors, computed blockwise without
    materializing the score matrix; fp32 accumulation. With the unit attribute `tessera.seq_heads` the
    tensors are [..., S, H, D] and attention runs per head h over [..., :, h, :] (the schedule stage sets it
    where the target's kernel reads that layout: passes/fold_transposes.attention)."""

    q: ext.Operand[typing.Any]
    k: ext.Operand[typing.Any]
    v: ext.Operand[typing.Any]
    causal: typing.Any  # BoolAttr (ext cannot constrain to it)
    scale: ir.FloatAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        q, k, v, o = ts
        seq_heads = SEQ_HEADS in self.operation.attributes
        if seq_heads and not isinstance(self.operation.attributes[SEQ_HEADS], ir.UnitAttr):
            raise Invalid(f"attribute '{SEQ_HEADS}' must be a unit attribute")
        if not (q.rank == k.rank == v.rank == o.rank) or q.rank < 2 + seq_heads:
            raise Invalid(f"Q, K, V and the result must have the same rank, at least {2 + seq_heads}")
        sq, sk, sv = shape_of(q), shape_of(k), shape_of(v)
        if seq_heads:   # the checks below on [..., H, S, D]
            sq, sk, sv = (x[:-3] + [x[-2], x[-3], x[-1]] for x in (sq, sk, sv))
        if not compatible(sq[-1:], sk[-1:]):
            raise Invalid(f"Q and K head dimensions differ: {sq[-1]} vs {sk[-1]}")
        if not compatible(sk[-2:-1], sv[-2:-1]):
            raise Invalid(f"K and V sequence lengths differ: {sk[-2]} vs {sv[-2]}")
        want = shape_of(q)[:-1] + sv[-1:]
        if not compatible(shape_of(o), want):
            raise Invalid(f"result shape {shape_of(o)} must be {want}")
        if _float(self.scale) <= 0:
            raise Invalid(f"scale must be positive, got {_float(self.scale)}")


@positional_groups
class FlashAttentionFp8Op(_TensorOp, name="flash_attention_fp8", traits=[ext.Pure]):
    """flash_attention on e4m3 with per-tensor scaling. Without `scales` (amax-dynamic): each of Q, K, V is
    quantized to e4m3 with its scale s = max(amax, 2^-126) / 448 (f32); with `scales` (sq, sk, sv: f32 0-d
    tensors) Q, K, V are already e4m3 and those are their descales, and the result is bf16. Then S = scale ·
    sq·sk · Q₈K₈ᵀ in f32 (causal mask as flash_attention's), P = exp(S − rowmax(S)), O = (e4m3(P) · V₈) · sv /
    rowsum(P), rounded to the result's type (docs/language.md)."""

    q: ext.Operand[typing.Any]
    k: ext.Operand[typing.Any]
    v: ext.Operand[typing.Any]
    scales: typing.Sequence[ext.Operand[typing.Any]]
    causal: typing.Any  # BoolAttr (ext cannot constrain to it)
    scale: ir.FloatAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        q, k, v, *scales, o = ts
        if scales:
            if len(scales) != 3:
                raise Invalid(f"takes no descales (amax-dynamic) or three (sq, sk, sv), got {len(scales)}")
            if any(s.rank != 0 or not isinstance(s.element_type, ir.F32Type) for s in scales):
                raise Invalid(f"the descales sq, sk, sv must be f32 0-d tensors, got "
                              f"{', '.join(str(s) for s in scales)}")
            if any(str(t.element_type) != "f8E4M3FN" for t in (q, k, v)) or str(o.element_type) != "bf16":
                raise Invalid(f"with descales, Q, K, V must be f8E4M3FN and the result bf16, got "
                              f"{', '.join(str(t.element_type) for t in (q, k, v, o))}")
            FlashAttentionOp.rules(self, q, k, v, o)
            return
        FlashAttentionOp.rules(self, q, k, v, o)
        kinds = {str(t.element_type) for t in ts}
        if len(kinds) != 1 or kinds - {"bf16", "f16", "f32"}:
            raise Invalid(f"Q, K, V and the result must share one element type of bf16, f16 or f32 (they are "
                          f"quantized to e4m3 here), got {', '.join(str(t.element_type) for t in ts)}")


ATTENTION_WRT = ("q", "k", "v")


def _check_attention_qk(q, k, scale: float) -> None:
    """What attention_lse and attention_grad ask of Q [..., SQ, D] and K [..., SK, D]: one rank of at least 2,
    floating elements of one type, equal batch extents and head dimensions, a positive scale."""
    if q.rank != k.rank or q.rank < 2:
        raise Invalid(f"Q and K must have the same rank, at least 2, got {q.rank} and {k.rank}")
    if not _floats(q, k) or q.element_type != k.element_type:
        raise Invalid(f"Q and K must be floating point of one element type, got {q.element_type} and "
                      f"{k.element_type}")
    sq, sk = shape_of(q), shape_of(k)
    if not compatible(sq[:-2], sk[:-2]):
        raise Invalid(f"Q and K batch extents differ: {sq[:-2]} vs {sk[:-2]}")
    if not compatible(sq[-1:], sk[-1:]):
        raise Invalid(f"Q and K head dimensions differ: {sq[-1]} vs {sk[-1]}")
    if scale <= 0:
        raise Invalid(f"scale must be positive, got {scale}")


def _check_row_stat(what: str, t, q) -> None:
    """`t` is one f32 value per query row of Q: [..., SQ]."""
    want = shape_of(q)[:-1]
    if not compatible(shape_of(t), want) or not isinstance(t.element_type, ir.F32Type):
        raise Invalid(f"{what} must be an f32 tensor of shape {want} (one value per query row), got {t}")


class AttentionLseOp(_TensorOp, name="attention_lse", traits=[ext.Pure]):
    """The natural-log log-sum-exp of each row of ``scale · Q Kᵀ`` (keys j > i masked out for `causal`,
    top-left aligned as flash_attention's): f32 [..., SQ]. The residual attention's backward needs: with it,
    ``P = exp(scale · Q Kᵀ − lse)`` is recomputed block by block (attention_grad), never stored."""

    q: ext.Operand[typing.Any]
    k: ext.Operand[typing.Any]
    causal: typing.Any  # BoolAttr (ext cannot constrain to it)
    scale: ir.FloatAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        q, k, r = ts
        _check_attention_qk(q, k, _float(self.scale))
        _check_row_stat("the result", r, q)


class AttentionGradOp(_TensorOp, name="attention_grad", traits=[ext.Pure]):
    """One gradient of flash_attention, `wrt` "q", "k" or "v", in that operand's type. With
    ``P = exp(scale · Q Kᵀ − lse)`` (masked for `causal`), ``dP = dO Vᵀ`` and ``dS = P ∘ (dP − delta)``:
    dV = Pᵀ dO, dQ = scale · dS K, dK = scale · dSᵀ Q, accumulated in f32. `lse` is attention_lse's result,
    `delta` the f32 row sums of dO ∘ O, both [..., SQ]."""

    q: ext.Operand[typing.Any]
    k: ext.Operand[typing.Any]
    v: ext.Operand[typing.Any]
    do: ext.Operand[typing.Any]
    lse: ext.Operand[typing.Any]
    delta: ext.Operand[typing.Any]
    causal: typing.Any  # BoolAttr (ext cannot constrain to it)
    scale: ir.FloatAttr
    wrt: ir.StringAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        q, k, v, do, lse, delta, r = ts
        wrt = _str(self.wrt)
        if wrt not in ATTENTION_WRT:
            raise Invalid(f"wrt must be one of {', '.join(ATTENTION_WRT)}, got '{wrt}'")
        _check_attention_qk(q, k, _float(self.scale))
        if v.rank != q.rank or not _floats(v, do):
            raise Invalid(f"V and dO must be floating point of Q's rank {q.rank}, got {v} and {do}")
        sk, sv = shape_of(k), shape_of(v)
        if not compatible(sv[:-2], sk[:-2]) or not compatible(sk[-2:-1], sv[-2:-1]):
            raise Invalid(f"V {sv} must have K's batch extents and sequence length {sk[:-1]}")
        want = shape_of(q)[:-1] + sv[-1:]
        if do.rank != q.rank or not compatible(shape_of(do), want):
            raise Invalid(f"dO must have the attention output's shape {want}, got {shape_of(do)}")
        _check_row_stat("lse", lse, q)
        _check_row_stat("delta", delta, q)
        of = {"q": q, "k": k, "v": v}[wrt]
        if r.element_type != of.element_type or not compatible(shape_of(r), shape_of(of)):
            raise Invalid(f"the result must have the type of {wrt.upper()} ({of}), got {r}")


def _check_fill_value(op, t: ir.RankedTensorType) -> None:
    """`other`, the value masked-off elements take: a float attribute of the element type (±inf allowed)."""
    if not _floats(t):
        raise Invalid(f"masked tiles are floating point, got {t.element_type}")
    if ir.FloatAttr(op.attributes["other"]).type != t.element_type:
        raise Invalid(f"other must be a {t.element_type} attribute, got {op.attributes['other']}")


def _blocks_of(n: int | None, step: int) -> int | None:
    return None if n is None else -(-n // step)


class LoadBlocksOp(_TensorOp, name="load_blocks", traits=[ext.Pure]):
    """A masked tile load: the rows of `input [N, ...]` in blocks of `step`, stacked ``[ceil(N/step), step,
    ...]``; rows past N (the last block's tail) hold `other`."""

    input: ext.Operand[typing.Any]
    step: ir.IntegerAttr
    other: ir.FloatAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        step = int_attr(self.step)
        if step < 1:
            raise Invalid(f"step must be positive, got {step}")
        if x.rank < 1:
            raise Invalid("input must have rank >= 1")
        sx = shape_of(x)
        want = [_blocks_of(sx[0], step), step] + sx[1:]
        if not compatible(shape_of(r), want) or r.element_type != x.element_type:
            raise Invalid(f"result shape {shape_of(r)} must be {want} (blocks, step, rest) of the input's "
                          f"element type")
        _check_fill_value(self, x)


class StoreBlocksOp(_TensorOp, name="store_blocks", traits=[ext.Pure]):
    """A masked tile store: the stacked blocks ``[B, step, ...]`` written to a tensor of `dest`'s type
    ``[N, ...]`` — rows past N (the last block's tail) are not written. `dest` gives only the extent."""

    input: ext.Operand[typing.Any]
    dest: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, d, r = ts
        if x.rank < 2 or d.rank != x.rank - 1:
            raise Invalid(f"stores blocks [B, step, ...] (rank {x.rank}) into a tensor of one rank less, "
                          f"got rank {d.rank}")
        if r != d or x.element_type != d.element_type:
            raise Invalid("the result must have dest's type, and the blocks its element type")
        sx, sd = shape_of(x), shape_of(d)
        if not compatible(sx[2:], sd[1:]):
            raise Invalid(f"trailing extents {sx[2:]} and {sd[1:]} differ")
        if None not in (sx[0], sx[1], sd[0]) and _blocks_of(sd[0], sx[1]) != sx[0]:
            raise Invalid(f"{sd[0]} rows are {_blocks_of(sd[0], sx[1])} blocks of {sx[1]}, not {sx[0]}")


class MaskBlocksOp(_TensorOp, name="mask_blocks", traits=[ext.Pure]):
    """``where(block mask, input, other)`` on stacked blocks ``[B, ...]``: element (b, ..., i@axis, ...) is
    kept when its row b·step + i lies within `bounds`' first extent, else it becomes `other` — a tile
    program's `tile.where(b.mask[None, :], scores, -inf)`. `bounds` gives only the extent."""

    input: ext.Operand[typing.Any]
    bounds: ext.Operand[typing.Any]
    axis: ir.IntegerAttr
    step: ir.IntegerAttr
    other: ir.FloatAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, b, r = ts
        axis, step = int_attr(self.axis), int_attr(self.step)
        if x.rank < 2 or not 1 <= axis < x.rank:
            raise Invalid(f"axis {axis} must be an axis of a block, 1..{x.rank - 1}")
        if step < 1:
            raise Invalid(f"step must be positive, got {step}")
        sx = shape_of(x)
        if sx[axis] is not None and sx[axis] != step:
            raise Invalid(f"the masked axis {axis} has extent {sx[axis]}, not the block step {step}")
        if b.rank < 1:
            raise Invalid("bounds must have rank >= 1 (its first extent bounds the rows)")
        if None not in (sx[0], shape_of(b)[0]) and _blocks_of(shape_of(b)[0], step) != sx[0]:
            raise Invalid(f"{shape_of(b)[0]} rows are {_blocks_of(shape_of(b)[0], step)} blocks of {step}, "
                          f"not {sx[0]}")
        if r != x:
            raise Invalid("the result must have the input's type")
        _check_fill_value(self, x)


def conv_extent(length: int, kernel: int, stride: int, lo: int, hi: int, dilation: int) -> int:
    """The output extent of a convolution along one spatial axis (PyTorch's formula): the window positions
    ``i * stride - lo`` whose taps ``+ j * dilation`` (j < kernel) all lie in the padded input."""
    return (length + lo + hi - dilation * (kernel - 1) - 1) // stride + 1


def _conv_geometry(op, x, spatial: int) -> tuple[list, list, list]:
    """(stride, padding pairs, dilation) of a conv or im2col op, checked for `spatial` spatial axes."""
    if x.rank not in (3, 4):
        raise Invalid(f"input must be [N, C, L] or [N, C, H, W] (rank 3 or 4), got rank {x.rank}")
    stride, pad, dil = _ints(op.stride), _ints(op.padding), _ints(op.dilation)
    if len(stride) != spatial or len(dil) != spatial or len(pad) != 2 * spatial:
        raise Invalid(f"stride and dilation take {spatial} value(s), padding {2 * spatial} (low and high per "
                      f"axis), got {len(stride)}, {len(dil)} and {len(pad)}")
    if min(stride) < 1 or min(dil) < 1:
        raise Invalid(f"stride {stride} and dilation {dil} must be positive")
    if min(pad) < 0:
        raise Invalid(f"padding {pad} must be >= 0")
    return stride, [pad[2 * i:2 * i + 2] for i in range(spatial)], dil


def _conv_out(x, kernel: list, stride: list, pads: list, dil: list) -> list:
    """The output's spatial extents (None where the input's is known only at run time); refuses an empty one."""
    out = []
    for length, k, s, (lo, hi), d in zip(shape_of(x)[2:], kernel, stride, pads, dil):
        if length is None:
            out.append(None)
            continue
        e = conv_extent(length, k, s, lo, hi, d)
        if e < 1:
            raise Invalid(f"the window ({k} taps, dilation {d}) does not fit the padded extent {length + lo + hi}:"
                          f" the output would be empty")
        out.append(e)
    return out


class ConvOp(_TensorOp, name="conv", traits=[ext.Pure]):
    """A cross-correlation, PyTorch's `conv1d`/`conv2d`: input ``[N, C, L]`` or ``[N, C, H, W]``, weight ``[O, C,
    K]`` or ``[O, C, KH, KW]``, result ``[N, O, L']`` / ``[N, O, H', W']`` of the input's element type (a
    float type; accumulated in f32, f64 for f64). `stride` and `dilation` hold one value per spatial axis,
    `padding` two (zeros before and after): ``out[n, o, i] = Σ_c,j x[n, c, i·stride − lo + j·dilation] ·
    w[o, c, j]``."""

    input: ext.Operand[typing.Any]
    weight: ext.Operand[typing.Any]
    stride: ir.ArrayAttr
    padding: ir.ArrayAttr
    dilation: ir.ArrayAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, w, r = ts
        stride, pads, dil = _conv_geometry(self, x, x.rank - 2)
        if w.rank != x.rank:
            raise Invalid(f"weight must be [O, C, kernel...] of the input's rank {x.rank}, got rank {w.rank}")
        if not _floats(x) or w.element_type != x.element_type or r.element_type != x.element_type:
            raise Invalid(f"input, weight and result must have one floating-point element type, got "
                          f"{x.element_type}, {w.element_type} and {r.element_type}")
        sx, sw = shape_of(x), shape_of(w)
        if not compatible([sx[1]], [sw[1]]):
            raise Invalid(f"the input has {sx[1]} channels, the weight {sw[1]}")
        if None in sw[2:]:
            raise Invalid(f"the kernel extents must be static, got {sw[2:]}")
        want = [sx[0], sw[0]] + _conv_out(x, sw[2:], stride, pads, dil)
        if not compatible(shape_of(r), want):
            raise Invalid(f"result shape {shape_of(r)} must be {want}")


class Im2colOp(_TensorOp, name="im2col", traits=[ext.Pure]):
    """A convolution's patches as a matrix (passes/convolution.py rewrites `conv` as this and a GEMM): row
    ``(n, i...)`` of the result ``[N · L'..., C · K...]`` holds the window of output position i of image n,
    column ``(c, j...)`` input element ``x[n, c, i·stride − lo + j·dilation]``, 0 in the padding. `kernel`
    holds the window's extents. `circular`: the padding wraps around (index modulo the extent, so each side's
    padding is at most the extent) instead of holding zeros; `flip`: column j holds tap K − 1 − j (per axis),
    so that the GEMM with a kernel h is a convolution, not a correlation (tod.conv1d's circulant:
    passes/tod_lower.py)."""

    input: ext.Operand[typing.Any]
    kernel: ir.ArrayAttr
    stride: ir.ArrayAttr
    padding: ir.ArrayAttr
    dilation: ir.ArrayAttr
    circular: typing.Any  # BoolAttr
    flip: typing.Any  # BoolAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        _im2col_rules(self, *ts)
        x = ts[0]
        if ir.BoolAttr(self.circular).value:
            pad = _ints(self.padding)
            for i, n in enumerate(shape_of(x)[2:]):
                if n is None or max(pad[2 * i:2 * i + 2]) > n:
                    raise Invalid(f"circular padding {pad[2 * i:2 * i + 2]} must be at most the static extent {n}")


def _im2col_rules(op, x, m, what: str = "result") -> None:
    """The rules of im2col `op` from x to its matrix m (col2im's, `what` = "input", from m back to x)."""
    stride, pads, dil = _conv_geometry(op, x, x.rank - 2)
    kernel = _ints(op.kernel)
    if len(kernel) != x.rank - 2 or min(kernel) < 1:
        raise Invalid(f"kernel {kernel} must hold {x.rank - 2} positive extent(s)")
    sx = shape_of(x)
    out = _conv_out(x, kernel, stride, pads, dil)
    rows = None if None in [sx[0], *out] else _count([sx[0], *out])
    cols = None if sx[1] is None else sx[1] * _count(kernel)
    if not compatible(shape_of(m), [rows, cols]) or m.element_type != x.element_type:
        raise Invalid(f"{what} must be [{rows}, {cols}] (positions, channels x taps) of the image's element "
                      f"type, got {shape_of(m)} of {m.element_type}")


class Col2imOp(_TensorOp, name="col2im", traits=[ext.Pure]):
    """im2col's adjoint (a conv's input gradient, passes/autodiff_conv.py): each column ``(c, j...)`` of row
    ``(n, i...)`` of `input` ``[N · L'..., C · K...]`` is added into element ``[n, c, i·stride − lo +
    j·dilation]`` of a tensor of `like`'s type ``[N, C, *S]`` (positions in the padding are dropped). `like`
    gives only the extents."""

    input: ext.Operand[typing.Any]
    like: ext.Operand[typing.Any]
    kernel: ir.ArrayAttr
    stride: ir.ArrayAttr
    padding: ir.ArrayAttr
    dilation: ir.ArrayAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        cols, like, r = ts
        _im2col_rules(self, like, cols, "input")
        if r != like:
            raise Invalid(f"the result must have like's type {like}, got {r}")


class ConstantOp(_TensorOp, name="constant", traits=[ext.Pure]):
    """A tensor of one repeated value (`value` is a float or integer attribute of the element type)."""

    value: typing.Any  # a FloatAttr or IntegerAttr of the element type
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        et = ts[0].element_type
        v = self.attributes["value"]
        if not isinstance(v, (ir.FloatAttr, ir.IntegerAttr)) or v.type != et:
            raise Invalid(f"value {v} must be a scalar attribute of the element type {et}")


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _width(t: ir.Type) -> int:
    if isinstance(t, ir.FloatType):
        return ir.FloatType(t).width
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width
    return 64


__all__ = [name for name in dir() if name.endswith("Op")] + ["TTensor", "UNARY_FNS", "BINARY_FNS",
                                                            "REDUCE_KINDS", "ATTENTION_WRT", "QUANTIZED",
                                                            "broadcast", "shape_of"]


TWIDDLE_MAX = 4096   # the largest DFT as GEMMs: two n×n matrices (256 MiB in f64 at n = 4096)


class TwiddleOp(_TensorOp, name="twiddle", traits=[ext.Pure]):
    """A part of the unitary discrete Fourier transform of size n as an [n, n] matrix: `part` "cos" is
    ``cos(2π·jk/n) / √n``, "sin" is ``sin(2π·jk/n) / √n``, so F = cos − i·sin and F* = cos + i·sin
    (tod.fft, tod.ifft: passes/fourier.py). A kernel of its own writes it, computing each entry from j·k mod n
    (no table in the image)."""

    part: ir.StringAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        (r,) = ts
        if _str(self.part) not in ("cos", "sin"):
            raise Invalid(f"part must be 'cos' or 'sin', got '{_str(self.part)}'")
        s = shape_of(r)
        if r.rank != 2 or None in s or s[0] != s[1] or s[0] < 1:
            raise Invalid(f"the result must be a square matrix of static extents, got {s}")
        if s[0] > TWIDDLE_MAX:
            raise Invalid(f"n = {s[0]} is larger than {TWIDDLE_MAX}")
        if not isinstance(r.element_type, (ir.F32Type, ir.F64Type)):
            raise Invalid(f"the result's element type must be f32 or f64, got {r.element_type}")


FFT_RADICES = (2, 4)
CHIRP_MAX = 1 << 28   # the largest n of a chirp: its padded FFT size 2^29 at most (MAX_ELEMENTS of passes/fft.py)


def _complex_layouts(op, ts) -> tuple:
    """(input type, result type, input layout, output layout) of an op reading complex columns in `input_layout`
    (an optional `imag` for "parts") and writing them in `output_layout` (fft_stage, chirp_mul), checked."""
    declared_attributes(op)
    into, out = _str(op.input_layout), _str(op.output_layout)
    if into not in ("parts", "pairs", "planes") or out not in ("pairs", "planes"):
        raise Invalid(f"layouts: input 'parts', 'pairs' or 'planes', output 'pairs' or 'planes'; got "
                      f"'{into}', '{out}'")
    if len(ts) == 3 and into != "parts":
        raise Invalid("an imaginary part is an input of layout 'parts' only")
    return ts[0], ts[-1], into, out


class FftStageOp(_TensorOp, name="fft_stage", traits=[ext.Pure]):
    """One radix-2 or radix-4 stage of a Stockham FFT of size n along axis −2 of complex columns [..., n, k]
    (tod.fft / tod.ifft of a power-of-two n: passes/fft.py). With r = `radix`, s = `stride` and q = i mod s,
    output position r·(i − q) + q + j·s of each column is `scale` · w^(j·(i − q)) · Σₘ aₘ·ω_r^(j·m), aₘ the input at
    i + m·n/r (0 ≤ i < n/r), w = exp(∓2πi/n), ω_r = exp(∓2πi/r) (+ where `inverse`). The complex values are
    stored as `input_layout` / `output_layout` says: "pairs" [..., n, k, 2] (real and imaginary part side by side,
    numpy's complex storage), "planes" [2, ..., n, k] (the real parts, then the imaginary parts), or, for the
    input only, "parts": the real part [..., n, k] as `input` and the imaginary part as `imag` (zero when
    absent). Static extents. A kernel of its own computes each twiddle from its exponent (no table in the
    image)."""

    input: ext.Operand[typing.Any]
    stride: ir.IntegerAttr
    radix: ir.IntegerAttr
    inverse: typing.Any  # BoolAttr (ext cannot constrain to it)
    scale: ir.FloatAttr
    input_layout: ir.StringAttr
    output_layout: ir.StringAttr
    result: ext.Result[typing.Any]
    imag: typing.Optional[ext.Operand[typing.Any]] = None

    def rules(self, *ts) -> None:
        x, r, into, out = _complex_layouts(self, ts)
        s = shape_of(r)
        if not r.has_static_shape or r.rank < 3 or (s[-1] if out == "pairs" else s[0]) != 2:
            raise Invalid(f"the result must be {out} of static extents ("
                          f"{'[..., n, k, 2]' if out == 'pairs' else '[2, ..., n, k]'}), got {s}")
        if not isinstance(r.element_type, (ir.F32Type, ir.F64Type)):
            raise Invalid(f"the element type must be f32 or f64, got {r.element_type}")
        core = s[:-1] if out == "pairs" else s[1:]
        want = core if into == "parts" else core + [2] if into == "pairs" else [2] + core
        if x.element_type != r.element_type or shape_of(x) != want:
            raise Invalid(f"the input ({into}) must be {want} of {r.element_type}, got {shape_of(x)} of "
                          f"{x.element_type}")
        if len(ts) == 3 and ts[1] != x:
            raise Invalid("the imaginary part must have the real part's type")
        n, radix, stride = core[-2], int_attr(self.radix), int_attr(self.stride)
        if radix not in FFT_RADICES:
            raise Invalid(f"radix must be one of {FFT_RADICES}, got {radix}")
        if n & (n - 1) or stride < 1 or stride & (stride - 1) or stride * radix > n:
            raise Invalid(f"n = {n} must be a power of two and stride · radix = {stride} · {radix} at most n")
        if not isinstance(self.inverse, ir.BoolAttr):
            raise Invalid("inverse must be a bool")


def part_source(v) -> tuple[ir.Value, str] | None:
    """(pairs, part) when real tensor `v` is part `part` ("re"/"im") of the pairs tensor `pairs`, seen through
    reshapes (a part of a reshape is the reshape of the part: both keep row-major order); else None."""
    while isinstance(v.owner, ir.OpView) and v.owner.operation.name == "ttensor.reshape":
        v = v.owner.operands[0]
    owner = v.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "ttensor.part":
        return owner.operands[0], _str(owner.attributes["part"])
    return None


def fft_radices(n: int) -> list[int]:
    """The Stockham stages' radices for size n = 2^m: radix-4 ones, then a radix-2 one where m is odd (last, where
    its stride n/2 makes every access but the pairs' stores contiguous)."""
    m = n.bit_length() - 1
    return [4] * (m // 2) + [2] * (m % 2)


def fft_stages(value, imag, layout: str, shape: list[int], element, inverse: bool, scale: float) -> ir.Value:
    """The Stockham FFT (unnormalized, times `scale`; the inverse's sign where `inverse`) of size n = shape[-2], a
    power of two, along axis −2 of the complex columns [..., n, k] = `shape` stored in `layout` (`value`, and
    `imag` or None for "parts"), as fft_stage ops at the insertion point: the stages between write planes, the
    last one pairs [..., n, k, 2], which it returns (passes/fft.py, the frontend's tile.fft)."""
    stride, i64 = 1, ir.IntegerType.get_signless(64)
    radices = fft_radices(shape[-2])
    for k, radix in enumerate(radices):
        last = k == len(radices) - 1
        out = "pairs" if last else "planes"
        value = create(FftStageOp, value, stride=ir.IntegerAttr.get(i64, stride),
                       radix=ir.IntegerAttr.get(i64, radix), inverse=ir.BoolAttr.get(inverse),
                       scale=ir.FloatAttr.get(ir.F64Type.get(), scale if last else 1.0),
                       input_layout=ir.StringAttr.get(layout), output_layout=ir.StringAttr.get(out),
                       result=ir.RankedTensorType.get(shape + [2] if last else [2] + shape, element),
                       imag=imag).result
        stride, imag, layout = stride * radix, None, out
    return value


def _columns(t, layout: str) -> list:
    """The complex columns [..., n, k] a tensor stored in `layout` holds ("pairs" [..., n, k, 2], "planes"
    [2, ..., n, k], "parts" [..., n, k])."""
    s = shape_of(t)
    return s[:-1] if layout == "pairs" else s[1:] if layout == "planes" else s


def _check_complex_store(t, layout: str, what: str) -> None:
    s = shape_of(t)
    if not t.has_static_shape or t.rank < (2 if layout == "parts" else 3) or \
            (layout == "pairs" and s[-1] != 2) or (layout == "planes" and s[0] != 2):
        form = {"pairs": "[..., n, k, 2]", "planes": "[2, ..., n, k]", "parts": "[..., n, k]"}[layout]
        raise Invalid(f"the {what} must be {layout} {form} of static extents, got {s}")
    if not isinstance(t.element_type, (ir.F32Type, ir.F64Type)):
        raise Invalid(f"the element type must be f32 or f64, got {t.element_type}")


class ChirpMulOp(_TensorOp, name="chirp_mul", traits=[ext.Pure]):
    """Bluestein's chirp multiply (passes/fft.py) along axis −2 of complex columns [..., n_in, k] →
    [..., n_out, k]: output element j is `scale` · w_j · x_j for j < min(n_in, `n`), zero beyond, with the chirp
    w_j = exp(∓πi·j²/`n`) (+ where `inverse`): with n_out = m ≥ 2n − 1 it pads a signal for the convolution,
    with n_in = m and n_out = n it takes the convolution's first n outputs. The layouts are fft_stage's ("parts"
    with an optional `imag` for the input only). Static extents. A kernel of its own computes each w_j from the
    integer j² mod 2n in the kernels' 64-bit index arithmetic (no table in the image); n ≤ CHIRP_MAX."""

    input: ext.Operand[typing.Any]
    n: ir.IntegerAttr
    inverse: typing.Any  # BoolAttr
    scale: ir.FloatAttr
    input_layout: ir.StringAttr
    output_layout: ir.StringAttr
    result: ext.Result[typing.Any]
    imag: typing.Optional[ext.Operand[typing.Any]] = None

    def rules(self, *ts) -> None:
        x, r, into, out = _complex_layouts(self, ts)
        _check_complex_store(x, into, "input")
        _check_complex_store(r, out, "result")
        if x.element_type != r.element_type or (len(ts) == 3 and ts[1] != x):
            raise Invalid("the input, its imaginary part and the result must have one element type")
        cin, cout = _columns(x, into), _columns(r, out)
        if cin[:-2] != cout[:-2] or cin[-1] != cout[-1]:
            raise Invalid(f"the input's columns {cin} and the result's {cout} may differ in axis −2 only")
        n = int_attr(self.n)
        if not 1 <= n <= min(cin[-2], cout[-2]) or n > CHIRP_MAX:
            raise Invalid(f"n = {n} must be at least 1 and at most the columns' lengths {cin[-2]}, {cout[-2]} "
                          f"and {CHIRP_MAX}")
        if not isinstance(self.inverse, ir.BoolAttr):
            raise Invalid("inverse must be a bool")


class ChirpOp(_TensorOp, name="chirp", traits=[ext.Pure]):
    """Bluestein's chirp filter (passes/fft.py) as planes [2, m, 1]: b_j = conj(w_j) for j < `n`, b_{m−j} =
    conj(w_j) for 0 < j < n, zero elsewhere, w_j = exp(∓πi·j²/n) (+ where `inverse`), m ≥ 2n − 1 a power of two:
    the circular filter whose convolution with the chirped, padded signal gives the DFT's sums. A kernel of its own
    writes it (no table in the image)."""

    n: ir.IntegerAttr
    inverse: typing.Any  # BoolAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        declared_attributes(self)
        (r,) = ts
        s = shape_of(r)
        if not r.has_static_shape or r.rank != 3 or s[0] != 2 or s[2] != 1:
            raise Invalid(f"the result must be planes [2, m, 1], got {s}")
        if not isinstance(r.element_type, (ir.F32Type, ir.F64Type)):
            raise Invalid(f"the element type must be f32 or f64, got {r.element_type}")
        n, m = int_attr(self.n), s[1]
        if not 1 <= n <= CHIRP_MAX or m & (m - 1) or m < 2 * n - 1:
            raise Invalid(f"m = {m} must be a power of two at least 2n − 1 for n = {n} (1 ≤ n ≤ {CHIRP_MAX})")
        if not isinstance(self.inverse, ir.BoolAttr):
            raise Invalid("inverse must be a bool")


class SpectrumMulOp(_TensorOp, name="spectrum_mul", traits=[ext.Pure]):
    """The pointwise complex product x_j · h_j along axis −2 of columns x, pairs [..., m, k, 2], with one column
    h = `spectrum`, pairs [m, 1, 2] (a filter's spectrum, broadcast over the other axes), as planes [2, ..., m, k]:
    Bluestein's convolution in the frequency domain (passes/fft.py). A kernel of its own computes it."""

    input: ext.Operand[typing.Any]
    spectrum: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, h, r = ts
        _check_complex_store(x, "pairs", "input")
        _check_complex_store(h, "pairs", "spectrum")
        _check_complex_store(r, "planes", "result")
        m = shape_of(x)[-3]
        if shape_of(h) != [m, 1, 2]:
            raise Invalid(f"the spectrum must be pairs [{m}, 1, 2], got {shape_of(h)}")
        if shape_of(r) != [2] + shape_of(x)[:-1] or not x.element_type == h.element_type == r.element_type:
            raise Invalid(f"the result must be [2] + {shape_of(x)[:-1]} and every element type one, got "
                          f"{shape_of(r)}")


class PartOp(_TensorOp, name="part", traits=[ext.Pure]):
    """numpy's ``x[..., 0]`` (`part` "re") or ``x[..., 1]`` ("im") of pairs [..., 2]: the real or imaginary part
    of the complex tensor a reshape viewed as its pairs (a complex parameter: passes/fourier.py). A kernel of its
    own writes it."""

    input: ext.Operand[typing.Any]
    part: ir.StringAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        if _str(self.part) not in ("re", "im"):
            raise Invalid(f"part must be 're' or 'im', got '{_str(self.part)}'")
        if not x.has_static_shape or x.rank < 1 or shape_of(x)[-1] != 2:
            raise Invalid(f"the input must be pairs [..., 2] of static extents, got {shape_of(x)}")
        if not isinstance(x.element_type, (ir.F32Type, ir.F64Type)):
            raise Invalid(f"the parts must be f32 or f64, got {x.element_type}")
        if shape_of(r) != shape_of(x)[:-1] or r.element_type != x.element_type:
            raise Invalid(f"the result must be {shape_of(x)[:-1]} of {x.element_type}, got {shape_of(r)} of "
                          f"{r.element_type}")


class InterleaveOp(_TensorOp, name="interleave", traits=[ext.Pure]):
    """numpy's ``stack((re, im), axis=-1)``: the result [..., 2] holds `re` and `im` side by side, the storage
    of the complex tensor re + i·im (a reshape views it as one). A kernel of its own writes it."""

    re: ext.Operand[typing.Any]
    im: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        re, im, r = ts
        if re != im:
            raise Invalid(f"re and im must have one type, got {re} and {im}")
        if not re.has_static_shape:
            raise Invalid("re and im must have static extents")
        if not isinstance(re.element_type, (ir.F32Type, ir.F64Type)):
            raise Invalid(f"the parts must be f32 or f64, got {re.element_type}")
        if shape_of(r) != shape_of(re) + [2] or r.element_type != re.element_type:
            raise Invalid(f"the result must be {shape_of(re) + [2]} of {re.element_type}, got {shape_of(r)} of "
                          f"{r.element_type}")


LINALG_FNS = ("svd", "eigh", "spectral_radius")


class LinalgOp(_TensorOp, name="linalg", traits=[ext.Pure]):
    """A small dense matrix algorithm of `input` [m, n] as one looping kernel (passes/linalg_kernels.py), its
    result one packed matrix the factors are sliced from: `fn` "svd" (m ≥ n; [m + n + 1, n]: U's rows, V's
    rows, the singular values descending), "eigh" (square; [2n + 1, n]: eigenvectors, scratch, eigenvalues by
    descending magnitude) or "spectral_radius" (square; [2n + 1, n], ρ at [2n, 0]). `transposed` (svd): the
    input is the operator's matrix transposed, so the column signs follow V's largest entries. Every entry is
    NaN where the input holds a NaN or an infinity or the iteration does not converge."""

    input: ext.Operand[typing.Any]
    fn: ir.StringAttr
    transposed: typing.Any  # BoolAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        fn = _str(self.fn)
        if fn not in LINALG_FNS:
            raise Invalid(f"fn must be one of {', '.join(LINALG_FNS)}, got '{fn}'")
        if x.rank != 2 or not x.has_static_shape or min(shape_of(x)) < 1:
            raise Invalid(f"the input must be a matrix of static extents, got {shape_of(x)}")
        if not isinstance(x.element_type, (ir.F32Type, ir.F64Type)):
            raise Invalid(f"the input must be f32 or f64, got {x.element_type}")
        m, n = shape_of(x)
        if fn == "svd" and m < n:
            raise Invalid(f"an svd's input has at least as many rows as columns, got {m}×{n}")
        if fn != "svd" and m != n:
            raise Invalid(f"{fn}'s input must be square, got {m}×{n}")
        want = [m + n + 1, n] if fn == "svd" else [2 * n + 1, n]
        if shape_of(r) != want or r.element_type != x.element_type:
            raise Invalid(f"the result must be {want} of {x.element_type}, got {shape_of(r)} of {r.element_type}")


class SliceOp(_TensorOp, name="slice", traits=[ext.Pure]):
    """numpy's ``x[r0:r0 + R, c0:c0 + C]`` of a matrix of static extents, `offsets` [r0, c0], [R, C] the
    result's extents. A kernel of its own writes it."""

    input: ext.Operand[typing.Any]
    offsets: ir.ArrayAttr
    result: ext.Result[typing.Any]

    def rules(self, *ts) -> None:
        x, r = ts
        offsets = _ints(self.offsets)
        if x.rank != 2 or not x.has_static_shape or r.rank != 2 or not r.has_static_shape:
            raise Invalid(f"input and result must be matrices of static extents, got {shape_of(x)} and {shape_of(r)}")
        if len(offsets) != 2 or min(offsets) < 0 or any(o + e > s for o, e, s in zip(offsets, shape_of(r),
                                                                                       shape_of(x))):
            raise Invalid(f"offsets {offsets} and extents {shape_of(r)} must lie within {shape_of(x)}")
        if r.element_type != x.element_type:
            raise Invalid(f"the result's element type must be {x.element_type}, got {r.element_type}")
