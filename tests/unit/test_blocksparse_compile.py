"""Block-sparse operators (op.descriptor("blocksparse", blocks, rows, cols, din=, dout=)) compiled: A x, A X,
a stack of X, Aᵀ X (op.adjoint and the "adjoint" flag) lowered by one-hot GEMMs (passes/tod_lower.py
_Lowering._blocksparse), against numpy's dense matrix and the reference interpreter, on the CPU and the
OpenCL CPU runtime (f32 within 1e-5 of the largest entry, f64 within 1e-12), duplicated coordinates (they
add), coordinates outside the operator (compiled: they contribute nothing; the interpreter
refuses them), a block count known only at run time (0 included; f32 and bf16), the gradient with respect to
x, the deterministic profile bit-identical across runs, ptx / amdgpu compiling, and what is refused."""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.backends.ptx import ptxas
from tessera.diagnostics import CompileError
from tessera.interpret.values import InterpreterError
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

# 12 x 8 operator of 4x4 blocks (R = 3 block rows, C = 2 block columns), 5 blocks, (2, 1) twice
TEMPLATE = """
@function
def apply(B: tensor[{t}, 5, 4, 4], rows: tensor[i32, 5], cols: tensor[i32, 5], x: tensor[{t}, 8],
          X: tensor[{t}, 8, 3], S: tensor[{t}, 2, 8, 3], Y: tensor[{t}, 12, 3]):
    A = op.descriptor("blocksparse", B, rows, cols, din=8, dout=12, name="A")
    return A @ x, A @ X, A @ S, op.adjoint(A) @ Y, op.adjoint(A) @ (A @ X)

@function
def flagged(B: tensor[{t}, 5, 4, 4], rows: tensor[i32, 5], cols: tensor[i32, 5], Y: tensor[{t}, 12, 3],
            x: tensor[{t}, 8]):
    At = op.descriptor("blocksparse", B, rows, cols, din=8, dout=12, flags=("adjoint",), name="At")
    return At @ Y, op.adjoint(At) @ x

"""
ROWS, COLS = np.array([0, 2, 2, 1, 2], np.int32), np.array([1, 0, 1, 1, 1], np.int32)
TOL = {"f32": 1e-5, "f64": 1e-12}


def source(t: str) -> str:
    return TEMPLATE.format(t=t)


def arrays(t: str, seed: int = 7):
    rng = np.random.default_rng(seed)
    dt = np.float32 if t == "f32" else np.float64
    r = lambda *s: rng.standard_normal(s).astype(dt)   # noqa: E731
    return r(5, 4, 4), r(8), r(8, 3), r(2, 8, 3), r(12, 3)


def dense(B, rows, cols, dout=12, din=8):
    m = np.zeros((dout, din))
    for k, (r, c) in enumerate(zip(rows, cols)):
        if 0 <= r < dout // 4 and 0 <= c < din // 4:
            m[4 * r:4 * r + 4, 4 * c:4 * c + 4] += B[k]
    return m


def close(got, want, t: str):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL[t] * max(1.0, float(np.abs(want).max())))


def expected(t: str):
    B, x, X, S, Y = arrays(t)
    M = dense(B.astype(np.float64), ROWS, COLS)
    return {"apply": [M @ x, M @ X, M @ S, M.T @ Y, M.T @ (M @ X)], "flagged": [M.T @ Y, M @ x]}


def call(program, name: str, t: str, rows=ROWS, cols=COLS):
    B, x, X, S, Y = arrays(t)
    args = {"apply": (B, rows, cols, x, X, S, Y), "flagged": (B, rows, cols, Y, x)}[name]
    return list(getattr(program, name)(*args))


@pytest.fixture(scope="module", params=["f32", "f64"])
def cpu(request):
    t = request.param
    return t, executor.load(compiler.compile_source(source(t), "bs.py").image)


@pytest.mark.parametrize("name", ["apply", "flagged"])
def test_compiled_block_sparse_matches_numpy_and_the_interpreter(cpu, name):
    t, program = cpu
    got = call(program, name, t)
    for g, w in zip(got, expected(t)[name]):
        close(g, w, t)
    interpreted = tessera_frontend_compile(source(t), {"filename": "bs.py"})
    for g, w in zip(got, interpret(interpreted, name, t)):
        close(g, w, t)


