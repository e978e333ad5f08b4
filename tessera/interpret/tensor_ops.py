"""Reference semantics of the ``ttensor`` ops."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..dialects.ttensor import conv_extent, matmul_transposes
from ..mlir import ir
from ..numerics.philox import uniforms
from ..plan import PlanError, evaluate
from .registry import local
from .values import cast, dtype_of, result

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _attr_int(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _attr_float(op, name: str) -> float:
    return ir.FloatAttr(op.attributes[name]).value


def _attr_str(op, name: str) -> str:
    return ir.StringAttr(op.attributes[name]).value


def _attr_bool(op, name: str) -> bool:
    return ir.BoolAttr(op.attributes[name]).value


@local("ttensor.constant")
def constant(op, ins):
    t = ir.RankedTensorType(op.results[0].type)
    v = op.attributes["value"]
    value = ir.FloatAttr(v).value if isinstance(v, ir.FloatAttr) else ir.IntegerAttr(v).value
    return [result(op, np.full([t.get_dim_size(i) for i in range(t.rank)], value))]


@local("ttensor.matmul")
def matmul(op, ins):
    # an operand stored transposed (the schedule stage's folded transposes) is read as its transpose
    a, b = (np.swapaxes(x, -1, -2) if t else x for x, t in zip(ins, matmul_transposes(op)))
    if _accum(op).kind in ("int", "uint"):  # exact in int64 (integers are held as int64), then wrapped to the accumulator
        return [result(op, cast(np.matmul(a.astype(np.int64), b.astype(np.int64)), _accum(op)))]
    # exact products and sums (float64 carries the significand of every product of <=24-bit inputs), then
    # one rounding to the accumulator and one to the result type
    acc = np.matmul(a.astype(np.float64), b.astype(np.float64))
    acc = cast(acc, _accum(op))
    return [result(op, acc)]


def _accum(op):
    return dtypes.of_ir_type(ir.TypeAttr(op.attributes["accum"]).value)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


_UNARY = {
    "relu": lambda x: np.maximum(x, 0), "gelu": _gelu, "gelu_tanh": _gelu_tanh,
    "silu": lambda x: x / (1.0 + np.exp(-x)), "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "tanh": np.tanh,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "neg": np.negative,
    "abs": np.abs, "erf": _erf, "square": np.square, "reciprocal": lambda x: 1.0 / x, "invert": np.invert,
    "round": np.round,  # numpy's: half to even
}

# integers are held as int64 and wrapped to their type by result(): add, sub, mul wrap as numpy's do in the
# tensor's type; floordiv and mod are numpy's (Python's: floor, the divisor's sign; 0 for a zero divisor)
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
           "pow": np.power, "div": np.divide, "floordiv": np.floor_divide, "mod": np.remainder,
           "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
           "ne": np.not_equal, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
# shifts take the count modulo the type's width (its low log2(bits) bits; docs/language.md): numpy's result
# for a count past the width, or a negative one, is C's undefined behaviour. Right shifts of the int64s that
# hold signed values are arithmetic, of u8's (held non-negative) logical.
_SHIFTS = {"shl": np.left_shift, "shr": np.right_shift}


@local("ttensor.unary")
def unary(op, ins):
    with np.errstate(all="ignore"):
        return [result(op, _UNARY[_attr_str(op, "fn")](ins[0]))]


@local("ttensor.binary")
def binary(op, ins):
    a, b = ins
    fn = _attr_str(op, "fn")
    if fn in _SHIFTS:
        return [result(op, _SHIFTS[fn](a, np.bitwise_and(b, dtype_of(op.results[0].type).bits - 1)))]
    with np.errstate(all="ignore"):
        return [result(op, _BINARY[fn](a, b))]


@local("ttensor.select")
def select(op, ins):
    return [result(op, np.where(*ins))]


@local("ttensor.bias_add")
def bias_add(op, ins):
    x, b = ins
    axis = _attr_int(op, "axis") % x.ndim
    shape = [1] * x.ndim
    shape[axis] = b.shape[0]
    return [result(op, x + b.reshape(shape))]


def _ints(op, name: str) -> list[int]:
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes[name])]


def _windows(op, x: np.ndarray, kernel: list, circular: bool = False) -> np.ndarray:
    """The windows of a conv or im2col `op` over x [N, C, *S]: a view [N, C, *out, *kernel] of x padded with
    zeros (wrapped around where `circular`), element (.., i.., j..) at x's spatial position i·stride − lo +
    j·dilation."""
    stride, pad, dil = _ints(op, "stride"), _ints(op, "padding"), _ints(op, "dilation")
    x = np.pad(x, [(0, 0), (0, 0)] + [(pad[2 * i], pad[2 * i + 1]) for i in range(len(kernel))],
               mode="wrap" if circular else "constant")
    out = [conv_extent(n, k, s, 0, 0, d) for n, k, s, d in zip(x.shape[2:], kernel, stride, dil)]
    st = x.strides[2:]
    return np.lib.stride_tricks.as_strided(
        x, x.shape[:2] + tuple(out) + tuple(kernel),
        x.strides[:2] + tuple(a * s for a, s in zip(st, stride)) + tuple(a * d for a, d in zip(st, dil)),
        writeable=False)


@local("ttensor.conv")
def conv(op, ins):
    x, w = ins
    spatial = x.ndim - 2
    win = _windows(op, np.asarray(x, np.float64), list(w.shape[2:]))
    # exact products, summed in f64, then one rounding to the accumulator (f32; f64 for f64) and one to the
    # result type, as matmul's reference does
    pos, taps = "ij"[:spatial], "kl"[:spatial]
    acc = np.einsum(f"nc{pos}{taps},oc{taps}->no{pos}", win, np.asarray(w, np.float64))
    accum = dtypes.BY_NAME["f64" if dtype_of(op.results[0].type).name == "f64" else "f32"]
    return [result(op, cast(acc, accum))]


@local("ttensor.im2col")
def im2col(op, ins):
    x = ins[0]
    kernel = _ints(op, "kernel")
    win = _windows(op, x, kernel, _attr_bool(op, "circular"))   # [N, C, *out, *kernel] -> [N, *out, C, *kernel]
    spatial = len(kernel)
    if _attr_bool(op, "flip"):
        win = win[(Ellipsis, *[slice(None, None, -1)] * spatial)]
    perm = [0, *range(2, 2 + spatial), 1, *range(2 + spatial, 2 + 2 * spatial)]
    t = np.transpose(win, perm)
    n_rows = int(np.prod(t.shape[:1 + spatial]))
    return [result(op, t.reshape(n_rows, -1))]


@local("ttensor.col2im")
def col2im(op, ins):
    cols, like = ins
    kernel = _ints(op, "kernel")
    stride, pad, dil = _ints(op, "stride"), _ints(op, "padding"), _ints(op, "dilation")
    spatial = len(kernel)
    padded = [n + pad[2 * i] + pad[2 * i + 1] for i, n in enumerate(like.shape[2:])]
    out = [conv_extent(n, k, s, 0, 0, d) for n, k, s, d in zip(padded, kernel, stride, dil)]
    n, c = like.shape[:2]
    # [N, *out, C, *kernel], summed tap by tap into the padded image in f64, then cropped and rounded once
    patches = np.asarray(cols, np.float64).reshape(n, *out, c, *kernel)
    acc = np.zeros((n, c, *padded))
    for taps in np.ndindex(*kernel):
        window = tuple(slice(j * d, j * d + (o - 1) * s + 1, s) for j, d, o, s in zip(taps, dil, out, stride))
        acc[(slice(None), slice(None), *window)] += np.moveaxis(patches[(Ellipsis, *taps)], spatial + 1, 1)
    crop = tuple(slice(pad[2 * i], pad[2 * i] + m) for i, m in enumerate(like.shape[2:]))
    return [result(op, acc[(slice(None), slice(None), *crop)])]


@local("ttensor.softmax")
def softmax(op, ins):
    x = ins[0]
    axis = _attr_int(op, "axis")
    if "tessera.causal" in op.attributes:
        # attention's scores decomposed (passes/decompose.py) or differentiated (passes/autodiff_attention.py):
        # query i (axis -2) sees keys j <= i of the last axis, top-left aligned as flash_attention's
        x = _causal(x)
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return [result(op, e / np.sum(e, axis=axis, keepdims=True))]


@local("ttensor.log_softmax")
def log_softmax(op, ins):
    x = ins[0]
    axis = _attr_int(op, "axis")
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=axis, keepdims=True)
        return [result(op, shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True)))]


def _params(op, ins):
    """The optional scale/shift operands, by their segment sizes."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    vals, pos = [], 1
    for n in sizes[1:]:
        vals.append(ins[pos] if n else None)
        pos += n
    return vals


