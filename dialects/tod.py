"""``tod``: the operator algebra (spec Part IX) — linear operators as Graph IR values.

Types::

    !tod.operator<Din, Dout, T, P>
        A linear map from vectors of length Din to vectors of length Dout: a Dout×Din matrix once
        materialized. T, the type of its entries, is a float or a complex<float>; P is the accumulation type
        (a float at least as wide as T's real component). Extents are positive integers or "?" (known only
        at run time).

    !tod.spectral_operator<Din, Dout, r, T, kind>
        A factorization A = U diag(S) V* of such an operator into r terms (U is Dout×r, V is Din×r):
        kind "svd": U and V have orthonormal columns, S ≥ 0, descending;
        kind "eig": a square A; U holds its eigenvectors, V* = U⁻¹, S its eigenvalues — complex in general,
                    so T is complex;
        kind "eigh": a self-adjoint A; U = V unitary, S real.
        T is the type of U's and V's entries.

Operator types carry no property flags (unitary, self-adjoint …). What is known of an operator follows from
how it was built, and `self_adjoint` / `unitary` below derive it from the IR: a rewrite that replaces one
construction by an equal one then never has to change a type.

Every op is pure. Its verifier checks the extents chain (compose, apply), agree (plus, commutator) or are
square (power, expm, resolvent, sym, skew, eig), and that result types are the ones the op produces.
"""

# No `from __future__ import annotations` here: ext reads the annotations as live types.
import typing
from dataclasses import dataclass
from math import prod

from ..mlir import ext, ir
from .support import Invalid, attribute, int_attribute, verifier

DYNAMIC = "?"
SPECTRAL_KINDS = ("svd", "eig", "eigh")


class TOD(ext.Dialect, name="tod"):
    pass


class OperatorType(TOD.Type, name="operator"):
    din: ir.IntegerAttr | ir.StringAttr
    dout: ir.IntegerAttr | ir.StringAttr
    elem: ir.TypeAttr
    accum: ir.TypeAttr


class SpectralType(TOD.Type, name="spectral_operator"):
    din: ir.IntegerAttr | ir.StringAttr
    dout: ir.IntegerAttr | ir.StringAttr
    rank: ir.IntegerAttr | ir.StringAttr
    elem: ir.TypeAttr
    kind: ir.StringAttr


# -- element types ----------------------------------------------------------------------------------------

def component(t: ir.Type) -> ir.Type:
    """The real type under a complex one (f32 for complex<f32>); a float type itself."""
    return ir.ComplexType(t).element_type if isinstance(t, ir.ComplexType) else t


def is_complex(t: ir.Type) -> bool:
    return isinstance(t, ir.ComplexType)


def complex_of(t: ir.Type) -> ir.Type:
    return t if is_complex(t) else ir.ComplexType.get(t)


def join(a: ir.Type, b: ir.Type) -> ir.Type | None:
    """The entry type of a combination of values of types `a` and `b`: a real and a complex value of the same
    precision combine to the complex type; different precisions do not combine (None)."""
    if component(a) != component(b):
        return None
    return complex_of(a) if is_complex(a) or is_complex(b) else a


def _is_entry_type(t: ir.Type) -> bool:
    return isinstance(component(t), ir.FloatType)


def _width(t: ir.Type) -> int:
    return ir.FloatType(component(t)).width


# -- reading and building types ---------------------------------------------------------------------------

Extent = int | None  # None: known only at run time


@dataclass(frozen=True)
class OperatorSig:
    din: Extent
    dout: Extent
    elem: ir.Type
    accum: ir.Type

    @property
    def square(self) -> bool:
        return same(self.din, self.dout)

    def __str__(self) -> str:
        return f"{show(self.din)} -> {show(self.dout)} of {self.elem}"


@dataclass(frozen=True)
class SpectralSig:
    din: Extent
    dout: Extent
    rank: Extent
    elem: ir.Type
    kind: str


def show(d: Extent) -> str:
    return DYNAMIC if d is None else str(d)


def same(a: Extent, b: Extent) -> bool:
    """Extents that may be equal: equal, or one known only at run time."""
    return a is None or b is None or a == b


def _extent_attr(d: Extent) -> ir.Attribute:
    return ir.StringAttr.get(DYNAMIC) if d is None else ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)


