"""The operator algebra: every tod op's reference semantics against an independent numpy computation, the
interpreter's numerical conventions, and every rewrite law checked with the interpreter as the oracle (a
program computes the same before and after tessera-tod-canonicalize, and the law did fire).

Tolerances: f64 programs within 1e-10 (each op rounds once to f64; laws reorder rounding only); f32 within
1e-5 relative."""

import pathlib
import textwrap

import numpy as np
import pytest

from tessera import compiler, tessera_frontend_compile
from tessera.dialects import make_context
from tessera.interpret import InterpreterError, run
from tessera.interpret.operator_ops import decompose, expm
from tessera.mlir import ir
from tessera.passes.registry import build_pass_manager

RNG = np.random.default_rng(11)
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph" / "spectral.py"


def randn(*shape):
    return RNG.standard_normal(shape)


def crandn(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def orthonormal(n, k):
    return np.linalg.qr(randn(n, k))[0]


def program(body: str):
    """Compiles `body` (the statements of one @function) with tessera's names in scope."""
    source = "from tessera import *\n\n@function\n" + textwrap.dedent(body)
    return tessera_frontend_compile(source, {"filename": "ops.py"})


def interpret(body: str, *args):
    m = program(body)
    return m.interpret(m.functions[0], *args)


# -- constructors -----------------------------------------------------------------------------------------

def test_eye_zero_dense():
    M, x = randn(5, 3), randn(3)
    out = interpret("""
        def f(M: tensor[f64, 5, 3], x: tensor[f64, 3]):
            return op.eye(3, dtype=f64) @ x, op.zero(3, 5, dtype=f64) @ x, op.dense(M) @ x
        """, M, x)
    np.testing.assert_allclose(out[0], x, rtol=0, atol=0)
    np.testing.assert_array_equal(out[1], np.zeros(5))
    np.testing.assert_allclose(out[2], M @ x, rtol=1e-12)


def test_diag_and_projector():
    d, U, x = randn(6), orthonormal(6, 2), randn(6)
    out = interpret("""
        def f(d: tensor[f64, 6], U: tensor[f64, 6, 2], x: tensor[f64, 6]):
            return op.diag(d) @ x, op.projector(U) @ x
        """, d, U, x)
    np.testing.assert_allclose(out[0], d * x, rtol=1e-12)
    np.testing.assert_allclose(out[1], U @ (U.T @ x), rtol=1e-12, atol=1e-12)


def test_projector_needs_orthonormal_columns():
    m = program("""
        def f(U: tensor[f64, 6, 2], x: tensor[f64, 6]):
            return op.projector(U) @ x
        """)
    with pytest.raises(InterpreterError, match=r'"ops.py":6:\d+\): \'tod.projector\' failed: the basis columns are '
                                               r"not orthonormal"):
        m.interpret("f", 2 * orthonormal(6, 2), randn(6))


def test_fft_ifft_match_numpy_orthonormal_dft():
    x = randn(16) + 1j * randn(16)
    f, g = interpret("""
        def f(x: tensor[c128, 16]):
            return op.fft(16, dtype=f64) @ x, op.ifft(16, dtype=f64) @ x
        """, x)
    np.testing.assert_allclose(f, np.fft.fft(x, norm="ortho"), atol=1e-12)
    np.testing.assert_allclose(g, np.fft.ifft(x, norm="ortho"), atol=1e-12)


def test_fft_in_f32_is_complex64():
    x = randn(8).astype(np.float32)
    y = interpret("""
        def f(x: tensor[f32, 8]):
            return op.fft(8) @ x
        """, x)
    assert y.dtype == np.complex64
    np.testing.assert_allclose(y, np.fft.fft(x, norm="ortho"), rtol=1e-5, atol=1e-5)


def test_conv1d_is_circular_convolution():
    h, x = randn(3), randn(10)
    y = interpret("""
        def f(h: tensor[f64, 3], x: tensor[f64, 10]):
            return op.conv1d(h, 10) @ x
        """, h, x)
    ref = [sum(h[j] * x[(i - j) % 10] for j in range(3)) for i in range(10)]
    np.testing.assert_allclose(y, ref, rtol=1e-12)


def test_kronecker_tensor_direct_sum():
    A, B, C, x, z = randn(2, 3), randn(4, 2), randn(3, 3), randn(6), randn(5)
    k, t, s = interpret("""
        def f(A: tensor[f64, 2, 3], B: tensor[f64, 4, 2], C: tensor[f64, 3, 3], x: tensor[f64, 6],
              z: tensor[f64, 5]):
            a, b, c = op.dense(A), op.dense(B), op.dense(C)
            return op.kronecker(a, b) @ x, op.tensor(b, a) @ x, op.direct_sum(b, c) @ z
        """, A, B, C, x, z)
    np.testing.assert_allclose(k, np.kron(A, B) @ x, rtol=1e-12)
    np.testing.assert_allclose(t, np.kron(B, A) @ x, rtol=1e-12)
    np.testing.assert_allclose(s, np.concatenate([B @ z[:2], C @ z[2:]]), rtol=1e-12)


def test_kronecker_of_three():
    A, B, C = randn(2, 2), randn(3, 3), randn(2, 2)
    x = randn(12)
    y = interpret("""
        def f(A: tensor[f64, 2, 2], B: tensor[f64, 3, 3], C: tensor[f64, 2, 2], x: tensor[f64, 12]):
            return op.kronecker(op.dense(A), op.dense(B), op.dense(C)) @ x
        """, A, B, C, x)
    np.testing.assert_allclose(y, np.kron(np.kron(A, B), C) @ x, rtol=1e-12)


# -- algebra ----------------------------------------------------------------------------------------------

def test_compose_adjoint_plus_scale():
    A, B, Z, x = randn(4, 3), randn(3, 5), crandn(4, 4), randn(5)
    s = np.array(2.5)
    c, adj, p, sc, neg = interpret("""
        def f(A: tensor[f64, 4, 3], B: tensor[f64, 3, 5], Z: tensor[c128, 4, 4], x: tensor[f64, 5], s: f64):
            a, b = op.dense(A), op.dense(B)
            y = op.compose(a, b) @ x
            return y, op.adjoint(op.dense(Z)) @ y, (a @ b + a @ b) @ x, (s * a) @ (b @ x), (a - 2 * a) @ (b @ x)
        """, A, B, Z, x, s)
    np.testing.assert_allclose(c, A @ B @ x, rtol=1e-12)
    np.testing.assert_allclose(adj, Z.conj().T @ (A @ B @ x), rtol=1e-12)
    np.testing.assert_allclose(p, 2 * A @ B @ x, rtol=1e-12)
    np.testing.assert_allclose(sc, 2.5 * A @ B @ x, rtol=1e-12)
    np.testing.assert_allclose(neg, -(A @ B @ x), rtol=1e-12)


def test_power_commutator_sym_skew():
    A, B, x = randn(4, 4), randn(4, 4), randn(4)
    p0, p3, c, s, k = interpret("""
        def f(A: tensor[f64, 4, 4], B: tensor[f64, 4, 4], x: tensor[f64, 4]):
            a, b = op.dense(A), op.dense(B)
            return (op.power(a, 0) @ x, (a ** 3) @ x, op.commutator(a, b) @ x, op.sym(a) @ x,
                    op.skew(a) @ x)
        """, A, B, x)
    np.testing.assert_allclose(p0, x, rtol=0, atol=0)
    np.testing.assert_allclose(p3, A @ (A @ (A @ x)), rtol=1e-12)
    np.testing.assert_allclose(c, (A @ B - B @ A) @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s, (A + A.T) / 2 @ x, rtol=1e-12)
    np.testing.assert_allclose(k, (A - A.T) / 2 @ x, rtol=1e-12, atol=1e-12)


def _taylor_expm(a, terms=60):
    out, term = np.eye(len(a), dtype=a.dtype), np.eye(len(a), dtype=a.dtype)
    for k in range(1, terms):
        term = term @ a / k
        out = out + term
    return out


@pytest.mark.parametrize("a", [
    np.diag([1.0, -2.0, 0.5]),                                  # diagonal: exp of the entries
    np.array([[0.0, -1.3], [1.3, 0.0]]),                        # skew: a rotation by 1.3 rad
    np.triu(np.ones((4, 4)), 1),                                # nilpotent: a finite series
    0.3 * np.random.default_rng(3).standard_normal((6, 6)),     # small norm: no squaring needed
    8.0 * np.random.default_rng(4).standard_normal((5, 5)),     # large norm: scaled and squared
    (0.4 * np.random.default_rng(5).standard_normal((4, 4)) + 0.4j * np.random.default_rng(6).standard_normal((4, 4))),
], ids=["diagonal", "rotation", "nilpotent", "small", "large", "complex"])
def test_expm_matches_independent_references(a):
    got = expm(a)
    if np.allclose(a, np.diag(np.diag(a))):
        ref = np.diag(np.exp(np.diag(a)))
    elif np.allclose(a, -a.T) and a.shape == (2, 2):
        t = a[1, 0]
        ref = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    elif np.linalg.norm(a, 1) > 10:
        w, V = np.linalg.eig(a)  # a random matrix is diagonalizable
        ref = (V * np.exp(w)) @ np.linalg.inv(V)
    else:
        ref = _taylor_expm(a)
    np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-12 * np.abs(ref).max())


