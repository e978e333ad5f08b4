"""Differentiation rules of the operator algebra (``tod``; passes/autodiff.py's tables hold them).

The derivative of an operator value — its tangent in forward mode, its cotangent in reverse mode — is its
dense Dout×Din matrix, a tensor of the operator's entry type: it sums with ttensor ops like any tensor's,
and pairs with the operator by the Frobenius product ⟨C, A⟩ = Σ C_ij A_ij. The rules build it with the
algebra's own ops: `tod.apply` of the primal operators (and of `tod.dense` of derivative matrices),
`tod.adjoint`, and `tod.matrix` where an operator's matrix itself is needed, e.g. d(A∘B) = dA·B + A·dB;
conv1d's kernel and direct_sum's operands take their cotangents from the matrix's by ops of their own
(`tod.conv1d_cotangent`: the sums along the cyclic diagonals; `tod.direct_sum_cotangent`: a diagonal block).

A factorization (`op.spectral`) is seen only through op.reconstruct and op.pseudoinverse, both functions of
the operator that do not depend on the basis chosen inside a group of repeated values. So its derivative is
not a tensor but a note of those uses: a tangent records (A, dA), a cotangent the list of (use, matrix
cotangent) pairs that reached it through op.truncate; at op.spectral each use becomes one
`tod.spectral_derivative` — the derivative of the spectral function f(A) = U g(S) V* that the use stands for,
a self-adjoint map, so one op serves both modes (its formulas: tessera/interpret/operator_ops.py). Repeated
values on one side of a truncation or of the pseudoinverse's cut are exact; a kept and a dropped term of
equal |S| fail at run time, naming them.

Complex operators (fft, ifft, eig factorizations, a complex scale) are refused where they meet a
differentiated value: autodiff differentiates real values only. op.norm's rules go through the svd cut to
one term (`_top_pair`); op.spectral_radius's read its gradient off `tod.spectral_radius_gradient`
(Re(conj(λ)/|λ| · y xᵀ) of the eigenvalue λ of largest magnitude, x and y* its right and left eigenvectors),
which fails where ρ has no derivative (a tie of magnitudes but a conjugate pair, ρ = 0, a defective λ).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import LoweringError
from ..dialects import tod, ttensor
from ..mlir import ir


def differentiable(v) -> bool:
    """Whether a value that is not a tensor (an operator or a factorization) gets a derivative: the real ones;
    a complex one that depends on a differentiated value is an error at its op's line."""
    t = v.type
    if isinstance(t, tod.OperatorType):
        elem = tod.operator_sig(t).elem
    elif isinstance(t, tod.SpectralType):
        elem = tod.spectral_sig(t).elem
    else:
        return False
    if tod.is_complex(elem) and isinstance(v.owner, ir.OpView):   # (a parameter is never an operator)
        raise LoweringError(v.owner, f"{_user_name(v.owner)} builds a complex operator ({elem}) from a "
                                     f"differentiated value: autodiff differentiates real values only (no fft, "
                                     f"ifft, spectral kind='eig' or complex scale on the path)")
    return not tod.is_complex(elem)


def _user_name(op) -> str:
    return "op." + op.operation.name.split(".", 1)[1]   # tod.compose is op.compose


def accumulate(e, have, d):
    """The sum of two derivatives of one value that is not a tensor (a factorization's lists of uses)."""
    if isinstance(have, SpectralCotangent):
        return SpectralCotangent(have.uses + d.uses)
    return e.add(have, d, have.type)


# -- building ---------------------------------------------------------------------------------------------

def _sig(v) -> tod.OperatorSig:
    return tod.operator_sig(v.type)


def _dyn(d):
    return ir.ShapedType.get_dynamic_size() if d is None else d


def _matrix_type(sig: tod.OperatorSig) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([_dyn(sig.dout), _dyn(sig.din)], sig.elem)


def _matrix(e, a):
    """A's dense matrix, a tensor."""
    return e._at(lambda: tod.MatrixOp(a, result=_matrix_type(_sig(a))).result)


def _dense(e, m, like):
    """The operator of the matrix m, of the type of the operator `like`."""
    return e._at(lambda: tod.DenseOp(m, result=like.type).result)