def interpret(reference, name: str, t: str):
    B, x, X, S, Y = arrays(t)
    args = {"apply": (B, ROWS, COLS, x, X, S, Y), "flagged": (B, ROWS, COLS, Y, x)}[name]
    return list(reference.interpret(name, *args))


def test_coordinates_outside_the_operator_contribute_nothing_compiled_and_are_refused_interpreted(cpu):
    t, program = cpu
    rows, cols = np.array([0, 3, -1, 2, 1], np.int32), np.array([1, 0, 1, 2, 1], np.int32)   # blocks 1-3 outside
    B, x, X, S, Y = arrays(t)
    M = dense(B.astype(np.float64), rows, cols)
    assert np.abs(M).sum() > 0 and np.count_nonzero(M) == 2 * 16
    got = call(program, "apply", t, rows, cols)
    for g, w in zip(got, [M @ x, M @ X, M @ S, M.T @ Y, M.T @ (M @ X)]):
        close(g, w, t)
    with pytest.raises(InterpreterError, match=r"block 1 at block coordinates \(3, 0\) lies outside the 12x8 operator"):
        tessera_frontend_compile(source(t), {"filename": "bs.py"}).interpret("apply", B, rows, cols, x, X, S, Y)


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_deterministic_profile_is_bit_identical_across_runs(target, request):
    ctx = [request.getfixturevalue("opencl")] if target == "spirv" else []
    rng = np.random.default_rng(3)
    # many duplicates of one coordinate: the scatter-sum's order decides the rounding
    src = """
@function
def f(B: tensor[f32, 64, 8, 8], rows: tensor[i32, 64], cols: tensor[i32, 64], X: tensor[f32, 32, 5]):
    A = op.descriptor("blocksparse", B, rows, cols, din=32, dout=24, name="A")
    return A @ X
"""
    B = (rng.standard_normal((64, 8, 8)) * np.exp(rng.uniform(-8, 8, (64, 1, 1)))).astype(np.float32)
    rows, cols = rng.integers(0, 3, 64).astype(np.int32), rng.integers(0, 4, 64).astype(np.int32)
    X = rng.standard_normal((32, 5)).astype(np.float32)
    runs = []
    for _ in range(2):   # two compilations, two loads, three runs each
        program = executor.load(compiler.compile_source(src, "d.py", CompileOptions(
            target=target, numerics="deterministic")).image, *ctx)
        runs += [np.asarray(program.f(B, rows, cols, X)).tobytes() for _ in range(3)]
    assert len(set(runs)) == 1
    M = np.zeros((24, 32))
    for k in range(64):
        M[8 * rows[k]:8 * rows[k] + 8, 8 * cols[k]:8 * cols[k] + 8] += B[k]
    want = M @ X
    got = np.frombuffer(runs[0], np.float32).reshape(24, 5)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(B).max() * 64)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_opencl_runs_block_sparse(opencl, t):  # noqa: F811
    program = executor.load(compiler.compile_source(source(t), "bs.py", CompileOptions(target="spirv")).image,
                            opencl)
    for name in ("apply", "flagged"):
        for g, w in zip(call(program, name, t), expected(t)[name]):
            close(g, w, t)


@pytest.mark.parametrize("target, arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942"),
                                          ("amdgpu", "gfx1100")])