def operator_type(din: Extent, dout: Extent, elem: ir.Type, accum: ir.Type) -> OperatorType:
    return OperatorType.get(_extent_attr(din), _extent_attr(dout), elem, accum)


def spectral_type(din: Extent, dout: Extent, rank: Extent, elem: ir.Type, kind: str) -> SpectralType:
    return SpectralType.get(_extent_attr(din), _extent_attr(dout), _extent_attr(rank), elem, ir.StringAttr.get(kind))


def _extent(attr: ir.Attribute, what: str) -> Extent:
    attr = attr.maybe_downcast()  # a type's parameters come back as plain Attributes
    if isinstance(attr, ir.StringAttr) and attr.value == DYNAMIC:
        return None
    if isinstance(attr, ir.IntegerAttr) and attr.value >= 1:
        return attr.value
    raise Invalid(f"{what} must be a positive integer or \"{DYNAMIC}\", got {attr}")


def _entry_type(attr: ir.Attribute, what: str) -> ir.Type:
    t = ir.TypeAttr(attr).value
    if not _is_entry_type(t):
        raise Invalid(f"{what} {t} must be a float or complex<float> type")
    return t


def operator_sig(t: ir.Type, what: str = "operand") -> OperatorSig:
    """The parts of an operator type; raises `Invalid` naming `what` when `t` is not a valid one."""
    if not isinstance(t, OperatorType):
        raise Invalid(f"{what} must be a !tod.operator, got {t}")
    elem = _entry_type(t.elem, f"{what} element type")
    accum = ir.TypeAttr(t.accum).value
    if not isinstance(accum, ir.FloatType) or _width(accum) < _width(elem):
        raise Invalid(f"{what} accumulation type {accum} must be a float at least as wide as {component(elem)}")
    return OperatorSig(_extent(t.din, f"{what} Din"), _extent(t.dout, f"{what} Dout"), elem, accum)


def spectral_sig(t: ir.Type, what: str = "operand") -> SpectralSig:
    if not isinstance(t, SpectralType):
        raise Invalid(f"{what} must be a !tod.spectral_operator, got {t}")
    kind = t.kind.maybe_downcast()
    kind = kind.value if isinstance(kind, ir.StringAttr) else str(kind)
    if kind not in SPECTRAL_KINDS:
        raise Invalid(f"{what} kind must be one of {', '.join(SPECTRAL_KINDS)}, got '{kind}'")
    return SpectralSig(_extent(t.din, f"{what} Din"), _extent(t.dout, f"{what} Dout"),
                       _extent(t.rank, f"{what} rank"), _entry_type(t.elem, f"{what} element type"), kind)


def _tensor(value, what: str, rank: int | None = None) -> ir.RankedTensorType:
    t = value.type
    if not isinstance(t, ir.RankedTensorType):
        raise Invalid(f"{what} must be a ranked tensor, got {t}")
    if rank is not None and t.rank != rank:
        raise Invalid(f"{what} must have rank {rank}, got {t}")
    return t


def _dims(t: ir.RankedTensorType) -> list[Extent]:
    return [None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]


def _scalar(value, what: str) -> ir.Type:
    """The element type of a 0-d float or complex tensor operand (a scalar of the algebra)."""
    t = _tensor(value, what, 0)
    if not _is_entry_type(t.element_type):
        raise Invalid(f"{what} must hold a float or complex number, got {t}")
    return t.element_type


def _joined(a: ir.Type, b: ir.Type, what: str) -> ir.Type:
    j = join(a, b)
    if j is None:
        raise Invalid(f"{what} have different precisions: {a} and {b}")
    return j


def _sum(ds: list[Extent]) -> Extent:
    return None if None in ds else sum(ds)


def _product(ds: list[Extent]) -> Extent:
    return None if None in ds else prod(ds)


# -- verifier helpers -------------------------------------------------------------------------------------

