"""``tessera-tod-lower``: the operator algebra as Graph IR (spec chapter 25), the first step of the schedule stage.

Operators are never materialized. Each ``tod.apply(A, x)`` becomes A's action on x, spelled out by A's
structure in ttensor ops that every target already lowers (GEMMs, fused elementwise kernels, reshapes):

    dense(M) x            matmul(M, X)                  adjoint(dense(M)) x    matmul(transpose(M), X)
    diag(d) x             d[:, None] · X                 scale(s, A) x          s · (A x)
    plus(A, B) x          A x + B x                      compose(A, B) x        A (B x)   (a GEMM chain)
    projector(U) x        U (Uᵀ X)                       power(A, n) x          A (… (A x))
    sym(A), skew(A) x     (A x ± Aᵀ x) / 2               commutator(A, B) x     A (B x) − B (A x)
    eye x = x             zero x = 0                     conv1d(h) x            Σ_j h[j] · x[(i − j) mod n]

so a factorization dense(U) ∘ diag(s) ∘ adjoint(dense(V)) applied to x is three kernels (two GEMMs and a
scaling, or one GEMM with the scaling fused by the fusion phase), never the m×n product. Adjoints push down to
the leaves by (A ∘ B)* = B* ∘ A*, (A + B)* = A* + B*, (A ⊗ B)* = A* ⊗ B*; diag, sym, projector and a real
scale are their own adjoints.

Kronecker products use the reshape identity. A vector x of length Din_A·Din_B, read row-major as the
Din_A×Din_B matrix X (the dialect's convention: index (j, l) is j·Din_B + l), has
(A ⊗ B) x = vec(A X Bᵀ), vec row-major (the column-major literature's vec(B X Aᵀ)). With the apply's columns
k carried along, X [..., Din_A, Din_B·k] is multiplied by A as one GEMM, reshaped to [..., Dout_A, Din_B, k],
and B applied to that as a batch of Dout_A GEMMs: neither A ⊗ B nor a transpose is formed.

Only real operators lower (the Graph IR has no complex tensors), with static extents where a Kronecker
product's reshape needs them. A circulant conv1d(h) is a circular im2col of x's columns (passes/convolution.py)
times h, summed over the taps. Everything else — the Fourier transforms, direct sums, expm, resolvents,
the spectral ops and the operator-valued queries (norm, matrix, …) — is refused at the user's line, naming the
op and the target; the reference interpreter (tessera.interpret) runs them.
"""

from __future__ import annotations

from math import prod

from ..diagnostics import LoweringError
from ..dialects import tod, ttensor
from ..mlir import ir
from . import convolution, tod_descriptors
from .decompose import _bin, _const, _elt, _i64, _reduce, _shape, _swap_last, _to

# why an op has no lowering yet, where there is more to say than its name
_MISSING = {
    **dict.fromkeys(("tod.fft", "tod.ifft"), "FFT tile kernels"),
    **dict.fromkeys(("tod.spectral", "tod.truncate", "tod.reconstruct", "tod.pseudoinverse", "tod.norm",
                     "tod.spectral_radius"), "an SVD or eigensolver kernel"),
    "tod.expm": "a matrix exponential kernel",
    "tod.resolvent": "a linear solver kernel",
    "tod.direct_sum": "a tensor slice and concatenation",
}


def run(fn, target: str) -> int:
    """Rewrites every tod.apply of `fn` into ttensor ops and erases the tod ops left unused; a tod op that
    anything else still reads raises LoweringError naming it and `target`. Returns how many applies it
    rewrote."""
    tod_descriptors.run(fn, target)   # operators crossing the ABI: recorded, then the tod ops they stand for
    applies = [op for op in fn.entry_block.operations if op.operation.name == "tod.apply"]
    memo: dict = {}   # one action of an operator on a tensor, computed once for all the applies that need it
    for op in applies:
        _lower_apply(op, target, memo)
    for op in reversed(list(fn.entry_block.operations)):
        if op.operation.name.startswith("tod.") and all(not list(r.uses) for r in op.results):
            op.operation.erase()
    for op in fn.entry_block.operations:   # what is left feeds a query of operators (norm, matrix …): refuse that
        if op.operation.name.startswith("tod.") and not any(
                isinstance(r.type, (tod.OperatorType, tod.SpectralType)) for r in op.results):
            raise _refusal(op, target)
    convolution.decompose(fn)   # the program's convolutions as GEMMs too, before anything plans them
    return len(applies)


def _refusal(op, target: str, why: str = "") -> LoweringError:
    name = op.operation.name
    if not why and name in _MISSING:
        why = f": it needs {_MISSING[name]}, which the compiler does not have"
    return LoweringError(op, f"'{name}' has no kernel lowering yet on {target}{why} (run it with tessera.interpret)")