def test_expm_and_resolvent_ops():
    S, x = randn(5, 5), randn(5)
    A = (S + S.T) / 4
    e, r, rc = interpret("""
        def f(A: tensor[f64, 5, 5], x: tensor[f64, 5], z: c128):
            a = op.dense(A)
            return op.expm(a) @ x, op.resolvent(a, 7.5) @ x, op.resolvent(a, z) @ x
        """, A, x, np.array(1 + 2j))
    w, V = np.linalg.eigh(A)
    np.testing.assert_allclose(e, V @ (np.exp(w) * (V.T @ x)), rtol=1e-11)
    np.testing.assert_allclose(r, np.linalg.inv(7.5 * np.eye(5) - A) @ x, rtol=1e-11)
    np.testing.assert_allclose(rc, np.linalg.inv((1 + 2j) * np.eye(5) - A) @ x, rtol=1e-11)


def test_resolvent_at_an_eigenvalue_fails_at_the_op():
    m = program("""
        def f(d: tensor[f64, 3], x: tensor[f64, 3]):
            return op.resolvent(op.diag(d), 2.0) @ x
        """)
    with pytest.raises(InterpreterError, match="is an eigenvalue of the operator"):
        m.interpret("f", np.array([1.0, 2.0, 3.0]), randn(3))