class _TodOp(TOD.Operation):
    def _operand(self, i: int, what: str = "") -> OperatorSig:
        return operator_sig(self.operands[i].type, what or f"operand #{i}")

    def _square(self, sig: OperatorSig, what: str = "the operator") -> None:
        if not sig.square:
            raise Invalid(f"needs a square operator: {what} maps {show(sig.din)} -> {show(sig.dout)}")

    def _real(self, sig: OperatorSig) -> None:
        if is_complex(sig.elem):
            raise Invalid(f"needs a real operator, got entries of {sig.elem}")

    def _static(self, sig: OperatorSig) -> None:
        if sig.din is None or sig.dout is None:
            raise Invalid(f"needs static extents, got {show(sig.din)} -> {show(sig.dout)}")

    def _expect(self, din: Extent, dout: Extent, elem: ir.Type) -> OperatorSig:
        """Checks the result is an operator din -> dout of `elem`; returns its parts."""
        r = operator_sig(self.results[0].type, "result")
        if not (same(r.din, din) and same(r.dout, dout) and r.elem == elem):
            raise Invalid(f"result must be an operator {show(din)} -> {show(dout)} of {elem}, got {r}")
        return r

    def _expect_tensor(self, dims: list[Extent], elem: ir.Type) -> None:
        t = _tensor(self.results[0], "result")
        got = _dims(t)
        if len(got) != len(dims) or not all(same(a, b) for a, b in zip(got, dims)) or t.element_type != elem:
            shape = "x".join(show(d) for d in dims)
            raise Invalid(f"result must be a tensor<{shape}{'x' if dims else ''}{elem}>, got {t}")


class _SquareUnaryOp(_TodOp):
    """Base of the maps from a square operator to one of the same type."""

    def _rules(self):
        a = self._operand(0)
        self._square(a)
        self._expect(a.din, a.dout, a.elem)

    @verifier
    def verify_invariants(self):
        self._rules()


# -- constructors -----------------------------------------------------------------------------------------

class EyeOp(_TodOp, name="eye", traits=[ext.Pure]):
    """The identity on vectors of the result's (static) extent."""

    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        r = operator_sig(self.result.type, "result")
        self._static(r)
        self._square(r, "the identity")


class ZeroOp(_TodOp, name="zero", traits=[ext.Pure]):
    """The zero map between the result's (static) extents."""

    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        self._static(operator_sig(self.result.type, "result"))


class DenseOp(_TodOp, name="dense", traits=[ext.Pure]):
    """The operator whose matrix is `matrix` (Dout×Din, the entries its element type)."""

    matrix: ext.Operand[typing.Any]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        t = _tensor(self.matrix, "matrix", 2)
        if not _is_entry_type(t.element_type):
            raise Invalid(f"matrix entries must be float or complex, got {t.element_type}")
        rows, cols = _dims(t)
        self._expect(cols, rows, t.element_type)


class DiagOp(_TodOp, name="diag", traits=[ext.Pure]):
    """The diagonal operator with diagonal `diagonal` (1-D)."""

    diagonal: ext.Operand[typing.Any]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        t = _tensor(self.diagonal, "diagonal", 1)
        if not _is_entry_type(t.element_type):
            raise Invalid(f"diagonal entries must be float or complex, got {t.element_type}")
        (n,) = _dims(t)
        self._expect(n, n, t.element_type)


class ProjectorOp(_TodOp, name="projector", traits=[ext.Pure]):
    """The orthogonal projector U U* onto the span of the columns of `basis` (n×k, k ≤ n). The columns must be
    orthonormal; the interpreter checks that they are."""

    basis: ext.Operand[typing.Any]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        t = _tensor(self.basis, "basis", 2)
        if not _is_entry_type(t.element_type):
            raise Invalid(f"basis entries must be float or complex, got {t.element_type}")
        n, k = _dims(t)
        if n is not None and k is not None and k > n:
            raise Invalid(f"basis of {k} columns in dimension {n} cannot be orthonormal: needs k <= n")
        self._expect(n, n, t.element_type)


class _FourierOp(_TodOp):
    @verifier
    def verify_invariants(self):
        r = operator_sig(self.result.type, "result")
        self._static(r)
        self._square(r, "the transform")
        if not is_complex(r.elem):
            raise Invalid(f"is complex: the element type must be complex<float>, got {r.elem}")


class FFTOp(_FourierOp, name="fft", traits=[ext.Pure]):
    """The unitary discrete Fourier transform of size n: F[j, k] = exp(-2πi·jk/n) / √n."""

    result: ext.Result[OperatorType]


class IFFTOp(_FourierOp, name="ifft", traits=[ext.Pure]):
    """The inverse of `fft` (its adjoint): F*[j, k] = exp(+2πi·jk/n) / √n."""

    result: ext.Result[OperatorType]


