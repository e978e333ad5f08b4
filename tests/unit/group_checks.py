"""The cooperative-group and shared-memory tests' checks, numpy only (the GPU machine runs them with the runtime alone):
`launch(name, *arrays, grid=, block=)` runs a kernel of tests/unit/group_kernels.py (or, for check_example,
of examples/tile/cooperative.py) on the arrays in place. tests/unit/test_groups.py runs them on the CPU and
OpenCL, tests/gpu/test_groups_gpu.py on CUDA."""

import numpy as np


def device_launcher(mod, ctx):
    """`launch` for the loaded module `mod` on the device context `ctx`: the arrays copied there and back."""
    from tessera.runtime import DeviceArray  # lazy: the runtime alone on the GPU machine, imported once needed

    def launch(name, *arrays, grid, block):
        on_device = [DeviceArray.from_numpy(a, ctx) for a in arrays]
        getattr(mod, name)(*on_device, grid=grid, block=block)
        for a, d in zip(arrays, on_device):
            a[...] = d.numpy()
    return launch

def check_barrier(launch):
    n = 512
    X, Out = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    launch("neighbours", X, Out, grid=2, block=256)
    i = np.arange(n)
    np.testing.assert_array_equal(Out, 2 * (i - i % 256 + (i % 256 + 1) % 256).astype(np.float32))


def check_group_within_a_warp(launch):
    n = 256
    X, Out = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    launch("quads", X, Out, grid=2, block=128)
    i = np.arange(n)
    np.testing.assert_array_equal(Out, (i - i % 4 + (i % 4 + 1) % 4 + 1).astype(np.float32))


def check_group_of_warps(launch):
    n = 512
    X, Out = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    launch("halves", X, Out, grid=2, block=256)
    i = np.arange(n)
    np.testing.assert_array_equal(Out, (i - i % 128 + 127 - i % 128 + 1).astype(np.float32))


def check_reductions(launch, warp: int = 32):
    n = 8 * 64
    rng = np.random.default_rng(3)
    I = rng.integers(-1000, 1000, n).astype(np.int32)
    F = rng.standard_normal(n)
    Isum, Fmin, Imax = np.zeros(n, np.int32), np.zeros(n), np.zeros(n, np.int32)
    launch("reductions", I, F, Isum, Fmin, Imax, grid=4, block=128)
    np.testing.assert_array_equal(Isum, np.repeat(I.reshape(-1, warp).sum(axis=1), warp))
    np.testing.assert_array_equal(Fmin, np.repeat(F.reshape(-1, 16).min(axis=1), 16))
    np.testing.assert_array_equal(Imax, np.repeat(I.reshape(-1, 2).max(axis=1), 2))


def check_shared_reversal(launch):
    n = 512
    X, Out = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    launch("reverse_blocks", X, Out, grid=4, block=128)
    i = np.arange(n)
    np.testing.assert_array_equal(Out, X[i - i % 128 + 127 - i % 128])


def check_shared_transpose(launch):
    R, C = 48, 80
    X = np.random.default_rng(11).standard_normal((R, C)).astype(np.float32)
    Out = np.zeros((C, R), np.float32)
    launch("transpose_tiles", X, Out, grid=(C // 16, R // 16), block=(16, 16))
    np.testing.assert_array_equal(Out, X.T)


def check_shared_copies_of_each_size(launch):
    n = 256
    rng = np.random.default_rng(13)
    D, H = rng.standard_normal(n), rng.standard_normal(n).astype(np.float16)
    OutD, OutH = np.zeros(n), np.zeros(n, np.float16)
    launch("rotate_wide_and_narrow", D, H, OutD, OutH, grid=4, block=64)
    i = np.arange(n)
    j = i - i % 64 + (i % 64 + 1) % 64
    np.testing.assert_array_equal(OutD, D[j])
    np.testing.assert_array_equal(OutH, H[j])


CHECKS = [check_barrier, check_group_within_a_warp, check_group_of_warps, check_reductions, check_shared_reversal,
          check_shared_transpose, check_shared_copies_of_each_size]


def check_example(launch):
    """examples/tile/cooperative.py: a 64-thread group's sync and rank, a warp's max per row, groups of 8."""
    X = np.zeros(64, np.float32)
    launch("coop_example", X, grid=1, block=64)
    np.testing.assert_array_equal(X, np.ones(64, np.float32))
    rng = np.random.default_rng(5)
    A, M = rng.standard_normal((10, 77), dtype=np.float32), np.zeros(10, np.float32)
    launch("row_max", A, M, grid=(1, 10), block=(32, 1))
    np.testing.assert_array_equal(M, A.max(axis=1))
    X, G = rng.standard_normal(96, dtype=np.float32), np.zeros(96, np.float32)
    launch("group_sums", X, G, grid=1, block=96)
    np.testing.assert_allclose(G, np.repeat(X.reshape(-1, 8).sum(axis=1), 8), rtol=1e-6, atol=1e-6)
