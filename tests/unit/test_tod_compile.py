"""The operator algebra compiled (passes/tod_lower.py): operator programs built for the CPU and for SPIR-V (run
on the OpenCL CPU runtime) against the reference interpreter on the same inputs, Kronecker products also
against numpy.kron; what has no lowering is refused at the user's line, naming the op and the target.

Tolerances: the interpreter forms each operator's matrix in f64 and rounds it once, the kernels apply the
operators' factors one GEMM or elementwise op at a time (f32 accumulation), so results differ by rounding:
f32 1e-5 of the largest reference entry (inputs of unit scale, reductions of at most 24 terms); bf16 2^-6
relative (two roundings of a bf16 result, 2^-8 each, and the interpreter's bf16 matrix of a product)."""

import pathlib

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph"
RNG = np.random.default_rng(18)

SOURCE = """
@function
def dense(M: tensor[f32, 8, 6], x: tensor[f32, 6], X: tensor[f32, 2, 8, 3]):
    D = op.dense(M)
    return D @ x, op.adjoint(D) @ X, op.adjoint(D @ op.adjoint(D)) @ X

@function
def elementwise(M: tensor[f32, 6, 6], d: tensor[f32, 6], s: f32, X: tensor[f32, 6, 4]):
    A, G = op.dense(M), op.diag(d)
    return (s * G + A - 2.0 * op.eye(6, dtype=f32)) @ X, (G @ G @ (0.5 * G)) @ X

@function
def diagonals(d: tensor[f32, 6], e: tensor[f32, 6], s: f32, X: tensor[f32, 6, 4]):
    G = op.diag(d)
    return (op.diag(e) @ G @ (s * G) + 2.0 * G) @ X

@function
def factorized(U: tensor[f32, 8, 3], s: tensor[f32, 3], V: tensor[f32, 6, 3], x: tensor[f32, 6], W: tensor[f32, 6, 2]):
    svd = op.dense(U) @ op.diag(s) @ op.adjoint(op.dense(V))
    low_rank = op.dense(U) @ op.adjoint(op.dense(V))
    return svd @ x, low_rank @ W, op.adjoint(svd) @ (svd @ x)

@function
def structured(M: tensor[f32, 6, 6], N: tensor[f32, 6, 6], Q: tensor[f32, 6, 2], X: tensor[f32, 6, 3]):
    A, B = op.dense(M), op.dense(N)
    return (A ** 3) @ X, op.sym(A) @ X, op.skew(A) @ X, op.commutator(A, B) @ X, op.projector(Q) @ X

@function
def kron(A: tensor[f32, 3, 2], B: tensor[f32, 4, 5], C: tensor[f32, 2, 3], d: tensor[f32, 3], x: tensor[f32, 10],
         X: tensor[f32, 10, 3], z: tensor[f32, 30], y: tensor[f32, 15]):
    K = op.kronecker(op.dense(A), op.dense(B))
    return (K @ x, K @ X, op.adjoint(K) @ (K @ x), op.kronecker(op.diag(d), op.dense(B)) @ y,
            op.kronecker(op.dense(A), op.dense(B), op.dense(C)) @ z)
"""


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)

ARGS = {
    "dense": lambda: (randn(8, 6), randn(6), randn(2, 8, 3)),
    "elementwise": lambda: (randn(6, 6), randn(6), np.float32(-1.5), randn(6, 4)),
    "diagonals": lambda: (randn(6), randn(6), np.float32(0.25), randn(6, 4)),
    "factorized": lambda: (randn(8, 3), np.abs(randn(3)), randn(6, 3), randn(6), randn(6, 2)),
    "structured": lambda: (randn(6, 6), randn(6, 6), np.linalg.qr(randn(6, 2))[0].astype(np.float32), randn(6, 3)),
    "kron": lambda: (randn(3, 2), randn(4, 5), randn(2, 3), randn(3), randn(10), randn(10, 3), randn(30), randn(15)),
}


@pytest.fixture(scope="module")
def built():
    return compiler.compile_source(SOURCE, "ops.py")


@pytest.fixture(scope="module")
def cpu(built):
    return executor.load(built.image)


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "ops.py"})


def close_f32(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * float(np.abs(w).max()))


@pytest.mark.parametrize("name", sorted(ARGS))
def test_compiled_operators_match_the_interpreter(cpu, reference, name):
    args = ARGS[name]()
    close_f32(getattr(cpu, name)(*args), reference.interpret(name, *args))


def test_kronecker_matches_numpy_kron(cpu):
    A, B, C, d, x, X, z, y = ARGS["kron"]()
    K = np.kron(A.astype(np.float64), B)
    want = (K @ x, K @ X, K.T @ (K @ x), np.kron(np.diag(d), B) @ y, np.kron(K, C) @ z)
    close_f32(cpu.kron(A, B, C, d, x, X, z, y), want)


def test_operators_are_gemms_and_elementwise_kernels(built):
    plan = built.metadata["plans"]
    kernels = {name: [s["kernel"].split("__")[1] for s in p["steps"] if "kernel" in s] for name, p in plan.items()}
    # diagonals, scales and their sums and compositions: one fused elementwise kernel
    assert len(kernels["diagonals"]) == 1 and kernels["diagonals"][0].startswith("elementwise")
    # two GEMMs per factorization applied (Vᵀx, then U times the scaled result), never the 8×6 product; the
    # adjoint's svd @ x is the first result's (cse)
    assert sum(k.startswith("gemm") for k in kernels["factorized"]) == 2 + 2 + 2
    # a GEMM per dense factor of each Kronecker product applied (a batched one for several columns), the
    # diagonal's an elementwise product: 2 + 2 + 2 (the adjoint's K @ x is K @ x) + 1 + 3, never A ⊗ B
    assert sum(k.startswith("gemm") for k in kernels["kron"]) == 10, kernels["kron"]