def test_apply_to_stacks_of_columns():
    A, X = randn(4, 3), randn(2, 3, 5)
    Y = interpret("""
        def f(A: tensor[f64, 4, 3], X: tensor[f64, 2, 3, 5]):
            return op.apply(op.dense(A), X)
        """, A, X)
    assert Y.shape == (2, 4, 5)
    np.testing.assert_allclose(Y, A @ X, rtol=1e-12)


def test_adjoint_is_the_vjp():
    """Part VII: the VJP of y = A x is dL/dx = A* (dL/dy), i.e. <A x, y> = <x, A* y>."""
    Z, x, y = crandn(5, 3), crandn(3), crandn(5)
    ax, ahy = interpret("""
        def f(Z: tensor[c128, 5, 3], x: tensor[c128, 3], y: tensor[c128, 5]):
            a = op.dense(Z)
            return a @ x, op.adjoint(a) @ y
        """, Z, x, y)
    np.testing.assert_allclose(np.vdot(y, ax), np.vdot(ahy, x), rtol=1e-12)


def test_f32_operators_round_to_f32():
    A, x = randn(6, 6).astype(np.float32), randn(6).astype(np.float32)
    y = interpret("""
        def f(A: tensor[f32, 6, 6], x: tensor[f32, 6]):
            return (op.dense(A) @ op.dense(A)) @ x
        """, A, x)
    assert y.dtype == np.float32
    a64 = A.astype(np.float64)
    np.testing.assert_allclose(y, (a64 @ a64).astype(np.float32) @ x.astype(np.float64), rtol=1e-5, atol=1e-5)


# -- spectral ---------------------------------------------------------------------------------------------

def materialized(body_expr: str, n_in: int, *params):
    """The matrix of an operator expression, by applying it to the identity."""
    names = ", ".join(f"{p}: tensor[f64, {', '.join(map(str, a.shape))}]" for p, a in params)
    return interpret(f"""
        def f({names}, E: tensor[f64, {n_in}, {n_in}]):
            return ({body_expr}) @ E
        """, *[a for _, a in params], np.eye(n_in))


def test_svd_reconstruct_truncate_pseudoinverse():
    M = randn(7, 5)
    full = materialized("op.reconstruct(op.spectral(op.dense(M)))", 5, ("M", M))
    np.testing.assert_allclose(full, M, rtol=1e-12, atol=1e-12)
    low = materialized("op.reconstruct(op.truncate(op.spectral(op.dense(M), kind='svd'), 2))", 5, ("M", M))
    s = np.linalg.svd(M, compute_uv=False)
    assert np.linalg.matrix_rank(low) == 2
    assert np.isclose(np.linalg.norm(M - low, 2), s[2])  # Eckart–Young: the best rank-2 approximation
    pinv = materialized("op.pseudoinverse(op.dense(M))", 7, ("M", M))
    for lhs, rhs in ((M @ pinv @ M, M), (pinv @ M @ pinv, pinv), ((M @ pinv).T, M @ pinv), ((pinv @ M).T, pinv @ M)):
        np.testing.assert_allclose(lhs, rhs, atol=1e-12)  # the four Moore–Penrose conditions
    pinv_s = materialized("op.pseudoinverse(op.spectral(op.dense(M)))", 7, ("M", M))
    np.testing.assert_allclose(pinv_s, np.linalg.pinv(M), atol=1e-12)


def test_pseudoinverse_drops_small_singular_values():
    M = randn(6, 2) @ randn(2, 4) + 1e-9 * randn(6, 4)
    pinv = materialized("op.pseudoinverse(op.dense(M), rcond=1e-6)", 6, ("M", M))
    np.testing.assert_allclose(pinv, np.linalg.pinv(M, rcond=1e-6), atol=1e-8)