class Conv1dOp(_TodOp, name="conv1d", traits=[ext.Pure]):
    """Circular convolution with `kernel` (length m ≤ n) on vectors of length n:
    (h ⊛ x)[i] = Σ_{j<m} h[j] · x[(i − j) mod n]."""

    kernel: ext.Operand[typing.Any]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        t = _tensor(self.kernel, "kernel", 1)
        if not _is_entry_type(t.element_type):
            raise Invalid(f"kernel entries must be float or complex, got {t.element_type}")
        r = operator_sig(self.result.type, "result")
        self._static(r)
        self._square(r, "the convolution")
        (m,) = _dims(t)
        if m is not None and m > r.din:
            raise Invalid(f"kernel of length {m} is longer than the signal length {r.din}")
        self._expect(r.din, r.din, t.element_type)


class _ProductOp(_TodOp):
    """lhs ⊗ rhs: (A ⊗ B)[(i, k), (j, l)] = A[i, j] · B[k, l], acting on row-major flattened Din_A×Din_B
    tensors."""

    @verifier
    def verify_invariants(self):
        a, b = self._operand(0, "lhs"), self._operand(1, "rhs")
        self._expect(_product([a.din, b.din]), _product([a.dout, b.dout]), _joined(a.elem, b.elem, "operands"))


class KroneckerOp(_ProductOp, name="kronecker", traits=[ext.Pure]):
    """The Kronecker product lhs ⊗ rhs: the constructor of Kronecker-structured operators (lowered as a
    reshape and batched GEMMs, never materialized)."""

    lhs: ext.Operand[OperatorType]
    rhs: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]


class DirectSumOp(_TodOp, name="direct_sum", traits=[ext.Pure]):
    """lhs ⊕ rhs: the block-diagonal operator acting on concatenated vectors."""

    lhs: ext.Operand[OperatorType]
    rhs: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        a, b = self._operand(0, "lhs"), self._operand(1, "rhs")
        self._expect(_sum([a.din, b.din]), _sum([a.dout, b.dout]), _joined(a.elem, b.elem, "operands"))


# -- algebra ----------------------------------------------------------------------------------------------

class ComposeOp(_TodOp, name="compose", traits=[ext.Pure]):
    """lhs ∘ rhs: apply rhs, then lhs. rhs's Dout must be lhs's Din."""

    lhs: ext.Operand[OperatorType]
    rhs: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        a, b = self._operand(0, "lhs"), self._operand(1, "rhs")
        if not same(b.dout, a.din):
            raise Invalid(f"extents do not chain: rhs maps {show(b.din)} -> {show(b.dout)} but lhs takes "
                          f"{show(a.din)}")
        self._expect(b.din, a.dout, _joined(a.elem, b.elem, "operands"))


class AdjointOp(_TodOp, name="adjoint", traits=[ext.Pure]):
    """The conjugate transpose A*: Dout -> Din."""

    input: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        a = self._operand(0)
        self._expect(a.dout, a.din, a.elem)


class TensorProductOp(_ProductOp, name="tensor", traits=[ext.Pure]):
    """The tensor product of the algebra (spec §22), the same map as `kronecker`, which canonicalization
    writes it as."""

    lhs: ext.Operand[OperatorType]
    rhs: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]


class PlusOp(_TodOp, name="plus", traits=[ext.Pure]):
    """lhs + rhs, of equal extents."""

    lhs: ext.Operand[OperatorType]
    rhs: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        a, b = self._operand(0, "lhs"), self._operand(1, "rhs")
        if not (same(a.din, b.din) and same(a.dout, b.dout)):
            raise Invalid(f"operands must have equal extents: {show(a.din)} -> {show(a.dout)} and "
                          f"{show(b.din)} -> {show(b.dout)}")
        self._expect(a.din if a.din is not None else b.din, a.dout if a.dout is not None else b.dout,
                     _joined(a.elem, b.elem, "operands"))


class ScaleOp(_TodOp, name="scale", traits=[ext.Pure]):
    """factor · input, `factor` a 0-d tensor (a real factor keeps a real operator real)."""

    factor: ext.Operand[typing.Any]
    input: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        s = _scalar(self.factor, "factor")
        a = self._operand(1, "input")
        self._expect(a.din, a.dout, _joined(s, a.elem, "factor and operator"))


class PowerOp(_SquareUnaryOp, name="power", traits=[ext.Pure]):
    """input^exponent (exponent ≥ 0; the 0th power is the identity)."""

    input: ext.Operand[OperatorType]
    exponent: ir.IntegerAttr
    result: ext.Result[OperatorType]

    def _rules(self):
        n = int_attribute(self, "exponent")
        if n < 0:
            raise Invalid(f"exponent must be non-negative, got {n}")
        super()._rules()


