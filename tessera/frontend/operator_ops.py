"""`op.*` builders for the operator algebra (the ``tod`` dialect), and Python's operators on operators.

    F = op.fft(n)                     # constructors: eye, zero, dense, diag, projector, fft, ifft, conv1d,
    C = op.ifft(n) @ op.diag(H) @ F   # kronecker, direct_sum; `A @ B` composes,
    y = C @ x                         # `A @ x` applies, `A + B`, `A - B`, `2.0 * A`, `A / 2`, `A ** 3`, `-A`

An operator's extents unify with the tensors it meets like any tensor extent (shapes.py); a mistake is
reported at the user's line. Entry types combine as the dialect's do: real and complex of one precision give
complex, different precisions are an error.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from ..dialects import tod, ttensor
from ..mlir import ir
from ..numerics.rounding import epsilon
from .. import dtypes
from .attrs import INT64_MAX
from .oplib import DTypePolicy, GTensor, describe, graph_op
from .shapes import Dim, show
from . import tensor_ops
from .tensor_ops import _check_kwargs, _i64

F32, F64 = dtypes.BY_NAME["f32"], dtypes.BY_NAME["f64"]
_COMPLEX = {"f32": "c64", "f64": "c128"}
_PART = {v: k for k, v in _COMPLEX.items()}


@dataclass
class GOperator:
    """An operator value of the program: Din -> Dout with entries of `dtype` accumulated in `accum`."""

    value: ir.Value
    din: Dim
    dout: Dim
    dtype: dtypes.DType
    accum: dtypes.DType
    # an op.descriptor (operator_abi.py), or its adjoint (`adjointed`): what the operator crosses the ABI as
    descriptor: object = None
    adjointed: bool = False

    def describe(self) -> str:
        return f"an operator {show(self.din)} -> {show(self.dout)} of {self.dtype.name}"


@dataclass
class GSpectral:
    """A factorization U diag(S) V* of an operator, `rank` terms, U and V with entries of `dtype`."""

    value: ir.Value
    din: Dim
    dout: Dim
    rank: Dim
    dtype: dtypes.DType
    kind: str

    def describe(self) -> str:
        return f"a {self.kind} factorization of rank {show(self.rank)}"


# -- entry types ------------------------------------------------------------------------------------------

def _part(dt: dtypes.DType) -> dtypes.DType:
    return dtypes.BY_NAME[_PART[dt.name]] if dt.kind == "complex" else dt


def _complex(b, node, dt: dtypes.DType) -> dtypes.DType:
    if dt.kind == "complex":
        return dt
    if dt.name not in _COMPLEX:
        raise b.error(node, f"complex operators have f32 or f64 parts, not {dt.name}")
    return dtypes.BY_NAME[_COMPLEX[dt.name]]


def _join(b, node, x: dtypes.DType, y: dtypes.DType, what: str) -> dtypes.DType:
    if _part(x) != _part(y):
        raise b.error(node, f"{what} have different precisions ({x.name}, {y.name}); use op.cast")
    return _complex(b, node, x) if "complex" in (x.kind, y.kind) else x


def _entries(b, node, dt: dtypes.DType, what: str) -> dtypes.DType:
    if dt.kind not in ("float", "complex"):
        raise b.error(node, f"{what} must have float or complex entries, got {dt.name}")
    return dt


def _default_accum(dt: dtypes.DType) -> dtypes.DType:
    return F64 if _part(dt) == F64 else F32


def _wider(x: dtypes.DType, y: dtypes.DType) -> dtypes.DType:
    return x if x.bits >= y.bits else y


def _epsilon(dt: dtypes.DType) -> float:
    return epsilon(_part(dt).name)


# -- building ---------------------------------------------------------------------------------------------

def _extent(b, d: Dim) -> int | None:
    r = b.shapes.resolve(d)
    return r if isinstance(r, int) else None


def _operator_type(b, din: Dim, dout: Dim, dtype: dtypes.DType, accum: dtypes.DType) -> ir.Type:
    return tod.operator_type(_extent(b, din), _extent(b, dout), ir.Type.parse(dtype.mlir), ir.Type.parse(accum.mlir))


def _build(b, node, op_cls, operands: list, din: Dim, dout: Dim, dtype: dtypes.DType, accum: dtypes.DType,
           **attrs) -> GOperator:
    """Builds `op_cls` on the ir.Values `operands` with attributes `attrs`; its result is an operator
    din -> dout."""
    for d in (din, dout):
        if (_extent(b, d) or 0) > INT64_MAX:   # a Kronecker product of large factors, say
            raise b.error(node, f"this operator's extent {show(d)} exceeds the largest extent, 2^63 - 1")
    with b.loc(node):
        op = op_cls(*operands, **attrs, result=_operator_type(b, din, dout, dtype, accum))
    return GOperator(op.result, din, dout, dtype, accum)


def _operators(b, node, args, n: int | None, what: str) -> list[GOperator]:
    """The arguments, which must be `n` operators (at least 2 when n is None)."""
    if n is not None and len(args) != n or n is None and len(args) < 2:
        want = n if n is not None else "at least 2"
        raise b.error(node, f"{what} takes {want} operator(s), got {len(args)} argument(s)")
    for a in args:
        if not isinstance(a, GOperator):
            raise b.error(node, f"{what} takes operators, got {describe(a)}")
    return list(args)


def _size(b, node, v, what: str) -> int:
    """A static extent: a positive int, or a symbol ("N") already bound to one."""
    if isinstance(v, str):
        r = b.shapes.resolve(v)
        if not isinstance(r, int):
            raise b.error(node, f"{what} must be static, and {show(r)} is not known here")
        return r
    if type(v) is not int or v < 1:
        raise b.error(node, f"{what} must be a positive int, got {v!r}")
    if v > INT64_MAX:
        raise b.error(node, f"{what} must be at most 2^63 - 1, got {v}")
    return v


def _dtype(b, node, kwargs, default: dtypes.DType = F32) -> dtypes.DType:
    p = kwargs.get("dtype", DTypePolicy(default))
    if not isinstance(p, DTypePolicy):
        raise b.error(node, f"dtype= takes an element type such as f32, got {describe(p)}")
    return _entries(b, node, p.dtype, "an operator")


def _tensor_arg(b, node, v, rank: int, what: str) -> GTensor:
    if not isinstance(v, GTensor) or v.rank != rank:
        raise b.error(node, f"{what} must be a {rank}-D tensor, got {describe(v)}"
                            + (f" of shape {b.shapes.show_shape(v.dims)}" if isinstance(v, GTensor) else ""))
    _entries(b, node, v.dtype, what)
    return v


def _scalar(b, node, v, like: dtypes.DType, what: str) -> GTensor:
    """A scalar operand: a 0-d tensor, or a Python number as a constant of `like`'s real precision."""
    if isinstance(v, GTensor):
        if v.rank != 0:
            raise b.error(node, f"{what} must be a scalar (a 0-d tensor), got shape {b.shapes.show_shape(v.dims)}")
        return GTensor(v.value, _entries(b, node, v.dtype, what), [])
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        part = _part(like)
        with b.loc(node):
            c = ttensor.ConstantOp(value=ir.FloatAttr.get(ir.Type.parse(part.mlir), float(v)),
                                   result=ir.RankedTensorType.get([], ir.Type.parse(part.mlir)))
        return GTensor(c.result, part, [])
    if isinstance(v, complex):
        raise b.error(node, f"{what}: complex constants are not supported; pass a c64 or c128 scalar parameter")
    raise b.error(node, f"{what} must be a number or a 0-d tensor, got {describe(v)}")


