"""Derivatives through the operator algebra (passes/autodiff_operators.py), in f64 through the interpreter.

Per case: the reverse-mode derivative (vjp) against central finite differences, and forward mode (jvp)
against it by duality <v, J u> = <Jᵀ v, u>. Then the spectral cases at repeated values (the convention of
docs/language.md: exact on one side of a cut, a run-time error at the user's line across it), and the refusals.
"""

import pathlib
import re
import zlib

import numpy as np
import pytest

from tessera import tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.interpret import InterpreterError

from derivative_checks import check_vjp_jvp, derivative_source

# name -> the body of `def name(A, B, R, Q, P, d, x, y, w, X, z)` (A, B [4, 4]; R [5, 3]; Q, P [2, 2];
# d, x [4]; y [3]; w [5]; X [4, 2]; z a scalar, away from A's spectrum: see _inputs)
CASES = {
    "compose_diag": "op.apply(op.compose(op.dense(A), op.diag(d)), x)",
    "apply_stack": "op.dense(A) @ X",
    "adjoint": "op.adjoint(op.dense(A)) @ x + op.dense(A) @ (op.adjoint(op.dense(B)) @ x)",
    "plus_scale": "(op.dense(A) + z * op.dense(B) - op.dense(B) / 2) @ x",
    "power": "op.power(op.dense(A), 3) @ x + (op.dense(B) ** 0) @ x",
    "commutator": "op.commutator(op.dense(A), op.dense(B)) @ x",
    "sym_skew": "(op.sym(op.dense(A)) + op.skew(op.dense(B))) @ x",
    "expm": "op.expm(0.5 * op.dense(A) @ op.dense(B)) @ x",
    "resolvent": "op.resolvent(op.dense(A), z) @ x",
    "kronecker": "op.kronecker(op.dense(Q), op.dense(P)) @ x + op.tensor(op.dense(P), op.dense(Q)) @ x",
    "svd_full": "op.reconstruct(op.spectral(op.dense(R), kind='svd')) @ y",
    "svd_truncate": "op.reconstruct(op.truncate(op.spectral(op.dense(R), kind='svd'), 2)) @ y",
    "svd_wide": "op.reconstruct(op.truncate(op.spectral(op.adjoint(op.dense(R)), kind='svd'), 2)) @ w",
    "pinv_operator": "op.pseudoinverse(op.dense(R)) @ w",
    "pinv_truncate": "op.pseudoinverse(op.truncate(op.spectral(op.dense(R)), 2)) @ w",
    "eigh_truncate": "op.reconstruct(op.truncate(op.spectral(op.sym(op.dense(A)), kind='eigh'), 2)) @ x",
    "pinv_eigh": "op.pseudoinverse(op.spectral(op.sym(op.dense(A)), kind='eigh')) @ x",
    "norm": "op.norm(op.dense(R) @ op.diag(y)) * x + op.norm(op.dense(A)) * (op.dense(B) @ x)",
    "spectral_radius": "op.spectral_radius(op.dense(A)) * x + op.spectral_radius(op.dense(B) @ op.dense(B)) * x",
    # one factorization, two uses (examples/graph/spectral.py's denoising)
    "denoise": "op.pseudoinverse(op.truncate(op.spectral(op.dense(R)), 2)) @ "
               "(op.reconstruct(op.truncate(op.spectral(op.dense(R)), 2)) @ y)",
}
PARAMS = ("A: tensor[f64, 4, 4], B: tensor[f64, 4, 4], R: tensor[f64, 5, 3], Q: tensor[f64, 2, 2], "
          "P: tensor[f64, 2, 2], d: tensor[f64, 4], x: tensor[f64, 4], y: tensor[f64, 3], w: tensor[f64, 5], "
          "X: tensor[f64, 4, 2], z: tensor[f64]")


@pytest.fixture(scope="module")
def ops_module():
    src = derivative_source("from tessera import f64, function, jvp, op, tensor, vjp",
                            ((name, PARAMS, body) for name, body in CASES.items()))
    return tessera_frontend_compile(src, {"filename": "operators.py"})


def _inputs(rng):
    shapes = [(4, 4), (4, 4), (5, 3), (2, 2), (2, 2), (4,), (4,), (3,), (5,), (4, 2)]
    xs = [rng.standard_normal(s) * 0.5 for s in shapes]
    return xs + [np.array(4.0 + rng.uniform())]   # z > 4 > the spectral radius of A (entries ~0.5)


