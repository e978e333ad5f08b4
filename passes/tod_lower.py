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

Complex operators lower as pairs of real tensors (passes/fourier.py): the Fourier transforms of power-of-two
sizes are FFTs (Stockham stages, passes/fft.py), of other sizes from 16 up Bluestein's chirp-z on those stages
(passes/fft.py), below 16 DFTs as GEMMs with twiddle matrices, a
complex diag or scale four real products, and any complex operator's action (R + iI) x the real actions R and
I on x's parts. A complex apply result becomes a complex tensor (its parts
interleaved, numpy's storage) only where it leaves the operator program, and a complex parameter is read as
its halves; any other op reading a complex tensor is refused. Static extents are
needed where a Kronecker product's reshape needs them. A circulant conv1d(h) is a circular im2col of x's
columns (passes/convolution.py) times h, summed over the taps. A block-sparse descriptor (passes/tod_descriptors.py
leaves it) acts by GEMMs with one-hot matrices of its block coordinates: a gather, the block products and a
scatter-sum (_Lowering._blocksparse), deterministic, not a sparse kernel.

expm(A) x is exp(A)'s matrix times x: A's matrix is A's action on the identity (a dense factor is its own
matrix, no product), exp of it is scaling and squaring with a Taylor polynomial in GEMMs, elementwise ops and
reductions (passes/matrix_functions.py), formed once per function. expm_derivative(A, E), the Fréchet
derivative that autodiff writes for expm, is the same recurrences differentiated. f64 operator products are
products and row sums (an elementwise kernel and a reduction), on every target: not every target's GEMM
takes f64. Everything else — direct sums, resolvents, the spectral ops (spectral_radius included) and the
operator-valued queries (norm, matrix, …) — is refused at the user's line, naming the op and the target; the
reference interpreter (tessera.interpret) runs them.
"""

from __future__ import annotations

from math import prod

from ..diagnostics import LoweringError
from ..dialects import tod, ttensor
from ..dialects.support import create
from ..dialects.tod_abi import flags_of
from ..mlir import ir
from . import convolution, fft, fourier, linalg_kernels, matrix_functions, tod_descriptors
from .decompose import _bin, _const, _elt, _i64, _reduce, _shape, _swap_last, _to
from .fourier import Pair

# why an op has no lowering yet, where there is more to say than its name
_MISSING = {
    "tod.spectral_derivative": "the derivative of a factorization as kernels (compiled, a factorization is "
                               "not differentiated)",
    "tod.spectral_radius_gradient": "an eigenvector kernel (compiled, the spectral radius is not differentiated)",
    "tod.resolvent": "a linear solver kernel",
    "tod.direct_sum": "a tensor slice and concatenation",
}
# queries of operators whose results are tensors, lowered where they stand (passes/matrix_functions.py)
_QUERIES = ("tod.expm_derivative", "tod.spectral_radius", "tod.norm")


def run(fn, target: str) -> int:
    """Rewrites every tod.apply and tod.expm_derivative of `fn` into ttensor ops and erases the tod ops left
    unused; a tod op that anything else still reads raises LoweringError naming it and `target`. Returns how
    many ops it rewrote."""
    tod_descriptors.run(fn, target)   # operators crossing the ABI: recorded, then the tod ops they stand for
    # in program order, so that what one of them memoizes comes before every later one that reads it
    todo = [op for op in fn.entry_block.operations if op.operation.name in ("tod.apply", *_QUERIES)]
    memo: dict = {}   # one action of an operator on a tensor, computed once for all the applies that need it
    for op in todo:
        (_lower_apply if op.operation.name == "tod.apply" else _lower_query)(op, target, memo)
    for op in reversed(list(fn.entry_block.operations)):   # with complex results only applies read (parts)
        if _lowered(op) and all(not list(r.uses) for r in op.results):
            op.operation.erase()
    for key, value in memo.items():   # an identity only operators' matrices read, which they had not needed
        if key[0] == "identity" and not list(value.uses):
            matrix_functions.erase_identity(value)
    for op in fn.entry_block.operations:
        name = op.operation.name
        if name not in ("ttensor.reshape", "func.return") and any(
                isinstance(v.type, ir.RankedTensorType) and tod.is_complex(ir.RankedTensorType(v.type).element_type)
                for v in op.operands):
            raise LoweringError(op, f"'{name}' of a complex tensor has no kernel lowering on {target}: a complex "
                                    "tensor is an operator's result, returned or applied to (run it with "
                                    "tessera.interpret)")
    for op in fn.entry_block.operations:   # what is left feeds a query of operators (norm, matrix …): refuse that
        if op.operation.name.startswith("tod.") and not any(
                isinstance(r.type, (tod.OperatorType, tod.SpectralType)) for r in op.results):
            raise _refusal(op, target)
    convolution.decompose(fn)   # the program's convolutions as GEMMs too, before anything plans them
    return len(todo)


def _lowered(op) -> bool:
    """An operator op, or an op of a complex apply result (which later applies may read as parts instead, and
    a return an FFT's pairs: passes/fft.py)."""
    name = op.operation.name
    return name.startswith("tod.") or name in ("ttensor.interleave", "ttensor.part") or (
        name == "ttensor.reshape" and (tod.is_complex(ir.RankedTensorType(op.results[0].type).element_type)
                                       or fft.source(op.results[0]) is not None))   # a view of a part


def _refusal(op, target: str, why: str = "") -> LoweringError:
    name = op.operation.name
    if not why and name in _MISSING:
        why = f": it needs {_MISSING[name]}, which the compiler does not have"
    return LoweringError(op, f"'{name}' has no kernel lowering yet on {target}{why} (run it with tessera.interpret)")


def _lower_apply(op, target: str, memo: dict) -> None:
    x, result = op.operands[1], ir.RankedTensorType(op.results[0].type)
    element = tod.component(result.element_type)
    with op.location, ir.InsertionPoint(op):
        lowering = _Lowering(target, element, op, memo)
        key = ("columns", x, element)
        if key not in memo:
            cols = lowering.entries(x)
            memo[key] = _map(lambda c: _reshape(c, _shape(c.type) + [1]), cols) if result.rank == 1 else cols
        out = lowering.act(op.operands[0], memo[key], adjoint=False)
        if result.rank == 1:
            out = _map(lambda c: _reshape(c, _shape(result)), out)
        if tod.is_complex(result.element_type):
            pair = out if isinstance(out, Pair) else Pair(out, ttensor.BroadcastOp(
                _const(0.0, element), result=out.type).result)   # a complex operator acting as a real one
            out = fourier.interleave(pair)
            memo[("parts", out)] = pair   # what later applies read of it
    op.results[0].replace_all_uses_with(out)
    op.operation.erase()


def _lower_query(op, target: str, memo: dict) -> None:
    """tod.expm_derivative(A, E): the Fréchet derivative of exp at A's matrix in the direction E; tod.norm(A):
    σ₁ of A's svd; tod.spectral_radius(A): Gelfand's formula in one kernel (passes/linalg_kernels.py)."""
    element = tod.component(ir.RankedTensorType(op.results[0].type).element_type)
    if op.operation.name != "tod.expm_derivative":
        with op.location, ir.InsertionPoint(op):
            out = _Lowering(target, element, op, memo).query(op)
        op.results[0].replace_all_uses_with(out)
        op.operation.erase()
        return
    with op.location, ir.InsertionPoint(op):
        lowering = _Lowering(target, element, op, memo)
        functions = lowering.functions(op, op.operands[0])
        a = lowering.matrix(op, op.operands[0])
        out = _to(functions.expm_frechet(a, _to(op.operands[1], functions.element)), element)
    op.results[0].replace_all_uses_with(out)
    op.operation.erase()


def _map(f, x):
    """f applied to a real tensor, or to each part of a Pair (f real-linear)."""
    return Pair(f(x.re), f(x.im)) if isinstance(x, Pair) else f(x)


def _neg(x) -> ir.Value:
    return ttensor.UnaryOp(x, fn=ir.StringAttr.get("neg"), result=x.type).result


def _combine(fn: str, a, b):
    """a + b or a − b (`fn` "add" / "sub"), each a real tensor or a Pair."""
    if not isinstance(a, Pair) and not isinstance(b, Pair):
        return _bin(fn, a, b)
    if not isinstance(b, Pair):
        return Pair(_bin(fn, a.re, b), a.im)
    if not isinstance(a, Pair):
        return Pair(_bin(fn, a, b.re), b.im if fn == "add" else _neg(b.im))
    return Pair(_bin(fn, a.re, b.re), _bin(fn, a.im, b.im))


def _product(x, d, conj: bool = False):
    """x · d elementwise (d broadcast to x's shape; d̄ where `conj`), each a real tensor or a Pair."""
    if not isinstance(d, Pair):
        return _map(lambda p: _bin("mul", p, d), x)
    return _linear(lambda p: _bin("mul", p, d.re), lambda p: _bin("mul", p, d.im), x, conj)


def _linear(re_map, im_map, x, conj: bool):
    """(R + iI) x, or (R − iI) x where `conj`, for real-linear maps R = re_map, I = im_map of real tensors."""
    if not isinstance(x, Pair):
        im = im_map(x)
        return Pair(re_map(x), _neg(im) if conj else im)
    rr, ri, ir_, ii = re_map(x.re), re_map(x.im), im_map(x.re), im_map(x.im)
    if conj:
        return Pair(_bin("add", rr, ii), _bin("sub", ri, ir_))
    return Pair(_bin("sub", rr, ii), _bin("add", ri, ir_))


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

    def entries(self, value):
        """Tensor `value` in the lowering's element type: a real one cast, a complex one as its Pair (an earlier
        apply's, or a parameter's halves)."""
        if not tod.is_complex(_elt(value)):
            return _to(value, self.element)
        key = ("parts", value)
        if key not in self.memo:   # a parameter: its halves, once per function
            self.memo[key] = fourier.parts(value)
        return _map(lambda p: _to(p, self.element), self.memo[key])

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
            shape = _shape((x.re if isinstance(x, Pair) else x).type)
            shape[-2] = sig.din if adjoint else sig.dout
            zero = _const(0.0, self.element)
            return ttensor.BroadcastOp(zero, result=ir.RankedTensorType.get(shape, self.element)).result
        if name == "tod.dense":   # (Mr + iMi)* = Mrᵀ − iMiᵀ
            m, accum = self.entries(ops[0]), tod.operator_sig(value.type).accum
            mul = lambda a: lambda p: self._matmul(a, p, accum, transposed=adjoint)   # noqa: E731
            if isinstance(m, Pair):
                return _linear(mul(m.re), mul(m.im), x, conj=adjoint)
            return _map(mul(m), x)
        if name in ("tod.fft", "tod.ifft"):
            return self._dft(owner, x, inverse=(name == "tod.ifft") != adjoint)
        if name == "tod.expm":
            return self._expm(owner, x, adjoint)
        if name == "tod.diag":
            return _product(x, _map(_column, self.entries(ops[0])), conj=adjoint)
        if name == "tod.projector":
            u = self.entries(ops[0])
            if isinstance(u, Pair):
                raise _refusal(owner, self.target, ": a projector onto a complex basis is not lowered yet")
            accum = tod.operator_sig(value.type).accum
            return _map(lambda p: self._matmul(u, self._matmul(u, p, accum, transposed=True), accum), x)
        if name == "tod.adjoint":
            return self.act(ops[0], x, not adjoint)
        if name == "tod.compose":
            first, then = (ops[0], ops[1]) if adjoint else (ops[1], ops[0])
            return self.act(then, self.act(first, x, adjoint), adjoint)
        if name == "tod.plus":
            return _combine("add", self.act(ops[0], x, adjoint), self.act(ops[1], x, adjoint))
        if name == "tod.scale":   # (s A)* = s̄ A*
            return _product(self.act(ops[1], x, adjoint), self.entries(ops[0]), conj=adjoint)
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
            return _product(_combine(fn, a, at), _const(0.5, self.element))
        if name == "tod.commutator":   # [A, B]* = [B*, A*]
            a, b = (ops[1], ops[0]) if adjoint else (ops[0], ops[1])
            return _combine("sub", self.act(a, self.act(b, x, adjoint), adjoint),
                            self.act(b, self.act(a, x, adjoint), adjoint))
        if name in ("tod.kronecker", "tod.tensor"):
            return self._kronecker(owner, x, adjoint)
        if name == "tod.conv1d":   # conv(hr + i·hi)* = conv*(hr) − i·conv*(hi)
            h = self.entries(ops[0])
            circ = lambda k: lambda p: self._circulant(owner, k, p, adjoint)   # noqa: E731
            return _linear(circ(h.re), circ(h.im), x, conj=adjoint) if isinstance(h, Pair) else _map(circ(h), x)
        if name in ("tod.reconstruct", "tod.pseudoinverse"):
            return self._spectral_function(owner, x, adjoint)
        if name == "tod.descriptor":   # block-sparse: the only kind tod_descriptors leaves
            if isinstance(self.entries(ops[0]), Pair):
                raise _refusal(owner, self.target, ": a block-sparse operator of complex blocks is not lowered yet")
            flagged = "adjoint" in flags_of(owner)
            return self._blocksparse(owner, x, adjoint != flagged)
        raise _refusal(owner, self.target)

    # -- block-sparse operators (docs/operators.md "What compiles") ----------------------------------------

    def _blocksparse(self, owner, x, transposed: bool) -> ir.Value:
        """A x (Aᵀ x where `transposed`) for the block-sparse A = Σ_k E(rows[k], cols[k]) ⊗ blocks[k] of
        descriptor `owner` (its payload's operator, before any "adjoint" flag), x [..., Din, k]: with R block
        rows, C block columns and one-hot matrices Or [nnz, R], Oc [nnz, C] (an exact 0/1 compare of the
        coordinates with 0 … R − 1), the gather Xg = Oc @ X viewed [C, b·k] (one nonzero product per sum:
        exact), the block products P = blocks @ Xg [nnz, b, k] (a batched GEMM; products and sums in f64), the
        scatter-sum Y = Orᵀ @ P viewed [nnz, b·k]: duplicates of a coordinate add, in a fixed order (no atomics:
        deterministic), and a coordinate outside the operator matches no row of Or or Oc and contributes
        nothing (the interpreter refuses it). Aᵀ swaps rows and cols and reads the blocks transposed. nnz may be
        known only at run time (0 included) but in f64. A correct lowering, not a sparse kernel:
        O(nnz·(R + C)·b·k) work more than the block products."""
        blocks, rows, cols = owner.operands
        sig = tod.operator_sig(owner.results[0].type)
        din, dout = (sig.dout, sig.din) if "adjoint" in flags_of(owner) else (sig.din, sig.dout)
        nnz, b, _ = _shape(blocks.type)
        shape = _shape(x.type)
        if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            raise _refusal(owner, self.target, ": a block-sparse operator applies to tensors of static extents only")
        if ir.ShapedType.is_dynamic_size(nnz) and self.element == ir.F64Type.get():
            raise _refusal(owner, self.target, ": an f64 block-sparse operator applies with a static block count "
                                               "only (its products are elementwise products and sums)")
        nr, nc = dout // b, din // b   # b divides both (the descriptor's verifier)
        if transposed:
            rows, cols, nr, nc = cols, rows, nc, nr
        lead, k = shape[:-2], shape[-1]
        cols_k, n_out = prod(lead) * k, nr * b
        out_shape = lead + [n_out, k]
        if nnz == 0:
            return ttensor.BroadcastOp(_const(0.0, self.element),
                                       result=ir.RankedTensorType.get(out_shape, self.element)).result
        accum, el = sig.accum, self.element
        xm = x if not lead else _swap_last(_reshape(_swap_last(x), [cols_k, nc * b]))   # [Din, cols_k]
        xg = self._matmul(self._one_hot(cols, nc), _reshape(xm, [nc, b * cols_k]), accum)   # [nnz, b·cols_k]
        xg = _reshape(xg, [nnz, b, cols_k])
        bl = self.entries(blocks)
        bl = _swap_last(bl) if transposed else bl
        if el == ir.F64Type.get():
            products = ttensor.BinaryOp(_reshape(bl, [nnz, b, b, 1]), _reshape(xg, [nnz, 1, b, cols_k]),
                                        fn=ir.StringAttr.get("mul"),
                                        result=ir.RankedTensorType.get([nnz, b, b, cols_k], el)).result
            p = create(ttensor.ReduceOp, products, kind=ir.StringAttr.get("sum"), axes=_i64s([2]),
                       keepdims=ir.BoolAttr.get(False), result=ir.RankedTensorType.get([nnz, b, cols_k], el)).result
        else:
            p = ttensor.MatmulOp(bl, xg, accum=ir.TypeAttr.get(accum),
                                 result=ir.RankedTensorType.get([nnz, b, cols_k], el)).result
        y = self._matmul(self._one_hot(rows, nr), _reshape(p, [nnz, b * cols_k]), accum, transposed=True)
        y = _reshape(y, [n_out, cols_k])
        return y if not lead else _swap_last(_reshape(_swap_last(y), lead + [k, n_out]))

    def _one_hot(self, index, n: int) -> ir.Value:
        """[nnz, n] of the element type, 1 where index[i] == j (index 1-D i32), else 0: the coordinates and
        0 … n − 1 compared in f32 (exact below 2²⁴). 0 … n − 1 are the row sums of the n×n lower-triangular
        matrix of ones (an im2col of n ones padded by n − 1 zeros, a gather every target has), less 1."""
        key = ("one-hot", index, n, self.element)
        if key in self.memo:
            return self.memo[key]
        f32 = ir.F32Type.get()
        iota_key = ("iota", n)
        if iota_key not in self.memo:
            ones = ttensor.BroadcastOp(_const(1.0, f32), result=ir.RankedTensorType.get([1, 1, n], f32)).result
            lower = convolution.im2col(ones, [n], _i64s([1]), _i64s([n - 1, 0]), _i64s([1]),
                                       ir.RankedTensorType.get([n, n], f32))
            self.memo[iota_key] = _reshape(_bin("sub", _reduce("sum", lower, keepdims=False), _const(1.0, f32)),
                                           [1, n])
        nnz = _shape(index.type)[0]
        at = _reshape(_to(index, f32), [nnz, 1])
        hit = ttensor.BinaryOp(at, self.memo[iota_key], fn=ir.StringAttr.get("eq"),
                               result=ir.RankedTensorType.get([nnz, n], ir.IntegerType.get_signless(1))).result
        out = ttensor.SelectOp(hit, _const(1.0, self.element), _const(0.0, self.element),
                               result=ir.RankedTensorType.get([nnz, n], self.element)).result
        self.memo[key] = out
        return out

    # -- factorizations (passes/linalg_kernels.py) ---------------------------------------------------------

    def _spectral_function(self, owner, x, adjoint: bool):
        """reconstruct(S) x = U (s ⊙ (V* x)), pseudoinverse x = V (g ⊙ (U* x)) with g = 1/s where |s| >
        rcond·max|s| (of the kept terms), else 0: three thin products, never the m×n matrix; the adjoints swap
        the factors. A pseudoinverse of an operator factorizes it (svd) first."""
        operand = owner.operands[0]
        if isinstance(operand.type, tod.SpectralType):
            u, s, v = self.factor(owner, operand)
        else:
            u, s, v = self.factor(owner, operand, kind="svd")
        u, s, v = (_to(t, self.element) for t in (u, s, v))
        if owner.operation.name == "tod.pseudoinverse":
            key = ("inverted", owner.results[0])
            if key not in self.memo:
                rcond = ir.FloatAttr(owner.attributes["rcond"]).value
                mag = ttensor.UnaryOp(s, fn=ir.StringAttr.get("abs"), result=s.type).result
                top = create(ttensor.ReduceOp, mag, kind=ir.StringAttr.get("max"), axes=_i64s([0]),
                             keepdims=ir.BoolAttr.get(False), result=ir.RankedTensorType.get([], self.element)).result
                # |s|/max|s| > rcond: the interpreter's |s| > rcond·max|s| up to one rounding at the cut, and an
                # all-zero s drops every term in both (NaN > rcond and 0 > 0 are False). The ratio dates from when
                # a comparison kernel read f64 values as f32 (kernelgen.elementwise, fixed in a2d8a55); both
                # forms compare in the element type now, the ratio is kept because it is right and tested
                keep = ttensor.BinaryOp(_bin("div", mag, top), _const(rcond, self.element), fn=ir.StringAttr.get("gt"),
                                        result=ir.RankedTensorType.get(_shape(s.type),
                                                                       ir.IntegerType.get_signless(1))).result
                inv = ttensor.BinaryOp(_const(1.0, self.element), s, fn=ir.StringAttr.get("div"), result=s.type).result
                self.memo[key] = ttensor.SelectOp(keep, inv, _const(0.0, self.element), result=s.type).result
            s, u, v = self.memo[key], v, u
        left, right = (v, u) if adjoint else (u, v)
        accum = tod.operator_sig(owner.results[0].type).accum
        inner = _map(lambda p: self._matmul(right, p, accum, transposed=True), x)
        return _map(lambda p: self._matmul(left, p, accum), _product(inner, _column(s)))

    def factor(self, owner, value, kind: str | None = None):
        """(U [m, k], s [k], V [n, k]) in the working type of factorization `value` (a tod.spectral, or a
        truncation of one), or, with `kind`, of operator `value` itself; made once per function."""
        key = ("factor", value, kind)
        if key in self.memo:
            return self.memo[key]
        if kind is None:
            source = value.owner
            if source.operation.name == "tod.truncate":
                u, s, v = self.factor(owner, source.operands[0])
                k = ir.IntegerAttr(source.attributes["k"]).value
                cut = lambda t: linalg_kernels.slice2d(t, 0, 0, _shape(t.type)[0], k)   # noqa: E731
                out = (cut(u), _reshape(linalg_kernels.slice2d(_reshape(s, [1, _shape(s.type)[0]]), 0, 0, 1, k),
                                        [k]), cut(v))
            elif source.operation.name == "tod.spectral":
                out = self.factor(source, source.operands[0], kind=tod.spectral_sig(value.type).kind)
            else:
                raise _refusal(source, self.target)
        else:
            out = self._factorize(owner, value, kind)
        self.memo[key] = out
        return out

    def _checked_matrix(self, owner, value, what: str) -> ir.Value:
        """Operator `value`'s [Dout, Din] matrix in the working type, for `what` (a refusal's words)."""
        sig = tod.operator_sig(value.type)
        if tod.is_complex(sig.elem):
            raise _refusal(owner, self.target, f": {what} of the complex operator of {sig.elem} entries is not "
                                               "lowered yet")
        if sig.din is None or sig.dout is None:
            raise _refusal(owner, self.target, f": {what} of an operator of extents known only at run time")
        work = matrix_functions.working_type(self.element)
        m = self.act(value, self.identity(sig.din, self.element), adjoint=False)
        if isinstance(m, Pair):
            raise _refusal(owner, self.target, f": {what} of a complex operator is not lowered yet")
        return _to(m, work)

    def _factorize(self, owner, value, kind: str):
        sig = tod.operator_sig(value.type)
        if kind == "eig":
            raise _refusal(owner, self.target, ": the general eigendecomposition (kind=\"eig\") has complex "
                                               "factors, which compile only as svd or eigh (self-adjoint) ones")
        what = "an svd" if kind == "svd" else "an eigh"
        small, large = min(sig.din or 0, sig.dout or 0), max(sig.din or 0, sig.dout or 0)
        if small > linalg_kernels.MAX_SMALL or (kind == "svd" and large > linalg_kernels.MAX_LARGE):
            limit = (f"{linalg_kernels.MAX_SMALL} (the smaller extent) and {linalg_kernels.MAX_LARGE} (the larger)"
                     if kind == "svd" else f"{linalg_kernels.MAX_SMALL}×{linalg_kernels.MAX_SMALL}")
            raise _refusal(owner, self.target, f": {what} of a {sig.dout}×{sig.din} operator is larger than the "
                                               f"one-thread Jacobi kernel takes, at most {limit}")
        a = self._checked_matrix(owner, value, what)
        m, n = sig.dout, sig.din
        if kind == "eigh":
            packed = linalg_kernels.linalg("eigh", a)
            u = linalg_kernels.slice2d(packed, 0, 0, n, n)
            s = _reshape(linalg_kernels.slice2d(packed, 2 * n, 0, 1, n), [n])
            return u, s, u
        transposed = m < n
        rows, cols = (n, m) if transposed else (m, n)
        packed = linalg_kernels.linalg("svd", _swap_last(a) if transposed else a, transposed=transposed)
        first = linalg_kernels.slice2d(packed, 0, 0, rows, cols)
        second = linalg_kernels.slice2d(packed, rows, 0, cols, cols)
        s = _reshape(linalg_kernels.slice2d(packed, rows + cols, 0, 1, cols), [cols])
        return (second, s, first) if transposed else (first, s, second)

    def query(self, op) -> ir.Value:
        """tod.norm (σ₁ of the svd) or tod.spectral_radius of op's operator, a 0-d tensor of op's type."""
        result = ir.RankedTensorType(op.results[0].type)
        if op.operation.name == "tod.norm":
            _, s, _ = self.factor(op, op.operands[0], kind="svd")
            first = linalg_kernels.slice2d(_reshape(s, [1, _shape(s.type)[0]]), 0, 0, 1, 1)
            return _to(_reshape(first, []), result.element_type)
        sig = tod.operator_sig(op.operands[0].type)
        if (sig.din or 0) > linalg_kernels.MAX_SMALL:
            raise _refusal(op, self.target, f": the spectral radius of a {sig.din}×{sig.din} operator is larger "
                                            f"than its one-thread kernel takes, at most {linalg_kernels.MAX_SMALL}"
                                            f"×{linalg_kernels.MAX_SMALL}")
        a = self._checked_matrix(op, op.operands[0], "the spectral radius")
        n = sig.din
        packed = linalg_kernels.linalg("spectral_radius", a)
        return _to(_reshape(linalg_kernels.slice2d(packed, 2 * n, 0, 1, 1), []), result.element_type)

    def _dft(self, owner, x, inverse: bool):
        """F x (F* x where `inverse`) for the unitary DFT F of size n: for a power of two n ≥ 2 and static
        extents, Stockham FFT stages (passes/fft.py); other n from fft.BLUESTEIN_MIN up to fft.MAX_BLUESTEIN,
        Bluestein's chirp-z on those stages (passes/fft.py); else GEMMs with the twiddle matrices C and S of F = C − iS
        (passes/fourier.py), made once per function."""
        n = tod.operator_sig(owner.results[0].type).din
        if not isinstance(self.element, (ir.F32Type, ir.F64Type)):
            raise _refusal(owner, self.target, f": Fourier transforms compute in f32 or f64, not {self.element}")
        if fft.applies(n, x):
            return fft.transform(x, n, inverse)
        if fft.bluestein_applies(n, x):
            return fft.bluestein(x, n, inverse, self.memo)
        if n > fourier.MAX_DFT:
            raise _refusal(owner, self.target, f": a Fourier transform of size {n} is larger than the "
                                               f"{fourier.MAX_DFT} its DFT as GEMMs takes (the FFT takes powers "
                                               f"of two, Bluestein's other sizes up to {fft.MAX_BLUESTEIN}, both "
                                               f"of tensors of static extents with at most {fft.MAX_ELEMENTS} "
                                               f"entries once padded)")
        c, s = (self._twiddle(n, part) for part in ("cos", "sin"))
        mul = lambda a: lambda p: self._matmul(a, p, self.element)   # noqa: E731   (C, S symmetric)
        return _linear(mul(c), mul(s), x, conj=not inverse)

    def _expm(self, owner, x, adjoint: bool):
        """exp(A) x (exp(A)ᵀ x where `adjoint`): exp(A) formed once per function (passes/matrix_functions.py)
        and multiplied."""
        key = ("expm", owner.results[0])
        if key not in self.memo:
            functions = self.functions(owner, owner.operands[0])
            self.memo[key] = _to(functions.expm(self.matrix(owner, owner.operands[0])), self.element)
        m, accum = self.memo[key], tod.operator_sig(owner.results[0].type).accum
        return _map(lambda p: self._matmul(m, p, accum, transposed=adjoint), x)

    def functions(self, owner, value) -> matrix_functions.Functions:
        """The matrix functions of operator `value` (of `owner`, where a refusal points): real, square, of
        static extents at most matrix_functions.MAX_N."""
        sig = tod.operator_sig(value.type)
        if tod.is_complex(sig.elem):
            raise _refusal(owner, self.target, f" for the complex operator of {sig.elem} entries")
        if sig.din is None:
            raise _refusal(owner, self.target, " for an operator of extents known only at run time")
        work = matrix_functions.working_type(self.element)
        most = matrix_functions.MAX_N[str(work)]
        if sig.din > most:
            raise _refusal(owner, self.target, f" for a {sig.din}×{sig.din} operator: its matrix functions "
                                               f"compute in {work}, up to {most}×{most}")
        mm = lambda a, b: self._matmul(a, b, work)   # noqa: E731
        return matrix_functions.Functions(mm, self.identity(sig.din, work))

    def matrix(self, owner, value) -> ir.Value:
        """Operator `value`'s n×n matrix in the working type: its action on the identity."""
        n = tod.operator_sig(value.type).din
        m = self.act(value, self.identity(n, self.element), adjoint=False)
        if isinstance(m, Pair):
            raise _refusal(owner, self.target, " for a complex operator")
        return _to(m, matrix_functions.working_type(self.element))

    def identity(self, n: int, element: ir.Type) -> ir.Value:
        key = ("identity", n, element)
        if key not in self.memo:
            self.memo[key] = matrix_functions.identity(n, element)
            self.memo[("is identity", self.memo[key])] = True
        return self.memo[key]

    def _twiddle(self, n: int, part: str) -> ir.Value:
        key = ("twiddle", n, part, self.element)
        if key not in self.memo:   # at this apply, so it comes before every later apply that reads it
            self.memo[key] = fourier.twiddle(n, part, self.element)
        return self.memo[key]

    def _circulant(self, owner, h, x, adjoint: bool) -> ir.Value:
        """conv1d(h) x, (h ⊛ x)[i] = Σ_{j<m} h[j] x[(i − j) mod n], for each column of X [..., n, k]: the
        columns as a batch of one-channel signals [B, 1, n], their circular windows as an im2col (padding m − 1
        wrapped around, taps flipped, so column j holds x[(i − j) mod n]; the adjoint's, x[(i + j) mod n], are
        neither), times h broadcast along the rows, summed over the taps: a gather, an elementwise product and
        a row sum, no n×n matrix, on every target and dtype."""
        shape = _shape(x.type)
        if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            raise _refusal(owner, self.target, ": a circulant applies to tensors of static extents only")
        lead, n, k = shape[:-2], shape[-2], shape[-1]
        m, b = _shape(h.type)[0], prod(lead) * k
        signals = _reshape(_swap_last(x), [b, 1, n])
        cols = convolution.im2col(signals, [m], _i64s([1]), _i64s([0, m - 1] if adjoint else [m - 1, 0]),
                                  _i64s([1]), ir.RankedTensorType.get([b * n, m], self.element), circular=True,
                                  flip=not adjoint)
        y = _reduce("sum", _bin("mul", cols, h), keepdims=False)
        return _swap_last(_reshape(y, lead + [k, n]))

    def _matmul(self, a, b, accum: ir.Type, transposed: bool = False) -> ir.Value:
        """a @ b (aᵀ @ b when `transposed`), `a` a matrix, `b` [..., n, k], both of b's element type. A stack is
        multiplied as (a Xᵢ)ᵀ = Xᵢᵀ aᵀ with the stack folded into the rows of one 2-D GEMM (every target's
        GEMM takes that; a batched one would need a copy of `a` per matrix). In f64, which not every target's
        GEMM takes (the CPU's and PTX's do not), products and sums (`_product_sums`). b the identity (an
        operator's matrix being formed): a itself."""
        element = _elt(b)
        if self.memo.get(("is identity", b)):
            return _swap_last(a) if transposed else a
        shape = _shape(b.type)
        m = _shape(a.type)[-1 if transposed else -2]
        if element == ir.F64Type.get():
            return self._product_sums(_swap_last(a) if transposed else a, b)
        if len(shape) == 2:
            return ttensor.MatmulOp(_swap_last(a) if transposed else a, b, accum=ir.TypeAttr.get(accum),
                                    result=ir.RankedTensorType.get([m, shape[1]], element)).result
        lead, n, k = shape[:-2], shape[-2], shape[-1]
        if any(ir.ShapedType.is_dynamic_size(d) for d in lead + [k]):
            shown = ", ".join("?" if ir.ShapedType.is_dynamic_size(d) else str(d) for d in shape)
            raise LoweringError(self.at, f"a stack of column vectors [{shown}] with extents known only at run time "
                                         f"cannot be lowered on {self.target} yet; give its batch and column "
                                         "extents statically")
        rows = _reshape(_swap_last(b), [prod(lead) * k, n])
        out = ttensor.MatmulOp(rows, a if transposed else _swap_last(a), accum=ir.TypeAttr.get(accum),
                               result=ir.RankedTensorType.get([prod(lead) * k, m], element)).result
        return _swap_last(_reshape(out, lead + [k, m]))

    def _product_sums(self, a, x) -> ir.Value:
        """a @ x in f64 for a [m, n] and x [..., n, k]: a [m, n, 1] times x [..., 1, n, k] (views), summed over
        n: an elementwise kernel and a reduction, no GEMM; O(m·n·k) memory, as the work."""
        shape = _shape(x.type)
        if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            raise LoweringError(self.at, f"an f64 operator product with extents known only at run time cannot be "
                                         f"lowered on {self.target} yet")
        lead, n, k = shape[:-2], shape[-2], shape[-1]
        m = _shape(a.type)[-2]
        products = ttensor.BinaryOp(_reshape(a, [m, n, 1]), _reshape(x, lead + [1, n, k]), fn=ir.StringAttr.get("mul"),
                                    result=ir.RankedTensorType.get(lead + [m, n, k], _elt(x))).result
        return create(ttensor.ReduceOp, products, kind=ir.StringAttr.get("sum"), axes=_i64s([len(lead) + 1]),
                      keepdims=ir.BoolAttr.get(False), result=ir.RankedTensorType.get(lead + [m, k], _elt(x))).result

    def _kronecker(self, owner, x, adjoint: bool) -> ir.Value:
        """(A ⊗ B) x = vec(A X Bᵀ) for each column x of X (X its Din_A×Din_B matrix): B applied to Xᵀ, then A
        to the transpose of that, each one GEMM over all columns at once (a batch of them for several
        columns). The CPU transposes the last two axes only, so each column's matrix is moved there first."""
        a, b = (tod.operator_sig(v.type) for v in owner.operands)
        (a_in, a_out), (b_in, b_out) = ((s.dout, s.din) if adjoint else (s.din, s.dout) for s in (a, b))
        shape = _shape((x.re if isinstance(x, Pair) else x).type)
        lead, k = shape[:-2], shape[-1]
        if None in (a_in, a_out, b_in, b_out) or any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            raise _refusal(owner, self.target, ": a Kronecker product lowers with static extents only")
        batch = lead + ([k] if k != 1 else [])          # one matrix X per column
        rows = _map(lambda p: _reshape(p, lead + [1, a_in * b_in]) if k == 1 else _swap_last(p), x)
        xt = _map(lambda p: _swap_last(_reshape(p, batch + [a_in, b_in])), rows)      # Xᵀ: [.., b_in, a_in]
        y = _map(_swap_last, self.act(owner.operands[1], xt, adjoint))            # X Bᵀ: [.., a_in, b_out]
        z = _map(lambda p: _reshape(p, batch + [a_out * b_out]), self.act(owner.operands[0], y, adjoint))
        if k == 1:
            return _map(lambda p: _reshape(p, lead + [a_out * b_out, 1]), z)
        return _map(_swap_last, z)