@local("ttensor.layernorm")
def layernorm(op, ins):
    x = ins[0]
    gamma, beta = _params(op, ins)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + _attr_float(op, "eps"))
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return [result(op, y)]


@local("ttensor.rmsnorm")
def rmsnorm(op, ins):
    x = ins[0]
    (gamma,) = _params(op, ins)
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + _attr_float(op, "eps"))
    return [result(op, y if gamma is None else y * gamma)]


_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


@local("ttensor.reduce")
def reduce(op, ins):
    axes = tuple(ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["axes"]))
    fn = _REDUCE[_attr_str(op, "kind")]
    return [result(op, fn(ins[0], axis=axes, keepdims=_attr_bool(op, "keepdims")))]


@local("ttensor.transpose")
def transpose(op, ins):
    perm = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["perm"])]
    return [np.transpose(ins[0], perm)]


def reshape(op, x, symbols: dict) -> np.ndarray:
    """`x` reshaped to the op's result type: an extent the type leaves `?` is the one its
    `tessera.result_dims` names (an expression over the function's extent symbols, `symbols` their values
    in this call), else inferred, which one `?` at most can be."""
    t = ir.RankedTensorType(op.results[0].type)
    named = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["tessera.result_dims"])] \
        if "tessera.result_dims" in op.attributes else ["?"] * t.rank
    shape = []
    for i in range(t.rank):
        if not t.is_dynamic_dim(i):
            shape.append(t.get_dim_size(i))
            continue
        try:
            shape.append(evaluate(named[i], symbols) if named[i] != "?" else -1)
        except PlanError:   # a symbol this call does not bind: inferred
            shape.append(-1)
    if shape.count(-1) > 1:
        raise ValueError(f"cannot reshape to {t}: more than one extent is only known at run time")
    return np.reshape(x, shape)


