"""`op.*` builders for tensor operations (the ``ttensor`` dialect)."""

from __future__ import annotations

import math

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from .. import dtypes
from .attrs import INT64_MAX, i64 as _i64, u64
from .oplib import DTypePolicy, GTensor, graph_op


def _f32(v: float) -> ir.FloatAttr:
    return ir.FloatAttr.get(ir.F32Type.get(), float(v))


def _bool(v: bool) -> ir.Attribute:
    return ir.BoolAttr.get(bool(v))


def _check_kwargs(b, node, kwargs: dict, allowed: tuple) -> None:
    extra = sorted(set(kwargs) - set(allowed))
    if extra:
        raise b.error(node, f"unexpected keyword argument(s) {', '.join(extra)}"
                            + (f" (accepted: {', '.join(allowed)})" if allowed else ""))


def _options(b, node, args, kwargs, n: int, positional: tuple, keywords: tuple, what: str) -> dict:
    """The arguments after `what`'s `n` tensors, by name, bound as numpy's functions bind them: `positional`
    in order (op.sum(x, 1), op.softmax(x, -1)), any of `keywords` by keyword; too many arguments, or one
    given both ways, is a mistake at `node`."""
    _check_kwargs(b, node, kwargs, keywords)
    extra = args[n:]
    if len(extra) > len(positional):
        more = f" and {', '.join(positional)}" if positional else ""
        raise b.error(node, f"{what} takes {n} tensor argument(s){more}, got {len(args)} positional arguments")
    given = dict(zip(positional, extra))
    twice = sorted(set(given) & set(kwargs))
    if twice:
        raise b.error(node, f"{what} got {', '.join(twice)} both by position and by keyword")
    return {**given, **kwargs}


def _tensors(b, node, args, n: int, what: str) -> list[GTensor]:
    if len(args) != n:
        raise b.error(node, f"{what} takes {n} tensor argument(s), got {len(args)}")
    out = [a for a in args if isinstance(a, GTensor)]
    if len(out) != n:
        raise b.error(node, f"{what} takes tensors, got {', '.join(type(a).__name__ for a in args)}")
    return out


def _axis(b, node, axis, rank: int, what: str) -> int:
    if not isinstance(axis, int) or not -rank <= axis < max(rank, 1):
        raise b.error(node, f"{what}: axis {axis!r} is out of range for a rank-{rank} tensor")
    return axis % rank if rank else 0


def _result(b, op, dtype: dtypes.DType, dims: list, accum=None) -> GTensor:
    return GTensor(op.result, dtype, dims, accum)


# -- matmul -----------------------------------------------------------------------------------------------

def _default_accum(dt: dtypes.DType) -> dtypes.DType:
    # f64 accumulates in f64 (language.md): an f32 sum would silently drop to f32 precision. Narrower floats
    # (f32, f16, bf16, fp8) accumulate in f32, integers in i32. A target without an f64 GEMM refuses it.
    if dt.kind in ("int", "uint"):
        return dtypes.BY_NAME["i32"]
    return dtypes.BY_NAME["f64" if dt.name == "f64" else "f32"]


@graph_op("matmul", "batch_matmul")
def matmul(b, node, args, kwargs):
    """op.matmul(A, B, accum=fp32, out_dtype=None): [..., M, K] @ [..., K, N] with broadcast batch axes."""
    _check_kwargs(b, node, kwargs, ("accum", "out_dtype"))
    a, c = _tensors(b, node, args, 2, "op.matmul")
    if a.rank < 2 or c.rank < 2:
        raise b.error(node, f"matmul needs operands of rank >= 2, got {b.shapes.show_shape(a.dims)} and "
                            f"{b.shapes.show_shape(c.dims)}")
    fp8 = a.dtype.name.startswith("fp8") and c.dtype.name.startswith("fp8")  # e4m3 x e5m2 is an fp8 GEMM
    if a.dtype != c.dtype and not fp8:
        raise b.error(node, f"matmul operands have different dtypes ({a.dtype.name}, {c.dtype.name}); "
                            f"use op.cast (only the fp8 kinds mix)")
    b.unify(node, a.dims[-1], c.dims[-2], "matmul contracting dimensions")
    batch = b.broadcast(node, a.dims[:-2], c.dims[:-2], "matmul batch dimensions")
    for key in ("accum", "out_dtype"):
        if kwargs.get(key) is not None and not isinstance(kwargs[key], DTypePolicy):
            raise b.error(node, f"op.matmul's {key}= is a dtype (e.g. f32), not a {type(kwargs[key]).__name__}")
    acc = kwargs.get("accum")
    acc = acc.dtype if acc is not None else (a.accum or c.accum or _default_accum(a.dtype))
    out = kwargs.get("out_dtype")
    if out is not None:
        out = out.dtype
    else:  # fp8 and integer results are not useful narrow: keep the accumulator (int8 x int8 -> i32, as
        # numpy's matmul of int8 would wrap); other types round back to the inputs'
        out = acc if a.dtype.name.startswith("fp8") or a.dtype.kind in ("int", "uint") else a.dtype
    dims = batch + [a.dims[-2], c.dims[-1]]
    with b.loc(node):
        op = ttensor.MatmulOp(a.value, c.value, accum=ir.TypeAttr.get(ir.Type.parse(acc.mlir)),
                              result=b.tensor_type(out, dims))
    return _result(b, op, out, dims)


# -- elementwise ------------------------------------------------------------------------------------------

