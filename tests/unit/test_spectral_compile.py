"""The spectral ops compiled (passes/linalg_kernels.py: one looping kernel per factorization, run by one
thread; passes/tod_lower.py: the factors' products): op.spectral (svd, eigh) with op.truncate,
op.reconstruct, op.pseudoinverse, op.norm and op.spectral_radius, against numpy (np.linalg.svd, eigh,
eigvals) and the reference interpreter, on the CPU and, through SPIR-V, the OpenCL CPU runtime; PTX and
AMDGPU compile.

Tolerances: f64 1e-10 of the reference's largest entry (Jacobi's rotations are backward stable, about
sweeps·n·u; the spectral radius by 60 normalized squarings, each rounding n·u·max|B|², on matrices far from
non-normal); f32 1e-4 (the interpreter computes in f64 and rounds once). Truncations cut between distinct
singular values: inside a group of equal ones the kept subspace is the factorization's choice (numpy's and
the kernel's differ), while a cut between groups, reconstruct and the pseudoinverse are the same for every
choice."""

import pathlib

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph"
RNG = np.random.default_rng(1992)

SOURCE = """
@function
def svd_tall(A: tensor[f64, 12, 7], x: tensor[f64, 7], y: tensor[f64, 12]):
    S = op.spectral(op.dense(A), kind="svd")
    S3 = op.truncate(S, 3)
    return op.reconstruct(S3) @ x, op.adjoint(op.reconstruct(S3)) @ y, op.pseudoinverse(S) @ y, op.norm(op.dense(A))

@function
def svd_wide(A: tensor[f64, 5, 9], x: tensor[f64, 9], y: tensor[f64, 5]):
    S = op.truncate(op.spectral(op.dense(A), kind="svd"), 2)
    return op.reconstruct(S) @ x, op.pseudoinverse(S) @ y, op.pseudoinverse(op.dense(A)) @ y

@function
def eigh8(B: tensor[f64, 8, 8], x: tensor[f64, 8]):
    S = op.spectral(op.dense(B), kind="eigh")
    return op.reconstruct(op.truncate(S, 3)) @ x, op.pseudoinverse(S) @ x

@function
def radius(A: tensor[f64, 16, 16]):
    return op.spectral_radius(op.dense(A))

@function
def svd32(A: tensor[f32, 10, 6], x: tensor[f32, 6], R: tensor[f32, 6, 6]):
    S = op.truncate(op.spectral(op.dense(A), kind="svd"), 2)
    return op.reconstruct(S) @ x, op.pseudoinverse(S) @ (op.reconstruct(S) @ x), op.spectral_radius(op.dense(R))
"""


@pytest.fixture(scope="module")
def cpu():
    return executor.load(compiler.compile_source(SOURCE, "spectral_ops.py").image)


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "spectral_ops.py"})


def close(got, want, rtol):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=rtol * max(float(np.abs(w).max()), 1e-300))


def with_singular_values(m, n, s):
    """An m×n matrix with singular values s (len min(m, n)), random singular vectors."""
    u, _ = np.linalg.qr(RNG.standard_normal((m, m)))
    v, _ = np.linalg.qr(RNG.standard_normal((n, n)))
    k = min(m, n)
    return (u[:, :k] * np.asarray(s, dtype=float)) @ v[:, :k].T


def numpy_svd_ops(a, x, y, k):
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    rec = (u[:, :k] * s[:k]) @ vt[:k]
    keep = s > max(a.shape) * np.finfo(np.float64).eps * s.max() if s.max() > 0 else np.zeros_like(s, bool)
    pinv = (vt[keep].T / s[keep]) @ u[:, keep].T
    return rec @ x, rec.T @ y, pinv @ y, s[0]