class CommutatorOp(_TodOp, name="commutator", traits=[ext.Pure]):
    """[lhs, rhs] = lhs∘rhs − rhs∘lhs, of square operators of one extent."""

    lhs: ext.Operand[OperatorType]
    rhs: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        a, b = self._operand(0, "lhs"), self._operand(1, "rhs")
        self._square(a, "lhs")
        self._square(b, "rhs")
        if not same(a.din, b.din):
            raise Invalid(f"operands must act on one space: {show(a.din)} and {show(b.din)}")
        n = a.din if a.din is not None else b.din
        self._expect(n, n, _joined(a.elem, b.elem, "operands"))


class SymOp(_SquareUnaryOp, name="sym", traits=[ext.Pure]):
    """The self-adjoint part (A + A*) / 2."""

    input: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]


class SkewOp(_SquareUnaryOp, name="skew", traits=[ext.Pure]):
    """The skew-adjoint part (A − A*) / 2."""

    input: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]


class ExpmOp(_SquareUnaryOp, name="expm", traits=[ext.Pure]):
    """The matrix exponential exp(A) = Σ A^k / k!."""

    input: ext.Operand[OperatorType]
    result: ext.Result[OperatorType]


class ResolventOp(_TodOp, name="resolvent", traits=[ext.Pure]):
    """(z·I − A)⁻¹ at the scalar `z` (a 0-d tensor); z must not be an eigenvalue of A."""

    input: ext.Operand[OperatorType]
    z: ext.Operand[typing.Any]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        a = self._operand(0, "input")
        self._square(a)
        z = _scalar(self.z, "z")
        self._expect(a.din, a.dout, _joined(a.elem, z, "operator and z"))


class ApplyOp(_TodOp, name="apply", traits=[ext.Pure]):
    """A @ x with numpy's matmul rule: a vector x of length Din gives one of length Dout; a tensor
    [..., Din, k] gives [..., Dout, k]."""

    operator: ext.Operand[OperatorType]
    input: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        a = self._operand(0, "operator")
        t = _tensor(self.input, "input")
        if t.rank == 0:
            raise Invalid("input must have rank >= 1 (a vector, or a stack of column vectors)")
        if not _is_entry_type(t.element_type):
            raise Invalid(f"input entries must be float or complex, got {t.element_type}")
        dims = _dims(t)
        axis = 0 if t.rank == 1 else t.rank - 2
        if not same(a.din, dims[axis]):
            raise Invalid(f"operator takes vectors of length {show(a.din)} but axis {axis} of the input has "
                          f"{show(dims[axis])}")
        out = dims[:]
        out[axis] = a.dout
        self._expect_tensor(out, _joined(a.elem, t.element_type, "operator and input"))


# -- spectral ---------------------------------------------------------------------------------------------

class SpectralOp(_TodOp, name="spectral", traits=[ext.Pure]):
    """The factorization the result type's kind names (svd, eig, eigh), of full rank."""

    input: ext.Operand[OperatorType]
    result: ext.Result[SpectralType]

    @verifier
    def verify_invariants(self):
        a = self._operand(0)
        s = spectral_sig(self.result.type, "result")
        if s.kind == "svd":
            rank = None if a.din is None or a.dout is None else min(a.din, a.dout)
            elem = a.elem
        else:
            self._square(a)
            rank = a.din if a.din is not None else a.dout
            elem = complex_of(a.elem) if s.kind == "eig" else a.elem
        if not (same(s.din, a.din) and same(s.dout, a.dout) and same(s.rank, rank) and s.elem == elem):
            want = f"{show(a.din)}, {show(a.dout)}, {show(rank)}, {elem}, \"{s.kind}\""
            raise Invalid(f"result must be a !tod.spectral_operator<{want}> (an {s.kind} of the operand), "
                          f"got {self.result.type}")