@pytest.mark.parametrize("name", CASES)
def test_vjp_matches_finite_differences_and_jvp(ops_module, name):
    """The central difference of <v, f(x + h u)> (h 1e-6) has error ~1e-9 relative to the derivative here,
    below rtol 1e-6; jvp and vjp are transposes to rtol 1e-10 (the spectral ones recompute one factorization
    per use, the same in both modes)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    _check_fd(ops_module, name, _inputs(rng), rng)


def _derivatives(src: str, filename: str):
    return tessera_frontend_compile("from tessera import f64, function, grad, jvp, op, tensor, vjp\n" + src,
                                    {"filename": filename})


def _check_fd(m, name: str, xs: list, rng, h: float = 1e-6, rtol: float = 1e-6):
    """vjp against central differences (rtol, absolute 1e-8) and jvp against vjp (duality, rtol 1e-10)."""
    check_vjp_jvp(m, name, xs, rng, h, rtol, 1e-10, fd_atol=1e-8)


SPECTRA = '''
@function
def svd_cut(R: tensor[f64, 5, 3], y: tensor[f64, 3]):
    S = op.spectral(op.dense(R), kind="svd")
    return op.reconstruct(op.truncate(S, CUT)) @ y

@function
def eigh_cut(A: tensor[f64, 4, 4], x: tensor[f64, 4]):
    S = op.spectral(op.sym(op.dense(A)), kind="eigh")
    return op.reconstruct(op.truncate(S, CUT)) @ x

@function
def pinv_rank2(R: tensor[f64, 5, 3], w: tensor[f64, 5]):
    return op.pseudoinverse(op.dense(R), rcond=1e-3) @ w

vjp_svd_cut = vjp(svd_cut)
jvp_svd_cut = jvp(svd_cut)
vjp_eigh_cut = vjp(eigh_cut)
jvp_eigh_cut = jvp(eigh_cut)
vjp_pinv_rank2 = vjp(pinv_rank2)
jvp_pinv_rank2 = jvp(pinv_rank2)
'''


def _orthonormal(rng, n: int, k: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((n, k)))[0]


def test_repeated_values_on_one_side_of_the_cut_are_exact():
    """The convention (docs/language.md): op.reconstruct and op.pseudoinverse do not depend on the basis of a
    group of repeated values, and the rules never divide by the gap between two values on one side of a cut:
    at singular values (3, 3, 1) cut to 2, eigenvalues (2, 2, -1, 0.5) cut to 2, and a rank-2 pseudoinverse
    (the dropped singular value 0 stays below rcond · 3 under a 1e-7 step), the derivative is the finite
    difference's (rtol 1e-5: the step moves the repeated values apart by ~1e-7)."""
    rng = np.random.default_rng(15)
    m = _derivatives(SPECTRA.replace("CUT", "2"), "spectra.py")
    R = _orthonormal(rng, 5, 3) @ np.diag([3.0, 3.0, 1.0]) @ _orthonormal(rng, 3, 3).T
    _check_fd(m, "svd_cut", [R, rng.standard_normal(3)], rng, rtol=1e-5)
    Q = _orthonormal(rng, 4, 4)
    A = Q @ np.diag([2.0, 2.0, -1.0, 0.5]) @ Q.T
    _check_fd(m, "eigh_cut", [A, rng.standard_normal(4)], rng, rtol=1e-5)
    low = _orthonormal(rng, 5, 3) @ np.diag([3.0, 1.0, 0.0]) @ _orthonormal(rng, 3, 3).T
    _check_fd(m, "pinv_rank2", [low, rng.standard_normal(5)], rng, h=1e-7, rtol=1e-5)


@pytest.mark.parametrize("name, values, where", [
    ("svd_cut", [3.0, 2.0, 2.0], ("singular values #2 (kept, ", 2.0)),
    ("eigh_cut", [2.0, -2.0, 1.0, 0.5], ("eigenvalue magnitudes #1 (kept, ", -2.0)),
])
def test_a_cut_through_repeated_values_fails_at_the_users_line(name, values, where):
    """Cut to 2 terms between the equal singular values 2 and 2, or to 1 between the eigenvalues 2 and -2 (an
    ordering tie): a perturbation swaps the kept and the dropped term, so there is no derivative. Both modes
    fail at the line of the op.reconstruct that makes the cut, naming the two terms."""
    rng = np.random.default_rng(7)
    cut = 2 if name == "svd_cut" else 1
    m = _derivatives(SPECTRA.replace("CUT", str(cut)), "cut.py")
    n = len(values)
    if name == "svd_cut":
        x = _orthonormal(rng, 5, 3) @ np.diag(values) @ _orthonormal(rng, 3, 3).T
    else:
        q = _orthonormal(rng, n, n)
        x = q @ np.diag(values) @ q.T
    vec = rng.standard_normal(x.shape[1])
    m.interpret(name, x, vec)   # the function itself is defined (LAPACK picks a basis)
    line = 6 if name == "svd_cut" else 11
    for call in (lambda: m.interpret(f"vjp_{name}", x, vec, rng.standard_normal(x.shape[0])),
                 lambda: m.interpret(f"jvp_{name}", x, vec, rng.standard_normal(x.shape), vec)):
        with pytest.raises(InterpreterError) as e:
            call()
        message = str(e.value)
        assert f"cut.py\":{line}:" in message and "'tod.spectral_derivative' failed" in message, message
        # The kept value as LAPACK computed it: 2 within rounding (1.9999999999999998 with some BLAS builds).
        term, value = where
        kept = re.search(re.escape(term) + r"(-?[0-9.e+-]+)\)", message)
        assert kept and abs(float(kept.group(1)) - value) < 1e-12, message
        assert "a degenerate spectrum at the cut" in message, message