def _square(b, node, a: GOperator, what: str) -> Dim:
    return b.unify(node, a.din, a.dout, f"{what} needs a square operator: Din and Dout")


# -- constructors -----------------------------------------------------------------------------------------

@graph_op("eye")
def eye(b, node, args, kwargs):
    """op.eye(n, dtype=f32): the identity on length-n vectors."""
    _check_kwargs(b, node, kwargs, ("dtype",))
    if len(args) != 1:
        raise b.error(node, "op.eye(n) takes one size")
    n = _size(b, node, args[0], "op.eye size")
    dt = _dtype(b, node, kwargs)
    return _build(b, node, tod.EyeOp, [], n, n, dt, _default_accum(dt))


@graph_op("zero")
def zero(b, node, args, kwargs):
    """op.zero(din, dout=din, dtype=f32): the zero map."""
    _check_kwargs(b, node, kwargs, ("dtype",))
    if len(args) not in (1, 2):
        raise b.error(node, "op.zero(din, dout) takes one or two sizes")
    din = _size(b, node, args[0], "op.zero Din")
    dout = _size(b, node, args[-1], "op.zero Dout")
    dt = _dtype(b, node, kwargs)
    return _build(b, node, tod.ZeroOp, [], din, dout, dt, _default_accum(dt))