class TruncateOp(_TodOp, name="truncate", traits=[ext.Pure]):
    """The first k terms of a factorization (the k largest in magnitude): a rank-k approximation."""

    input: ext.Operand[SpectralType]
    k: ir.IntegerAttr
    result: ext.Result[SpectralType]

    @verifier
    def verify_invariants(self):
        s = spectral_sig(self.input.type)
        k = int_attribute(self, "k")
        if k < 1:
            raise Invalid(f"k must be at least 1, got {k}")
        if s.rank is not None and k > s.rank:
            raise Invalid(f"k = {k} exceeds the factorization's rank {s.rank}")
        r = spectral_sig(self.result.type, "result")
        if (r.din, r.dout, r.rank, r.elem, r.kind) != (s.din, s.dout, k, s.elem, s.kind):
            raise Invalid(f"result must be the operand's type with rank {k}, got {self.result.type}")


class ReconstructOp(_TodOp, name="reconstruct", traits=[ext.Pure]):
    """U diag(S) V*: the operator a factorization stands for."""

    input: ext.Operand[SpectralType]
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        s = spectral_sig(self.input.type)
        self._expect(s.din, s.dout, s.elem)


class PseudoinverseOp(_TodOp, name="pseudoinverse", traits=[ext.Pure]):
    """The Moore–Penrose pseudoinverse (Dout -> Din) of an operator or of an svd/eigh factorization: terms whose
    |S| is at most rcond · max |S| count as zero."""

    input: ext.Operand[OperatorType | SpectralType]
    rcond: ir.FloatAttr
    result: ext.Result[OperatorType]

    @verifier
    def verify_invariants(self):
        rcond = attribute(self, "rcond", ir.FloatAttr, "a float").value
        if not 0.0 <= rcond < 1.0:
            raise Invalid(f"rcond must be in [0, 1), got {rcond}")
        t = self.input.type
        if isinstance(t, SpectralType):
            s = spectral_sig(t)
            if s.kind == "eig":
                raise Invalid("needs an svd or eigh factorization: inverting the eigenvalues of a general "
                              "(non-normal) operator does not give the Moore-Penrose pseudoinverse")
            self._expect(s.dout, s.din, s.elem)
        else:
            a = self._operand(0)
            self._expect(a.dout, a.din, a.elem)


# -- derivatives ------------------------------------------------------------------------------------------
# Written by the autodiff pass (passes/autodiff_operators.py), where the derivative of an operator is its
# dense matrix, a tensor<Dout x Din>: these ops carry what the algebra's other ops cannot express.

class MatrixOp(_TodOp, name="matrix", traits=[ext.Pure]):
    """The dense Dout×Din matrix of an operator, a tensor of its entry type."""

    input: ext.Operand[OperatorType]
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        a = self._operand(0)
        self._expect_tensor([a.dout, a.din], a.elem)


def _direction(op, what: str, dims: list[Extent], elem: ir.Type) -> None:
    t = _tensor(op.operands[1], what, 2)
    if not all(same(a, b) for a, b in zip(_dims(t), dims)) or t.element_type != elem:
        shape = "x".join(show(d) for d in dims)
        raise Invalid(f"{what} must be a tensor<{shape}x{elem}> (the operand's matrix shape), got {t}")


class ExpmDerivativeOp(_TodOp, name="expm_derivative", traits=[ext.Pure]):
    """The Fréchet derivative of the exponential at `input` in the direction `direction` (an n×n tensor):
    L(A, E) = ∫₀¹ exp(sA) E exp((1−s)A) ds, the n×n tensor by which exp(A + tE) moves at t = 0."""

    input: ext.Operand[OperatorType]
    direction: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        a = self._operand(0, "input")
        self._square(a)
        self._real(a)
        _direction(self, "direction", [a.dout, a.din], a.elem)
        self._expect_tensor([a.dout, a.din], a.elem)


class Conv1dCotangentOp(_TodOp, name="conv1d_cotangent", traits=[ext.Pure]):
    """The cotangent of conv1d's kernel h (length m) from the cotangent C (n×n) of its circulant matrix:
    the sums along C's cyclic diagonals, h̄[t] = Σ_i C[i, (i − t) mod n] for t < m. The result has h's type."""

    cotangent: ext.Operand[typing.Any]
    kernel: ext.Operand[typing.Any]
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        h = _tensor(self.kernel, "kernel", 1)
        c = _tensor(self.cotangent, "cotangent", 2)
        n, n2 = _dims(c)
        (m,) = _dims(h)
        if not same(n, n2) or c.element_type != h.element_type:
            raise Invalid(f"cotangent must be a square matrix of the kernel's entries {h.element_type}, got {c}")
        if n is not None and n2 is not None and m is not None and m > min(n, n2):
            raise Invalid(f"kernel of length {m} is longer than the signal length {min(n, n2)}")
        self._expect_tensor([m], h.element_type)