def test_eig_and_eigh_reconstruct():
    A = randn(5, 5)
    S = A + A.T
    m = program("""
        def f(A: tensor[f64, 5, 5], S: tensor[f64, 5, 5], E: tensor[f64, 5, 5]):
            e = op.spectral(op.dense(A), kind="eig")
            h = op.spectral(op.dense(S), kind="eigh")
            return op.reconstruct(e) @ E, op.reconstruct(op.truncate(h, 2)) @ E, op.pseudoinverse(h) @ E
        """)
    full, top2, pinv = m.interpret("f", A, S, np.eye(5))
    assert full.dtype == np.complex128
    np.testing.assert_allclose(full, A, atol=1e-11)
    w, V = np.linalg.eigh(S)
    big = np.argsort(-np.abs(w))[:2]
    np.testing.assert_allclose(top2, (V[:, big] * w[big]) @ V[:, big].T, atol=1e-11)
    np.testing.assert_allclose(pinv, np.linalg.inv(S), atol=1e-10)


def test_eigh_needs_a_self_adjoint_operator():
    m = program("""
        def f(A: tensor[f64, 4, 4], E: tensor[f64, 4, 4]):
            return op.reconstruct(op.spectral(op.dense(A), kind="eigh")) @ E
        """)
    with pytest.raises(InterpreterError, match="eigh needs a self-adjoint operator"):
        m.interpret("f", np.triu(np.ones((4, 4))), np.eye(4))


def test_conventions_svd():
    M = randn(6, 4)
    s = decompose(M, "svd", None)
    assert np.all(np.diff(s.S) <= 0)
    for i in range(4):
        p = np.argmax(np.abs(s.U[:, i]))
        assert s.U[p, i] > 0 and np.isreal(s.U[p, i])
    np.testing.assert_allclose(s.matrix(), M, atol=1e-12)
    np.testing.assert_allclose(s.U.T @ s.U, np.eye(4), atol=1e-12)


def test_conventions_eig_order_and_phase():
    rot = np.array([[0.0, -2.0], [2.0, 0.0]])  # eigenvalues ±2i
    A = np.zeros((4, 4))
    A[:2, :2], A[2, 2], A[3, 3] = rot, -3.0, 1.0
    Q = orthonormal(4, 4)
    s = decompose(Q @ A @ Q.T, "eig", None)
    np.testing.assert_allclose(s.S, [-3.0, 2j, -2j, 1.0], atol=1e-12)  # |λ| descending, then +i before −i
    for i in range(4):
        p = np.argmax(np.abs(s.U[:, i]))
        assert abs(s.U[p, i].imag) < 1e-15 and s.U[p, i].real > 0
    np.testing.assert_allclose(s.V.conj().T @ s.U, np.eye(4), atol=1e-12)  # V* = U⁻¹
    again = decompose(Q @ A @ Q.T, "eig", None)
    np.testing.assert_array_equal(again.U, s.U)  # reproducible


def test_diagnostics():
    M = randn(5, 5)
    n, u1, u2, r = interpret("""
        def f(M: tensor[f64, 5, 5]):
            a = op.dense(M)
            return op.norm(a), op.is_unitary(op.fft(5, dtype=f64)), op.is_unitary(a), op.spectral_radius(a)
        """, M)
    assert np.isclose(n, np.linalg.norm(M, 2), rtol=1e-12)
    assert u1.dtype == np.bool_ and bool(u1) and not bool(u2)
    assert np.isclose(r, np.max(np.abs(np.linalg.eigvals(M))), rtol=1e-12)


def test_is_unitary_of_rectangular_operator_is_false():
    out = interpret("""
        def f(U: tensor[f64, 4, 2]):
            return op.is_unitary(op.dense(U))
        """, orthonormal(4, 2))
    assert not bool(out)


# -- the worked example -----------------------------------------------------------------------------------

def test_worked_example():
    m = tessera_frontend_compile(EXAMPLE.read_text(), {"filename": str(EXAMPLE)})
    h, x = randn(64), randn(64)
    direct, via_fft = m.interpret("circular_convolution", h, x)
    ref = np.real(np.fft.ifft(np.fft.fft(h) * np.fft.fft(x)))
    np.testing.assert_allclose(direct, ref, atol=1e-12)
    np.testing.assert_allclose(via_fft, ref, atol=1e-12)
    A0 = randn(48, 4) @ randn(4, 32)
    A, x = A0 + 0.01 * randn(48, 32), randn(32)
    y, x_row = m.interpret("denoised_measurement", A, x)
    assert np.linalg.norm(y - A0 @ x) < np.linalg.norm(A @ x - A0 @ x)
    _, _, vh = np.linalg.svd(A)
    np.testing.assert_allclose(x_row, vh[:4].T @ (vh[:4] @ x), atol=1e-10)
    L = 2 * np.eye(16) - np.eye(16, k=1) - np.eye(16, k=-1)
    u, rate = m.interpret("heat_flow", L, np.eye(16)[3])
    w, V = np.linalg.eigh(L)
    np.testing.assert_allclose(u, V @ (np.exp(-0.5 * w) * V[3]), atol=1e-12)
    assert np.isclose(rate, w.max())