@graph_op("dense")
def dense(b, node, args, kwargs):
    """op.dense(M, accum=…): the operator with matrix M (Dout×Din)."""
    _check_kwargs(b, node, kwargs, ("accum",))
    if len(args) != 1:
        raise b.error(node, "op.dense(M) takes one matrix")
    m = _tensor_arg(b, node, args[0], 2, "op.dense matrix")
    acc = kwargs.get("accum")
    acc = acc.dtype if isinstance(acc, DTypePolicy) else (m.accum or _default_accum(m.dtype))
    if acc.kind != "float" or acc.bits < _part(m.dtype).bits:
        raise b.error(node, f"accum {acc.name} must be a float at least as wide as {_part(m.dtype).name}")
    return _build(b, node, tod.DenseOp, [m.value], m.dims[1], m.dims[0], m.dtype, acc)


@graph_op("diag")
def diag(b, node, args, kwargs):
    """op.diag(d): the diagonal operator with diagonal d."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 1:
        raise b.error(node, "op.diag(d) takes one vector")
    d = _tensor_arg(b, node, args[0], 1, "op.diag diagonal")
    return _build(b, node, tod.DiagOp, [d.value], d.dims[0], d.dims[0], d.dtype, _default_accum(d.dtype))


@graph_op("projector")
def projector(b, node, args, kwargs):
    """op.projector(U): U U*, the orthogonal projector onto the span of U's orthonormal columns."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 1:
        raise b.error(node, "op.projector(U) takes one basis")
    u = _tensor_arg(b, node, args[0], 2, "op.projector basis")
    n, k = (_extent(b, d) for d in u.dims)
    if n is not None and k is not None and k > n:
        raise b.error(node, f"op.projector: {k} columns in dimension {n} cannot be orthonormal")
    return _build(b, node, tod.ProjectorOp, [u.value], u.dims[0], u.dims[0], u.dtype, _default_accum(u.dtype))


def _fourier(op_cls, name: str):
    def build(b, node, args, kwargs):
        _check_kwargs(b, node, kwargs, ("dtype",))
        if len(args) != 1:
            raise b.error(node, f"op.{name}(n) takes one size")
        n = _size(b, node, args[0], f"op.{name} size")
        dt = _complex(b, node, _dtype(b, node, kwargs))
        return _build(b, node, op_cls, [], n, n, dt, _default_accum(dt))
    build.__doc__ = f"op.{name}(n, dtype=f32): the unitary {'inverse ' if name == 'ifft' else ''}DFT (complex)."
    return build


graph_op("fft")(_fourier(tod.FFTOp, "fft"))
graph_op("ifft")(_fourier(tod.IFFTOp, "ifft"))


@graph_op("conv1d")
def conv1d(b, node, args, kwargs):
    """op.conv1d(h, n): circular convolution with kernel h on length-n vectors; op.conv1d(x, w, ...), a
    tensor weight second, is the tensor convolution (tensor_ops.conv1d)."""
    if len(args) >= 2 and isinstance(args[1], GTensor):
        return tensor_ops.conv1d(b, node, args, kwargs)
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2:
        raise b.error(node, "op.conv1d(h, n) takes a kernel and a signal length")
    h = _tensor_arg(b, node, args[0], 1, "op.conv1d kernel")
    n = _size(b, node, args[1], "op.conv1d signal length")
    m = _extent(b, h.dims[0])
    if m is not None and m > n:
        raise b.error(node, f"op.conv1d: the kernel has {m} taps, more than the signal length {n}")
    return _build(b, node, tod.Conv1dOp, [h.value], n, n, h.dtype, _default_accum(h.dtype))


def _combined(b, node, ops: list[GOperator], what: str) -> tuple[dtypes.DType, dtypes.DType]:
    dt, acc = ops[0].dtype, ops[0].accum
    for o in ops[1:]:
        dt, acc = _join(b, node, dt, o.dtype, f"{what} operands"), _wider(acc, o.accum)
    return dt, acc


