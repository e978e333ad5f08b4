"""``tessera-tod-canonicalize``: the operator algebra's rewrite laws, applied in the canonicalization phase.

The spec's laws (§23) and the others a mathematician expects, each an identity of linear operators:

    adjoint(adjoint(A)) = A                       compose(A, I) = A = compose(I, A)
    compose(fft, ifft) = I = compose(ifft, fft)   projector(U) ∘ projector(U) = projector(U)
    adjoint(fft) = ifft, adjoint(ifft) = fft      adjoint(A) = A for a provably self-adjoint A (I, U U*, …)
    adjoint(A ∘ B) = adjoint(B) ∘ adjoint(A)      adjoint(A + B) = adjoint(A) + adjoint(B)
    adjoint(s·A) = s·adjoint(A), s real           adjoint(0) = 0
    scale(a, scale(b, A)) = scale(ab, A)          scale(1, A) = A
    compose(A, 0) = 0 = compose(0, A)             plus(A, 0) = A = plus(0, A)
    power(A, 0) = I, power(A, 1) = A              commutator(A, A) = 0
    sym(A) = A, skew(A) = 0 for a self-adjoint A (so sym(sym(A)) = sym(A))
    U* ∘ U = I = U ∘ U* for a provably unitary U
    tensor(A, B) = kronecker(A, B)                (A ⊗ B) ∘ (C ⊗ D) = (A ∘ C) ⊗ (B ∘ D) when A∘C is defined

A law fires only where it keeps every type: a replacement must have the type of the value it replaces (a real
A does not replace a complex compose(A, I)). The laws hold in exact arithmetic; a rewritten program computes
the same operators up to rounding. Scalar factors multiply exactly as the interpreter would: a product of
two constants is folded into one constant of their type.
"""

from __future__ import annotations

from ..dialects import tod, ttensor
from ..mlir import ir, rewrite

_FAIL = True  # a pattern function returns a true value when it does not apply


def _name(value) -> str | None:
    """The name of the op that defines `value` (None for a block argument)."""
    owner = value.owner
    return owner.operation.name if isinstance(owner, ir.OpView) else None


def _defining(value, name: str):
    """The op named `name` that defines `value`, or None."""
    return value.owner if _name(value) == name else None


def _replace(rewriter, op, value):
    """Replaces `op` by the existing `value` when that keeps the type."""
    if value.type != op.results[0].type:
        return _FAIL
    rewriter.replace_op(op, [value])
    return None


def _create(rewriter, op, build):
    """Replaces `op` by the op `build()` makes, before `op` and at its location. Builders give the
    replacement `op`'s result type."""
    with rewriter.ip, op.location:
        new = build()
    rewriter.replace_op(op, [new.result])
    return None


def _result_type(op) -> ir.Type:
    return op.results[0].type


def _constant_of_result(rewriter, op, op_cls):
    """Replaces `op` by an `eye` or `zero` of its result type, which those need static."""
    s = tod.operator_sig(_result_type(op))
    if s.din is None or s.dout is None:
        return _FAIL
    return _create(rewriter, op, lambda: op_cls(result=_result_type(op)))


def _adjoint_type(value) -> ir.Type:
    s = tod.operator_sig(value.type)
    return tod.operator_type(s.dout, s.din, s.elem, s.accum)