def _adjoint(e, a):
    s = _sig(a)
    return e._at(lambda: tod.AdjointOp(a, result=tod.operator_type(s.dout, s.din, s.elem, s.accum)).result)


def _apply(e, a, x):
    """A @ x, x a vector [Din] or a stack of columns [..., Din, k]."""
    t = ir.RankedTensorType(x.type)
    shape = ttensor.shape_of(t)
    shape[0 if t.rank == 1 else t.rank - 2] = _sig(a).dout
    return e._at(lambda: tod.ApplyOp(a, x, result=ir.RankedTensorType.get([_dyn(d) for d in shape],
                                                                          t.element_type)).result)


def _mm(e, x, y, like):
    """The matrix product x @ y of two tensors, accumulated as the operator `like`."""
    return e.matmul(x, y, ir.TypeAttr.get(_sig(like).accum))


def _right(e, x, b):
    """x @ B for a matrix x and an operator B: (B* xᵀ)ᵀ, never materialising B."""
    return e.swap_last(_apply(e, _adjoint(e, b), e.swap_last(x)))


def _build(e, cls, operands, result_type, **attrs):
    return e._at(lambda: cls(*operands, **attrs, result=result_type).result)


def _sum(e, terms: list, t):
    terms = [x for x in terms if x is not None]
    out = terms[0]
    for x in terms[1:]:
        out = e.add(out, x, t)
    return out


def _power(e, a, n: int):
    return _build(e, tod.PowerOp, [a], a.type, exponent=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n))


def _frobenius(e, c, m):
    """⟨c, m⟩ = Σ c_ij m_ij, a 0-d tensor."""
    return e.reduce("sum", e.mul(c, m, c.type), [0, 1], False, ir.RankedTensorType.get([], ir.RankedTensorType(
        c.type).element_type))


def _refuse_complex_scalar(op, v):
    if tod.is_complex(ir.RankedTensorType(v.type).element_type):
        raise LoweringError(op, f"{_user_name(op)} with the complex scalar {v.type}: autodiff differentiates real "
                                f"values only")


# -- constructors -----------------------------------------------------------------------------------------

def _ones_diag(e, d, like):
    """The identity matrix of d's length, at run time: the matrix of diag(d·0 + 1)."""
    ones = e.shift(e.zeros_like(d), 1.0)
    return _matrix(e, _build(e, tod.DiagOp, [ones], like.type))


def _vjp_diag(e, op, cts, want):
    d = op.operands[0]
    return [e.reduce("sum", e.mul(cts[0], _ones_diag(e, d, op.results[0]), cts[0].type), [1], False, d.type)]


def _vjp_projector(e, op, cts, want):
    (c,) = cts
    u = op.operands[0]
    return [_mm(e, e.add(c, e.swap_last(c), c.type), u, op.results[0])]


def _jvp_projector(e, op, ts):
    (du,) = ts
    u, p = op.operands[0], op.results[0]
    one = _mm(e, du, e.swap_last(u), p)
    return [e.add(one, e.swap_last(one), one.type)]


def _kron_shapes(op):
    a, b = _sig(op.operands[0]), _sig(op.operands[1])
    dims = [a.dout, b.dout, a.din, b.din]
    if None in dims:
        raise LoweringError(op, f"{_user_name(op)} of operators with extents known only at run time has no "
                                f"reverse-mode rule yet: its cotangent is reshaped, which needs static extents")
    return dims


def _vjp_kronecker(e, op, cts, want):
    # (A ⊗ B)[(i, k), (j, l)] = A_ij B_kl: Ā_ij = Σ_kl C[(i,k),(j,l)] B_kl, B̄_kl = Σ_ij C[(i,k),(j,l)] A_ij
    (c,) = cts
    p, q, r, s = _kron_shapes(op)
    elem = ir.RankedTensorType(c.type).element_type
    c4 = e.reshape(c, ir.RankedTensorType.get([p, q, r, s], elem))
    a, b = op.operands
    out = []
    if want[0]:
        bb = e.reshape(_matrix(e, b), ir.RankedTensorType.get([1, q, 1, s], elem))
        out.append(e.reduce("sum", e.mul(c4, bb, c4.type), [1, 3], False, _matrix_type(_sig(a))))
    else:
        out.append(None)
    if want[1]:
        aa = e.reshape(_matrix(e, a), ir.RankedTensorType.get([p, 1, r, 1], elem))
        out.append(e.reduce("sum", e.mul(c4, aa, c4.type), [0, 2], False, _matrix_type(_sig(b))))
    else:
        out.append(None)
    return out


