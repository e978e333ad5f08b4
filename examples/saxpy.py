"""SAXPY and a warp reduction, written exactly as in spec/execution-model.md §1 and §3.

`tessera-cc examples/saxpy.py -o saxpy.tessera` compiles both kernels; `python examples/run_saxpy.py`
compiles, launches them on the CPU through libtessera and checks the results against numpy.
"""
import numpy as np
from tessera import ceil_div, kernel, launch, tensor, tile


@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]


@kernel
def warp_reduce_sum(X, Out):
    tid = launch.thread_id()
    val = X[tid]
    for offset in [16,8,4,2,1]:
        val += tile.warp_shuffle_down(val, offset)
    if tile.lane_id() == 0:
        Out[tile.warp_id()] = val


# How the examples matrix runs these kernels (docs/portability.md, "Examples on every target"): each launch's
# kernel, grid and block, its arguments drawn from the seeded generator `rng`, and what the arguments at the
# `expect` positions must hold afterwards (numpy's answer: the interpreter runs @functions, not @kernels),
# exactly, or within |got - want| <= atol + rtol * |want| where those are given.
def launches(rng):
    n, a = 1000, np.float32(2.5)
    X, Y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    warps = 8
    W = rng.standard_normal(warps * 32, dtype=np.float32)
    return [
        # one rounding of a * X apart where the target fuses the multiply-add; NaN where a thread wrote nothing
        dict(kernel="saxpy", grid=ceil_div(n, 256), block=256, args=[a, X, Y, np.full(n, np.nan, np.float32)],
             expect={3: a * X + Y}, atol=2.0**-23 * np.abs(a * X)),
        # a sum of 32 floats in any order is within 31 roundings of its terms' magnitude
        dict(kernel="warp_reduce_sum", grid=warps * 32 // 128, block=128, args=[W, np.zeros(warps, np.float32)],
             expect={1: W.reshape(warps, 32).sum(axis=1, dtype=np.float64)},
             atol=32 * 2.0**-24 * np.abs(W).reshape(warps, 32).sum(axis=1)),
    ]