def _product(b, ds: list[Dim]) -> Dim:
    """The product of extents; a fresh unknown when one is not static."""
    rs = [b.shapes.resolve(d) for d in ds]
    return math.prod(rs) if all(isinstance(r, int) for r in rs) else b.shapes.fresh()


def _total(b, ds: list[Dim]) -> Dim:
    rs = [b.shapes.resolve(d) for d in ds]
    return sum(rs) if all(isinstance(r, int) for r in rs) else b.shapes.fresh()


def _product_op(op_cls, name: str, combine, doc: str):
    """op.kronecker / op.direct_sum of two or more operators, nested from the left."""
    def build(b, node, args, kwargs):
        _check_kwargs(b, node, kwargs, ())
        ops = _operators(b, node, args, None, f"op.{name}")
        out = ops[0]
        for c in ops[1:]:
            dt, acc = _combined(b, node, [out, c], f"op.{name}")
            out = _build(b, node, op_cls, [out.value, c.value], combine(b, [out.din, c.din]),
                         combine(b, [out.dout, c.dout]), dt, acc)
        return out
    build.__doc__ = doc
    return build


graph_op("kronecker")(_product_op(tod.KroneckerOp, "kronecker", _product,
                                  "op.kronecker(A, B, …): A ⊗ B ⊗ …, acting on row-major flattened tensors."))
graph_op("direct_sum")(_product_op(tod.DirectSumOp, "direct_sum", _total,
                                   "op.direct_sum(A, B, …): the block-diagonal operator on concatenated vectors."))


@graph_op("tensor")
def tensor(b, node, args, kwargs):
    """op.tensor(A, B): the tensor product A ⊗ B (the algebra's name for the Kronecker product)."""
    _check_kwargs(b, node, kwargs, ())
    a, c = _operators(b, node, args, 2, "op.tensor")
    dt, acc = _combined(b, node, [a, c], "op.tensor")
    return _build(b, node, tod.TensorProductOp, [a.value, c.value], _product(b, [a.din, c.din]),
                  _product(b, [a.dout, c.dout]), dt, acc)


# -- algebra ----------------------------------------------------------------------------------------------

def _compose2(b, node, a: GOperator, c: GOperator) -> GOperator:
    b.unify(node, c.dout, a.din, "compose: the right operator's Dout and the left operator's Din")
    dt, acc = _combined(b, node, [a, c], "compose")
    return _build(b, node, tod.ComposeOp, [a.value, c.value], c.din, a.dout, dt, acc)


@graph_op("compose")
def compose(b, node, args, kwargs):
    """op.compose(A, B, …) = A ∘ B ∘ …: the rightmost applies first (as `A @ B @ …`)."""
    _check_kwargs(b, node, kwargs, ())
    ops = _operators(b, node, args, None, "op.compose")
    out = ops[-1]
    for a in reversed(ops[:-1]):
        out = _compose2(b, node, a, out)
    return out


@graph_op("adjoint")
def adjoint(b, node, args, kwargs):
    """op.adjoint(A): the conjugate transpose A*."""
    _check_kwargs(b, node, kwargs, ())
    (a,) = _operators(b, node, args, 1, "op.adjoint")
    g = _build(b, node, tod.AdjointOp, [a.value], a.dout, a.din, a.dtype, a.accum)
    if a.descriptor is not None:   # the adjoint of a descriptor crosses the ABI as it, flagged "adjoint"
        g.descriptor, g.adjointed = a.descriptor, not a.adjointed
    return g


def _plus(b, node, a: GOperator, c: GOperator) -> GOperator:
    din = b.unify(node, a.din, c.din, "plus: the operands' Din")
    dout = b.unify(node, a.dout, c.dout, "plus: the operands' Dout")
    dt, acc = _combined(b, node, [a, c], "plus")
    return _build(b, node, tod.PlusOp, [a.value, c.value], din, dout, dt, acc)


@graph_op("plus")
def plus(b, node, args, kwargs):
    """op.plus(A, B): A + B."""
    _check_kwargs(b, node, kwargs, ())
    a, c = _operators(b, node, args, 2, "op.plus")
    return _plus(b, node, a, c)