TALL = {
    "random": lambda: RNG.standard_normal((12, 7)),
    "rank 2": lambda: RNG.standard_normal((12, 2)) @ RNG.standard_normal((2, 7)),
    "repeated (3, 3, 3, 1, 1, 0.5, 0.5)": lambda: with_singular_values(12, 7, [3, 3, 3, 1, 1, 0.5, 0.5]),
    # graded to 1e-4: the pseudoinverse's error is about u·κ (1e-12 here) for numpy's and the kernel's alike
    "graded to 1e-4": lambda: with_singular_values(12, 7, [1, 0.3, 0.1, 1e-2, 1e-3, 3e-4, 1e-4]),
    "large entries": lambda: RNG.standard_normal((12, 7)) * 1e200,
}


@pytest.mark.parametrize("case", list(TALL))
def test_svd_against_numpy_and_the_interpreter(cpu, reference, case):
    """reconstruct of the 3 largest terms, its adjoint, the pseudoinverse, the norm; the cut between σ₃ and σ₄
    is a gap in every case (in the repeated one, 3 | 1)."""
    a, x, y = TALL[case](), RNG.standard_normal(7), RNG.standard_normal(12)
    got = cpu.svd_tall(a, x, y)
    close(got, numpy_svd_ops(a, x, y, 3), 1e-10)
    close(got, tuple(reference.interpret("svd_tall", a, x, y)), 1e-10)


def test_svd_of_a_wide_matrix(cpu, reference):
    """5×9: factorized transposed; reconstruct and the pseudoinverse of the truncation and of the operator."""
    for a in (RNG.standard_normal((5, 9)), with_singular_values(5, 9, [4, 3, 1, 1, 0])):
        x, y = RNG.standard_normal(9), RNG.standard_normal(5)
        got = cpu.svd_wide(a, x, y)
        close(got, tuple(reference.interpret("svd_wide", a, x, y)), 1e-10)
        close(got[2], np.linalg.pinv(a, rcond=9 * np.finfo(np.float64).eps) @ y, 1e-10)


def test_zero_matrix(cpu):
    """σ = 0 everywhere: reconstruct 0, pseudoinverse 0 (no term above rcond·0), norm 0, radius 0."""
    got = cpu.svd_tall(np.zeros((12, 7)), RNG.standard_normal(7), RNG.standard_normal(12))
    for g in got:
        assert np.array_equal(np.asarray(g), np.zeros_like(g))
    assert cpu.radius(np.zeros((16, 16))) == 0.0
    assert np.array_equal(cpu.eigh8(np.zeros((8, 8)), np.ones(8))[1], np.zeros(8))


def test_nan_and_infinite_entries_give_nan(cpu):
    """A NaN or an infinity anywhere: every result NaN, never a number."""
    for bad in (np.nan, np.inf):
        a = RNG.standard_normal((12, 7))
        a[4, 5] = bad
        for g in cpu.svd_tall(a, np.ones(7), np.ones(12)):
            assert np.isnan(g).all()
        r = RNG.standard_normal((16, 16))
        r[0, 3] = bad
        assert np.isnan(cpu.radius(r))
        b = np.eye(8)
        b[2, 2] = bad
        for g in cpu.eigh8(b, np.ones(8)):
            assert np.isnan(g).all()


def symmetric_with(w):
    q, _ = np.linalg.qr(RNG.standard_normal((len(w), len(w))))
    b = (q * np.asarray(w, dtype=float)) @ q.T
    return (b + b.T) / 2


@pytest.mark.parametrize("w", [
    None, [5, -4, 3, 2, 1, 0.5, -0.25, 0.1],          # distinct magnitudes
    [4, 4, 4, -1, 1, 0.5, 0.5, 0],                   # repeated, singular, ±1: cut after 4, 4, 4
    [-6, 3, 3, 2, 2, 2, 0.05, 0]])
def test_eigh_against_numpy_and_the_interpreter(cpu, reference, w):
    b = RNG.standard_normal((8, 8)) if w is None else symmetric_with(w)
    if w is None:
        b = b + b.T
    x = RNG.standard_normal(8)
    got = cpu.eigh8(b, x)
    close(got, tuple(reference.interpret("eigh8", b, x)), 1e-10)
    lam, v = np.linalg.eigh(b)
    order = np.lexsort((-lam, -np.abs(lam)))
    lam, v = lam[order], v[:, order]
    close(got[0], (v[:, :3] * lam[:3]) @ v[:, :3].T @ x, 1e-10)