def _vjp_conv1d(e, op, cts, want):
    h = op.operands[0]
    return [_build(e, tod.Conv1dCotangentOp, [cts[0], h], h.type)]


def _vjp_direct_sum(e, op, cts, want):
    a, b = op.operands
    return [_build(e, tod.DirectSumCotangentOp, [cts[0], a, b], _matrix_type(_sig(v)),
                   part=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), i)) if w else None
            for i, (v, w) in enumerate(zip((a, b), want))]


def _jvp_binary_constructor(e, op, ts):
    """kronecker, tensor, direct_sum: bilinear (kronecker) or linear (direct_sum) in the operands, so the
    tangent is the op of the tangents' operators, one operand's tangent at a time (a zero one for
    direct_sum's missing tangent)."""
    a, b = op.operands
    da, db = ts
    res = op.results[0]
    cls = type(op.operation.opview)
    if op.operation.name == "tod.direct_sum":
        da = da if da is not None else e.zeros_like(_matrix(e, a))
        db = db if db is not None else e.zeros_like(_matrix(e, b))
        return [_matrix(e, _build(e, cls, [_dense(e, da, a), _dense(e, db, b)], res.type))]
    terms = [_matrix(e, _build(e, cls, [_dense(e, da, a), b], res.type)) if da is not None else None,
             _matrix(e, _build(e, cls, [a, _dense(e, db, b)], res.type)) if db is not None else None]
    return [_sum(e, terms, _matrix_type(_sig(res)))]


def _jvp_tensor_constructor(e, op, ts):
    """diag, conv1d: linear in their tensor operand."""
    return [_matrix(e, e._at(lambda: ir.Operation.create(op.operation.name, results=[op.results[0].type],
                                                         operands=[ts[0]],
                                                         attributes={a.name: a.attr for a in op.attributes}
                                                         ).result))]


# -- algebra ----------------------------------------------------------------------------------------------

def _vjp_compose(e, op, cts, want):
    (c,) = cts
    lhs, rhs = op.operands
    return [_right(e, c, _adjoint(e, rhs)) if want[0] else None,
            _apply(e, _adjoint(e, lhs), c) if want[1] else None]


def _jvp_compose(e, op, ts):
    dl, dr = ts
    lhs, rhs = op.operands
    return [_sum(e, [_right(e, dl, rhs) if dl is not None else None,
                     _apply(e, lhs, dr) if dr is not None else None], _matrix_type(_sig(op.results[0])))]


def _vjp_plus(e, op, cts, want):
    return [cts[0] if w else None for w in want]


def _jvp_plus(e, op, ts):
    return [_sum(e, list(ts), _matrix_type(_sig(op.results[0])))]


def _vjp_scale(e, op, cts, want):
    (c,) = cts
    s, a = op.operands
    _refuse_complex_scalar(op, s)
    return [_frobenius(e, c, _matrix(e, a)) if want[0] else None,
            e.mul(c, s, c.type) if want[1] else None]


def _jvp_scale(e, op, ts):
    ds, da = ts
    s, a = op.operands
    _refuse_complex_scalar(op, s)
    t = _matrix_type(_sig(op.results[0]))
    return [_sum(e, [e.mul(_matrix(e, a), ds, t) if ds is not None else None,
                     e.mul(da, s, t) if da is not None else None], t)]


def _exponent(op) -> int:
    return ir.IntegerAttr(op.attributes["exponent"]).value


def _vjp_power(e, op, cts, want):
    # d(Aⁿ) = Σ_k A^k dA A^(n-1-k): Ā = Σ_k (A*)^k C (A*)^(n-1-k)
    (c,) = cts
    a, n = op.operands[0], _exponent(op)
    if n == 0:
        return [None]
    at = _adjoint(e, a)
    return [_sum(e, [_right(e, _apply(e, _power(e, at, k), c), _power(e, at, n - 1 - k)) for k in range(n)],
                 c.type)]


