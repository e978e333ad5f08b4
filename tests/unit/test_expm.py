"""op.expm and its Fréchet derivative compiled (passes/matrix_functions.py: scaling and squaring with a Taylor
polynomial, as GEMMs, elementwise ops and reductions) against references: symmetric matrices' exponentials
from their eigendecompositions (numpy, f64), the reference interpreter (Padé-13, and for the derivative the
exponential of the block matrix [[A, E], [0, A]]), on the CPU and, through SPIR-V, the OpenCL CPU runtime;
PTX and AMDGPU compile.

Tolerances: f64 1e-12 of the reference's largest entry (the polynomial's backward error is u by the choice of
θ; each of at most 8 squarings and 9 products adds a few n·u); f32 1e-5 of it (the interpreter computes in f64
and rounds once)."""

import pathlib

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph"
RNG = np.random.default_rng(2011)

SOURCE = """
@function
def exp64(A: tensor[f64, 8, 8], X: tensor[f64, 8, 8]):
    return op.expm(op.dense(A)) @ X

@function
def exp32(A: tensor[f32, 8, 8], x: tensor[f32, 8], s: f32):
    E = op.expm(s * op.dense(A))
    return E @ x, op.adjoint(E) @ x

@function
def heat(L: tensor[f64, 6, 6], u0: tensor[f64, 6], w: tensor[f64, 6]):
    return op.sum(w * (op.expm(-0.5 * op.dense(L)) @ u0))

sensitivity = grad(heat, argnums=(0, 1))
"""


@pytest.fixture(scope="module")
def cpu():
    return executor.load(compiler.compile_source(SOURCE, "expm.py").image)


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "expm.py"})


def close(got, want, rtol):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=rtol * float(np.abs(w).max()))


def symmetric(n, norm):
    """A symmetric n×n matrix of 1-norm `norm` and its exponential by its eigendecomposition."""
    a = RNG.standard_normal((n, n))
    a = a + a.T
    a *= norm / np.abs(a).sum(axis=0).max()
    w, v = np.linalg.eigh(a)
    return a, (v * np.exp(w)) @ v.T


@pytest.mark.parametrize("norm", [0.0, 0.5, 3.0, 20.0, 150.0, 900.0])
def test_f64_exponential_of_symmetric_matrices(cpu, norm):
    """From no squaring (‖A‖₁ ≤ θ = 3.54) to 8 (900 ≤ θ·2⁸), A and −A, against V exp(Λ) Vᵀ, relative to the
    reference's largest entry (those of exp(−A) are far smaller than exp(A)'s); one whose exponential
    overflows f64 is skipped."""
    for sign in (1.0, -1.0):
        a, want = symmetric(8, norm)
        if sign < 0:
            w, v = np.linalg.eigh(-a)
            a, want = -a, (v * np.exp(w)) @ v.T
        if not np.isfinite(want).all():
            continue
        close(cpu.exp64(a, np.eye(8)), want, 1e-12)


def test_f64_general_matrices_match_the_interpreter(cpu, reference):
    for norm in (0.1, 2.0, 30.0):
        a = RNG.standard_normal((8, 8))
        a *= norm / np.abs(a).sum(axis=0).max()
        x = RNG.standard_normal((8, 8))
        close(cpu.exp64(a, x), reference.interpret("exp64", a, x), 1e-12)


def test_beyond_the_squarings_the_result_is_nan(cpu, reference):
    """‖A‖₁ > θ·2⁸ needs more squarings than the graph holds: NaN, never a wrong number."""
    a = np.diag(np.full(8, -200.0)) + np.diag(np.full(7, 800.0), 1)   # ‖A‖₁ = 1000
    assert np.isfinite(reference.interpret("exp64", a, np.eye(8))).all()
    assert np.isnan(cpu.exp64(a, np.eye(8))).all()
    a[0, 0] = np.nan
    assert np.isnan(cpu.exp64(a / 10, np.eye(8))).all()


def f32_args(scale):
    return (RNG.standard_normal((8, 8)).astype(np.float32), RNG.standard_normal(8).astype(np.float32),
            np.float32(scale))


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_f32_exponential_and_its_adjoint(target, reference, request):
    ctx = request.getfixturevalue("opencl") if target == "spirv" else None
    program = executor.load(compiler.compile_source(SOURCE, "expm.py", CompileOptions(
        target=target, kernels=("exp32",))).image, *([ctx] if ctx else []))
    for scale in (0.05, 1.0, 4.0):
        args = f32_args(scale)
        got = program.exp32(*args)
        assert got[0].dtype == np.float32
        close(got, reference.interpret("exp32", *args), 1e-5)


def test_gradient_through_the_exponential(cpu, reference):
    """grad through expm: the Fréchet derivative L(Aᵀ, C) by the differentiated recurrences, against the
    interpreter's block exponential; a graph Laplacian as in examples/graph/spectral.py."""
    w = np.triu(RNG.random((6, 6)), 1)
    lap = np.diag((w + w.T).sum(axis=1)) - (w + w.T)
    for args in [(lap, RNG.standard_normal(6), RNG.standard_normal(6)),
                 (RNG.standard_normal((6, 6)) * 3, RNG.standard_normal(6), RNG.standard_normal(6))]:
        close(cpu.heat(*args), reference.interpret("heat", *args), 1e-12)
        close(cpu.sensitivity(*args), reference.interpret("sensitivity", *args), 1e-12)


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_spectral_example_heat_at(target, request):
    """examples/graph/spectral.py's heat_at (16×16, f64); its heat_flow and denoised_measurement:
    test_spectral_compile.py."""
    path = EXAMPLES / "spectral.py"
    ctx = request.getfixturevalue("opencl") if target == "spirv" else None
    built = compiler.compile_source(path.read_text(), str(path), CompileOptions(target=target, kernels=("heat_at",)))
    w = np.triu(RNG.random((16, 16)) * (RNG.random((16, 16)) < 0.3), 1)
    lap = np.diag((w + w.T).sum(axis=1)) - (w + w.T)
    args = (lap, RNG.standard_normal(16), RNG.standard_normal(16))
    got = executor.load(built.image, *([ctx] if ctx else [])).heat_at(*args)
    close(got, tessera_frontend_compile(path.read_text(), {"filename": str(path)}).interpret("heat_at", *args), 1e-12)


@pytest.mark.parametrize("target, arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942")])
def test_gpu_targets_compile(target, arch):
    built = compiler.compile_source(SOURCE, "expm.py", CompileOptions(target=target, arch=arch,
                                                                      kernels=("exp32", "exp64")))
    assert set(built.metadata["plans"]) == {"exp32", "exp64"}


@pytest.mark.parametrize("line, expect", [
    ("op.expm(op.fft(8, dtype=f32)) @ x", "4:12: error: 'tod.expm' has no kernel lowering yet on cpu for the "
                                          "complex operator of complex<f32> entries"),
    ("op.expm(op.dense(B)) @ y", "4:12: error: 'tod.expm' has no kernel lowering yet on cpu for a 300×300 operator: "
                                 "its matrix functions compute in f64, up to 256×256"),
])
def test_refusals_at_the_users_line(line, expect):
    src = ("\n@function\ndef f(x: tensor[f32, 8], B: tensor[f64, 300, 300], y: tensor[f64, 300]):\n"
           f"    return {line}\n")
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "user.py")
    assert "user.py:" + expect in str(e.value)