def _constant(value) -> float | None:
    c = _defining(value, "ttensor.constant")
    if c is None or not isinstance(c.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(c.attributes["value"]).value


def _real(value) -> bool:
    return not tod.is_complex(ir.RankedTensorType(value.type).element_type)


# -- adjoint ----------------------------------------------------------------------------------------------

def adjoint_laws(op, rewriter):
    (a,) = op.operands
    if (inner := _defining(a, "tod.adjoint")) is not None:
        return _replace(rewriter, op, inner.operands[0])
    if tod.self_adjoint(a):
        return _replace(rewriter, op, a)
    for src, dst in (("tod.fft", tod.IFFTOp), ("tod.ifft", tod.FFTOp), ("tod.zero", tod.ZeroOp)):
        if _name(a) == src:
            return _constant_of_result(rewriter, op, dst)
    if (c := _defining(a, "tod.compose")) is not None:
        lhs, rhs = c.operands
        return _create(rewriter, op, lambda: tod.ComposeOp(
            tod.AdjointOp(rhs, result=_adjoint_type(rhs)).result,
            tod.AdjointOp(lhs, result=_adjoint_type(lhs)).result, result=_result_type(op)))
    if (p := _defining(a, "tod.plus")) is not None:
        lhs, rhs = p.operands
        return _create(rewriter, op, lambda: tod.PlusOp(
            tod.AdjointOp(lhs, result=_adjoint_type(lhs)).result,
            tod.AdjointOp(rhs, result=_adjoint_type(rhs)).result, result=_result_type(op)))
    if (s := _defining(a, "tod.scale")) is not None and _real(s.operands[0]):
        factor, inner = s.operands  # a real factor is its own conjugate
        return _create(rewriter, op, lambda: tod.ScaleOp(
            factor, tod.AdjointOp(inner, result=_adjoint_type(inner)).result, result=_result_type(op)))
    return _FAIL


# -- compose ----------------------------------------------------------------------------------------------

def _same_projector(a, b) -> bool:
    pa, pb = _defining(a, "tod.projector"), _defining(b, "tod.projector")
    return pa is not None and pb is not None and pa.operands[0] == pb.operands[0]


def _adjoint_of(a, b) -> bool:
    """Whether `a` is adjoint(b)."""
    adj = _defining(a, "tod.adjoint")
    return adj is not None and adj.operands[0] == b


def compose_laws(op, rewriter):
    lhs, rhs = op.operands
    for kept, unit in ((lhs, rhs), (rhs, lhs)):
        if _name(unit) == "tod.eye" and kept.type == op.result.type:
            return _replace(rewriter, op, kept)
    if "tod.zero" in (_name(lhs), _name(rhs)) and _constant_of_result(rewriter, op, tod.ZeroOp) is None:
        return None
    if {_name(lhs), _name(rhs)} == {"tod.fft", "tod.ifft"}:
        return _constant_of_result(rewriter, op, tod.EyeOp)
    if _same_projector(lhs, rhs):
        return _replace(rewriter, op, lhs)
    if (_adjoint_of(lhs, rhs) and tod.unitary(rhs)) or (_adjoint_of(rhs, lhs) and tod.unitary(lhs)):
        return _constant_of_result(rewriter, op, tod.EyeOp)
    return _mixed_product(op, rewriter)


def _compose_value(a, b) -> ir.Value:
    """a ∘ b, built at the current insertion point."""
    sa, sb = tod.operator_sig(a.type), tod.operator_sig(b.type)
    accum = max(sa.accum, sb.accum, key=lambda t: ir.FloatType(t).width)
    return tod.ComposeOp(a, b, result=tod.operator_type(sb.din, sa.dout, tod.join(sa.elem, sb.elem), accum)).result


def _mixed_product(op, rewriter):
    """(A ⊗ B) ∘ (C ⊗ D) = (A ∘ C) ⊗ (B ∘ D) when A's Din is C's Dout (and so B's Din is D's Dout)."""
    kl, kr = _defining(op.operands[0], "tod.kronecker"), _defining(op.operands[1], "tod.kronecker")
    if kl is None or kr is None:
        return _FAIL
    a, b = kl.operands
    c, d = kr.operands
    din_a, dout_c = tod.operator_sig(a.type).din, tod.operator_sig(c.type).dout
    if din_a is None or din_a != dout_c:
        return _FAIL
    return _create(rewriter, op, lambda: tod.KroneckerOp(_compose_value(a, c), _compose_value(b, d),
                                                         result=_result_type(op)))


# -- the others -------------------------------------------------------------------------------------------

def plus_laws(op, rewriter):
    lhs, rhs = op.operands
    for kept, zero in ((lhs, rhs), (rhs, lhs)):
        if _name(zero) == "tod.zero" and kept.type == op.result.type:
            return _replace(rewriter, op, kept)
    return _FAIL


def scale_laws(op, rewriter):
    factor, a = op.operands
    if _constant(factor) == 1.0:
        return _replace(rewriter, op, a)
    inner = _defining(a, "tod.scale")
    if inner is None or inner.operands[0].type != factor.type:
        return _FAIL
    other, base = inner.operands
    x, y = _constant(factor), _constant(other)

    def product():
        if x is not None and y is not None:
            et = ir.RankedTensorType(factor.type).element_type
            return ttensor.ConstantOp(value=ir.FloatAttr.get(et, x * y), result=factor.type).result
        return ttensor.BinaryOp(factor, other, fn=ir.StringAttr.get("mul"), result=factor.type).result

    return _create(rewriter, op, lambda: tod.ScaleOp(product(), base, result=_result_type(op)))


def power_laws(op, rewriter):
    n = ir.IntegerAttr(op.attributes["exponent"]).value
    if n == 0:
        return _constant_of_result(rewriter, op, tod.EyeOp)
    if n == 1:
        return _replace(rewriter, op, op.operands[0])
    return _FAIL


def commutator_laws(op, rewriter):
    lhs, rhs = op.operands
    return _constant_of_result(rewriter, op, tod.ZeroOp) if lhs == rhs else _FAIL


def sym_laws(op, rewriter):
    (a,) = op.operands
    return _replace(rewriter, op, a) if tod.self_adjoint(a) else _FAIL


def skew_laws(op, rewriter):
    (a,) = op.operands
    return _constant_of_result(rewriter, op, tod.ZeroOp) if tod.self_adjoint(a) else _FAIL


def tensor_laws(op, rewriter):
    lhs, rhs = op.operands
    return _create(rewriter, op, lambda: tod.KroneckerOp(lhs, rhs, result=_result_type(op)))


LAWS = [
    (tod.AdjointOp, adjoint_laws), (tod.ComposeOp, compose_laws), (tod.PlusOp, plus_laws),
    (tod.ScaleOp, scale_laws), (tod.PowerOp, power_laws), (tod.CommutatorOp, commutator_laws),
    (tod.SymOp, sym_laws), (tod.SkewOp, skew_laws), (tod.TensorProductOp, tensor_laws),
]


def run(op: ir.Operation) -> None:
    """Applies the laws to `op` and everything nested in it until none applies (folding and removing dead
    pure ops on the way)."""
    patterns = rewrite.RewritePatternSet()
    for root, law in LAWS:
        patterns.add(root, law)
    rewrite.apply_patterns_and_fold_greedily(op, patterns.freeze())