STRUCTURED = '''
@function
def conv(h: tensor[f64, 3], x: tensor[f64, 6]):
    return op.conv1d(h, 6) @ x + op.conv1d(x, 6) @ (op.conv1d(h, 6) @ x)

@function
def blocks(A: tensor[f64, 2, 3], B: tensor[f64, 4, 4], x: tensor[f64, 7]):
    return op.direct_sum(op.dense(A), op.expm(op.dense(B))) @ x

@function
def project(U: tensor[f64, 5, 2], x: tensor[f64, 5]):
    return op.projector(U) @ x

vjp_conv = vjp(conv)
jvp_conv = jvp(conv)
vjp_blocks = vjp(blocks)
jvp_blocks = jvp(blocks)
jvp_project = jvp(project)
vjp_project = vjp(project)
'''


def test_conv1d_direct_sum_and_projector():
    """conv1d (its kernel's cotangent: the sums along the cyclic diagonals) and direct_sum (a diagonal block
    each) against central differences; the projector, whose operand must stay orthonormal (a finite step
    leaves the interpreter's promise), against its definition's derivative dU Uᵀ + U dUᵀ, and by duality."""
    rng = np.random.default_rng(3)
    m = _derivatives(STRUCTURED, "structured.py")
    _check_fd(m, "conv", [rng.standard_normal(3), rng.standard_normal(6)], rng)
    _check_fd(m, "blocks", [rng.standard_normal((2, 3)), rng.standard_normal((4, 4)) * 0.5,
                            rng.standard_normal(7)], rng)
    U, x = _orthonormal(rng, 5, 2), rng.standard_normal(5)
    dU, dx, v = rng.standard_normal((5, 2)), rng.standard_normal(5), rng.standard_normal(5)
    tangent = m.interpret("jvp_project", U, x, dU, dx)[1]
    np.testing.assert_allclose(tangent, (dU @ U.T + U @ dU.T) @ x + U @ U.T @ dx, rtol=1e-12)
    cU, cx = m.interpret("vjp_project", U, x, v)[1:]
    assert float(np.sum(cU * dU) + cx @ dx) == pytest.approx(float(v @ tangent), rel=1e-12)


@pytest.mark.parametrize("body, line_col, message", [
    ("return op.reconstruct(op.spectral(op.dense(A), kind='eig')) @ x", (5, 27),
     "op.spectral builds a complex operator (complex<f64>) from a differentiated value"),
    ("return (op.fft(4, dtype=f64) @ op.dense(A)) @ x", (5, 13),
     "op.compose builds a complex operator (complex<f64>)"),
])
def test_unsupported_operator_ops_are_refused_at_their_line(body, line_col, message):
    src = f'''
@function
def f(A: tensor[f64, 4, 4], x: tensor[f64, 4], y: tensor[f64, 8]):
    {body}

g = vjp(f)
'''
    m = _derivatives(src, "refuse.py")
    out = np.ones(8) if "* y" in body else np.ones(4)
    with pytest.raises(CompileError) as e:
        m.interpret("g", np.eye(4), np.ones(4), np.ones(8), out)
    assert (e.value.filename, e.value.line, e.value.col) == ("refuse.py", *line_col), e.value
    assert message in e.value.message, e.value.message


SYMBOLIC = '''
@function
def f(A: tensor[f64, "M", "N"], d: tensor[f64, "N"], x: tensor[f64, "N"]):
    B = op.dense(A) @ op.diag(d)
    low = op.reconstruct(op.truncate(op.spectral(B, kind="svd"), 2)) @ x
    return low + B @ (op.pseudoinverse(B) @ (B @ (op.expm(op.adjoint(B) @ B) @ x)))

vjp_f = vjp(f)
jvp_f = jvp(f)
'''


