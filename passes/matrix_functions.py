"""Matrix functions as GEMMs and elementwise ops, on every target: exp(A) and its Fréchet derivative L(A, E) of
an n×n matrix (passes/tod_lower.py forms an operator's matrix and calls these).

The input decides how much work exp(A) needs (how far to scale, how many squarings), but the Graph IR has no
control flow: every op here runs, and the data-dependent choices are elementwise selects.

exp(A): scaling and squaring with the Taylor polynomial T_m (Al-Mohy & Higham, SIAM J. Sci. Comput. 33(2),
2011, §3). With h(x) = log(e⁻ˣ T_m(x)) = Σ_{k>m} c_k xᵏ, T_m(X) = exp(X + ΔX) where ‖ΔX‖ ≤ Σ|c_k| ‖X‖ᵏ, so
for ‖X‖₁ ≤ θ_m (the largest θ with Σ_{k>m} |c_k| θ^(k−1) ≤ u) the backward error of T_m is at most u, the
unit roundoff. The derivative's bound is Σ k |c_k| θ^(k−1) ≤ u (T_m's Fréchet derivative is exp's at X + ΔX
in the direction E + L_h(X, E)), a smaller θ. The θ below were computed in 60-digit arithmetic from 400
coefficients (mpmath); the f64 one is the published θ_30 = 3.54.

    f64: m = 30, θ = 3.5396663487436893 (derivative 3.1833560184777376), u = 2⁻⁵³
    f32: m = 16, θ = 2.4782808775219714 (derivative 2.1075918544313559), u = 2⁻²⁴

s = max(0, ⌈log₂(‖A‖₁ / θ)⌉) is counted by comparisons, k ≤ s ⇔ ‖A‖₁ > θ·2^(k−1) (exact: no log, no
rounding), so X = 2⁻ˢ A exactly; T_m(X) is Paterson–Stockmeyer's evaluation (blocks of p powers: 9 products
for m = 30, 6 for m = 16); then S_MAX conditional squarings R ← (k ≤ s ? R·R : R), all computed, one
selected. S_MAX = 8: ‖A‖₁ up to θ·2⁸ (906 in f64, 634 in f32); beyond, the result is NaN (every entry), as it
is where A holds a NaN or an infinity, so a larger A is never silently wrong; it runs with tessera.interpret.
S_MAX is small because each squaring is products in the graph that every call runs and the compiler plans
one by one (S_MAX = 53, where exp's condition number ‖A‖ reaches 1/u in f64, made a 16×16 gradient's plan
take minutes to compile).

L(A, E) = d/dt exp(A + tE) at t = 0, by the same recurrences differentiated (Al-Mohy & Higham, SIAM J. Matrix
Anal. Appl. 30(4), 2009): the powers' derivatives by the product rule, and each squaring
(R, L) ← (R², R L + L R). About three times the products of exp(A).
"""

from __future__ import annotations

from math import factorial

from ..dialects import ttensor
from ..dialects.support import create
from ..mlir import ir
from . import convolution
from .decompose import _bin, _const, _elt, _i64, _shape

# element type -> (Taylor degree m, Paterson–Stockmeyer block p, θ_m, the derivative's θ_m, S_MAX)
TAYLOR = {"f64": (30, 5, 3.5396663487436893, 3.1833560184777376, 8),
          "f32": (16, 4, 2.4782808775219714, 2.1075918544313559, 8)}
MAX_N = {"f64": 256, "f32": 4096}    # products: f64 ones as products and row sums (n³ entries), f32 GEMMs


def working_type(element: ir.Type) -> ir.Type:
    """The type a matrix function of `element` entries computes in: f64 for f64, else f32."""
    return element if element == ir.F64Type.get() else ir.F32Type.get()


def identity(n: int, element: ir.Type) -> ir.Value:
    """The n×n identity: the im2col of a one-element signal 1 padded by n − 1 zeros on each side, taps
    flipped (row i, column j reads x[i − j]), a gather kernel every target has."""
    one = ttensor.BroadcastOp(_const(1.0, element), result=ir.RankedTensorType.get([1, 1, 1], element)).result
    ints = lambda vals: ir.ArrayAttr.get([_i64(v) for v in vals])   # noqa: E731
    return convolution.im2col(one, [n], ints([1]), ints([n - 1, n - 1]), ints([1]),
                              ir.RankedTensorType.get([n, n], element), flip=True)