def test_eigh_of_a_matrix_that_is_not_self_adjoint_is_nan(cpu, reference):
    """The interpreter refuses it (its promise check); the kernel's result is NaN."""
    b = RNG.standard_normal((8, 8))
    with pytest.raises(Exception, match="self-adjoint"):
        reference.interpret("eigh8", b, np.ones(8))
    for g in cpu.eigh8(b, np.ones(8)):
        assert np.isnan(g).all()


def radius_cases():
    n = 16
    lap = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    rot = np.zeros((n, n))
    rot[:2, :2] = [[0.0, -2.0], [2.0, 0.0]]   # eigenvalues ±2i
    rot[2:, 2:] = np.diag(np.linspace(-1.5, 1.5, n - 2))
    jordan = np.eye(n) * 0.7 + np.eye(n, k=1)
    return {"path Laplacian": lap, "random general": RNG.standard_normal((n, n)),
            "complex pair on top": rot, "±3 on top": np.diag(np.r_[3.0, -3.0, np.linspace(0, 2, n - 2)]),
            "symmetric": symmetric_with(np.linspace(-5, 4, n)), "defective (Jordan 0.7)": jordan,
            "upper triangular": np.triu(RNG.standard_normal((n, n))), "tiny": RNG.standard_normal((n, n)) * 1e-200}


@pytest.mark.parametrize("case", list(radius_cases()))
def test_spectral_radius_against_eigvals(cpu, reference, case):
    """max |eigvals(A)| (the interpreter's definition), within 1e-10 relative, except the Jordan block, whose
    eigenvalues numpy finds only to ε^(1/16) (its perturbed block's) while Gelfand's limit is 0.7 exactly."""
    a = radius_cases()[case]
    got = float(cpu.radius(a))
    if case.startswith("defective"):
        assert abs(got - 0.7) <= 1e-10 * 0.7
        return
    want = float(np.max(np.abs(np.linalg.eigvals(a))))
    assert abs(got - want) <= 1e-10 * want
    assert abs(got - float(reference.interpret("radius", a))) <= 1e-10 * want


def test_nilpotent_radius_is_zero(cpu):
    assert cpu.radius(np.triu(RNG.standard_normal((16, 16)), 1)) == 0.0


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_f32_factorization(target, reference, request):
    ctx = request.getfixturevalue("opencl") if target == "spirv" else None
    program = executor.load(compiler.compile_source(SOURCE, "spectral_ops.py", CompileOptions(
        target=target, kernels=("svd32",))).image, *([ctx] if ctx else []))
    for a in (RNG.standard_normal((10, 6)), with_singular_values(10, 6, [5, 3, 1, 1, 0.5, 0])):
        a, x = a.astype(np.float32), RNG.standard_normal(6).astype(np.float32)
        r = RNG.standard_normal((6, 6)).astype(np.float32)
        got = program.svd32(a, x, r)
        assert got[0].dtype == np.float32
        close(got, tuple(reference.interpret("svd32", a, x, r)), 1e-4)


