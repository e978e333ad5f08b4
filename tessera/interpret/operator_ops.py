"""Reference semantics of the ``tod`` operator algebra.

An operator is materialized as its dense Dout×Din matrix (float64, or complex128 for complex entries) holding
values of its element type: like every interpreter op, each tod op computes in double precision and rounds
once to its result's entry type — products (compose, apply, kronecker) first to the accumulation type.

Conventions, so that results are reproducible:

- fft is the unitary DFT, F[j, k] = exp(−2πi·jk/n)/√n (numpy's ``norm="ortho"``); ifft is its adjoint.
- conv1d(h) of size n is the circulant matrix C[i, j] = h[(i − j) mod n] (h zero-padded to n).
- projector(U) is U U*, made exactly self-adjoint; U's columns must be orthonormal within the promise
  tolerance below, or the op fails.
- expm is Padé-13 scaling and squaring (Higham, SIAM J. Matrix Anal. Appl. 26(4), 2005).
- spectral: "svd" is numpy's (LAPACK's) SVD with singular values descending; "eigh" is the Hermitian solver
  (the operand must be self-adjoint within the promise tolerance); "eig" the general one, with V* = U⁻¹.
  Eigenvalues are ordered by descending magnitude, then descending real part, then descending imaginary
  part (so a conjugate pair lists +i first), and truncate keeps the first k terms. Every column of U is
  scaled to unit norm and rotated so that its largest entry (the first, on ties) is real and positive; V's
  columns get the same rotation, which leaves U diag(S) V* unchanged.
- is_unitary compares the largest entry of |A*A − I| with the op's `tol`.
- The promise tolerance (projector, eigh) is √ε of the entries' real type, times the operand's largest entry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dialects import tod
from .. import dtypes
from ..mlir import ir
from ..numerics.rounding import epsilon, round_to
from .registry import local
from .values import cast


@dataclass
class Spectral:
    """A factorization A = U diag(S) V* (U: Dout×r, S: r, V: Din×r)."""

    U: np.ndarray
    S: np.ndarray
    V: np.ndarray

    def matrix(self) -> np.ndarray:
        return (self.U * self.S) @ self.V.conj().T


# -- rounding ---------------------------------------------------------------------------------------------

def _round_parts(x: np.ndarray, t: ir.Type) -> np.ndarray:
    """`x` with real and imaginary parts rounded to the float type `t` (the component type)."""
    name = dtypes.of_ir_type(t).name
    if not np.iscomplexobj(x):
        return round_to(x, name)
    out = np.empty(x.shape, np.complex128)
    out.real, out.imag = round_to(x.real, name), round_to(x.imag, name)
    return out


def _entries(x: np.ndarray, t: ir.Type) -> np.ndarray:
    """`x` rounded to entries of type `t` (a float or complex<float>)."""
    return cast(x, dtypes.of_ir_type(t))


def _operator(op, x: np.ndarray, accumulated: bool = False) -> np.ndarray:
    """The op's operator result: `x` rounded (to the accumulation type first, for sums of products)."""
    sig = tod.operator_sig(op.results[0].type)
    if accumulated:
        x = _round_parts(x, sig.accum)
    return _entries(x, sig.elem)


def _tensor(op, x: np.ndarray, accum: ir.Type | None = None) -> np.ndarray:
    if accum is not None:
        x = _round_parts(x, accum)
    return cast(x, dtypes.of_ir_type(ir.ShapedType(op.results[0].type).element_type))


def _spectral(op, s: Spectral) -> Spectral:
    sig = tod.spectral_sig(op.results[0].type)
    values = sig.elem if sig.kind == "eig" else tod.component(sig.elem)
    return Spectral(_entries(s.U, sig.elem), _entries(s.S, values), _entries(s.V, sig.elem))


def _extents(op) -> tuple[int, int]:
    sig = tod.operator_sig(op.results[0].type)
    return sig.dout, sig.din


def _promise_tolerance(t: ir.Type, scale: float) -> float:
    """How far a promised property (orthonormal columns, self-adjointness) may miss: √ε of the entries' real
    type, relative to the operand's largest entry (or 1)."""
    return np.sqrt(epsilon(dtypes.of_ir_type(tod.component(t)).name)) * max(1.0, scale)