class Functions:
    """Matrix functions of n×n matrices at the insertion point: `mm(a, b)` multiplies two of them, `eye` is the
    identity, all of the working type (f32 or f64)."""

    def __init__(self, mm, eye: ir.Value):
        self.mm, self.eye = mm, eye
        self.element = _elt(eye)
        self.dt = str(self.element)

    def expm(self, a: ir.Value) -> ir.Value:
        return self._exp(a, None)[0]

    def expm_frechet(self, a: ir.Value, e: ir.Value) -> ir.Value:
        return self._exp(a, e)[1]

    def _exp(self, a, e):
        """(exp(a), None) where `e` is None, else (None, L(a, e))."""
        m, p, theta, theta_d, s_max = TAYLOR[self.dt]
        theta = theta if e is None else theta_d
        norm = self._reduce_all("max", self._column_sums(self._un("abs", a)))
        # k ≤ s for k = 1 … S_MAX, and 2⁻ˢ
        steps = [self._compare("gt", norm, self._c(theta * 2.0 ** (k - 1))) for k in range(1, s_max + 1)]
        scale = self._c(1.0)
        for step in steps:
            scale = _bin("mul", scale, self._select(step, self._c(0.5), self._c(1.0)))
        x = _bin("mul", a, scale)
        dx = None if e is None else _bin("mul", e, scale)
        r, dr = self._taylor(x, dx, m, p)
        for k, step in enumerate(steps, 1):
            if dr is not None:
                dr = self._select(step, self._add(self.mm(r, dr), self.mm(dr, r)), dr)
                if k == s_max:   # the last R² only exp(A) needs
                    break
            r = self._select(step, self.mm(r, r), r)
        beyond = self._compare("le", norm, self._c(theta * 2.0 ** s_max))   # NaN compares false too
        nan = self._c(float("nan"))
        if dr is None:
            return self._select(beyond, r, nan), None
        return None, self._select(beyond, dr, nan)

    def _taylor(self, x, dx, m: int, p: int):
        """(T_m(x), its derivative in the direction dx or None) by Paterson–Stockmeyer: with P = x^p and blocks
        B_i = Σ_{j<p} x^j / (ip + j)!, T_m = B_0 + P(B_1 + P(… + P(B_{q−1} + P/m!))) for m = pq."""
        q = m // p
        powers, dpowers = [self.eye, x], [None, dx]
        for _ in range(2, p + 1):
            if dx is not None:   # d(x^{j−1} x) = d(x^{j−1}) x + x^{j−1} dx
                dpowers.append(self._add(self.mm(dpowers[-1], x), self.mm(powers[-1], dx)))
            powers.append(self.mm(powers[-1], x))
        block = lambda i, ps: self._sum(ps, [1.0 / factorial(i * p + j) for j in range(p)])   # noqa: E731
        y = self._add(self._scaled(powers[p], 1.0 / factorial(m)), block(q - 1, powers))
        dy = None if dx is None else self._add(self._scaled(dpowers[p], 1.0 / factorial(m)), block(q - 1, dpowers))
        for i in range(q - 2, -1, -1):
            if dx is not None:
                dy = self._add(self._add(self.mm(dpowers[p], y), self.mm(powers[p], dy)), block(i, dpowers))
            y = self._add(self.mm(powers[p], y), block(i, powers))
        return y, dy

    def _sum(self, values, coefficients):
        """Σ c_j values[j] over the values that are not None (a derivative's dx⁰ = 0)."""
        out = None
        for v, c in zip(values, coefficients):
            if v is not None:
                term = self._scaled(v, c)
                out = term if out is None else self._add(out, term)
        return out

    def _column_sums(self, a) -> ir.Value:
        n = _shape(a.type)[0]
        return create(ttensor.ReduceOp, a, kind=ir.StringAttr.get("sum"), axes=ir.ArrayAttr.get([_i64(0)]),
                      keepdims=ir.BoolAttr.get(False), result=ir.RankedTensorType.get([n], self.element)).result

    def _reduce_all(self, kind: str, a) -> ir.Value:
        rank = len(_shape(a.type))
        return create(ttensor.ReduceOp, a, kind=ir.StringAttr.get(kind),
                      axes=ir.ArrayAttr.get([_i64(i) for i in range(rank)]), keepdims=ir.BoolAttr.get(False),
                      result=ir.RankedTensorType.get([], self.element)).result

    def _c(self, value: float) -> ir.Value:
        return _const(value, self.element)

    def _un(self, fn: str, x) -> ir.Value:
        return ttensor.UnaryOp(x, fn=ir.StringAttr.get(fn), result=x.type).result

    def _add(self, a, b) -> ir.Value:
        return _bin("add", a, b)

    def _scaled(self, a, c: float) -> ir.Value:
        return _bin("mul", a, self._c(c))

    def _compare(self, fn: str, a, b) -> ir.Value:
        return ttensor.BinaryOp(a, b, fn=ir.StringAttr.get(fn),
                                result=ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))).result

    def _select(self, cond, a, b) -> ir.Value:
        t = a.type if len(_shape(a.type)) >= len(_shape(b.type)) else b.type
        return ttensor.SelectOp(cond, a, b, result=t).result


def erase_identity(eye: ir.Value) -> None:
    """Erases an unused `identity(n, …)` and the ops it alone reads."""
    op = eye.owner
    while op is not None and all(not list(r.uses) for r in op.results):
        operands = list(op.operands)
        op.operation.erase()
        op = operands[0].owner if operands and isinstance(operands[0].owner, ir.OpView) else None