def _jvp_power(e, op, ts):
    (da,) = ts
    a, n = op.operands[0], _exponent(op)
    if n == 0:
        return [None]
    return [_sum(e, [_right(e, _apply(e, _power(e, a, k), da), _power(e, a, n - 1 - k)) for k in range(n)],
                 da.type)]


def _vjp_commutator(e, op, cts, want):
    # [A, B] = AB − BA: Ā = C B* − B* C, B̄ = A* C − C A*
    (c,) = cts
    a, b = op.operands
    out = []
    for w, other, sign in ((want[0], b, 1.0), (want[1], a, -1.0)):
        if not w:
            out.append(None)
            continue
        ot = _adjoint(e, other)
        term = e.sub(_right(e, c, ot), _apply(e, ot, c), c.type)
        out.append(term if sign > 0 else e.un("neg", term))
    return out


def _jvp_commutator(e, op, ts):
    da, db = ts
    a, b = op.operands
    t = _matrix_type(_sig(op.results[0]))
    terms = []
    if da is not None:
        terms.append(e.sub(_right(e, da, b), _apply(e, b, da), t))
    if db is not None:
        terms.append(e.sub(_apply(e, a, db), _right(e, db, a), t))
    return [_sum(e, terms, t)]


def _symmetric_part(e, d, sign: float):
    both = e.add(d, e.swap_last(d), d.type) if sign > 0 else e.sub(d, e.swap_last(d), d.type)
    return e.scale(both, 0.5)


def _vjp_expm(e, op, cts, want):
    # ⟨C, L(A, E)⟩ = ⟨L(A*, C), E⟩
    a = op.operands[0]
    return [_build(e, tod.ExpmDerivativeOp, [_adjoint(e, a), cts[0]], cts[0].type)]


def _jvp_expm(e, op, ts):
    return [_build(e, tod.ExpmDerivativeOp, [op.operands[0], ts[0]], ts[0].type)]


def _vjp_resolvent(e, op, cts, want):
    # R = (zI − A)⁻¹: dR = R dA R − dz R², so Ā = R* C R*, z̄ = −⟨C, R R⟩
    (c,) = cts
    a, z = op.operands
    _refuse_complex_scalar(op, z)
    r = op.results[0]
    rt = _adjoint(e, r)
    zbar = None
    if want[1]:
        rr = _matrix(e, _build(e, tod.ComposeOp, [r, r], r.type))
        zbar = e.un("neg", _frobenius(e, c, rr))
    return [_right(e, _apply(e, rt, c), rt) if want[0] else None, zbar]


def _jvp_resolvent(e, op, ts):
    da, dz = ts
    z = op.operands[1]
    _refuse_complex_scalar(op, z)
    r = op.results[0]
    t = _matrix_type(_sig(r))
    rr = _matrix(e, _build(e, tod.ComposeOp, [r, r], r.type)) if dz is not None else None
    return [_sum(e, [_right(e, _apply(e, r, da), r) if da is not None else None,
                     e.un("neg", e.mul(rr, dz, t)) if dz is not None else None], t)]


def _vjp_apply(e, op, cts, want):
    # y = A x: x̄ = A* ȳ, Ā = Σ ȳ xᵀ (over a stack's leading axes and its columns)
    (c,) = cts
    a, x = op.operands
    abar = None
    if want[0]:
        t = ir.RankedTensorType(x.type)
        mt = _matrix_type(_sig(a))
        if t.rank == 1:
            col = e.reshape(c, ir.RankedTensorType.get([_dyn(_sig(a).dout), 1], t.element_type),
                            (e.dims(c) or [None]) + ["1"])
            row = e.reshape(x, ir.RankedTensorType.get([1, _dyn(_sig(a).din)], t.element_type),
                            ["1"] + (e.dims(x) or [None]))
            abar = e.mul(col, row, mt)
        else:
            abar = e.sum_to(e.matmul(c, e.swap_last(x), ir.TypeAttr.get(_sig(a).accum)), mt)
    return [abar, _apply(e, _adjoint(e, a), c) if want[1] else None]