def _unary(fn: str):
    def build(b, node, args, kwargs):
        _check_kwargs(b, node, kwargs, ("approximate",) if fn == "gelu" else ())
        (x,) = _tensors(b, node, args, 1, f"op.{fn}")
        name = fn
        if fn == "gelu":
            approx = kwargs.get("approximate", "none")
            if approx not in ("none", "tanh"):
                raise b.error(node, f"gelu approximate must be 'none' or 'tanh', got {approx!r}")
            name = "gelu_tanh" if approx == "tanh" else "gelu"
        if name == "invert":
            if x.dtype.kind not in ("int", "uint", "bool"):
                raise b.error(node, f"'~' (op.invert) needs an integer or bool tensor, got {x.dtype.name}")
        elif x.dtype.kind != "float" and name not in ("neg", "abs", "relu", "square"):
            raise b.error(node, f"op.{fn} needs a floating-point tensor, got {x.dtype.name}")
        with b.loc(node):
            op = ttensor.UnaryOp(x.value, fn=ir.StringAttr.get(name), result=x.value.type)
        return _result(b, op, x.dtype, x.dims, x.accum)
    return build


for _fn in ttensor.UNARY_FNS:
    if _fn != "gelu_tanh":
        graph_op(_fn)(_unary(_fn))


def _binary(fn: str):
    def build(b, node, args, kwargs):
        _check_kwargs(b, node, kwargs, ())
        if len(args) != 2:
            raise b.error(node, f"op.{fn} takes 2 arguments, got {len(args)}")
        like = next((a for a in args if isinstance(a, GTensor)), None)
        if like is None:
            raise b.error(node, f"op.{fn} needs at least one tensor")
        x, y = (b.as_tensor(a, node, like) for a in args)
        if x.dtype != y.dtype:
            raise b.error(node, f"operands have different dtypes ({x.dtype.name}, {y.dtype.name}); use op.cast")
        if fn in ttensor.FLOAT_ONLY and x.dtype.kind != "float":
            hint = "; use // for floor division, or op.cast to a float type" if fn == "div" else \
                "; op.cast to a float type first"
            raise b.error(node, f"{_SPELLING[fn]} needs floating-point tensors, got {x.dtype.name}{hint}")
        if fn in ttensor.INT_ONLY and x.dtype.kind not in ("int", "uint"):
            raise b.error(node, f"{_SPELLING[fn]} needs integer tensors, got {x.dtype.name} (Python's floor "
                                f"division and modulo of floats are not supported yet)")
        logic = fn in ttensor.BITWISE_FNS and x.dtype.kind == "bool"
        if fn in ttensor.BITWISE_FNS + ttensor.SHIFT_FNS and x.dtype.kind not in ("int", "uint") and not logic:
            what = "integer or bool" if fn in ttensor.BITWISE_FNS else "integer"
            raise b.error(node, f"{_SPELLING[fn]} needs {what} tensors, got {x.dtype.name}")
        dims = b.broadcast(node, x.dims, y.dims, f"{fn} operand shapes")
        out = dtypes.BY_NAME["bool"] if fn in ttensor.COMPARE_FNS else x.dtype
        with b.loc(node):
            op = ttensor.BinaryOp(x.value, y.value, fn=ir.StringAttr.get(fn), result=b.tensor_type(out, dims))
        return _result(b, op, out, dims, None if fn in ttensor.COMPARE_FNS else x.accum or y.accum)
    return build


_SPELLING = {"div": "'/' (op.div)", "pow": "'**' (op.pow)", "floordiv": "'//' (op.floordiv)",
             "mod": "'%' (op.mod)", "and": "'&' (op.bitwise_and)", "or": "'|' (op.bitwise_or)",
             "xor": "'^' (op.bitwise_xor)", "shl": "'<<' (op.left_shift)", "shr": "'>>' (op.right_shift)"}

for _fn, _names in (("add", ("add",)), ("sub", ("sub",)), ("mul", ("mul",)), ("div", ("div",)),
                    ("max", ("maximum",)), ("min", ("minimum",)), ("pow", ("pow",)),
                    ("floordiv", ("floordiv", "floor_divide")), ("mod", ("mod", "remainder")),
                    ("lt", ("less",)), ("le", ("less_equal",)), ("gt", ("greater",)), ("ge", ("greater_equal",)),
                    ("eq", ("equal",)), ("ne", ("not_equal",)), ("and", ("bitwise_and",)), ("or", ("bitwise_or",)),
                    ("xor", ("bitwise_xor",)), ("shl", ("left_shift",)), ("shr", ("right_shift",))):
    graph_op(*_names)(_binary(_fn))
graph_op("bitwise_not")(_unary("invert"))   # numpy's other name of invert