# -- the rewrite laws, with the interpreter as the oracle -------------------------------------------------

def O(din, dout, elem="f64"):  # noqa: E743 — the operator type, short
    return f"!tod.operator<{din}, {dout}, {elem}, f64>"


def Z(n):  # a square complex operator type
    return O(n, n, "complex<f64>")


# name -> (function text, arguments, {op name: count the law leaves})
LAWS = {
    "adjoint_involution": (f"""
        func.func @f(%m: tensor<4x3xf64>, %x: tensor<3xf64>) -> tensor<4xf64> {{
          %a = "tod.dense"(%m) : (tensor<4x3xf64>) -> {O(3, 4)}
          %0 = "tod.adjoint"(%a) : ({O(3, 4)}) -> {O(4, 3)}
          %1 = "tod.adjoint"(%0) : ({O(4, 3)}) -> {O(3, 4)}
          %y = "tod.apply"(%1, %x) : ({O(3, 4)}, tensor<3xf64>) -> tensor<4xf64>
          return %y : tensor<4xf64>
        }}""", [randn(4, 3), randn(3)], {"tod.adjoint": 0}),
    "compose_identity": (f"""
        func.func @f(%m: tensor<4x3xf64>, %x: tensor<3xf64>) -> tensor<4xf64> {{
          %a = "tod.dense"(%m) : (tensor<4x3xf64>) -> {O(3, 4)}
          %i = "tod.eye"() : () -> {O(3, 3)}
          %j = "tod.eye"() : () -> {O(4, 4)}
          %0 = "tod.compose"(%a, %i) : ({O(3, 4)}, {O(3, 3)}) -> {O(3, 4)}
          %1 = "tod.compose"(%j, %0) : ({O(4, 4)}, {O(3, 4)}) -> {O(3, 4)}
          %y = "tod.apply"(%1, %x) : ({O(3, 4)}, tensor<3xf64>) -> tensor<4xf64>
          return %y : tensor<4xf64>
        }}""", [randn(4, 3), randn(3)], {"tod.compose": 0, "tod.eye": 0}),
    "fft_inverse": (f"""
        func.func @f(%x: tensor<8xcomplex<f64>>) -> (tensor<8xcomplex<f64>>, tensor<8xcomplex<f64>>) {{
          %f = "tod.fft"() : () -> {Z(8)}
          %g = "tod.ifft"() : () -> {Z(8)}
          %0 = "tod.compose"(%f, %g) : ({Z(8)}, {Z(8)}) -> {Z(8)}
          %1 = "tod.compose"(%g, %f) : ({Z(8)}, {Z(8)}) -> {Z(8)}
          %y = "tod.apply"(%0, %x) : ({Z(8)}, tensor<8xcomplex<f64>>) -> tensor<8xcomplex<f64>>
          %z = "tod.apply"(%1, %x) : ({Z(8)}, tensor<8xcomplex<f64>>) -> tensor<8xcomplex<f64>>
          return %y, %z : tensor<8xcomplex<f64>>, tensor<8xcomplex<f64>>
        }}""", [crandn(8)], {"tod.fft": 0, "tod.ifft": 0, "tod.compose": 0, "tod.eye": 2}),
    "projector_idempotent": (f"""
        func.func @f(%u: tensor<6x2xf64>, %x: tensor<6xf64>) -> tensor<6xf64> {{
          %p = "tod.projector"(%u) : (tensor<6x2xf64>) -> {O(6, 6)}
          %0 = "tod.compose"(%p, %p) : ({O(6, 6)}, {O(6, 6)}) -> {O(6, 6)}
          %y = "tod.apply"(%0, %x) : ({O(6, 6)}, tensor<6xf64>) -> tensor<6xf64>
          return %y : tensor<6xf64>
        }}""", [orthonormal(6, 2), randn(6)], {"tod.compose": 0}),
    "scale_fold_constants": (f"""
        func.func @f(%m: tensor<3x3xf64>, %x: tensor<3xf64>) -> tensor<3xf64> {{
          %a = "tod.dense"(%m) : (tensor<3x3xf64>) -> {O(3, 3)}
          %c = "ttensor.constant"() {{value = 3.0 : f64}} : () -> tensor<f64>
          %d = "ttensor.constant"() {{value = -0.25 : f64}} : () -> tensor<f64>
          %0 = "tod.scale"(%c, %a) : (tensor<f64>, {O(3, 3)}) -> {O(3, 3)}
          %1 = "tod.scale"(%d, %0) : (tensor<f64>, {O(3, 3)}) -> {O(3, 3)}
          %y = "tod.apply"(%1, %x) : ({O(3, 3)}, tensor<3xf64>) -> tensor<3xf64>
          return %y : tensor<3xf64>
        }}""", [randn(3, 3), randn(3)], {"tod.scale": 1, "ttensor.constant": 1}),
    "scale_fold_runtime_and_one": (f"""
        func.func @f(%m: tensor<3x3xf64>, %x: tensor<3xf64>, %s: tensor<f64>, %t: tensor<f64>) -> tensor<3xf64> {{
          %a = "tod.dense"(%m) : (tensor<3x3xf64>) -> {O(3, 3)}
          %one = "ttensor.constant"() {{value = 1.0 : f64}} : () -> tensor<f64>
          %0 = "tod.scale"(%one, %a) : (tensor<f64>, {O(3, 3)}) -> {O(3, 3)}
          %1 = "tod.scale"(%s, %0) : (tensor<f64>, {O(3, 3)}) -> {O(3, 3)}
          %2 = "tod.scale"(%t, %1) : (tensor<f64>, {O(3, 3)}) -> {O(3, 3)}
          %y = "tod.apply"(%2, %x) : ({O(3, 3)}, tensor<3xf64>) -> tensor<3xf64>
          return %y : tensor<3xf64>
        }}""", [randn(3, 3), randn(3), np.array(1.5), np.array(-0.7)], {"tod.scale": 1, "ttensor.binary": 1}),
    "adjoint_reverses_compose": (f"""
        func.func @f(%m: tensor<4x3xf64>, %n: tensor<3x5xf64>, %x: tensor<4xf64>) -> tensor<5xf64> {{
          %a = "tod.dense"(%m) : (tensor<4x3xf64>) -> {O(3, 4)}
          %b = "tod.dense"(%n) : (tensor<3x5xf64>) -> {O(5, 3)}
          %0 = "tod.compose"(%a, %b) : ({O(3, 4)}, {O(5, 3)}) -> {O(5, 4)}
          %1 = "tod.adjoint"(%0) : ({O(5, 4)}) -> {O(4, 5)}
          %y = "tod.apply"(%1, %x) : ({O(4, 5)}, tensor<4xf64>) -> tensor<5xf64>
          return %y : tensor<5xf64>
        }}""", [randn(4, 3), randn(3, 5), randn(4)], {"tod.adjoint": 2}),
    "adjoint_linear": (f"""
        func.func @f(%m: tensor<4x4xcomplex<f64>>, %n: tensor<4x4xcomplex<f64>>, %s: tensor<f64>,
                     %x: tensor<4xcomplex<f64>>) -> tensor<4xcomplex<f64>> {{
          %a = "tod.dense"(%m) : (tensor<4x4xcomplex<f64>>) -> {Z(4)}
          %b = "tod.dense"(%n) : (tensor<4x4xcomplex<f64>>) -> {Z(4)}
          %sb = "tod.scale"(%s, %b) : (tensor<f64>, {Z(4)}) -> {Z(4)}
          %0 = "tod.plus"(%a, %sb) : ({Z(4)}, {Z(4)}) -> {Z(4)}
          %1 = "tod.adjoint"(%0) : ({Z(4)}) -> {Z(4)}
          %y = "tod.apply"(%1, %x) : ({Z(4)}, tensor<4xcomplex<f64>>) -> tensor<4xcomplex<f64>>
          return %y : tensor<4xcomplex<f64>>
        }}""", [crandn(4, 4), crandn(4, 4), np.array(0.3), crandn(4)], {"tod.adjoint": 2}),
    "adjoint_of_self_adjoint_and_zero": (f"""
        func.func @f(%u: tensor<5x2xf64>, %d: tensor<5xf64>, %m: tensor<5x5xf64>, %x: tensor<5xf64>,
                     %w: tensor<3xf64>) -> (tensor<5xf64>, tensor<5xf64>) {{
          %p = "tod.projector"(%u) : (tensor<5x2xf64>) -> {O(5, 5)}
          %g = "tod.diag"(%d) : (tensor<5xf64>) -> {O(5, 5)}
          %a = "tod.dense"(%m) : (tensor<5x5xf64>) -> {O(5, 5)}
          %s = "tod.sym"(%a) : ({O(5, 5)}) -> {O(5, 5)}
          %i = "tod.eye"() : () -> {O(5, 5)}
          %0 = "tod.plus"(%p, %g) : ({O(5, 5)}, {O(5, 5)}) -> {O(5, 5)}
          %1 = "tod.plus"(%0, %s) : ({O(5, 5)}, {O(5, 5)}) -> {O(5, 5)}
          %2 = "tod.plus"(%1, %i) : ({O(5, 5)}, {O(5, 5)}) -> {O(5, 5)}
          %3 = "tod.adjoint"(%2) : ({O(5, 5)}) -> {O(5, 5)}
          %y = "tod.apply"(%3, %x) : ({O(5, 5)}, tensor<5xf64>) -> tensor<5xf64>
          %z = "tod.zero"() : () -> {O(5, 3)}
          %zh = "tod.adjoint"(%z) : ({O(5, 3)}) -> {O(3, 5)}
          %v = "tod.apply"(%zh, %w) : ({O(3, 5)}, tensor<3xf64>) -> tensor<5xf64>
          return %y, %v : tensor<5xf64>, tensor<5xf64>
        }}""", [orthonormal(5, 2), randn(5), randn(5, 5), randn(5), randn(3)], {"tod.adjoint": 0}),
    "adjoint_of_fft": (f"""
        func.func @f(%x: tensor<8xf64>) -> (tensor<8xcomplex<f64>>, tensor<8xcomplex<f64>>) {{
          %f = "tod.fft"() : () -> {Z(8)}
          %g = "tod.ifft"() : () -> {Z(8)}
          %0 = "tod.adjoint"(%f) : ({Z(8)}) -> {Z(8)}
          %1 = "tod.adjoint"(%g) : ({Z(8)}) -> {Z(8)}
          %y = "tod.apply"(%0, %x) : ({Z(8)}, tensor<8xf64>) -> tensor<8xcomplex<f64>>
          %z = "tod.apply"(%1, %x) : ({Z(8)}, tensor<8xf64>) -> tensor<8xcomplex<f64>>
          return %y, %z : tensor<8xcomplex<f64>>, tensor<8xcomplex<f64>>
        }}""", [randn(8)], {"tod.adjoint": 0}),
    "kronecker_mixed_product": (f"""
        func.func @f(%ma: tensor<2x3xf64>, %mb: tensor<4x2xf64>, %mc: tensor<3x2xf64>, %md: tensor<2x5xf64>,
                     %x: tensor<10xf64>) -> tensor<8xf64> {{
          %a = "tod.dense"(%ma) : (tensor<2x3xf64>) -> {O(3, 2)}
          %b = "tod.dense"(%mb) : (tensor<4x2xf64>) -> {O(2, 4)}
          %c = "tod.dense"(%mc) : (tensor<3x2xf64>) -> {O(2, 3)}
          %d = "tod.dense"(%md) : (tensor<2x5xf64>) -> {O(5, 2)}
          %ab = "tod.tensor"(%a, %b) : ({O(3, 2)}, {O(2, 4)}) -> {O(6, 8)}
          %cd = "tod.kronecker"(%c, %d) : ({O(2, 3)}, {O(5, 2)}) -> {O(10, 6)}
          %0 = "tod.compose"(%ab, %cd) : ({O(6, 8)}, {O(10, 6)}) -> {O(10, 8)}
          %y = "tod.apply"(%0, %x) : ({O(10, 8)}, tensor<10xf64>) -> tensor<8xf64>
          return %y : tensor<8xf64>
        }}""", [randn(2, 3), randn(4, 2), randn(3, 2), randn(2, 5), randn(10)],
        {"tod.tensor": 0, "tod.kronecker": 1, "tod.compose": 2}),
    "zero_laws": (f"""
        func.func @f(%m: tensor<3x4xf64>, %x: tensor<4xf64>) -> (tensor<3xf64>, tensor<2xf64>) {{
          %a = "tod.dense"(%m) : (tensor<3x4xf64>) -> {O(4, 3)}
          %z = "tod.zero"() : () -> {O(4, 3)}
          %0 = "tod.plus"(%z, %a) : ({O(4, 3)}, {O(4, 3)}) -> {O(4, 3)}
          %1 = "tod.plus"(%0, %z) : ({O(4, 3)}, {O(4, 3)}) -> {O(4, 3)}
          %w = "tod.zero"() : () -> {O(3, 2)}
          %2 = "tod.compose"(%w, %1) : ({O(3, 2)}, {O(4, 3)}) -> {O(4, 2)}
          %y = "tod.apply"(%1, %x) : ({O(4, 3)}, tensor<4xf64>) -> tensor<3xf64>
          %v = "tod.apply"(%2, %x) : ({O(4, 2)}, tensor<4xf64>) -> tensor<2xf64>
          return %y, %v : tensor<3xf64>, tensor<2xf64>
        }}""", [randn(3, 4), randn(4)], {"tod.plus": 0, "tod.compose": 0, "tod.zero": 1}),
    "power_zero_and_one": (f"""
        func.func @f(%m: tensor<3x3xf64>, %x: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {{
          %a = "tod.dense"(%m) : (tensor<3x3xf64>) -> {O(3, 3)}
          %0 = "tod.power"(%a) {{exponent = 0 : i64}} : ({O(3, 3)}) -> {O(3, 3)}
          %1 = "tod.power"(%a) {{exponent = 1 : i64}} : ({O(3, 3)}) -> {O(3, 3)}
          %y = "tod.apply"(%0, %x) : ({O(3, 3)}, tensor<3xf64>) -> tensor<3xf64>
          %z = "tod.apply"(%1, %x) : ({O(3, 3)}, tensor<3xf64>) -> tensor<3xf64>
          return %y, %z : tensor<3xf64>, tensor<3xf64>
        }}""", [randn(3, 3), randn(3)], {"tod.power": 0, "tod.eye": 1}),
    "commutator_with_itself": (f"""
        func.func @f(%m: tensor<3x3xf64>, %x: tensor<3xf64>) -> tensor<3xf64> {{
          %a = "tod.dense"(%m) : (tensor<3x3xf64>) -> {O(3, 3)}
          %0 = "tod.commutator"(%a, %a) : ({O(3, 3)}, {O(3, 3)}) -> {O(3, 3)}
          %y = "tod.apply"(%0, %x) : ({O(3, 3)}, tensor<3xf64>) -> tensor<3xf64>
          return %y : tensor<3xf64>
        }}""", [randn(3, 3), randn(3)], {"tod.commutator": 0, "tod.zero": 1}),
    "sym_and_skew_of_self_adjoint": (f"""
        func.func @f(%m: tensor<4x4xf64>, %x: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) {{
          %a = "tod.dense"(%m) : (tensor<4x4xf64>) -> {O(4, 4)}
          %0 = "tod.sym"(%a) : ({O(4, 4)}) -> {O(4, 4)}
          %1 = "tod.sym"(%0) : ({O(4, 4)}) -> {O(4, 4)}
          %2 = "tod.skew"(%0) : ({O(4, 4)}) -> {O(4, 4)}
          %y = "tod.apply"(%1, %x) : ({O(4, 4)}, tensor<4xf64>) -> tensor<4xf64>
          %z = "tod.apply"(%2, %x) : ({O(4, 4)}, tensor<4xf64>) -> tensor<4xf64>
          return %y, %z : tensor<4xf64>, tensor<4xf64>
        }}""", [randn(4, 4), randn(4)], {"tod.sym": 1, "tod.skew": 0}),
    "unitary_times_adjoint": (f"""
        func.func @f(%x: tensor<12xf64>) -> tensor<12xcomplex<f64>> {{
          %f = "tod.fft"() : () -> {Z(4)}
          %g = "tod.ifft"() : () -> {Z(3)}
          %u = "tod.kronecker"(%f, %g) : ({Z(4)}, {Z(3)}) -> {Z(12)}
          %uh = "tod.adjoint"(%u) : ({Z(12)}) -> {Z(12)}
          %0 = "tod.compose"(%uh, %u) : ({Z(12)}, {Z(12)}) -> {Z(12)}
          %y = "tod.apply"(%0, %x) : ({Z(12)}, tensor<12xf64>) -> tensor<12xcomplex<f64>>
          return %y : tensor<12xcomplex<f64>>
        }}""", [randn(12)], {"tod.compose": 0, "tod.adjoint": 0, "tod.eye": 1}),
}


