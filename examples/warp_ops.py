"""Warp operations at the warp's edge: shuffles that reach past it keep their own value, butterflies over
all 32 lanes, and the ids a thread sees (spec/execution-model.md §3). The GPU tests (tests/gpu/kernels.py)
and the OpenCL ones (tests/unit/test_opencl.py) run these kernels and check each lane.

    tessera-cc examples/warp_ops.py --target ptx -o warp_ops.tessera
"""
import numpy as np
from tessera import f64, kernel, launch, tensor, tile


@kernel
def shift_down(X: tensor[int, "N"], Out: tensor[int, "N"]):
    i = launch.thread_id()
    Out[i] = tile.warp_shuffle_down(X[i], 3)


@kernel
def butterfly_f64(X: tensor[f64, "N"], Out: tensor[f64, "N"]):
    i = launch.thread_id()
    v = X[i]
    for m in [16, 8, 4, 2, 1]:
        v += tile.warp_shuffle_xor(v, m)
    Out[i] = v


@kernel
def ids(Out: tensor[int, "N", 4]):
    i = launch.thread_id()
    Out[i, 0] = tile.lane_id()
    Out[i, 1] = tile.warp_id()
    Out[i, 2] = launch.block_id()
    Out[i, 3] = tile.warp_size()


# How the examples matrix runs these kernels (docs/portability.md, "Examples on every target"): each launch's
# kernel, grid and block, its arguments drawn from the seeded generator `rng`, and what the arguments at the
# `expect` positions must hold afterwards (numpy's answer: the interpreter runs @functions, not @kernels),
# exactly, or within |got - want| <= atol + rtol * |want| where those are given.
def launches(rng):
    X = rng.integers(-1000, 1000, 64).astype(np.int32)
    i = np.arange(64)
    F = rng.standard_normal(128)
    n = 4 * 96
    t = np.arange(n)
    return [
        # lanes 29-31 reach past the warp's edge and keep their own value
        dict(kernel="shift_down", grid=1, block=64, args=[X, np.zeros(64, np.int32)],
             expect={1: X[np.where(i % 32 + 3 < 32, i + 3, i)]}),
        dict(kernel="butterfly_f64", grid=2, block=64, args=[F, np.zeros(128)],
             expect={1: np.repeat(F.reshape(4, 32).sum(axis=1), 32)}, atol=1e-12),
        dict(kernel="ids", grid=4, block=96, args=[np.zeros((n, 4), np.int32)],
             expect={0: np.stack([t % 32, t // 32, t // 96, np.full(n, 32)], axis=1).astype(np.int32)}),
    ]