def _lower_apply(op, target: str, memo: dict) -> None:
    x, result = op.operands[1], ir.RankedTensorType(op.results[0].type)
    element = result.element_type
    if not isinstance(element, ir.FloatType):
        raise _refusal(_complex_source(op.operands[0]) or op, target,
                       f": complex operators ({element}) need complex tensors, which the Graph IR does not have")
    with op.location, ir.InsertionPoint(op):
        key = ("columns", x, element)
        if key not in memo:
            cols = _to(x, element)
            memo[key] = _reshape(cols, _shape(cols.type) + [1]) if result.rank == 1 else cols   # a vector: a column
        out = _Lowering(target, element, op, memo).act(op.operands[0], memo[key], adjoint=False)
        if result.rank == 1:
            out = _reshape(out, _shape(result))
    op.results[0].replace_all_uses_with(out)
    op.operation.erase()


def _complex_source(value):
    """The first op under operator `value` whose entries are complex (fft, a complex diag …), or None."""
    owner = value.owner
    if not isinstance(owner, ir.OpView):
        return None
    for operand in owner.operands:
        if isinstance(operand.type, tod.OperatorType):
            found = _complex_source(operand)
            if found is not None:
                return found
    return owner if tod.is_complex(tod.operator_sig(value.type).elem) else None