class DirectSumCotangentOp(_TodOp, name="direct_sum_cotangent", traits=[ext.Pure]):
    """The cotangent of one operand (`part` 0: lhs, 1: rhs) of lhs ⊕ rhs from the cotangent C of its matrix:
    C's diagonal block of that operand's extents. lhs and rhs are the sum's operands (for their extents)."""

    cotangent: ext.Operand[typing.Any]
    lhs: ext.Operand[OperatorType]
    rhs: ext.Operand[OperatorType]
    part: ir.IntegerAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        a, b = self._operand(1, "lhs"), self._operand(2, "rhs")
        c = _tensor(self.cotangent, "cotangent", 2)
        elem = _joined(a.elem, b.elem, "operands")
        want = [_sum([a.dout, b.dout]), _sum([a.din, b.din])]
        if not all(same(x, y) for x, y in zip(_dims(c), want)) or c.element_type != elem:
            raise Invalid(f"cotangent must be a tensor<{show(want[0])}x{show(want[1])}x{elem}> (the sum's "
                          f"matrix shape), got {c}")
        part = int_attribute(self, "part")
        if part not in (0, 1):
            raise Invalid(f"part must be 0 (lhs) or 1 (rhs), got {part}")
        p = (a, b)[part]
        self._expect_tensor([p.dout, p.din], elem)


class SpectralRadiusGradientOp(_TodOp, name="spectral_radius_gradient", traits=[ext.Pure]):
    """The gradient G (n×n) of the spectral radius ρ(A) = max |λ| of a real square operator: dρ = ⟨G, dA⟩.
    The interpreter fails where ρ has no derivative (ρ = 0, eigenvalues of the largest magnitude other than
    one real or one conjugate pair, a defective one)."""

    input: ext.Operand[OperatorType]
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        a = self._operand(0)
        self._square(a)
        self._real(a)
        self._expect_tensor([a.dout, a.din], a.elem)


SPECTRAL_FUNCTIONS = ("reconstruct", "pseudoinverse")


class SpectralDerivativeOp(_TodOp, name="spectral_derivative", traits=[ext.Pure]):
    """The derivative Df(A)[D] (an m×n tensor, A and the direction D m×n) of the spectral function f that a
    factorization of `kind` (svd, or eigh of a self-adjoint A), cut to its first `rank` terms (0: all of
    them), stands for under `function`: f(A) = U g(S) V* with g(s) = s ("reconstruct") or g(s) = 1/s where
    |s| > rcond · max |S| and 0 elsewhere ("pseudoinverse", whose value is f(A)*; rcond is 0 for
    "reconstruct"). D f(A) is self-adjoint, so the op is both the tangent and the cotangent map. Real
    operators only. The interpreter fails where a kept and a dropped term have equal |S| (within its
    tolerance): f is not differentiable there."""

    input: ext.Operand[OperatorType]
    direction: ext.Operand[typing.Any]
    kind: ir.StringAttr
    rank: ir.IntegerAttr
    function: ir.StringAttr
    rcond: ir.FloatAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        a = self._operand(0, "input")
        self._real(a)
        kind = attribute(self, "kind", ir.StringAttr, "a string").value
        if kind not in ("svd", "eigh"):
            raise Invalid(f"kind must be svd or eigh, got '{kind}'")
        if kind == "eigh":
            self._square(a)
        rank = int_attribute(self, "rank")
        full = None if a.din is None or a.dout is None else min(a.din, a.dout)
        if rank < 0 or full is not None and rank > full:
            raise Invalid(f"rank must be in [0, {show(full)}] (0: every term), got {rank}")
        function = attribute(self, "function", ir.StringAttr, "a string").value
        if function not in SPECTRAL_FUNCTIONS:
            raise Invalid(f"function must be one of {', '.join(SPECTRAL_FUNCTIONS)}, got '{function}'")
        rcond = attribute(self, "rcond", ir.FloatAttr, "a float").value
        if not 0.0 <= rcond < 1.0 or function == "reconstruct" and rcond != 0.0:
            raise Invalid(f"rcond must be in [0, 1) for pseudoinverse and 0 for reconstruct, got {rcond}")
        _direction(self, "direction", [a.dout, a.din], a.elem)
        self._expect_tensor([a.dout, a.din], a.elem)