def _jvp_apply(e, op, ts):
    da, dx = ts
    a, x = op.operands
    return [_sum(e, [_apply(e, _dense(e, da, a), x) if da is not None else None,
                     _apply(e, a, dx) if dx is not None else None], op.results[0].type)]


# -- spectral ---------------------------------------------------------------------------------------------

@dataclass
class SpectralTangent:
    """The tangent of a factorization: the operator it factors and that operator's tangent (a matrix)."""

    source: ir.Value
    direction: ir.Value


@dataclass
class SpectralCotangent:
    """The cotangent of a factorization: its uses, each (function, rank, rcond, matrix cotangent, location) —
    the cotangent of f(A) = U g(S) V* cut to `rank` terms (0: all), as SpectralDerivativeOp names them, and
    the line of the op.reconstruct or op.pseudoinverse that uses it."""

    uses: list = field(default_factory=list)


def _kind(spectral_value) -> str:
    return tod.spectral_sig(spectral_value.type).kind


def _rank(spectral_value) -> int:
    r = tod.spectral_sig(spectral_value.type).rank
    return 0 if r is None else r


def _derivative(e, a, d, kind: str, rank: int, function: str, rcond: float):
    full = _sig(a)
    if full.din is not None and full.dout is not None and rank == min(full.din, full.dout):
        rank = 0
    return _build(e, tod.SpectralDerivativeOp, [a, d], d.type, kind=ir.StringAttr.get(kind),
                  rank=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), rank),
                  function=ir.StringAttr.get(function), rcond=ir.FloatAttr.get(ir.F64Type.get(), rcond))


def _rcond(op) -> float:
    return ir.FloatAttr(op.attributes["rcond"]).value


def _vjp_spectral(e, op, cts, want):
    # each use's derivative at the use's line (as in forward mode): a cut without a derivative is reported
    # at the op.reconstruct or op.pseudoinverse that makes it
    a, s = op.operands[0], op.results[0]
    terms = []
    for fn, rank, rcond, c, loc in cts[0].uses:
        e.loc = loc
        terms.append(_derivative(e, a, c, _kind(s), rank, fn, rcond))
    e.loc = op.location
    return [_sum(e, terms, terms[0].type)]


def _vjp_reconstruct(e, op, cts, want):
    return [SpectralCotangent([("reconstruct", _rank(op.operands[0]), 0.0, cts[0], op.location)])]


def _vjp_pseudoinverse(e, op, cts, want):
    # pinv = f(A)* for the spectral function f with g(s) = 1/s: the cotangent of f(A) is C*
    x = op.operands[0]
    c = e.swap_last(cts[0])
    if isinstance(x.type, tod.SpectralType):
        return [SpectralCotangent([("pseudoinverse", _rank(x), _rcond(op), c, op.location)])]
    return [_derivative(e, x, c, "svd", 0, "pseudoinverse", _rcond(op))]


def _jvp_spectral(e, op, ts):
    return [SpectralTangent(op.operands[0], ts[0])]


def _jvp_reconstruct(e, op, ts):
    s = op.operands[0]
    t = ts[0]
    return [_derivative(e, t.source, t.direction, _kind(s), _rank(s), "reconstruct", 0.0)]


def _jvp_pseudoinverse(e, op, ts):
    x = op.operands[0]
    if isinstance(x.type, tod.SpectralType):
        t = ts[0]
        d = _derivative(e, t.source, t.direction, _kind(x), _rank(x), "pseudoinverse", _rcond(op))
    else:
        d = _derivative(e, x, ts[0], "svd", 0, "pseudoinverse", _rcond(op))
    return [e.swap_last(d)]


def _top_pair(e, op):
    """u₁v₁ᵀ = f(A) / σ₁ for f(A) = σ₁u₁v₁ᵀ, the svd cut to 1 term: the norm's gradient. As dσ₁ = ⟨u₁v₁ᵀ,
    Df(A)[E]⟩ (u₁v₁ᵀ has a constant Frobenius norm, so its own change is orthogonal to it), the rules go
    through tod.spectral_derivative of that cut, which fails at a tie σ₁ = σ₂, where the norm has a kink."""
    a = op.operands[0]
    s = _sig(a)
    full = None if s.din is None or s.dout is None else min(s.din, s.dout)
    spec = _build(e, tod.SpectralOp, [a], tod.spectral_type(s.din, s.dout, full, s.elem, "svd"))
    top = _build(e, tod.TruncateOp, [spec], tod.spectral_type(s.din, s.dout, 1, s.elem, "svd"),
                 k=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1))
    t = _matrix_type(s)
    return e.div(_matrix(e, _build(e, tod.ReconstructOp, [top], a.type)), op.results[0], t)


