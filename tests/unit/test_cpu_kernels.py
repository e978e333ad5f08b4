"""SIMT kernels on the CPU backend, checked against numpy.

Tolerances: exact for integer results and for single float operations (saxpy's a*x+y is two roundings in
both); 1e-5 relative for float32 reductions, whose order differs from numpy's pairwise summation.
"""

import pathlib

import numpy as np
import pytest

from tessera import ceil_div

RNG = np.random.default_rng(1234)


def f32(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


# The spec's kernels, from the example the README runs: saxpy and warp_reduce_sum.
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "saxpy.py"
SAXPY = WARP_REDUCE = EXAMPLE.read_text()


@pytest.mark.parametrize("n, block", [(1, 32), (31, 32), (1000, 256), (4097, 128), (100_000, 1024), (777, 100)])
def test_saxpy(build, n, block):
    mod = build(SAXPY)
    X, Y = f32(n), f32(n)
    Out = np.full(n, np.nan, dtype=np.float32)
    a = np.float32(-1.75)
    mod.saxpy(a, X, Y, Out, grid=ceil_div(n, block), block=block)
    np.testing.assert_array_equal(Out, a * X + Y)


def test_saxpy_does_not_write_past_the_guard(build):
    """Threads past n are masked off: the sentinel after the output survives."""
    mod = build(SAXPY)
    n = 45
    X, Y = f32(n), f32(n)
    backing = np.full(n + 64, 7.0, dtype=np.float32)
    Out = backing[:n]
    mod.saxpy(np.float32(2), X, Y, Out, grid=4, block=32)  # 128 threads for 45 elements
    assert np.all(backing[n:] == 7.0)


@pytest.mark.parametrize("warps, block", [(1, 32), (8, 64), (64, 256), (1000, 128)])
def test_warp_reduce_sum(build, warps, block):
    mod = build(WARP_REDUCE)
    X = f32(warps * 32)
    Out = np.zeros(warps, dtype=np.float32)
    mod.warp_reduce_sum(X, Out, grid=warps * 32 // block, block=block)
    np.testing.assert_allclose(Out, X.reshape(warps, 32).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_shuffle_semantics_match_cuda(build):
    """Lanes whose source lies past the warp keep their own value (__shfl_down_sync)."""
    mod = build("""
        @kernel
        def shift(X: tensor[int, "N"], Out: tensor[int, "N"]):
            i = launch.thread_id()
            Out[i] = tile.warp_shuffle_down(X[i], 3)
        """)
    X = np.arange(64, dtype=np.int32)
    Out = np.zeros(64, dtype=np.int32)
    mod.shift(X, Out, grid=1, block=64)
    expect = np.concatenate([np.where(np.arange(32) + 3 < 32, np.arange(32) + 3, np.arange(32)) + w * 32
                             for w in range(2)])
    np.testing.assert_array_equal(Out, expect)


def test_shuffle_with_runtime_offset(build):
    mod = build("""
        @kernel
        def tree(X: tensor[float, "N"], Out: tensor[float, "M"]):
            i = launch.thread_id()
            v = X[i]
            off = tile.warp_size() // 2
            for step in range(5):
                v += tile.warp_shuffle_down(v, off)
                off = off // 2
            if tile.lane_id() == 0:
                Out[tile.warp_id()] = v
        """)
    X = f32(32 * 16)
    Out = np.zeros(16, dtype=np.float32)
    mod.tree(X, Out, grid=2, block=256)
    np.testing.assert_allclose(Out, X.reshape(16, 32).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_divergent_if_else_and_loops(build):
    mod = build("""
        @kernel
        def piecewise(X: tensor[float, "N"], Out: tensor[float, "N"], k: int):
            i = launch.thread_id()
            if i < X.shape[0]:
                v = X[i]
                if v > 0.5:
                    v = v * 2.0
                elif v < -0.5:
                    v = -v
                else:
                    acc = 0.0
                    for j in range(k):
                        acc += v
                    v = acc
                Out[i] = v
        """)
    X = f32(1000)
    Out = np.zeros_like(X)
    mod.piecewise(X, Out, np.int32(3), grid=8, block=128)
    expect = np.where(X > 0.5, X * 2, np.where(X < -0.5, -X, X * 3))
    np.testing.assert_allclose(Out, expect, rtol=1e-6)


def test_two_dimensional_tensors_and_blocks(build):
    """A 2-D launch over a row-major matrix; warps form along x."""
    mod = build("""
        @kernel
        def transpose(A: tensor[float, "M", "N"], B: tensor[float, "N", "M"]):
            col = launch.thread_id(0)
            row = launch.thread_id(1)
            if row < A.shape[0] and col < A.shape[1]:
                B[col, row] = A[row, col]
        """)
    A = f32(70, 45)
    B = np.zeros((45, 70), dtype=np.float32)
    mod.transpose(A, B, grid=(ceil_div(45, 16), ceil_div(70, 8)), block=(16, 8))
    np.testing.assert_array_equal(B, A.T)


def test_row_loop_with_named_dims(build):
    mod = build("""
        @kernel
        def row_mean(A: tensor[float, "M", "K"], Out: tensor[float, "M"]):
            r = launch.thread_id()
            if r < A.shape[0]:
                acc = 0.0
                for k in range(A.shape[1]):
                    acc += A[r, k]
                Out[r] = acc / A.shape[1]
        """)
    A = f32(300, 17)
    Out = np.zeros(300, dtype=np.float32)
    mod.row_mean(A, Out, grid=3, block=128)
    np.testing.assert_allclose(Out, A.mean(axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype, np_dtype, name", [("double", np.float64, "f64"), ("int64", np.int64, "i64"),
                                                   ("int32", np.int32, "i32"), ("int16", np.int16, "i16")])
def test_element_types(build, dtype, np_dtype, name):
    mod = build(f"""
        @kernel
        def axpb(a: {dtype}, X: tensor[{dtype}, "N"], Out: tensor[{dtype}, "N"]):
            i = launch.thread_id()
            if i < X.shape[0]:
                Out[i] = a * X[i] + 3
        """)
    X = (RNG.standard_normal(500) * 100).astype(np_dtype)
    Out = np.zeros_like(X)
    mod.axpb(np_dtype(2), X, Out, grid=4, block=128)
    np.testing.assert_array_equal(Out, (np_dtype(2) * X + np_dtype(3)).astype(np_dtype))


def test_integer_semantics_follow_python(build):
    mod = build("""
        @kernel
        def divmod_(X: tensor[int, "N"], Q: tensor[int, "N"], R: tensor[int, "N"]):
            i = launch.thread_id()
            if i < X.shape[0]:
                Q[i] = X[i] // 7
                R[i] = X[i] % 7
        """)
    X = np.arange(-50, 50, dtype=np.int32)
    Q, R = np.zeros_like(X), np.zeros_like(X)
    mod.divmod_(X, Q, R, grid=1, block=128)
    np.testing.assert_array_equal(Q, X // 7)
    np.testing.assert_array_equal(R, X % 7)


def test_math_functions(build):
    mod = build("""
        import math

        @kernel
        def f(X: tensor[float, "N"], Out: tensor[float, "N"]):
            i = launch.thread_id()
            if i < X.shape[0]:
                Out[i] = math.exp(-X[i] * X[i]) + math.sqrt(abs(X[i])) + math.tanh(X[i]) + max(X[i], 0.0)
        """)
    X = f32(2048)
    Out = np.zeros_like(X)
    mod.f(X, Out, grid=8, block=256)
    ref = np.exp(-X * X) + np.sqrt(np.abs(X)) + np.tanh(X) + np.maximum(X, 0)
    np.testing.assert_allclose(Out, ref, rtol=2e-6, atol=2e-6)


def test_block_and_grid_queries(build):
    mod = build("""
        @kernel
        def ids(B: tensor[int, "N"], L: tensor[int, "N"], G: tensor[int, "N"]):
            i = launch.thread_id()
            B[i] = launch.block_id()
            L[i] = launch.local_id()
            G[i] = launch.grid_dim() * 1000 + launch.block_dim()
        """)
    n = 5 * 96
    B, L, G = (np.zeros(n, np.int32) for _ in range(3))
    mod.ids(B, L, G, grid=5, block=96)
    np.testing.assert_array_equal(B, np.repeat(np.arange(5), 96))
    np.testing.assert_array_equal(L, np.tile(np.arange(96), 5))
    assert np.all(G == 5 * 1000 + 96)


def test_libm_functions_and_short_conditions(build):
    """Regression: erf has no LLVM intrinsic; its per-lane libm calls must be lowered before vector ops."""
    import math
    mod = build("""
        import math

        @kernel
        def f(X: tensor[float, "N"], Out: tensor[float, "N"]):
            i = launch.thread_id()
            if i < X.shape[0] and X[i] > -10.0:
                Out[i] = math.erf(X[i]) + math.log(abs(X[i]) + 1.0) + math.floor(X[i])
        """)
    X = f32(1000)
    Out = np.zeros_like(X)
    mod.f(X, Out, grid=4, block=256)
    ref = np.array([math.erf(x) for x in X.astype(np.float64)]) + np.log(np.abs(X) + 1) + np.floor(X)
    np.testing.assert_allclose(Out, ref, rtol=2e-6, atol=2e-6)