def broadcast(op, x, symbols: dict) -> np.ndarray:
    """`x` broadcast to the op's result type: an extent the type leaves `?` is the one its
    `tessera.result_dims` names (a derivative's broadcast of a cotangent to its primal's run-time extents),
    else x's own."""
    t = ir.RankedTensorType(op.results[0].type)
    named = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["tessera.result_dims"])] \
        if "tessera.result_dims" in op.attributes else ["?"] * t.rank
    shape = []
    for i in range(t.rank):
        j = i - (t.rank - x.ndim)
        if not t.is_dynamic_dim(i):
            shape.append(t.get_dim_size(i))
        elif named[i] != "?":
            shape.append(evaluate(named[i], symbols))
        else:
            shape.append(x.shape[j] if j >= 0 else 1)
    return np.broadcast_to(x, shape).copy()


@local("ttensor.cast")
def cast_(op, ins):
    return [result(op, ins[0])]


def _scale_like(op, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The scale of each element of `x` (ttensor.quantize's granularities): a 0-d scale for all of it, a [C]
    one along `axis`, or one per `block` consecutive elements of the last axis."""
    g = _attr_str(op, "granularity")
    if g == "tensor":
        return s
    if g == "channel":
        shape = [1] * x.ndim
        shape[_attr_int(op, "axis") % x.ndim] = s.shape[0]
        return s.reshape(shape)
    return np.repeat(s, _attr_int(op, "block"), axis=-1)


@local("ttensor.quantize")
def quantize(op, ins):
    # x in f32 divided by the scale in f32 (one rounding to f32), then the quantized type's rounding: i8 (or
    # i4) saturates first (the bounds are integers, so it commutes with rounding) and rounds half to even;
    # fp8's cast rounds to its grid and saturates (numerics/rounding.py)
    x, s = ins
    t = cast(cast(x, dtypes.BY_NAME["f32"]) / _scale_like(op, x, s), dtypes.BY_NAME["f32"])
    dt = dtypes.of_ir_type(ir.RankedTensorType(op.results[0].type).element_type)
    if dt.kind == "int":   # i8 or i4: [-128, 127] or [-8, 7]
        with np.errstate(invalid="ignore"):
            t = np.round(np.clip(t, -2.0 ** (dt.bits - 1), 2.0 ** (dt.bits - 1) - 1))
    return [result(op, t)]


@local("ttensor.dequantize")
def dequantize(op, ins):
    q, s = ins
    return [result(op, cast(q.astype(np.float64) * _scale_like(op, q, s), dtypes.BY_NAME["f32"]))]


@local("ttensor.push")
def push(op, ins):
    v, h = ins
    return [result(op, np.concatenate([np.reshape(v, [1]), h[:-1]]))]


@local("ttensor.dropout")
def dropout(op, ins):
    x = ins[0]
    p = _attr_float(op, "p")
    u = uniforms(x.size, ir.IntegerAttr(op.attributes["seed"]).value, _attr_int(op, "offset")).reshape(x.shape)
    keep = u >= p
    return [result(op, np.where(keep, x / (1.0 - p), 0.0))]


def _causal(s: np.ndarray) -> np.ndarray:
    """Scores [..., SQ, SK] with keys j > i masked (-inf) for query i: top-left aligned, as torch's is_causal."""
    sq, sk = s.shape[-2], s.shape[-1]
    return np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)


def _scores(op, q, k) -> np.ndarray:
    """scale · Q Kᵀ of an attention op, masked for `causal`."""
    return _causal_if(op, np.matmul(q, np.swapaxes(k, -1, -2)) * _attr_float(op, "scale"))


def _causal_if(op, s: np.ndarray) -> np.ndarray:
    return _causal(s) if _attr_bool(op, "causal") else s


def _lse(s: np.ndarray) -> np.ndarray:
    """The log-sum-exp of each row of `s` (a row's largest score is finite: key 0 is never masked)."""
    m = s.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True)))[..., 0]