def test_gpu_targets_compile_block_sparse(target, arch):
    if target == "ptx" and ptxas.find() is None:
        pytest.skip("ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
    plans = compiler.compile_source(source("f32"), "bs.py", CompileOptions(target=target, arch=arch)
                                    ).metadata["plans"]
    assert [o["repr"] for o in plans["apply"]["operators"]] == ["blocksparse"]
    assert any(s.get("kernel") for s in plans["apply"]["steps"])
    dynamic = compiler.compile_source(DYNAMIC.format(t="f32"), "d.py", CompileOptions(target=target, arch=arch))
    assert any(s.get("kernel") for s in dynamic.metadata["plans"]["f"]["steps"])


DYNAMIC = """
@function
def f(B: tensor[{t}, "N", 4, 4], rows: tensor[i32, "N"], cols: tensor[i32, "N"], X: tensor[{t}, 8, 3]):
    A = op.descriptor("blocksparse", B, rows, cols, din=8, dout=12, name="A")
    return A @ X, op.adjoint(A) @ (A @ X)
"""


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_block_count_known_at_run_time(target, request):
    ctx = [request.getfixturevalue("opencl")] if target == "spirv" else []
    program = executor.load(compiler.compile_source(DYNAMIC.format(t="f32"), "d.py", CompileOptions(target=target)
                                                    ).image, *ctx)
    B, _, X, _, _ = arrays("f32")
    for n in (5, 0, 1, 17, 0):   # a call with no blocks after calls with some: exactly zero
        idx = np.arange(n) % 5
        Bn = B[idx] * (1 + np.arange(n, dtype=np.float32)[:, None, None])   # 17: each coordinate several times
        M = dense(Bn.astype(np.float64), ROWS[idx], COLS[idx])
        got = program.f(Bn, ROWS[idx], COLS[idx], X)
        if n == 0:
            assert all(np.asarray(g).shape == s and not np.asarray(g).any() for g, s in zip(got, [(12, 3), (8, 3)]))
        for g, w in zip(got, [M @ X, M.T @ (M @ X)]):
            close(g, w, "f32")


def test_bf16_block_sparse_with_a_run_time_block_count():
    """bf16 blocks and x (float32 values a bf16 holds), f32 accumulation: within 2⁻⁶ of the largest entry of
    the interpreter's result (the bf16 results' rounding), duplicates included."""
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="the interpreter takes bf16 arguments as ml_dtypes arrays")
    src = DYNAMIC.format(t="bf16")
    program = executor.load(compiler.compile_source(src, "d.py").image)
    reference = tessera_frontend_compile(src, {"filename": "d.py"})
    B, _, X, _, _ = arrays("f32")
    idx = np.arange(9) % 5
    Bn, Xb = (a.astype(ml_dtypes.bfloat16).astype(np.float32) for a in (B[idx], X))
    M = dense(Bn.astype(np.float64), ROWS[idx], COLS[idx])
    got = program.f(Bn, ROWS[idx], COLS[idx], Xb)
    want = reference.interpret("f", Bn.astype(ml_dtypes.bfloat16), ROWS[idx], COLS[idx], Xb.astype(ml_dtypes.bfloat16))
    for g, w, exact in zip(got, want, [M @ Xb, M.T @ (M @ Xb)]):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        np.testing.assert_allclose(g, w, rtol=0, atol=2 ** -6 * float(np.abs(w).max()))
        np.testing.assert_allclose(g, exact, rtol=0, atol=2 ** -6 * float(np.abs(exact).max()))


def test_gradient_with_respect_to_x_is_the_adjoint_apply():
    src = """
@function
def loss(B: tensor[f32, 5, 4, 4], rows: tensor[i32, 5], cols: tensor[i32, 5], x: tensor[f32, 8]):
    A = op.descriptor("blocksparse", B, rows, cols, din=8, dout=12, name="A")
    return op.sum(op.tanh(A @ x))

g = grad(loss, argnums=(3,))
"""
    B, x, _, _, _ = arrays("f32")
    got = executor.load(compiler.compile_source(src, "g.py").image).g(B, ROWS, COLS, x)
    M = dense(B.astype(np.float64), ROWS, COLS)
    want = M.T @ (1 - np.tanh(M @ x) ** 2)
    close(got, want, "f32")
    close(got, tessera_frontend_compile(src, {"filename": "g.py"}).interpret("g", B, ROWS, COLS, x), "f32")


@pytest.mark.parametrize("src, message", [
    (DYNAMIC.format(t="f64"), "an f64 block-sparse operator applies with a static block count only"),
    (TEMPLATE.format(t="f32").replace("X: tensor[f32, 8, 3]", 'X: tensor[f32, 8, "K"]'),
     "a block-sparse operator applies to tensors of static extents only"),
])
def test_what_is_refused_at_the_users_line(src, message):
    with pytest.raises(CompileError, match=r"d.py:\d+:\d+: error: 'tod.descriptor' has no kernel lowering yet on "
                                           r"cpu: " + message):
        compiler.compile_source(src, "d.py")
