"""Cooperative groups and warp-size-agnostic reductions (spec/execution-model.md §5, portability guide §6)."""
import numpy as np
from tessera import kernel, launch, tensor, tile


@kernel
def coop_example(X):
    g = tile.cooperative_group(size=64)
    g.sync()
    X[g.thread_rank()] += 1


@kernel
def row_max(X: tensor[float, "R", "C"], Out: tensor[float, "R"]):
    # one warp per row, whatever the target's warp size
    r = launch.thread_id(1)
    lane = tile.lane_id()
    m = -3.0e38
    for c0 in range(0, X.shape[1], tile.warp_size()):
        c = c0 + lane
        if c < X.shape[1]:
            m = max(m, X[r, c])
    best = tile.warp_reduce(m, "max")
    if lane == 0:
        Out[r] = best


@kernel
def group_sums(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    Out[i] = tile.group_reduce(X[i], "sum", size=8)


# How the examples matrix runs these kernels (docs/portability.md, "Examples on every target"): each launch's
# kernel, grid and block, its arguments drawn from the seeded generator `rng`, and what the arguments at the
# `expect` positions must hold afterwards (numpy's answer: the interpreter runs @functions, not @kernels),
# exactly, or within |got - want| <= atol + rtol * |want| where those are given.
def launches(rng):
    A = rng.standard_normal((10, 77), dtype=np.float32)
    X = rng.standard_normal(96, dtype=np.float32)
    return [
        dict(kernel="coop_example", grid=1, block=64, args=[np.zeros(64, np.float32)],
             expect={0: np.ones(64, np.float32)}),
        dict(kernel="row_max", grid=(1, 10), block=(32, 1), args=[A, np.zeros(10, np.float32)],
             expect={1: A.max(axis=1)}),
        # a sum of 8 floats in any order is within 7 roundings of its terms' magnitude
        dict(kernel="group_sums", grid=1, block=96, args=[X, np.zeros(96, np.float32)],
             expect={1: np.repeat(X.reshape(-1, 8).sum(axis=1, dtype=np.float64), 8)},
             atol=np.repeat(8 * 2.0**-24 * np.abs(X).reshape(-1, 8).sum(axis=1), 8)),
    ]