def _largest(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) if x.size else 0.0


# -- constructors -----------------------------------------------------------------------------------------

@local("tod.eye")
def eye(op, ins):
    dout, din = _extents(op)
    return [_operator(op, np.eye(dout, din))]


@local("tod.zero")
def zero(op, ins):
    return [_operator(op, np.zeros(_extents(op)))]


@local("tod.dense")
def dense(op, ins):
    return [_operator(op, ins[0])]


@local("tod.diag")
def diag(op, ins):
    return [_operator(op, np.diag(ins[0]))]


@local("tod.projector")
def projector(op, ins):
    (u,) = ins
    gram = u.conj().T @ u
    err = _largest(gram - np.eye(gram.shape[0]))
    tol = _promise_tolerance(ir.ShapedType(op.operands[0].type).element_type, 1.0)
    if err > tol:
        raise ValueError(f"the basis columns are not orthonormal: max |U*U - I| = {err:.3g} > {tol:.3g}")
    p = u @ u.conj().T
    return [_operator(op, (p + p.conj().T) / 2)]


def _dft(n: int, sign: int) -> np.ndarray:
    jk = np.outer(np.arange(n), np.arange(n)) % n  # reduced first: the angle stays exact for large n
    return np.exp(sign * 2j * np.pi * jk / n) / np.sqrt(n)


@local("tod.fft")
def fft(op, ins):
    return [_operator(op, _dft(_extents(op)[0], -1))]


@local("tod.ifft")
def ifft(op, ins):
    return [_operator(op, _dft(_extents(op)[0], +1))]


@local("tod.conv1d")
def conv1d(op, ins):
    (h,) = ins
    n = _extents(op)[0]
    padded = np.zeros(n, dtype=h.dtype)
    padded[:h.shape[0]] = h
    i = np.arange(n)
    return [_operator(op, padded[(i[:, None] - i[None, :]) % n])]


@local("tod.kronecker", "tod.tensor")
def kronecker(op, ins):
    return [_operator(op, np.kron(*ins), accumulated=True)]


@local("tod.direct_sum")
def direct_sum(op, ins):
    a, b = ins
    out = np.zeros((a.shape[0] + b.shape[0], a.shape[1] + b.shape[1]), dtype=np.result_type(a, b))
    out[:a.shape[0], :a.shape[1]] = a
    out[a.shape[0]:, a.shape[1]:] = b
    return [_operator(op, out)]


# -- algebra ----------------------------------------------------------------------------------------------

@local("tod.compose")
def compose(op, ins):
    a, b = ins
    return [_operator(op, a @ b, accumulated=True)]


@local("tod.adjoint")
def adjoint(op, ins):
    return [_operator(op, ins[0].conj().T)]


@local("tod.plus")
def plus(op, ins):
    return [_operator(op, ins[0] + ins[1])]


@local("tod.scale")
def scale(op, ins):
    s, a = ins
    return [_operator(op, s * a)]


@local("tod.power")
def power(op, ins):
    return [_operator(op, np.linalg.matrix_power(ins[0], ir.IntegerAttr(op.attributes["exponent"]).value),
                      accumulated=True)]


@local("tod.commutator")
def commutator(op, ins):
    a, b = ins
    return [_operator(op, a @ b - b @ a, accumulated=True)]


@local("tod.sym")
def sym(op, ins):
    a = ins[0]
    return [_operator(op, (a + a.conj().T) / 2)]


@local("tod.skew")
def skew(op, ins):
    a = ins[0]
    return [_operator(op, (a - a.conj().T) / 2)]