@graph_op("where")
def where(b, node, args, kwargs):
    """op.where(cond, x, y): numpy's, `cond` a bool tensor (a comparison's result), x and y of one dtype (a
    Python number takes the other's), the three broadcast."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 3:
        raise b.error(node, f"op.where takes 3 arguments (cond, x, y), got {len(args)}")
    cond = args[0]
    if not isinstance(cond, GTensor) or cond.dtype.name != "bool":
        got = cond.dtype.name + " tensor" if isinstance(cond, GTensor) else type(cond).__name__
        raise b.error(node, f"op.where's condition must be a bool tensor (a comparison such as A < B), got {got}")
    like = next((a for a in args[1:] if isinstance(a, GTensor)), None)
    if like is None:
        raise b.error(node, "op.where needs x or y to be a tensor")
    x, y = (b.as_tensor(a, node, like) for a in args[1:])
    if x.dtype != y.dtype:
        raise b.error(node, f"op.where's values have different dtypes ({x.dtype.name}, {y.dtype.name}); use op.cast")
    dims = b.broadcast(node, b.broadcast(node, cond.dims, x.dims, "where operand shapes"), y.dims,
                       "where operand shapes")
    with b.loc(node):
        op = ttensor.SelectOp(cond.value, x.value, y.value, result=b.tensor_type(x.dtype, dims))
    return _result(b, op, x.dtype, dims, x.accum or y.accum)


@graph_op("bias_add", "bias")
def bias_add(b, node, args, kwargs):
    """op.bias_add(x, bias, axis=-1)."""
    given = _options(b, node, args, kwargs, 2, ("axis",), ("axis",), "op.bias_add")
    x, bias = _tensors(b, node, args[:2], 2, "op.bias_add")
    axis = _axis(b, node, given.get("axis", -1), x.rank, "op.bias_add")
    if bias.rank != 1:
        raise b.error(node, f"bias must be 1-D, got shape {b.shapes.show_shape(bias.dims)}")
    b.unify(node, x.dims[axis], bias.dims[0], "bias length and the biased axis")
    if bias.dtype != x.dtype:
        raise b.error(node, f"bias dtype {bias.dtype.name} differs from the input's {x.dtype.name}")
    with b.loc(node):
        op = ttensor.BiasAddOp(x.value, bias.value, axis=_i64(axis), result=x.value.type)
    return _result(b, op, x.dtype, x.dims, x.accum)


# -- convolution ------------------------------------------------------------------------------------------

def _per_axis(b, node, value, spatial: int, name: str, what: str) -> list:
    """`value` as one entry per spatial axis: an int (every axis) or a tuple of one entry per axis."""
    if isinstance(value, (tuple, list)):
        if len(value) != spatial:
            raise b.error(node, f"{what}'s {name} takes {spatial} value(s) (one per spatial axis), got {len(value)}")
        return list(value)
    return [value] * spatial


def _conv_padding(b, node, padding, kernel: list, stride: list, dilation: list, what: str) -> list[int]:
    """The padding as [lo, hi] per spatial axis, flattened: an int (both sides of every axis), one entry per
    axis (an int, or a (lo, hi) pair), "valid" (none) or "same" (stride 1 only: the output has the input's
    extent, the odd zero after, as PyTorch pads)."""
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * (2 * len(kernel))
        if padding != "same":
            raise b.error(node, f"{what}'s padding is an int, a tuple, 'same' or 'valid', not {padding!r}")
        if any(s != 1 for s in stride):
            raise b.error(node, f"{what}'s padding='same' needs stride 1, got stride {tuple(stride)}")
        out = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            out += [total // 2, total - total // 2]
        return out
    out = []
    for p in _per_axis(b, node, padding, len(kernel), "padding", what):
        pair = list(p) if isinstance(p, (tuple, list)) else [p, p]
        if len(pair) != 2 or any(type(v) is not int or v < 0 for v in pair):
            raise b.error(node, f"{what}'s padding {padding!r}: each axis takes an int >= 0 or a (low, high) pair")
        out += pair
    return out


def _conv(spatial: int):
    what = f"op.conv{spatial}d"
    layout = ("[N, C, L]", "[O, C, K]") if spatial == 1 else ("[N, C, H, W]", "[O, C, KH, KW]")

    def build(b, node, args, kwargs):
        given = _options(b, node, args, kwargs, 2, ("stride", "padding", "dilation"),
                         ("stride", "padding", "dilation"), what)
        x, w = _tensors(b, node, args[:2], 2, what)
        if x.rank != spatial + 2 or w.rank != spatial + 2:
            raise b.error(node, f"{what} takes an input {layout[0]} and a weight {layout[1]}, got shapes "
                                f"{b.shapes.show_shape(x.dims)} and {b.shapes.show_shape(w.dims)}")
        if x.dtype != w.dtype or x.dtype.kind != "float":
            raise b.error(node, f"{what} takes an input and a weight of one floating-point dtype, got "
                                f"{x.dtype.name} and {w.dtype.name}")
        b.unify(node, x.dims[1], w.dims[1], f"{what}'s input channels and the weight's")
        static = [b.shapes.resolve(d) for d in (x.dims[1], *x.dims[2:], *w.dims[2:])]
        # the output channels too: the lowering's GEMMs take them as a static extent
        if any(type(d) is not int for d in (*static, b.shapes.resolve(w.dims[0]))):
            raise b.error(node, f"{what} needs static channel, spatial and kernel extents, got input "
                                f"{b.shapes.show_shape(x.dims)} and weight {b.shapes.show_shape(w.dims)}")
        length, kernel = static[1:1 + spatial], static[1 + spatial:]
        geometry = {}
        for name in ("stride", "dilation"):
            vals = _per_axis(b, node, given.get(name, 1), spatial, name, what)
            if any(type(v) is not int or v < 1 for v in vals):
                raise b.error(node, f"{what}'s {name} must be positive ints, got {given.get(name)!r}")
            geometry[name] = vals
        pad = _conv_padding(b, node, given.get("padding", 0), kernel, geometry["stride"], geometry["dilation"],
                            what)
        out = [ttensor.conv_extent(n, k, s, pad[2 * i], pad[2 * i + 1], d) for i, (n, k, s, d) in
               enumerate(zip(length, kernel, geometry["stride"], geometry["dilation"]))]
        if min(out) < 1:
            raise b.error(node, f"{what}: the window (kernel {tuple(kernel)}, dilation "
                                f"{tuple(geometry['dilation'])}) does not fit the padded input "
                                f"{tuple(n + pad[2 * i] + pad[2 * i + 1] for i, n in enumerate(length))}")
        dims = [x.dims[0], w.dims[0], *out]
        with b.loc(node):
            op = ttensor.ConvOp(x.value, w.value, stride=ir.ArrayAttr.get([_i64(v) for v in geometry["stride"]]),
                                padding=ir.ArrayAttr.get([_i64(v) for v in pad]),
                                dilation=ir.ArrayAttr.get([_i64(v) for v in geometry["dilation"]]),
                                result=b.tensor_type(x.dtype, dims))
        return _result(b, op, x.dtype, dims, x.accum)
    build.__doc__ = (f"{what}(x {layout[0]}, w {layout[1]}, stride=1, padding=0, dilation=1): PyTorch's "
                     f"cross-correlation, no groups.")
    return build


# op.conv1d is also the operator algebra's circulant constructor op.conv1d(h, n): operator_ops registers the
# name and hands a call whose second argument is a tensor to this one
conv1d = _conv(1)
graph_op("conv2d")(_conv(2))


# -- normalizations and softmax ---------------------------------------------------------------------------

def _along_axis(name: str, op_class):
    def build(b, node, args, kwargs):
        what = f"op.{name}"
        given = _options(b, node, args, kwargs, 1, ("axis",), ("axis",), what)
        (x,) = _tensors(b, node, args[:1], 1, what)
        axis = _axis(b, node, given.get("axis", -1), x.rank, what)
        if x.dtype.kind != "float":
            raise b.error(node, f"{what} needs a floating-point tensor")
        with b.loc(node):
            op = op_class(x.value, axis=_i64(axis), result=x.value.type)
        return _result(b, op, x.dtype, x.dims, x.accum)
    return build


# op.softmax(x, axis=-1): stable (max-subtracted) softmax.
graph_op("softmax")(_along_axis("softmax", ttensor.SoftmaxOp))
# op.log_softmax(x, axis=-1): x - max - log(sum(exp(x - max))), one row kernel like softmax's.
graph_op("log_softmax")(_along_axis("log_softmax", ttensor.LogSoftmaxOp))


def _norm_params(b, node, x: GTensor, kwargs, names) -> list:
    if x.rank < 1:
        raise b.error(node, "a normalization is over the last axis: a 0-d tensor has none")
    params = []
    for n in names:
        p = kwargs.get(n)
        if p is None:
            params.append(None)
            continue
        if not isinstance(p, GTensor) or p.rank != 1:
            raise b.error(node, f"{n} must be a 1-D tensor")
        b.unify(node, p.dims[0], x.dims[-1], f"{n} length and the normalized axis")
        params.append(p.value)
    return params


@graph_op("layernorm", "layer_norm")
def layernorm(b, node, args, kwargs):
    """op.layernorm(x, gamma=None, beta=None, eps=1e-5) over the last axis."""
    _check_kwargs(b, node, kwargs, ("gamma", "beta", "eps"))
    (x,) = _tensors(b, node, args, 1, "op.layernorm")
    gamma, beta = _norm_params(b, node, x, kwargs, ("gamma", "beta"))
    with b.loc(node):
        op = ttensor.LayerNormOp(x.value, eps=_f32(kwargs.get("eps", 1e-5)), result=x.value.type,
                                 gamma=gamma, beta=beta)
    return _result(b, op, x.dtype, x.dims, x.accum)


@graph_op("rmsnorm", "rms_norm")
def rmsnorm(b, node, args, kwargs):
    """op.rmsnorm(x, gamma=None, eps=1e-6) over the last axis."""
    _check_kwargs(b, node, kwargs, ("gamma", "eps"))
    (x,) = _tensors(b, node, args, 1, "op.rmsnorm")
    (gamma,) = _norm_params(b, node, x, kwargs, ("gamma",))
    with b.loc(node):
        op = ttensor.RMSNormOp(x.value, eps=_f32(kwargs.get("eps", 1e-6)), result=x.value.type, gamma=gamma)
    return _result(b, op, x.dtype, x.dims, x.accum)


# -- reductions -------------------------------------------------------------------------------------------

def _reduction(kind: str):
    def build(b, node, args, kwargs):
        # numpy's positional order is (a, axis, dtype, out, keepdims): keepdims only by keyword
        given = _options(b, node, args, kwargs, 1, ("axis",), ("axis", "keepdims"), f"op.{kind}")
        (x,) = _tensors(b, node, args[:1], 1, f"op.{kind}")
        axis = given.get("axis")
        axes = list(range(x.rank)) if axis is None else list(axis) if isinstance(axis, (tuple, list)) else [axis]
        if not axes:  # numpy's meaning: a reduction over no axis leaves every element as it is
            return x
        axes = sorted({_axis(b, node, a, x.rank, f"op.{kind}") for a in axes})
        keep = bool(given.get("keepdims", False))
        if x.dtype.kind == "bool":  # numpy counts in an integer; the bool's own arithmetic would be xor
            raise b.error(node, f"op.{kind} of a bool tensor: op.cast it to an integer type first (numpy's sum counts)")
        if kind == "mean" and x.dtype.kind != "float":
            raise b.error(node, f"op.mean needs a floating-point tensor, got {x.dtype.name}; op.cast it first")
        dims = [1 if i in axes else d for i, d in enumerate(x.dims)] if keep else \
            [d for i, d in enumerate(x.dims) if i not in axes]
        with b.loc(node):
            op = create(ttensor.ReduceOp, x.value, kind=ir.StringAttr.get(kind),
                                  axes=ir.ArrayAttr.get([_i64(a) for a in axes]), keepdims=_bool(keep),
                                  result=b.tensor_type(x.dtype, dims))
        return _result(b, op, x.dtype, dims, x.accum)
    return build


for _kind in ttensor.REDUCE_KINDS:
    graph_op(_kind)(_reduction(_kind))


# -- layout -----------------------------------------------------------------------------------------------

@graph_op("transpose")
def transpose(b, node, args, kwargs):
    """op.transpose(x, perm=None): numpy's transpose (all axes reversed by default, as `x.T`); numpy's name
    `axes=` for `perm` too."""
    given = _options(b, node, args, kwargs, 1, ("perm",), ("perm", "axes"), "op.transpose")
    x = args[0] if args else None
    if not isinstance(x, GTensor):
        raise b.error(node, "op.transpose takes a tensor")
    if "perm" in given and "axes" in given:
        raise b.error(node, "op.transpose got both perm= and axes= (one name for the same argument)")
    perm = given.get("perm", given.get("axes"))
    if perm is not None and not isinstance(perm, (tuple, list)):
        raise b.error(node, f"op.transpose's axes are a tuple of axis numbers, not {perm!r}")
    perm = list(reversed(range(x.rank))) if perm is None else \
        [_axis(b, node, p, x.rank, "op.transpose") for p in perm]  # negative axes count from the end
    if sorted(perm) != list(range(x.rank)):
        raise b.error(node, f"perm {perm} is not a permutation of the {x.rank} axes")
    if not perm:  # a 0-d tensor is its own transpose
        return x
    dims = [x.dims[p] for p in perm]
    with b.loc(node):
        op = ttensor.TransposeOp(x.value, perm=ir.ArrayAttr.get([_i64(p) for p in perm]),
                                 result=b.tensor_type(x.dtype, dims))
    return _result(b, op, x.dtype, dims, x.accum)


def _target_shape(b, node, x: GTensor, shape, what: str) -> list:
    if not isinstance(shape, (tuple, list)):
        raise b.error(node, f"{what}: the shape must be a tuple of extents")
    for d in shape:
        if not ((isinstance(d, str) and d.isidentifier() and d.isascii())
                or (type(d) is int and (0 < d <= INT64_MAX or d == -1))):
            raise b.error(node, f"{what}: extent {d!r} must be a positive int, an ASCII symbol name or -1")
    return list(shape)


@graph_op("reshape")
def reshape(b, node, args, kwargs):
    """op.reshape(x, shape): row-major; one extent may be -1 (inferred)."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2 or not isinstance(args[0], GTensor):
        raise b.error(node, "op.reshape(x, shape) takes a tensor and a shape")
    x = args[0]
    dims = _target_shape(b, node, x, args[1], "op.reshape")
    if dims.count(-1) > 1:
        raise b.error(node, "op.reshape: at most one extent may be -1")
    known = [b.shapes.resolve(d) for d in x.dims]
    if -1 in dims:
        rest = [d for d in dims if d != -1]
        if all(isinstance(d, int) for d in known + rest):
            total, part = math.prod(known), math.prod(rest)
            if part == 0 or total % part:
                raise b.error(node, f"cannot reshape {known} into {dims}")
            dims[dims.index(-1)] = total // part
        else:
            dims[dims.index(-1)] = b.shapes.fresh()
    elif all(isinstance(d, int) for d in known + dims) and math.prod(known) != math.prod(dims):
        raise b.error(node, f"cannot reshape {known} ({math.prod(known)} elements) into {dims}")
    with b.loc(node):
        op = ttensor.ReshapeOp(x.value, result=b.tensor_type(x.dtype, dims))
    if any(isinstance(d, str) and not d.startswith("?") for d in dims):
        # the type keeps only `?`: the symbols let the launch plan size the result
        op.attributes["tessera.result_dims"] = ir.ArrayAttr.get(
            [ir.StringAttr.get(str(b.shapes.resolve(d)) if not str(d).startswith("?") else "?") for d in dims])
    return _result(b, op, x.dtype, dims, x.accum)