@pytest.mark.parametrize("m, n", [(5, 3), (4, 4), (3, 6)])
def test_operators_of_extents_known_at_run_time(m, n):
    """The rules build their matrices and outer products at the operators' run-time extents (one derivative
    for every M, N): finite differences and duality as above."""
    rng = np.random.default_rng(m * 10 + n)
    mod = _derivatives(SYMBOLIC, "symbolic.py")
    _check_fd(mod, "f", [rng.standard_normal((m, n)) * 0.5, rng.standard_normal(n), rng.standard_normal(n)], rng)


def test_the_norm_at_a_tie_of_its_top_singular_values_fails_at_its_line():
    """op.norm is σ₁: at σ₁ = σ₂ it has a kink, and its rules (through the svd cut to one term) fail there,
    in both modes, at the op.norm line."""
    m = _derivatives('''
@function
def n(R: tensor[f64, 5, 3]):
    return op.norm(op.dense(R)) * R

vjp_n = vjp(n)
jvp_n = jvp(n)
''', "norm.py")
    rng = np.random.default_rng(5)
    R = _orthonormal(rng, 5, 3) @ np.diag([3.0, 3.0, 1.0]) @ _orthonormal(rng, 3, 3).T
    for call in (lambda: m.interpret("vjp_n", R, np.ones((5, 3))), lambda: m.interpret("jvp_n", R, np.ones((5, 3)))):
        with pytest.raises(InterpreterError) as e:
            call()
        message = str(e.value)
        assert 'norm.py":5:12' in message and "singular values #1 (kept, " in message, message
        assert "#2 (dropped, " in message and "cut of reconstruct to 1 term(s)" in message, message


def test_the_spectral_examples_heat_sensitivity():
    """examples/graph/spectral.py's grad through expm: d/du0 is exp(−L/2)ᵀ w (L symmetric: by its
    eigendecomposition), d/dL matches a central difference along a random symmetric direction (rtol 1e-6)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph" / "spectral.py"
    m = tessera_frontend_compile(path.read_text(), {"filename": str(path)})
    rng = np.random.default_rng(16)
    L = 2 * np.eye(16) - np.eye(16, k=1) - np.eye(16, k=-1)
    u0, w = rng.standard_normal(16), rng.standard_normal(16)
    dL, du0 = m.interpret("heat_sensitivity", L, u0, w)
    lam, q = np.linalg.eigh(L)
    np.testing.assert_allclose(du0, q @ np.diag(np.exp(-0.5 * lam)) @ q.T @ w, rtol=1e-10, atol=1e-12)
    E = rng.standard_normal((16, 16))
    E = E + E.T
    h = 1e-6
    fd = (m.interpret("heat_at", L + h * E, u0, w) - m.interpret("heat_at", L - h * E, u0, w)) / (2 * h)
    assert float(np.sum(dL * E)) == pytest.approx(float(fd), rel=1e-6)


def test_kronecker_of_run_time_extents_is_refused_in_reverse_mode():
    m = _derivatives('''
@function
def f(A: tensor[f64, "N", "N"], x: tensor[f64, "M"]):
    return op.kronecker(op.dense(A), op.dense(A)) @ x

g = vjp(f)
''', "kron.py")
    with pytest.raises(CompileError) as e:
        m.interpret("g", np.eye(2), np.ones(4), np.ones(4))
    assert (e.value.filename, e.value.line, e.value.col) == ("kron.py", 5, 12), e.value
    assert "op.kronecker of operators with extents known only at run time has no reverse-mode rule" in \
        e.value.message, e.value.message


RADIUS = '''
@function
def rho(A: tensor[f64, 3, 3]):
    return op.spectral_radius(op.dense(A))

grad_rho = grad(rho)
'''


def test_spectral_radius_of_a_conjugate_pair_and_its_kinks():
    """A dominant conjugate pair (a rotation-like block) has a derivative (finite differences, rtol 1e-6);
    eigenvalues 2 and -2, and the zero operator, are kinks of ρ: the gradient fails at the op's line."""
    m = _derivatives(RADIUS, "radius.py")
    rng = np.random.default_rng(9)
    q = _orthonormal(rng, 3, 3)
    A = q @ np.array([[1.0, -2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 0.5]]) @ q.T   # λ = 1 ± 2i, 0.5
    E, h = rng.standard_normal((3, 3)), 1e-6
    fd = (m.interpret("rho", A + h * E) - m.interpret("rho", A - h * E)) / (2 * h)
    assert float(np.sum(m.interpret("grad_rho", A) * E)) == pytest.approx(float(fd), rel=1e-6)
    for bad, why in ((q @ np.diag([2.0, -2.0, 1.0]) @ q.T, "magnitude of 2 eigenvalue(s)"),
                     (np.zeros((3, 3)), "the spectral radius is 0")):
        with pytest.raises(InterpreterError) as e:
            m.interpret("grad_rho", bad)
        assert 'radius.py":5:12' in str(e.value) and why in str(e.value), str(e.value)