def _i64s(vals: list[int]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([_i64(v) for v in vals])


def _reshape(x, shape: list[int]) -> ir.Value:
    return ttensor.ReshapeOp(x, result=ir.RankedTensorType.get(shape, _elt(x))).result


def _column(d) -> ir.Value:
    """A 1-D `d` as an [n, 1] column, which broadcasts along the apply's columns and batch axes."""
    return _reshape(d, _shape(d.type) + [1])


class _Lowering:
    """A's action on X ([..., Din, k] of `element`), at the current insertion point and location."""

    def __init__(self, target: str, element: ir.Type, at, memo: dict):
        self.target, self.element, self.at, self.memo = target, element, at, memo

    def act(self, value, x, adjoint: bool) -> ir.Value:
        """A x, or A* x when `adjoint` (for a real A, Aᵀ x); made once per (A, x, adjoint) in a function, whose
        earlier applies' ops come before the later ones."""
        key = (value, x, adjoint)
        if key not in self.memo:
            self.memo[key] = self._act(value, x, adjoint)
        return self.memo[key]

    def _act(self, value, x, adjoint: bool) -> ir.Value:
        owner = value.owner
        if not isinstance(owner, ir.OpView):
            raise LoweringError(x.owner, "an operator that is a block argument cannot be lowered")
        name = owner.operation.name
        ops = owner.operands
        if name == "tod.eye":
            return x
        if name == "tod.zero":
            sig = tod.operator_sig(value.type)
            shape = _shape(x.type)
            shape[-2] = sig.din if adjoint else sig.dout
            zero = _const(0.0, self.element)
            return ttensor.BroadcastOp(zero, result=ir.RankedTensorType.get(shape, self.element)).result
        if name == "tod.dense":
            m = _to(ops[0], self.element)
            return self._matmul(m, x, tod.operator_sig(value.type).accum, transposed=adjoint)
        if name == "tod.diag":
            return _bin("mul", x, _column(_to(ops[0], self.element)))
        if name == "tod.projector":
            u = _to(ops[0], self.element)
            accum = tod.operator_sig(value.type).accum
            return self._matmul(u, self._matmul(u, x, accum, transposed=True), accum)
        if name == "tod.adjoint":
            return self.act(ops[0], x, not adjoint)
        if name == "tod.compose":
            first, then = (ops[0], ops[1]) if adjoint else (ops[1], ops[0])
            return self.act(then, self.act(first, x, adjoint), adjoint)
        if name == "tod.plus":
            return _bin("add", self.act(ops[0], x, adjoint), self.act(ops[1], x, adjoint))
        if name == "tod.scale":
            y = self.act(ops[1], x, adjoint)
            return _bin("mul", y, _to(ops[0], self.element))
        if name == "tod.power":
            for _ in range(ir.IntegerAttr(owner.attributes["exponent"]).value):
                x = self.act(ops[0], x, adjoint)
            return x
        if name in ("tod.sym", "tod.skew"):
            # sym is self-adjoint; skew* = -skew, so its adjoint swaps the difference's order
            fn = "add" if name == "tod.sym" else "sub"
            a, at = self.act(ops[0], x, False), self.act(ops[0], x, True)
            if name == "tod.skew" and adjoint:
                a, at = at, a
            return _bin("mul", _bin(fn, a, at), _const(0.5, self.element))
        if name == "tod.commutator":   # [A, B]* = [B*, A*]
            a, b = (ops[1], ops[0]) if adjoint else (ops[0], ops[1])
            return _bin("sub", self.act(a, self.act(b, x, adjoint), adjoint),
                        self.act(b, self.act(a, x, adjoint), adjoint))
        if name in ("tod.kronecker", "tod.tensor"):
            return self._kronecker(owner, x, adjoint)
        if name == "tod.conv1d":
            return self._circulant(owner, x, adjoint)
        raise _refusal(owner, self.target)

    def _circulant(self, owner, x, adjoint: bool) -> ir.Value:
        """conv1d(h) x, (h ⊛ x)[i] = Σ_{j<m} h[j] x[(i − j) mod n], for each column of X [..., n, k]: the
        columns as a batch of one-channel signals [B, 1, n], their circular windows as an im2col (padding m − 1
        wrapped around, taps flipped, so column j holds x[(i − j) mod n]; the adjoint's, x[(i + j) mod n], are
        neither), times h broadcast along the rows, summed over the taps: a gather, an elementwise product and
        a row sum, no n×n matrix, on every target and dtype."""
        shape = _shape(x.type)
        if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            raise _refusal(owner, self.target, ": a circulant applies to tensors of static extents only")
        lead, n, k = shape[:-2], shape[-2], shape[-1]
        h = _to(owner.operands[0], self.element)
        m, b = _shape(h.type)[0], prod(lead) * k
        signals = _reshape(_swap_last(x), [b, 1, n])
        cols = convolution.im2col(signals, [m], _i64s([1]), _i64s([0, m - 1] if adjoint else [m - 1, 0]),
                                  _i64s([1]), ir.RankedTensorType.get([b * n, m], self.element), circular=True,
                                  flip=not adjoint)
        y = _reduce("sum", _bin("mul", cols, h), keepdims=False)
        return _swap_last(_reshape(y, lead + [k, n]))

    def _matmul(self, a, b, accum: ir.Type, transposed: bool = False) -> ir.Value:
        """a @ b (aᵀ @ b when `transposed`), `a` a matrix, `b` [..., n, k]. A stack is multiplied as (a Xᵢ)ᵀ = Xᵢᵀ aᵀ with the stack folded
        into the rows of one 2-D GEMM (every target's GEMM takes that; a batched one would need a copy of
        `a` per matrix)."""
        shape = _shape(b.type)
        m = _shape(a.type)[-1 if transposed else -2]
        if len(shape) == 2:
            return ttensor.MatmulOp(_swap_last(a) if transposed else a, b, accum=ir.TypeAttr.get(accum),
                                    result=ir.RankedTensorType.get([m, shape[1]], self.element)).result
        lead, n, k = shape[:-2], shape[-2], shape[-1]
        if any(ir.ShapedType.is_dynamic_size(d) for d in lead + [k]):
            shown = ", ".join("?" if ir.ShapedType.is_dynamic_size(d) else str(d) for d in shape)
            raise LoweringError(self.at, f"a stack of column vectors [{shown}] with extents known only at run time "
                                         f"cannot be lowered on {self.target} yet; give its batch and column "
                                         "extents statically")
        rows = _reshape(_swap_last(b), [prod(lead) * k, n])
        out = ttensor.MatmulOp(rows, a if transposed else _swap_last(a), accum=ir.TypeAttr.get(accum),
                               result=ir.RankedTensorType.get([prod(lead) * k, m], self.element)).result
        return _swap_last(_reshape(out, lead + [k, m]))

    def _kronecker(self, owner, x, adjoint: bool) -> ir.Value:
        """(A ⊗ B) x = vec(A X Bᵀ) for each column x of X (X its Din_A×Din_B matrix): B applied to Xᵀ, then A
        to the transpose of that, each one GEMM over all columns at once (a batch of them for several
        columns). The CPU transposes the last two axes only, so each column's matrix is moved there first."""
        a, b = (tod.operator_sig(v.type) for v in owner.operands)
        (a_in, a_out), (b_in, b_out) = ((s.dout, s.din) if adjoint else (s.din, s.dout) for s in (a, b))
        shape = _shape(x.type)
        lead, k = shape[:-2], shape[-1]
        if None in (a_in, a_out, b_in, b_out) or any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            raise _refusal(owner, self.target, ": a Kronecker product lowers with static extents only")
        batch = lead + ([k] if k != 1 else [])          # one matrix X per column
        rows = _reshape(x, lead + [1, a_in * b_in]) if k == 1 else _swap_last(x)
        xt = _swap_last(_reshape(rows, batch + [a_in, b_in]))                    # Xᵀ: [.., b_in, a_in]
        y = _swap_last(self.act(owner.operands[1], xt, adjoint))                 # (B Xᵀ)ᵀ = X Bᵀ: [.., a_in, b_out]
        z = _reshape(self.act(owner.operands[0], y, adjoint), batch + [a_out * b_out])   # A X Bᵀ, row-major
        if k == 1:
            return _reshape(z, lead + [a_out * b_out, 1])
        return _swap_last(z)