@graph_op("broadcast_to")
def broadcast_to(b, node, args, kwargs):
    """op.broadcast_to(x, shape): numpy broadcasting to a larger shape."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2 or not isinstance(args[0], GTensor):
        raise b.error(node, "op.broadcast_to(x, shape) takes a tensor and a shape")
    x = args[0]
    dims = _target_shape(b, node, x, args[1], "op.broadcast_to")
    if -1 in dims or len(dims) < x.rank:
        raise b.error(node, f"cannot broadcast a rank-{x.rank} tensor to {dims}")
    out = b.broadcast(node, x.dims, dims, "op.broadcast_to")
    for d, o in zip(dims, out):
        b.unify(node, d, o, "op.broadcast_to target")
    with b.loc(node):
        op = ttensor.BroadcastOp(x.value, result=b.tensor_type(x.dtype, dims))
    return _result(b, op, x.dtype, dims, x.accum)


# -- casts, dropout, attention ----------------------------------------------------------------------------

@graph_op("cast")
def cast(b, node, args, kwargs):
    """op.cast(x, bf16) or op.cast(x, fp8_e4m3 @ accum(fp32))."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2 or not isinstance(args[0], GTensor) or not isinstance(args[1], DTypePolicy):
        raise b.error(node, "op.cast(x, dtype) takes a tensor and a dtype (optionally `dtype @ accum(dtype)`)")
    x, policy = args
    acc = policy.accum or (policy.dtype if policy.dtype.kind != "float" or policy.dtype.bits >= 32
                           else dtypes.BY_NAME["f32"])
    if acc.bits < policy.dtype.bits:
        raise b.error(node, f"accumulator {acc.name} is narrower than {policy.dtype.name}")
    with b.loc(node):
        op = ttensor.CastOp(x.value, accum=ir.TypeAttr.get(ir.Type.parse(acc.mlir)),
                            result=b.tensor_type(policy.dtype, x.dims))
    return _result(b, op, policy.dtype, x.dims, acc)