@pytest.mark.parametrize("target", ["spirv"])
def test_f64_on_the_opencl_runtime(target, reference, opencl):  # noqa: F811
    program = executor.load(compiler.compile_source(SOURCE, "spectral_ops.py", CompileOptions(
        target=target, kernels=("svd_tall", "eigh8", "radius"))).image, opencl)
    a, x, y = with_singular_values(12, 7, [3, 3, 3, 1, 1, 0.5, 0]), RNG.standard_normal(7), RNG.standard_normal(12)
    close(program.svd_tall(a, x, y), tuple(reference.interpret("svd_tall", a, x, y)), 1e-10)
    b = symmetric_with([4, 4, 4, -1, 1, 0.5, 0.5, 0])
    close(program.eigh8(b, x[:1].repeat(8)), tuple(reference.interpret("eigh8", b, x[:1].repeat(8))), 1e-10)
    r = RNG.standard_normal((16, 16))
    close(program.radius(r), reference.interpret("radius", r), 1e-10)


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_spectral_example(target, request):
    """examples/graph/spectral.py's denoised_measurement (48×32, rank 4) and heat_flow, as the docs run them."""
    path = EXAMPLES / "spectral.py"
    ctx = request.getfixturevalue("opencl") if target == "spirv" else None
    built = compiler.compile_source(path.read_text(), str(path), CompileOptions(
        target=target, kernels=("denoised_measurement", "heat_flow")))
    program = executor.load(built.image, *([ctx] if ctx else []))
    reference = tessera_frontend_compile(path.read_text(), {"filename": str(path)})
    a0 = RNG.standard_normal((48, 4)) @ RNG.standard_normal((4, 32))
    a, x = a0 + 0.01 * RNG.standard_normal((48, 32)), RNG.standard_normal(32)
    close(program.denoised_measurement(a, x), tuple(reference.interpret("denoised_measurement", a, x)), 1e-10)
    lap = 2 * np.eye(16) - np.eye(16, k=1) - np.eye(16, k=-1)
    close(program.heat_flow(lap, np.eye(16)[8]), tuple(reference.interpret("heat_flow", lap, np.eye(16)[8])), 1e-10)


@pytest.mark.parametrize("target, arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942"),
                                          ("amdgpu", "gfx1100")])
def test_gpu_targets_compile(target, arch):
    built = compiler.compile_source(SOURCE, "spectral_ops.py", CompileOptions(
        target=target, arch=arch, kernels=("svd_wide", "eigh8", "radius", "svd32")))
    assert set(built.metadata["plans"]) == {"svd_wide", "eigh8", "radius", "svd32"}


@pytest.mark.parametrize("line, expect", [
    ('op.reconstruct(op.spectral(op.dense(E), kind="eig")) @ z',
     "4:27: error: 'tod.spectral' has no kernel lowering yet on cpu: the general eigendecomposition "
     "(kind=\"eig\") has complex factors"),
    ('op.pseudoinverse(op.dense(B)) @ y',
     "4:12: error: 'tod.pseudoinverse' has no kernel lowering yet on cpu: an svd of a 100×70 operator is larger "
     "than the one-thread Jacobi kernel takes, at most 64 (the smaller extent) and 4096 (the larger)"),
    ('op.spectral_radius(op.dense(C)) * y',
     "4:12: error: 'tod.spectral_radius' has no kernel lowering yet on cpu: the spectral radius of a 65×65 "
     "operator is larger than its one-thread kernel takes, at most 64×64"),
    ('op.norm(op.fft(8, dtype=f32) @ op.dense(E))',
     "4:12: error: 'tod.norm' has no kernel lowering yet on cpu: an svd of the complex operator"),
])
def test_refusals_at_the_users_line(line, expect):
    src = ("\n@function\ndef f(E: tensor[f32, 8, 8], z: tensor[f32, 8], B: tensor[f64, 100, 70], y: tensor[f64, 100],"
           " C: tensor[f64, 65, 65]):\n"
           f"    return {line}\n")
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "user.py")
    assert "user.py:" + expect in str(e.value)


def test_gradients_through_a_factorization_are_refused_at_the_line():
    """The interpreter differentiates reconstruct and pseudoinverse (Daleckii–Krein / Townsend); compiled,
    tod.spectral_derivative is refused at the op's line, naming it."""
    src = ("\n@function\ndef f(A: tensor[f64, 6, 4], x: tensor[f64, 4]):\n"
           "    return op.sum(op.reconstruct(op.truncate(op.spectral(op.dense(A), kind=\"svd\"), 2)) @ x)\n\n"
           "g = grad(f)\n")
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "user.py", CompileOptions(kernels=("g",)))
    assert "'tod.spectral_derivative' has no kernel lowering yet on cpu: it needs the derivative of a factorization" \
        in str(e.value)
    assert "user.py:4:" in str(e.value)