def _scale(b, node, s, a: GOperator) -> GOperator:
    s = _scalar(b, node, s, a.dtype, "the scale factor")
    dt = _join(b, node, s.dtype, a.dtype, "the scale factor and the operator")
    return _build(b, node, tod.ScaleOp, [s.value, a.value], a.din, a.dout, dt, a.accum)


@graph_op("scale")
def scale(b, node, args, kwargs):
    """op.scale(s, A): s · A, s a number or a 0-d tensor."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2 or not isinstance(args[1], GOperator):
        raise b.error(node, "op.scale(s, A) takes a scalar and an operator")
    return _scale(b, node, args[0], args[1])


def _power(b, node, a: GOperator, n) -> GOperator:
    if type(n) is not int or n < 0:
        raise b.error(node, f"an operator power must be a non-negative int, got {n!r}")
    _square(b, node, a, "power")
    return _build(b, node, tod.PowerOp, [a.value], a.din, a.dout, a.dtype, a.accum, exponent=_i64(n))


@graph_op("power")
def power(b, node, args, kwargs):
    """op.power(A, n): A ∘ … ∘ A (n ≥ 0 times; the 0th power is the identity)."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2 or not isinstance(args[0], GOperator):
        raise b.error(node, "op.power(A, n) takes an operator and an exponent")
    return _power(b, node, args[0], args[1])


@graph_op("commutator")
def commutator(b, node, args, kwargs):
    """op.commutator(A, B): A∘B − B∘A."""
    _check_kwargs(b, node, kwargs, ())
    a, c = _operators(b, node, args, 2, "op.commutator")
    n = b.unify(node, _square(b, node, a, "commutator"), _square(b, node, c, "commutator"),
                "commutator: the operands' extents")
    dt, acc = _combined(b, node, [a, c], "commutator")
    return _build(b, node, tod.CommutatorOp, [a.value, c.value], n, n, dt, acc)


def _square_unary(op_cls, name: str, doc: str):
    def build(b, node, args, kwargs):
        _check_kwargs(b, node, kwargs, ())
        (a,) = _operators(b, node, args, 1, f"op.{name}")
        n = _square(b, node, a, name)
        return _build(b, node, op_cls, [a.value], n, n, a.dtype, a.accum)
    build.__doc__ = doc
    return build


graph_op("sym")(_square_unary(tod.SymOp, "sym", "op.sym(A): (A + A*) / 2."))
graph_op("skew")(_square_unary(tod.SkewOp, "skew", "op.skew(A): (A − A*) / 2."))
graph_op("expm")(_square_unary(tod.ExpmOp, "expm", "op.expm(A): the matrix exponential."))


@graph_op("resolvent")
def resolvent(b, node, args, kwargs):
    """op.resolvent(A, z): (z·I − A)⁻¹."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2 or not isinstance(args[0], GOperator):
        raise b.error(node, "op.resolvent(A, z) takes an operator and a scalar")
    a = args[0]
    n = _square(b, node, a, "resolvent")
    z = _scalar(b, node, args[1], a.dtype, "resolvent z")
    dt = _join(b, node, a.dtype, z.dtype, "the operator and z")
    return _build(b, node, tod.ResolventOp, [a.value, z.value], n, n, dt, a.accum)


@graph_op("apply")
def apply(b, node, args, kwargs):
    """op.apply(A, x) and `A @ x`: x a vector [Din] or a stack of columns [..., Din, k]. `A @ B` of two
    operators composes them."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2 or not isinstance(args[0], GOperator):
        raise b.error(node, f"'@' and op.apply take an operator on the left, got {describe(args[0])}"
                      if args else "op.apply(A, x) takes an operator and a tensor")
    a, x = args
    if isinstance(x, GOperator):
        return _compose2(b, node, a, x)
    if not isinstance(x, GTensor) or x.rank == 0:
        raise b.error(node, f"an operator applies to a vector or a stack of column vectors, got {describe(x)}")
    _entries(b, node, x.dtype, "the operand of an operator")
    axis = 0 if x.rank == 1 else x.rank - 2
    b.unify(node, a.din, x.dims[axis], f"operator Din and axis {axis} of the tensor")
    dims = list(x.dims)
    dims[axis] = a.dout
    dt = _join(b, node, a.dtype, x.dtype, "the operator and the tensor")
    with b.loc(node):
        op = tod.ApplyOp(a.value, x.value, result=b.tensor_type(dt, dims))
    return GTensor(op.result, dt, dims)