# Padé-13 coefficients and the 1-norm up to which it is accurate to double precision without scaling
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0,
           960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def expm(a: np.ndarray) -> np.ndarray:
    """exp(a) by scaling and squaring with the [13/13] Padé approximant."""
    norm = np.linalg.norm(a, 1)
    s = max(0, int(np.ceil(np.log2(norm / _THETA13)))) if norm > 0 else 0
    a = a / 2.0 ** s
    b = _PADE13
    ident = np.eye(a.shape[0], dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


@local("tod.expm")
def expm_(op, ins):
    return [_operator(op, expm(ins[0]))]


@local("tod.resolvent")
def resolvent(op, ins):
    a, z = ins
    n = a.shape[0]
    shifted = z * np.eye(n) - a
    if np.linalg.cond(shifted) * np.finfo(np.float64).eps >= 1.0:
        raise ValueError(f"z = {complex(z) if np.iscomplexobj(z) else float(z)} is an eigenvalue of the operator: "
                         "zI - A is singular")
    return [_operator(op, np.linalg.solve(shifted, np.eye(n)))]


@local("tod.apply")
def apply(op, ins):
    a, x = ins
    accum = tod.operator_sig(op.operands[0].type).accum
    return [_tensor(op, np.matmul(a, x), accum)]


# -- spectral ---------------------------------------------------------------------------------------------

def _phase_normalized(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotates each column pair so that u's largest entry (the first, on ties) is real and positive."""
    u, v = u.astype(np.result_type(u, v), copy=True), v.astype(np.result_type(u, v), copy=True)
    for i in range(u.shape[1]):
        p = int(np.argmax(np.abs(u[:, i])))
        if u[p, i] != 0:
            phase = u[p, i] / abs(u[p, i])
            u[:, i] /= phase
            v[:, i] /= phase
    return u, v


def _eigen_order(w: np.ndarray) -> np.ndarray:
    """Descending |w|, then descending real part, then descending imaginary part."""
    w = np.asarray(w, dtype=np.complex128)
    return np.lexsort((-w.imag, -w.real, -np.abs(w)))


def _check_self_adjoint(a: np.ndarray, elem: ir.Type) -> None:
    err, tol = _largest(a - a.conj().T), _promise_tolerance(elem, _largest(a))
    if err > tol:
        raise ValueError(f"eigh needs a self-adjoint operator: max |A - A*| = {err:.3g} > {tol:.3g}")


def decompose(a: np.ndarray, kind: str, elem: ir.Type) -> Spectral:
    """The factorization of kind `kind` of the matrix `a`, with the conventions of this module."""
    if kind == "svd":
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        u, v = _phase_normalized(u, vh.conj().T)
        return Spectral(u, s, v)
    if kind == "eigh":
        _check_self_adjoint(a, elem)
        w, u = np.linalg.eigh((a + a.conj().T) / 2)
        order = _eigen_order(w)
        w, u = w[order], u[:, order]
        u, _ = _phase_normalized(u, u)
        return Spectral(u, w, u)
    w, u = np.linalg.eig(a)
    order = _eigen_order(w)
    w, u = w[order].astype(np.complex128), u[:, order].astype(np.complex128)
    u = u / np.linalg.norm(u, axis=0)
    u, _ = _phase_normalized(u, u)
    return Spectral(u, w, np.linalg.inv(u).conj().T)


@local("tod.spectral")
def spectral(op, ins):
    sig = tod.spectral_sig(op.results[0].type)
    return [_spectral(op, decompose(ins[0], sig.kind, tod.operator_sig(op.operands[0].type).elem))]


@local("tod.truncate")
def truncate(op, ins):
    (s,) = ins
    k = ir.IntegerAttr(op.attributes["k"]).value
    return [Spectral(s.U[:, :k], s.S[:k], s.V[:, :k])]


@local("tod.reconstruct")
def reconstruct(op, ins):
    return [_operator(op, ins[0].matrix())]


def _inverted(s: np.ndarray, rcond: float) -> np.ndarray:
    """1/s where |s| > rcond · max|s|, else 0."""
    mag = np.abs(s)
    keep = mag > rcond * (mag.max() if mag.size else 0.0)
    out = np.zeros_like(s)
    out[keep] = 1.0 / s[keep]
    return out


@local("tod.pseudoinverse")
def pseudoinverse(op, ins):
    x = ins[0]
    rcond = ir.FloatAttr(op.attributes["rcond"]).value
    s = x if isinstance(x, Spectral) else decompose(x, "svd", tod.operator_sig(op.operands[0].type).elem)
    return [_operator(op, (s.V * _inverted(s.S, rcond)) @ s.U.conj().T)]


# -- derivatives (passes/autodiff_operators.py) -----------------------------------------------------------

@local("tod.matrix")
def matrix(op, ins):
    return [_tensor(op, ins[0])]


@local("tod.expm_derivative")
def expm_derivative(op, ins):
    # exp([[A, E], [0, A]]) = [[exp A, L(A, E)], [0, exp A]] (Mathias, SIAM J. Matrix Anal. Appl. 17(3), 1996)
    a, d = ins
    n = a.shape[0]
    block = np.zeros((2 * n, 2 * n), dtype=np.result_type(a, d))
    block[:n, :n] = block[n:, n:] = a
    block[:n, n:] = d
    return [_tensor(op, expm(block)[:n, n:])]


@local("tod.conv1d_cotangent")
def conv1d_cotangent(op, ins):
    c, h = ins
    n, i = c.shape[0], np.arange(c.shape[0])
    return [_tensor(op, np.array([c[i, (i - t) % n].sum() for t in range(h.shape[0])]))]


@local("tod.direct_sum_cotangent")
def direct_sum_cotangent(op, ins):
    c, a, b = ins
    if ir.IntegerAttr(op.attributes["part"]).value == 0:
        return [_tensor(op, c[:a.shape[0], :a.shape[1]])]
    return [_tensor(op, c[a.shape[0]:, a.shape[1]:])]


@local("tod.spectral_radius_gradient")
def spectral_radius_gradient(op, ins):
    # dλᵢ = yᵢ* dA xᵢ (x right, y* = row i of X⁻¹ the left eigenvectors), so dρ = Re(conj(λ)/|λ| · yᵢ* dA xᵢ); a
    # conjugate pair gives the same gradient from either member
    a = ins[0]
    elem = tod.operator_sig(op.operands[0].type).elem
    w, x = np.linalg.eig(a)
    mag = np.abs(w)
    rho = float(mag.max())
    tol = _promise_tolerance(elem, rho)
    top = np.flatnonzero(mag >= rho - tol)
    i = int(top[0])
    pair = len(top) == 2 and abs(w[top[1]] - np.conj(w[i])) <= tol and abs(w[i].imag) > tol
    if rho <= tol or not (len(top) == 1 or pair):
        raise ValueError(f"the spectral radius {rho:.17g} has no derivative here: it is the magnitude of "
                         f"{len(top)} eigenvalue(s) ({', '.join(f'{complex(v):.6g}' for v in w[top])}) within "
                         f"{tol:.3g}, not of one real eigenvalue or one conjugate pair" if rho > tol else
                         f"the spectral radius is 0 (within {tol:.3g}), a kink: it has no derivative here")
    cond = np.linalg.cond(x)
    if cond * np.sqrt(np.finfo(np.float64).eps) >= 1.0:
        raise ValueError(f"the eigenvalue {complex(w[i]):.6g} of largest magnitude is defective (its eigenvectors "
                         f"are nearly dependent, condition {cond:.3g}): the spectral radius has no derivative here")
    y = np.linalg.inv(x)[i, :]
    g = np.real(np.conj(w[i]) / abs(w[i]) * np.outer(y, x[:, i]))
    return [_tensor(op, g)]


def spectral_function_derivative(a: np.ndarray, d: np.ndarray, kind: str, rank: int, function: str,
                                 rcond: float, elem: ir.Type) -> np.ndarray:
    """Df(A)[D] for the spectral function f(A) = U g(S) V* of `SpectralDerivativeOp` (dialects/tod.py).

    Daleckii–Krein for eigh: Df(A)[D] = U (Γ ∘ U*sym(D)U) U* with Γ_ij = (g_i − g_j)/(s_i − s_j), g'(s_i) on
    ties. For the svd, through the symmetric embedding [[0, A], [A*, 0]] (eigenvalues ±s_i, and 0 for the
    non-square rest): with X = U*DV, Df(A)[D] = U (Γ⁺ ∘ sym X + Γ⁻ ∘ skew X) V* + (I − UU*) D V h V*
    + U h U* D (I − VV*), Γ± = (g_i ∓ g_j)/(s_i ∓ s_j), h = g(s)/s — Townsend's (2016) svd derivative with
    its non-square terms, for any such g. The divided differences are written in closed form for each pair
    of kept (k) or dropped (d) terms — 1 (reconstruct) or ∓1/(s_i s_j) (pseudoinverse) for k-k, 0 for d-d —
    so that repeated values among the kept terms, or among the dropped ones, need no division: f depends on
    each such group's subspace only, never on its basis. Only a kept and a dropped term of equal |s| leave f
    without a derivative (a perturbation swaps which one is kept): that fails, naming the two terms."""
    if kind == "svd":
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        v = vh.T
    else:
        _check_self_adjoint(a, elem)
        s, u = np.linalg.eigh((a + a.T) / 2)
        order = _eigen_order(s)
        s, u = s[order], u[:, order]
        v = u
    r = s.shape[0]
    kept = np.arange(r) < (rank or r)
    mag = np.abs(s)
    if function == "pseudoinverse":
        kept &= mag > rcond * (mag[kept].max() if kept.any() else 0.0)
    dropped = ~kept
    tol = _promise_tolerance(elem, float(mag.max()) if r else 0.0)
    if kept.any() and dropped.any():
        i, j = int(np.flatnonzero(kept)[np.argmin(mag[kept])]), int(np.flatnonzero(dropped)[np.argmax(mag[dropped])])
        if mag[i] - mag[j] <= tol:
            what = "singular values" if kind == "svd" else "eigenvalue magnitudes"
            raise ValueError(f"no derivative here: {what} #{i + 1} (kept, {s[i]:.17g}) and #{j + 1} (dropped, "
                             f"{s[j]:.17g}) of the {kind} are equal within {tol:.3g}, so a perturbation can swap "
                             f"them (a degenerate spectrum at the cut of {function} to {int(kept.sum())} "
                             f"term(s)); repeated values on one side of the cut are fine")
    inverse = function == "pseudoinverse"
    safe = np.where(kept, s, 1.0)
    g = np.where(kept, 1.0 / safe if inverse else s, 0.0)
    kk = np.outer(kept, kept)
    mixed = np.outer(kept, dropped) | np.outer(dropped, kept)

    def divided(sign: float, both_kept: np.ndarray) -> np.ndarray:
        gap = s[:, None] - sign * s[None, :]
        out = np.where(kk, both_kept, 0.0)
        return np.where(mixed, (g[:, None] - sign * g[None, :]) / np.where(mixed, gap, 1.0), out)

    inv_pair = 1.0 / np.outer(safe, safe)
    minus = divided(1.0, -inv_pair if inverse else np.ones((r, r)))
    if kind == "eigh":
        sym = (d + d.T) / 2
        return u @ (minus * (u.T @ sym @ u)) @ u.T
    plus = divided(-1.0, inv_pair if inverse else np.ones((r, r)))
    x = u.T @ d @ v
    h = np.where(kept, inv_pair.diagonal() if inverse else 1.0, 0.0)
    core = u @ (minus * (x + x.T) / 2 + plus * (x - x.T) / 2) @ v.T
    return core + (d @ v - u @ x) * h @ v.T + u * h @ (u.T @ d - x @ v.T)


@local("tod.spectral_derivative")
def spectral_derivative(op, ins):
    a, d = ins
    attr = op.attributes
    return [_tensor(op, spectral_function_derivative(
        a, d, ir.StringAttr(attr["kind"]).value, ir.IntegerAttr(attr["rank"]).value,
        ir.StringAttr(attr["function"]).value, ir.FloatAttr(attr["rcond"]).value,
        tod.operator_sig(op.operands[0].type).elem))]


# -- diagnostics ------------------------------------------------------------------------------------------

@local("tod.norm")
def norm(op, ins):
    return [_tensor(op, np.linalg.norm(ins[0], 2))]


@local("tod.is_unitary")
def is_unitary(op, ins):
    a = ins[0]
    tol = ir.FloatAttr(op.attributes["tol"]).value
    square = a.shape[0] == a.shape[1]
    return [np.array(square and _largest(a.conj().T @ a - np.eye(a.shape[1])) <= tol)]


@local("tod.spectral_radius")
def spectral_radius(op, ins):
    return [_tensor(op, np.max(np.abs(np.linalg.eigvals(ins[0]))))]