def _counts(module) -> dict:
    counts: dict = {}
    for op in module.body.operations[0].regions[0].blocks[0].operations:
        counts[op.operation.name] = counts.get(op.operation.name, 0) + 1
    return counts


@pytest.mark.parametrize("law", LAWS)
def test_law_preserves_what_the_program_computes(law):
    text, args, after = LAWS[law]
    with make_context():
        module = ir.Module.parse(textwrap.dedent(text))
        before = run(module, "f", *args)
        build_pass_manager("builtin.module(tessera-tod-canonicalize)").run(module.operation)
        module.operation.verify()
        counts = _counts(module)
        rewritten = run(module, "f", *args)
    for op_name, n in after.items():
        assert counts.get(op_name, 0) == n, f"{law} did not fire: {op_name} x{counts.get(op_name, 0)}\n{module}"
    before = before if isinstance(before, tuple) else (before,)
    rewritten = rewritten if isinstance(rewritten, tuple) else (rewritten,)
    for b, r in zip(before, rewritten):
        np.testing.assert_allclose(r, b, rtol=1e-10, atol=1e-10)


def test_compile_driver_canonicalizes_operator_programs():
    source = textwrap.dedent("""
        from tessera import *

        @function
        def f(M: tensor[f32, 8, 8], U: tensor[f32, 8, 2], x: tensor[f32, 8]):
            P = op.projector(U)
            return (P @ P @ op.adjoint(op.adjoint(op.dense(M)))) @ x
        """)
    result = compiler.compile_source(source, "user.py", stop_after="canonical")
    with make_context():
        ops = ir.Module.parse(result.metadata["ops"])
        counts = _counts(ops)
    assert "tod.adjoint" not in counts and counts["tod.compose"] == 1 and counts["tod.projector"] == 1