# -- quantization ------------------------------------------------------------------------------------------

_F32 = dtypes.BY_NAME["f32"]
QUANTIZED = ("i8", "fp8_e4m3", "fp8_e5m2", "i4")


def _scale(b, node, x: GTensor, scale, axis, block, what: str) -> tuple[GTensor, str, int, int]:
    """The scale operand of `what` and its granularity: a positive Python number is a 0-d f32 constant (a
    static scale); a tensor must be f32 of the shape its granularity needs (ttensor.QuantizeOp's rules)."""
    if axis is not None and block is not None:
        raise b.error(node, f"{what}: give axis= (a scale per channel) or block= (a scale per block), not both")
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        if not 0 < scale < math.inf:
            raise b.error(node, f"{what}: a static scale must be a positive finite number, got {scale!r}")
        with b.loc(node):
            c = ttensor.ConstantOp(value=ir.FloatAttr.get(ir.F32Type.get(), float(scale)),
                                   result=b.tensor_type(_F32, []))
        scale = GTensor(c.result, _F32, [])
    if not isinstance(scale, GTensor):
        raise b.error(node, f"{what} needs scale=: an f32 tensor or a positive number, got {type(scale).__name__}")
    if scale.dtype != _F32:
        raise b.error(node, f"{what}: the scale must be an f32 tensor, got {scale.dtype.name}; op.cast it")
    if axis is not None:
        a = _axis(b, node, axis, x.rank, what)
        if scale.rank != 1:
            raise b.error(node, f"{what}: a per-channel scale (axis={axis}) is 1-D, got shape "
                                f"{b.shapes.show_shape(scale.dims)}")
        b.unify(node, scale.dims[0], x.dims[a], f"{what}'s scale length and the extent of axis {axis}")
        return scale, "channel", a, 0
    if block is not None:
        if type(block) is not int or block < 1 or x.rank < 1:
            raise b.error(node, f"{what}: block= is a positive number of elements along the last axis, got {block!r}")
        n = b.shapes.resolve(x.dims[-1])
        if isinstance(n, int) and n % block:
            raise b.error(node, f"{what}: the last extent {n} is not a multiple of the block {block}")
        if scale.rank != x.rank:
            raise b.error(node, f"{what}: a per-block scale has the input's rank {x.rank}, got shape "
                                f"{b.shapes.show_shape(scale.dims)}")
        for i in range(x.rank - 1):
            b.unify(node, scale.dims[i], x.dims[i], f"{what}'s scale and input extents of axis {i}")
        if isinstance(n, int):
            b.unify(node, scale.dims[-1], n // block, f"{what}'s scale's last extent (blocks of {block})")
        return scale, "block", 0, block
    if scale.rank != 0:
        raise b.error(node, f"{what}: a per-tensor scale is 0-d (give axis= or block= for others), got shape "
                            f"{b.shapes.show_shape(scale.dims)}")
    return scale, "tensor", 0, 0


def _quantized_op(b, node, cls, x: GTensor, scale: GTensor, granularity: str, axis: int, block: int,
                  out: dtypes.DType) -> GTensor:
    with b.loc(node):
        op = cls(x.value, scale.value, granularity=ir.StringAttr.get(granularity), axis=_i64(axis),
                 block=_i64(block), result=b.tensor_type(out, x.dims))
    return _result(b, op, out, x.dims)


@graph_op("quantize")
def quantize(b, node, args, kwargs):
    """op.quantize(x, dtype, scale=s, axis=None, block=None): saturate(round_half_even(x / s)) in i8, i4,
    fp8_e4m3 or fp8_e5m2; s per tensor (0-d or a number), per channel along `axis` ([C]), or per `block`
    elements of the last axis ([..., N/block])."""
    given = _options(b, node, args, kwargs, 2, ("scale",), ("scale", "axis", "block"), "op.quantize")
    if len(args) < 2 or not isinstance(args[0], GTensor) or not isinstance(args[1], DTypePolicy):
        raise b.error(node, "op.quantize(x, dtype, scale=...) takes a tensor and a dtype (i8, fp8_e4m3 or fp8_e5m2)")
    x, out = args[0], args[1].dtype
    if out.name not in QUANTIZED:
        raise b.error(node, f"op.quantize quantizes to {', '.join(QUANTIZED)}, not {out.name}")
    if x.dtype.kind != "float":
        raise b.error(node, f"op.quantize needs a floating-point tensor, got {x.dtype.name}")
    last = b.shapes.resolve(x.dims[-1]) if x.rank else None
    if out.name == "i4" and (not isinstance(last, int) or last % 2):
        raise b.error(node, f"op.quantize to i4 needs a static even last extent (two elements a byte), got shape "
                            f"{b.shapes.show_shape(x.dims)}")
    scale = _scale(b, node, x, given.get("scale"), given.get("axis"), given.get("block"), "op.quantize")
    return _quantized_op(b, node, ttensor.QuantizeOp, x, *scale, out)


@graph_op("dequantize")
def dequantize(b, node, args, kwargs):
    """op.dequantize(q, scale, axis=None, block=None, dtype=f32): q * scale, q of i8, i4 or fp8, scale as
    op.quantize's."""
    given = _options(b, node, args, kwargs, 1, ("scale",), ("scale", "axis", "block", "dtype"), "op.dequantize")
    q = args[0] if args else None
    if not isinstance(q, GTensor) or q.dtype.name not in QUANTIZED:
        got = q.dtype.name + " tensor" if isinstance(q, GTensor) else type(q).__name__
        raise b.error(node, f"op.dequantize takes an {', '.join(QUANTIZED)} tensor, got {got}")
    out = given.get("dtype", DTypePolicy(_F32))
    if not isinstance(out, DTypePolicy) or out.dtype.kind != "float" or out.dtype.name in QUANTIZED:
        raise b.error(node, "op.dequantize's dtype= is a floating-point dtype such as f32 or bf16")
    scale = _scale(b, node, q, given.get("scale"), given.get("axis"), given.get("block"), "op.dequantize")
    return _quantized_op(b, node, ttensor.DequantizeOp, q, *scale, out.dtype)


@graph_op("amax")
def amax(b, node, args, kwargs):
    """op.amax(x): max |x| over every element, a 0-d tensor of x's dtype (a quantization scale's input)."""
    _check_kwargs(b, node, kwargs, ())
    (x,) = _tensors(b, node, args, 1, "op.amax")
    if x.dtype.kind != "float":
        raise b.error(node, f"op.amax needs a floating-point tensor, got {x.dtype.name}")
    with b.loc(node):
        a = ttensor.UnaryOp(x.value, fn=ir.StringAttr.get("abs"), result=x.value.type)
        if not x.rank:
            return _result(b, a, x.dtype, [])
        op = create(ttensor.ReduceOp, a.result, kind=ir.StringAttr.get("max"),
                    axes=ir.ArrayAttr.get([_i64(i) for i in range(x.rank)]), keepdims=_bool(False),
                    result=b.tensor_type(x.dtype, []))
    return _result(b, op, x.dtype, [])


@graph_op("amax_scale")
def amax_scale(b, node, args, kwargs):
    """op.amax_scale(x, dtype, history=h) -> (scale, new_history): delayed scaling with an explicit state.
    `h` is an f32 [H] tensor of past amaxes (the caller's, zeros at first); new_history = [amax(x), h[0], …,
    h[H-2]], and scale = max(new_history) / the largest value of `dtype` (127, 448, 57344), at least the
    smallest normal f32 over it, so that an all-zero start divides by no zero."""
    given = _options(b, node, args, kwargs, 2, (), ("history",), "op.amax_scale")
    if len(args) != 2 or not isinstance(args[0], GTensor) or not isinstance(args[1], DTypePolicy):
        raise b.error(node, "op.amax_scale(x, dtype, history=h) takes a tensor and a dtype (i8, fp8_e4m3 or fp8_e5m2)")
    x, out, h = args[0], args[1].dtype, given.get("history")
    if out.name not in QUANTIZED:
        raise b.error(node, f"op.amax_scale scales for {', '.join(QUANTIZED)}, not {out.name}")
    if not isinstance(h, GTensor) or h.dtype != _F32 or h.rank != 1:
        raise b.error(node, "op.amax_scale needs history=: a 1-D f32 tensor of past amaxes (the state it returns)")
    a = amax(b, node, [x], {})
    if a.dtype != _F32:
        a = cast(b, node, [a, DTypePolicy(_F32)], {})
    with b.loc(node):
        pushed = ttensor.PushOp(a.value, h.value, result=h.value.type)
        top = create(ttensor.ReduceOp, pushed.result, kind=ir.StringAttr.get("max"), axes=ir.ArrayAttr.get([_i64(0)]),
                     keepdims=_bool(False), result=b.tensor_type(_F32, []))
        tiny = ttensor.ConstantOp(value=ir.FloatAttr.get(ir.F32Type.get(), 1.1754943508222875e-38),
                                  result=b.tensor_type(_F32, []))
        floor = ttensor.BinaryOp(top.result, tiny.result, fn=ir.StringAttr.get("max"), result=b.tensor_type(_F32, []))
        limit = ttensor.ConstantOp(value=ir.FloatAttr.get(ir.F32Type.get(), ttensor.QUANTIZED[out.mlir]),
                                   result=b.tensor_type(_F32, []))
        scale = ttensor.BinaryOp(floor.result, limit.result, fn=ir.StringAttr.get("div"),
                                 result=b.tensor_type(_F32, []))
    return GTensor(scale.result, _F32, []), GTensor(pushed.result, _F32, h.dims)


@graph_op("dropout")
def dropout(b, node, args, kwargs):
    """op.dropout(x, p, seed, offset=0): Philox-4x32-10 keyed by `seed` (deterministic on every backend)."""
    _check_kwargs(b, node, kwargs, ("p", "seed", "offset"))
    names = ("x", "p", "seed", "offset")
    given = dict(zip(names, args))
    given.update(kwargs)
    x = given.get("x")
    if not isinstance(x, GTensor):
        raise b.error(node, "op.dropout takes a tensor")
    p, seed, offset = given.get("p", 0.5), given.get("seed"), given.get("offset", 0)
    if not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise b.error(node, f"dropout probability p must be in [0, 1), got {p!r}")
    if not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
        raise b.error(node, "dropout needs a fixed integer seed=… (0 <= seed < 2**64), for reproducibility")
    if not isinstance(offset, int) or not 0 <= offset <= INT64_MAX:
        raise b.error(node, "dropout offset must be a non-negative integer")
    if x.dtype.kind != "float":
        raise b.error(node, "op.dropout needs a floating-point tensor")
    with b.loc(node):
        op = ttensor.DropoutOp(x.value, p=_f32(p), seed=u64(seed),
                               offset=_i64(offset), result=x.value.type)
    return _result(b, op, x.dtype, x.dims, x.accum)


@graph_op("flash_attention", "attention")
def flash_attention(b, node, args, kwargs):
    """op.flash_attention(Q, K, V, causal=False, scale=1/sqrt(D)) over [..., S, D] tensors."""
    _check_kwargs(b, node, kwargs, ("causal", "scale"))
    q, k, v, scale, dims = _attention_operands(b, node, args, kwargs.get("scale"), "op.flash_attention")
    with b.loc(node):
        op = create(ttensor.FlashAttentionOp, q.value, k.value, v.value, causal=_bool(kwargs.get("causal", False)),
                                      scale=_f32(scale), result=b.tensor_type(q.dtype, dims))
    return _result(b, op, q.dtype, dims)


@graph_op("flash_attention_fp8")
def flash_attention_fp8(b, node, args, kwargs):
    """op.flash_attention_fp8(Q, K, V, scale="amax_dynamic", causal=False, softmax_scale=1/sqrt(D)):
    flash_attention with Q, K, V quantized to e4m3 per tensor (scale amax / 448, taken from the tensors
    themselves) and P rounded to e4m3 (ttensor.flash_attention_fp8; docs/language.md); the result in the
    inputs' dtype (bf16, f16 or f32). op.flash_attention_fp8(Q8, K8, V8, scale=(sq, sk, sv), ...): Q, K, V
    already fp8_e4m3 (op.quantize's), sq, sk, sv their f32 0-d descales; the same after the quantization, in
    bf16."""
    _check_kwargs(b, node, kwargs, ("scale", "causal", "softmax_scale"))
    given = kwargs.get("scale", "amax_dynamic")
    if isinstance(given, (tuple, list)):
        return _flash_attention_fp8_scaled(b, node, args, kwargs, tuple(given))
    if given != "amax_dynamic":
        raise b.error(node, f"op.flash_attention_fp8 scales by scale=\"amax_dynamic\" (each tensor's own amax / "
                            f"448) or scale=(sq, sk, sv) (the f32 descales of e4m3 Q, K, V), not {given!r}")
    if all(isinstance(x, GTensor) and x.dtype.name == "fp8_e4m3" for x in args[:3]) and len(args) >= 3:
        raise b.error(node, "op.flash_attention_fp8 of fp8_e4m3 Q, K, V takes their descales: scale=(sq, sk, sv), "
                            "f32 0-d tensors (amax_dynamic quantizes bf16, f16 or f32 tensors)")
    q, k, v, scale, dims = _attention_operands(b, node, args, kwargs.get("softmax_scale"), "op.flash_attention_fp8")
    if q.dtype.name not in ("bf16", "f16", "f32"):
        raise b.error(node, f"op.flash_attention_fp8 quantizes bf16, f16 or f32 tensors, not {q.dtype.name}")
    with b.loc(node):
        op = create(ttensor.FlashAttentionFp8Op, q.value, k.value, v.value, [],
                    causal=_bool(kwargs.get("causal", False)), scale=_f32(scale), result=b.tensor_type(q.dtype, dims))
    return _result(b, op, q.dtype, dims)


def _flash_attention_fp8_scaled(b, node, args, kwargs, given: tuple):
    """op.flash_attention_fp8(Q8, K8, V8, scale=(sq, sk, sv)): fp8_e4m3 tensors and their f32 0-d descales."""
    what = "op.flash_attention_fp8"
    if len(given) != 3 or not all(isinstance(s, GTensor) and s.dtype == _F32 and s.rank == 0 for s in given):
        got = ", ".join(f"{s.dtype.name} tensor of shape {b.shapes.show_shape(s.dims)}" if isinstance(s, GTensor)
                        else type(s).__name__ for s in given)
        raise b.error(node, f"{what}'s scale=(sq, sk, sv) is three f32 0-d tensors (the descales of Q, K, V, as "
                            f"op.dequantize takes them), got ({got})")
    got = [x.dtype.name if isinstance(x, GTensor) else type(x).__name__ for x in args[:3]]
    if len(args) != 3 or got != ["fp8_e4m3"] * 3:
        raise b.error(node, f"{what} with scale=(sq, sk, sv) takes fp8_e4m3 Q, K, V (op.quantize's), got "
                            f"{', '.join(got)}")
    q, k, v, scale, dims = _attention_operands(b, node, args, kwargs.get("softmax_scale"), what)
    out = dtypes.BY_NAME["bf16"]
    with b.loc(node):
        op = create(ttensor.FlashAttentionFp8Op, q.value, k.value, v.value, [s.value for s in given],
                    causal=_bool(kwargs.get("causal", False)), scale=_f32(scale), result=b.tensor_type(out, dims))
    return _result(b, op, out, dims)


def _attention_operands(b, node, args, scale, what: str):
    """Q, K, V of an attention call, checked and unified, the softmax scale (1/sqrt(D) if not given) and the
    result's extents."""
    q, k, v = _tensors(b, node, args, 3, what)
    if not (q.rank == k.rank == v.rank) or q.rank < 2:
        raise b.error(node, "Q, K and V must have the same rank (at least 2: [..., seq, head_dim])")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype.kind != "float":
        raise b.error(node, "Q, K and V must share a floating-point dtype")
    b.unify(node, q.dims[-1], k.dims[-1], "Q and K head dimensions")
    b.unify(node, k.dims[-2], v.dims[-2], "K and V sequence lengths")
    for i in range(q.rank - 2):
        b.unify(node, q.dims[i], k.dims[i], f"Q and K batch axis {i}")
        b.unify(node, k.dims[i], v.dims[i], f"K and V batch axis {i}")
    name = "softmax_scale" if what.endswith("fp8") else "scale"
    if scale is None:
        d = b.shapes.resolve(q.dims[-1])
        if not isinstance(d, int):
            raise b.error(node, f"the head dimension {d!r} is symbolic: give {name}=… explicitly")
        scale = 1.0 / math.sqrt(d)
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or scale <= 0:
        raise b.error(node, f"{name} must be a positive number, got {scale!r}")
    return q, k, v, scale, q.dims[:-1] + v.dims[-1:]