BF16 = """
@function
def f(M: tensor[bf16, 16, 24], x: tensor[bf16, 24, 4], s: bf16):
    return (s * op.dense(M)) @ x, op.adjoint(op.dense(M)) @ (op.dense(M) @ x)
"""


def test_bf16_operators():
    M, x = randn(16, 24), randn(24, 4)
    args = (M, x, np.float32(0.75))
    cpu = executor.load(compiler.compile_source(BF16, "ops.py").image).f(*args)
    ref = tessera_frontend_compile(BF16, {"filename": "ops.py"}).interpret("f", *args)
    for g, w in zip(cpu, ref):
        g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
        np.testing.assert_allclose(g, w, rtol=2 ** -6, atol=2 ** -6 * float(np.abs(w).max()))


def test_opencl_runs_the_lowered_operators(opencl):  # noqa: F811
    program = executor.load(compiler.compile_source(SOURCE, "ops.py", CompileOptions(target="spirv")).image, opencl)
    ref = tessera_frontend_compile(SOURCE, {"filename": "ops.py"})
    for name in ("factorized", "kron", "elementwise"):
        args = ARGS[name]()
        close_f32(getattr(program, name)(*args), ref.interpret(name, *args))


@pytest.mark.parametrize("target", ["cpu", "spirv"])
@pytest.mark.parametrize("line, expect", [
    ("op.is_unitary(op.dense(M)), x", "4:12: error: 'tod.is_unitary' has no kernel lowering yet on {target}"),
    ('op.reconstruct(op.spectral(op.dense(M), kind="eig")) @ x',
     "4:27: error: 'tod.spectral' has no kernel lowering yet on {target}: the general eigendecomposition"),
])
def test_refusals_name_the_op_and_target_at_the_users_line(target, line, expect):
    src = f"\n@function\ndef f(M: tensor[f32, 8, 8], x: tensor[f32, 8]):\n    return {line}\n"
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "user.py", CompileOptions(target=target))
    assert "user.py:" + expect.format(target=target) in str(e.value)


def example_args():
    """examples/graph/structured_operators.py's inputs: filters of unit gain, orthonormal singular vectors."""
    R, C, image = randn(32, 32) / 8, randn(48, 48) / 8, randn(1536)
    U, V = (np.linalg.qr(randn(n, 8))[0].astype(np.float32) for n in (256, 128))
    return {"separable_blur": (R, C, image),
            "denoise": (U, np.abs(randn(8)) * 10, V, randn(128, 16), np.float32(2.0))}


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_structured_operators_example(target, request):
    path = EXAMPLES / "structured_operators.py"
    ctx = request.getfixturevalue("opencl") if target == "spirv" else None
    program = executor.load(compiler.compile_source(path.read_text(), str(path),
                                                    CompileOptions(target=target)).image, *([ctx] if ctx else []))
    ref = tessera_frontend_compile(path.read_text(), {"filename": str(path)})
    for name, args in example_args().items():
        close_f32(getattr(program, name)(*args), ref.interpret(name, *args))
    R, C, image = example_args()["separable_blur"]
    close_f32(program.separable_blur(R, C, image)[:1], [np.kron(R.astype(np.float64), C) @ image])


def test_derivatives_through_dense_operators_compile():
    """The cotangents of dense operators are GEMMs and outer products (passes/autodiff_operators.py), so grad of
    a program of dense operators lowers; a diagonal's cotangent forms an operator matrix (tod.matrix) and is
    refused at its line."""
    src = """
@function
def loss(M: tensor[f32, 8, 6], N: tensor[f32, 6, 6], x: tensor[f32, 6]):
    return op.sum(op.tanh((op.dense(M) @ op.adjoint(op.dense(N))) @ x))

g = grad(loss, argnums=(0, 1, 2))
"""
    args = (randn(8, 6), randn(6, 6), randn(6))
    got = executor.load(compiler.compile_source(src, "ops.py").image).g(*args)
    close_f32(got, tessera_frontend_compile(src, {"filename": "ops.py"}).interpret("g", *args))
    with pytest.raises(CompileError, match="'tod.matrix' has no kernel lowering yet on cpu"):
        compiler.compile_source(src.replace("op.dense(N)", "op.diag(x)"), "ops.py")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_bf16_operators_compile_for_ptx(arch):
    """The GPUs' tensor-core GEMMs take the lowered operators (bf16; f32 GEMMs on GPUs are issue 18 item 1's):
    the dense, adjoint and Kronecker applications are GEMM kernels there too."""
    src = """
@function
def f(M: tensor[bf16, 64, 64], A: tensor[bf16, 16, 16], B: tensor[bf16, 32, 32], x: tensor[bf16, 64, 16], s: bf16,
      z: tensor[bf16, 512, 16]):
    return (s * op.dense(M)) @ x, op.adjoint(op.dense(M)) @ (op.dense(M) @ x), op.kronecker(op.dense(A), op.dense(B)) @ z
"""
    plan = compiler.compile_source(src, "ops.py", CompileOptions(target="ptx", arch=arch)).metadata["plans"]["f"]
    gemms = [s["kernel"] for s in plan["steps"] if "gemm" in s.get("kernel", "")]
    # M x once for both results (the scale applies to it; Mᵀ multiplies it), then Mᵀ(M x) and the Kronecker's two
    assert len(gemms) == 1 + 1 + 2, gemms