@local("ttensor.flash_attention")
def flash_attention(op, ins):
    seq_heads = "tessera.seq_heads" in op.attributes   # [..., S, H, D]: per head, as on [..., H, S, D]
    q, k, v = (np.swapaxes(x, -3, -2) for x in ins) if seq_heads else ins
    s = _scores(op, q, k)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    o = np.matmul(p, v)
    return [result(op, np.swapaxes(o, -3, -2) if seq_heads else o)]


def _e4m3_per_tensor(x: np.ndarray) -> tuple[np.ndarray, float]:
    """x quantized to e4m3 with amax-dynamic scaling: s = max(amax, 2^-126) / 448 in f32, then quantize's
    rounding of f32(x) / s; returns (the e4m3 values, s)."""
    f32, e4m3 = dtypes.BY_NAME["f32"], dtypes.BY_NAME["fp8_e4m3"]
    amax = cast(np.max(np.abs(x)) if x.size else np.float64(0.0), f32)
    s = cast(np.maximum(amax, np.float64(2.0 ** -126)) / 448.0, f32)
    return cast(cast(cast(x, f32) / s, f32), e4m3), float(s)


@local("ttensor.flash_attention_fp8")
def flash_attention_fp8(op, ins):
    # The contract (dialects/ttensor.py, docs/language.md), in float64 from the e4m3 values: scores and
    # probabilities unrounded, P rounded to e4m3 before its product with V, the row sums of the unrounded P.
    # With descales (sq, sk, sv operands) Q, K, V are already e4m3: the same after the quantization step.
    if len(ins) == 6:
        q, k, v = ins[:3]
        sq, sk, sv = (float(np.asarray(s, dtype=np.float64)) for s in ins[3:])
    else:
        (q, sq), (k, sk), (v, sv) = (_e4m3_per_tensor(x) for x in ins)
    s = _causal_if(op, np.matmul(q, np.swapaxes(k, -1, -2)) * (sq * sk * _attr_float(op, "scale")))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p8 = cast(p, dtypes.BY_NAME["fp8_e4m3"])
    return [result(op, np.matmul(p8, v) * sv / p.sum(axis=-1, keepdims=True))]


@local("ttensor.attention_lse")
def attention_lse(op, ins):
    q, k = ins
    return [result(op, _lse(_scores(op, q, k)))]


@local("ttensor.attention_grad")
def attention_grad(op, ins):
    # The contract's math (dialects/ttensor.py), in float64 and rounded once to the result's type: the
    # probabilities from the lse operand, exp(-inf) = 0 where masked
    q, k, v, do, lse, delta = ins
    scale = _attr_float(op, "scale")
    p = np.exp(_scores(op, q, k) - lse[..., None])
    wrt = _attr_str(op, "wrt")
    if wrt == "v":
        return [result(op, np.matmul(np.swapaxes(p, -1, -2), do))]
    ds = p * (np.matmul(do, np.swapaxes(v, -1, -2)) - delta[..., None])
    out = np.matmul(ds, k) if wrt == "q" else np.matmul(np.swapaxes(ds, -1, -2), q)
    return [result(op, scale * out)]


@local("ttensor.load_blocks")
def load_blocks(op, ins):
    x = ins[0]
    step = _attr_int(op, "step")
    blocks = -(-x.shape[0] // step)
    out = np.full((blocks * step,) + x.shape[1:], _attr_float(op, "other"))
    out[:x.shape[0]] = x
    return [result(op, out.reshape((blocks, step) + x.shape[1:]))]


@local("ttensor.store_blocks")
def store_blocks(op, ins):
    x, dest = ins
    rows = x.reshape((-1,) + x.shape[2:])
    if rows.shape[0] < dest.shape[0] or rows.shape[0] - x.shape[1] >= dest.shape[0]:
        raise ValueError(f"{x.shape[0]} blocks of {x.shape[1]} rows cannot be stored into {dest.shape[0]} rows")
    return [result(op, rows[:dest.shape[0]])]


@local("ttensor.mask_blocks")
def mask_blocks(op, ins):
    x, bounds = ins
    axis, step = _attr_int(op, "axis"), _attr_int(op, "step")
    shape = [1] * x.ndim
    row = np.arange(x.shape[0]).reshape([-1] + [1] * (x.ndim - 1)) * step
    shape[axis] = x.shape[axis]
    row = row + np.arange(x.shape[axis]).reshape(shape)
    return [result(op, np.where(row < bounds.shape[0], x, _attr_float(op, "other")))]
