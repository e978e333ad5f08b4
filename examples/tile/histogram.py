"""A histogram with atomics: every thread adds one to its value's bin, many threads hitting the same bins.

`tile.atomic_add(H[b], 1)` is one indivisible read-modify-write, so no count is lost however the threads and
blocks interleave (on the CPU the blocks run on several worker threads; a warp's lanes update one bin in
turn). `python examples/tile/histogram.py` runs it on the CPU and checks the counts against numpy.
"""

import sys

import numpy as np

from tessera import ceil_div, kernel, launch, tensor, tile


@kernel
def histogram(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        b = X[i]
        if b >= 0 and b < H.shape[0]:   # values outside the bins are not counted
            tile.atomic_add(H[b], 1)


# How the examples matrix runs these kernels (docs/portability.md, "Examples on every target"): each launch's
# kernel, grid and block, its arguments drawn from the seeded generator `rng`, and what the arguments at the
# `expect` positions must hold afterwards (numpy's answer: the interpreter runs @functions, not @kernels),
# exactly, or within |got - want| <= atol + rtol * |want| where those are given.
def launches(rng):
    n, bins = 10_000, 16
    X = rng.integers(-1, bins + 1, n).astype(np.int32)
    counts = np.bincount(X[(X >= 0) & (X < bins)], minlength=bins).astype(np.int32)
    return [dict(kernel="histogram", grid=ceil_div(n, 256), block=256, args=[X, np.zeros(bins, np.int32)],
                 expect={1: counts})]   # exact: no count may be lost


def main() -> int:
    rng = np.random.default_rng(0)
    n, bins = 1_000_000, 16
    X = rng.integers(-1, bins + 1, n).astype(np.int32)
    H = np.zeros(bins, dtype=np.int32)
    histogram[ceil_div(n, 256), 256](X, H)
    ref = np.bincount(X[(X >= 0) & (X < bins)], minlength=bins)
    ok = np.array_equal(H, ref)
    print(f"histogram  n={n}  bins={bins}  counted {int(H.sum())} of {int(ref.sum())}  {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