# -- Python's operators -----------------------------------------------------------------------------------

@graph_op("operator_binop")
def operator_binop(b, node, args, kwargs):
    """`A + B`, `A - B`, `s * A`, `A * s`, `A / s`, `A ** n` (and `-A`, as `-1 * A`)."""
    a, c = args
    op = kwargs["op"]
    if isinstance(op, ast.Add) and isinstance(a, GOperator) and isinstance(c, GOperator):
        return _plus(b, node, a, c)
    if isinstance(op, ast.Sub) and isinstance(a, GOperator) and isinstance(c, GOperator):
        return _plus(b, node, a, _scale(b, node, -1.0, c))
    if isinstance(op, ast.Mult) and isinstance(c, GOperator) and not isinstance(a, GOperator):
        return _scale(b, node, a, c)
    if isinstance(op, ast.Mult) and isinstance(a, GOperator) and not isinstance(c, GOperator):
        return _scale(b, node, c, a)
    if isinstance(op, ast.Div) and isinstance(a, GOperator) and isinstance(c, (int, float)) \
            and not isinstance(c, bool):
        if c == 0:
            raise b.error(node, "division of an operator by zero")
        return _scale(b, node, 1.0 / c, a)
    if isinstance(op, ast.Pow) and isinstance(a, GOperator):
        return _power(b, node, a, c)
    raise b.error(node, f"'{ast.unparse(node)}' is not defined on {describe(a)} and {describe(c)} "
                        "(operators support A + B, A - B, s * A, A / s, A ** n, A @ B and A @ x)")


# -- spectral ---------------------------------------------------------------------------------------------

def _spectral_of(b, node, v, what: str) -> GSpectral:
    if not isinstance(v, GSpectral):
        raise b.error(node, f"{what} takes a factorization from op.spectral, got {describe(v)}")
    return v


def _spectral_type(b, din: Dim, dout: Dim, rank: Dim, dtype: dtypes.DType, kind: str) -> ir.Type:
    return tod.spectral_type(_extent(b, din), _extent(b, dout), _extent(b, rank), ir.Type.parse(dtype.mlir), kind)


@graph_op("spectral")
def spectral(b, node, args, kwargs):
    """op.spectral(A, kind="svd"): a factorization U diag(S) V* — "svd", "eig" (square; complex) or "eigh"
    (self-adjoint A: real eigenvalues, unitary U)."""
    _check_kwargs(b, node, kwargs, ("kind",))
    if not 1 <= len(args) <= 2 or not isinstance(args[0], GOperator):
        raise b.error(node, "op.spectral(A, kind) takes an operator and an optional kind")
    a = args[0]
    kind = kwargs.get("kind", args[1] if len(args) > 1 else "svd")
    if kind not in tod.SPECTRAL_KINDS:
        raise b.error(node, f"op.spectral kind must be one of {', '.join(tod.SPECTRAL_KINDS)}, got {kind!r}")
    dt = a.dtype
    if kind == "svd":
        m, n = b.shapes.resolve(a.dout), b.shapes.resolve(a.din)
        rank = min(m, n) if isinstance(m, int) and isinstance(n, int) else b.shapes.fresh()
    else:
        rank = _square(b, node, a, f"op.spectral kind={kind!r}")
        dt = _complex(b, node, dt) if kind == "eig" else dt
    with b.loc(node):
        op = tod.SpectralOp(a.value, result=_spectral_type(b, a.din, a.dout, rank, dt, kind))
    return GSpectral(op.result, a.din, a.dout, rank, dt, kind)