# -- diagnostics ------------------------------------------------------------------------------------------

class NormOp(_TodOp, name="norm", traits=[ext.Pure]):
    """The operator 2-norm (the largest singular value), a 0-d tensor of the real component type."""

    input: ext.Operand[OperatorType]
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        self._expect_tensor([], component(self._operand(0).elem))


class IsUnitaryOp(_TodOp, name="is_unitary", traits=[ext.Pure]):
    """Whether A*A = I within `tol` (largest entry of |A*A − I|): a tensor<i1>. A non-square operator is
    not unitary."""

    input: ext.Operand[OperatorType]
    tol: ir.FloatAttr
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        self._operand(0)
        tol = attribute(self, "tol", ir.FloatAttr, "a float").value
        if not tol > 0.0:
            raise Invalid(f"tol must be positive, got {tol}")
        self._expect_tensor([], ir.IntegerType.get_signless(1))


class SpectralRadiusOp(_TodOp, name="spectral_radius", traits=[ext.Pure]):
    """The largest |eigenvalue| of a square operator, a 0-d tensor of the real component type."""

    input: ext.Operand[OperatorType]
    result: ext.Result[typing.Any]

    @verifier
    def verify_invariants(self):
        a = self._operand(0)
        self._square(a)
        self._expect_tensor([], component(a.elem))


# -- what the IR proves about an operator -----------------------------------------------------------------
# Each rule follows from the construction alone, exactly (not up to rounding) in real arithmetic. Rewrites
# use them; an operator that reaches a function as an argument is known nothing about.

_DEPTH = 32  # how far back through defining ops a question looks


def _defining(value) -> tuple[str, typing.Any] | None:
    owner = value.owner
    if isinstance(owner, ir.OpView):
        return owner.operation.name, owner
    return None


def _real_scalar(value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and not is_complex(value.type.element_type)


def self_adjoint(value, depth: int = _DEPTH) -> bool:
    """Whether the operator `value` provably equals its adjoint."""
    d = _defining(value)
    if d is None or depth == 0:
        return False
    name, op = d
    sa = lambda v: self_adjoint(v, depth - 1)  # noqa: E731
    if name in ("tod.eye", "tod.projector", "tod.sym"):
        return True
    if name == "tod.zero":
        return operator_sig(value.type).square
    if name == "tod.diag":
        return _real_scalar(op.operands[0])
    if name in ("tod.adjoint", "tod.power", "tod.expm", "tod.pseudoinverse"):
        return isinstance(op.operands[0].type, OperatorType) and sa(op.operands[0])
    if name in ("tod.plus", "tod.kronecker", "tod.tensor", "tod.direct_sum"):
        return all(sa(v) for v in op.operands)
    if name == "tod.scale":
        return _real_scalar(op.operands[0]) and sa(op.operands[1])
    if name == "tod.resolvent":
        return _real_scalar(op.operands[1]) and sa(op.operands[0])
    if name == "tod.reconstruct":
        return spectral_sig(op.operands[0].type).kind == "eigh"
    return False


def unitary(value, depth: int = _DEPTH) -> bool:
    """Whether the operator `value` provably satisfies U*U = UU* = I."""
    d = _defining(value)
    if d is None or depth == 0:
        return False
    name, op = d
    u = lambda v: unitary(v, depth - 1)  # noqa: E731
    if name in ("tod.eye", "tod.fft", "tod.ifft"):
        return True
    if name in ("tod.adjoint", "tod.power"):
        return u(op.operands[0])
    if name in ("tod.compose", "tod.kronecker", "tod.tensor", "tod.direct_sum"):
        return all(u(v) for v in op.operands)
    if name == "tod.expm":  # the exponential of a skew-adjoint operator
        inner = _defining(op.operands[0])
        return inner is not None and inner[0] == "tod.skew"
    return False


__all__ = [name for name in dir() if name.endswith("Op") and not name.startswith("_")] + [
    "TOD", "OperatorType", "SpectralType", "OperatorSig", "SpectralSig", "SPECTRAL_KINDS", "SPECTRAL_FUNCTIONS",
    "DYNAMIC",
    "operator_type", "spectral_type", "operator_sig", "spectral_sig", "component", "complex_of", "is_complex",
    "join", "same", "show", "self_adjoint", "unitary"]