def _vjp_norm(e, op, cts, want):
    a = op.operands[0]
    g = _top_pair(e, op)
    return [_derivative(e, a, e.mul(g, cts[0], g.type), "svd", 1, "reconstruct", 0.0)]


def _jvp_norm(e, op, ts):
    return [_frobenius(e, _top_pair(e, op), _derivative(e, op.operands[0], ts[0], "svd", 1, "reconstruct", 0.0))]


def _radius_gradient(e, op):
    a = op.operands[0]
    return _build(e, tod.SpectralRadiusGradientOp, [a], _matrix_type(_sig(a)))


# op name -> rule, as passes/autodiff.py's _VJP and _JVP tables take them
VJP = {
    "tod.dense": lambda e, op, cts, want: [cts[0]],
    "tod.diag": _vjp_diag,
    "tod.conv1d": _vjp_conv1d,
    "tod.projector": _vjp_projector,
    "tod.kronecker": _vjp_kronecker,
    "tod.tensor": _vjp_kronecker,
    "tod.direct_sum": _vjp_direct_sum,
    "tod.compose": _vjp_compose,
    "tod.adjoint": lambda e, op, cts, want: [e.swap_last(cts[0])],
    "tod.plus": _vjp_plus,
    "tod.scale": _vjp_scale,
    "tod.power": _vjp_power,
    "tod.commutator": _vjp_commutator,
    "tod.sym": lambda e, op, cts, want: [_symmetric_part(e, cts[0], 1.0)],
    "tod.skew": lambda e, op, cts, want: [_symmetric_part(e, cts[0], -1.0)],
    "tod.expm": _vjp_expm,
    "tod.resolvent": _vjp_resolvent,
    "tod.apply": _vjp_apply,
    "tod.spectral": _vjp_spectral,
    "tod.truncate": lambda e, op, cts, want: [cts[0]],   # each use already names its rank
    "tod.reconstruct": _vjp_reconstruct,
    "tod.pseudoinverse": _vjp_pseudoinverse,
    "tod.norm": _vjp_norm,
    "tod.spectral_radius": lambda e, op, cts, want: [e.mul(_radius_gradient(e, op), cts[0],
                                                           _matrix_type(_sig(op.operands[0])))],
}

JVP = {
    "tod.dense": lambda e, op, ts: [ts[0]],
    "tod.diag": _jvp_tensor_constructor,
    "tod.conv1d": _jvp_tensor_constructor,
    "tod.projector": _jvp_projector,
    "tod.kronecker": _jvp_binary_constructor,
    "tod.tensor": _jvp_binary_constructor,
    "tod.direct_sum": _jvp_binary_constructor,
    "tod.compose": _jvp_compose,
    "tod.adjoint": lambda e, op, ts: [e.swap_last(ts[0])],
    "tod.plus": _jvp_plus,
    "tod.scale": _jvp_scale,
    "tod.power": _jvp_power,
    "tod.commutator": _jvp_commutator,
    "tod.sym": lambda e, op, ts: [_symmetric_part(e, ts[0], 1.0)],
    "tod.skew": lambda e, op, ts: [_symmetric_part(e, ts[0], -1.0)],
    "tod.expm": _jvp_expm,
    "tod.resolvent": _jvp_resolvent,
    "tod.apply": _jvp_apply,
    "tod.spectral": _jvp_spectral,
    "tod.truncate": lambda e, op, ts: [ts[0]],   # the rank is read from each use's operand type
    "tod.reconstruct": _jvp_reconstruct,
    "tod.pseudoinverse": _jvp_pseudoinverse,
    "tod.norm": _jvp_norm,
    "tod.spectral_radius": lambda e, op, ts: [_frobenius(e, _radius_gradient(e, op), ts[0])],
}