@graph_op("truncate")
def truncate(b, node, args, kwargs):
    """op.truncate(S, k): the k largest terms of a factorization."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 2:
        raise b.error(node, "op.truncate(S, k) takes a factorization and a rank")
    s = _spectral_of(b, node, args[0], "op.truncate")
    k = args[1]
    if type(k) is not int or k < 1:
        raise b.error(node, f"op.truncate rank k must be a positive int, got {k!r}")
    rank = _extent(b, s.rank)
    if rank is not None and k > rank:
        raise b.error(node, f"op.truncate: k = {k} exceeds the factorization's rank {rank}")
    with b.loc(node):
        op = tod.TruncateOp(s.value, k=_i64(k), result=_spectral_type(b, s.din, s.dout, k, s.dtype, s.kind))
    return GSpectral(op.result, s.din, s.dout, k, s.dtype, s.kind)


@graph_op("reconstruct")
def reconstruct(b, node, args, kwargs):
    """op.reconstruct(S): the operator U diag(S) V*."""
    _check_kwargs(b, node, kwargs, ())
    if len(args) != 1:
        raise b.error(node, "op.reconstruct(S) takes one factorization")
    s = _spectral_of(b, node, args[0], "op.reconstruct")
    return _build(b, node, tod.ReconstructOp, [s.value], s.din, s.dout, s.dtype, _default_accum(s.dtype))


@graph_op("pseudoinverse")
def pseudoinverse(b, node, args, kwargs):
    """op.pseudoinverse(A or S, rcond=…): the Moore–Penrose pseudoinverse; terms with |S| ≤ rcond·max|S| are
    dropped (default rcond: max(Din, Dout)·ε of the entries' precision)."""
    _check_kwargs(b, node, kwargs, ("rcond",))
    if len(args) != 1 or not isinstance(args[0], (GOperator, GSpectral)):
        raise b.error(node, "op.pseudoinverse takes one operator or factorization")
    x = args[0]
    if isinstance(x, GSpectral) and x.kind == "eig":
        raise b.error(node, "op.pseudoinverse needs an svd or eigh factorization (or the operator itself)")
    extents = [e for e in (_extent(b, x.din), _extent(b, x.dout)) if e is not None]
    rcond = kwargs.get("rcond", max(extents, default=1) * _epsilon(x.dtype))
    if not isinstance(rcond, (int, float)) or isinstance(rcond, bool) or not 0 <= rcond < 1:
        raise b.error(node, f"rcond must be a number in [0, 1), got {rcond!r}")
    accum = x.accum if isinstance(x, GOperator) else _default_accum(x.dtype)
    return _build(b, node, tod.PseudoinverseOp, [x.value], x.dout, x.din, x.dtype, accum,
                  rcond=ir.FloatAttr.get(ir.F64Type.get(), float(rcond)))


# -- diagnostics ------------------------------------------------------------------------------------------

def _diagnostic(b, node, op_cls, a: GOperator, dtype: dtypes.DType, **attrs) -> GTensor:
    with b.loc(node):
        op = op_cls(a.value, **attrs, result=ir.RankedTensorType.get([], ir.Type.parse(dtype.mlir)))
    return GTensor(op.result, dtype, [])


@graph_op("norm")
def norm(b, node, args, kwargs):
    """op.norm(A): the 2-norm (largest singular value), a scalar."""
    _check_kwargs(b, node, kwargs, ())
    (a,) = _operators(b, node, args, 1, "op.norm")
    return _diagnostic(b, node, tod.NormOp, a, _part(a.dtype))


@graph_op("is_unitary")
def is_unitary(b, node, args, kwargs):
    """op.is_unitary(A, tol=√ε): whether max |A*A − I| ≤ tol, a bool scalar."""
    _check_kwargs(b, node, kwargs, ("tol",))
    (a,) = _operators(b, node, args, 1, "op.is_unitary")
    tol = kwargs.get("tol", math.sqrt(_epsilon(a.dtype)))
    if not isinstance(tol, (int, float)) or isinstance(tol, bool) or tol <= 0:
        raise b.error(node, f"tol must be a positive number, got {tol!r}")
    return _diagnostic(b, node, tod.IsUnitaryOp, a, dtypes.BY_NAME["bool"],
                       tol=ir.FloatAttr.get(ir.F64Type.get(), float(tol)))


@graph_op("spectral_radius")
def spectral_radius(b, node, args, kwargs):
    """op.spectral_radius(A): the largest |eigenvalue| of a square operator, a scalar."""
    _check_kwargs(b, node, kwargs, ())
    (a,) = _operators(b, node, args, 1, "op.spectral_radius")
    _square(b, node, a, "op.spectral_radius")
    return _diagnostic(b, node, tod.SpectralRadiusOp, a, _part(a.dtype))
