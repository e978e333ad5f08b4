"""Scatter-add with atomics: Out[I[i]] += X[i] for every i, many i sharing a destination.

Integer values are exact in any order, so they match numpy's `np.add.at` bit for bit; float32 sums depend on
the order the threads happen to add in, so they are checked against a float64 reference within a tolerance.
`python examples/tile/scatter_add.py` runs both on the CPU.
"""

import sys

import numpy as np

from tessera import ceil_div, int64, kernel, launch, tensor, tile


@kernel
def scatter_add_i64(X: tensor[int64, "N"], I: tensor[int, "N"], Out: tensor[int64, "M"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(Out[I[i]], X[i])


@kernel
def scatter_add_f32(X: tensor[float, "N"], I: tensor[int, "N"], Out: tensor[float, "M"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(Out[I[i]], X[i], order="relaxed", scope="device")


# How the examples matrix runs these kernels (docs/portability.md, "Examples on every target"): each launch's
# kernel, grid and block, its arguments drawn from the seeded generator `rng`, and what the arguments at the
# `expect` positions must hold afterwards (numpy's answer: the interpreter runs @functions, not @kernels),
# exactly, or within |got - want| <= atol + rtol * |want| where those are given.
def launches(rng):
    n, m = 20_000, 37
    I = rng.integers(0, m, n).astype(np.int32)
    Xi = rng.integers(-2**40, 2**40, n).astype(np.int64)
    want_i = np.zeros(m, np.int64)
    np.add.at(want_i, I, Xi)
    Xf = rng.standard_normal(n).astype(np.float32)
    want_f, magnitude = np.zeros(m), np.zeros(m)
    np.add.at(want_f, I, Xf.astype(np.float64))
    np.add.at(magnitude, I, np.abs(Xf.astype(np.float64)))
    count = np.bincount(I, minlength=m)
    return [
        dict(kernel="scatter_add_i64", grid=ceil_div(n, 256), block=256, args=[Xi, I, np.zeros(m, np.int64)],
             expect={2: want_i}),   # exact in any order
        # the threads add in any order: count roundings of float32, each at most 2^-24 of the sum's magnitude
        dict(kernel="scatter_add_f32", grid=ceil_div(n, 256), block=256, args=[Xf, I, np.zeros(m, np.float32)],
             expect={2: want_f}, atol=count * 2.0**-24 * magnitude),
    ]


def main() -> int:
    rng = np.random.default_rng(0)
    n, m = 500_000, 37
    I = rng.integers(0, m, n).astype(np.int32)

    Xi = rng.integers(-2**40, 2**40, n).astype(np.int64)
    Oi = np.zeros(m, dtype=np.int64)
    scatter_add_i64[ceil_div(n, 256), 256](Xi, I, Oi)
    ref_i = np.zeros(m, dtype=np.int64)
    np.add.at(ref_i, I, Xi)
    ok_i = np.array_equal(Oi, ref_i)
    print(f"scatter_add i64  n={n}  m={m}  exact: {'OK' if ok_i else 'FAILED'}")

    Xf = rng.standard_normal(n).astype(np.float32)
    Of = np.zeros(m, dtype=np.float32)
    scatter_add_f32[ceil_div(n, 256), 256](Xf, I, Of)
    ref_f = np.zeros(m)
    np.add.at(ref_f, I, Xf.astype(np.float64))
    err = float(np.max(np.abs(Of - ref_f)))
    ok_f = err <= 1e-2   # ~13,500 float32 additions per destination, each rounding by up to 2^-24 of the sum
    print(f"scatter_add f32  n={n}  m={m}  max |error| vs float64 = {err:.2e}  {'OK' if ok_f else 'FAILED'}")
    return 0 if ok_i and ok_f else 1


if __name__ == "__main__":
    sys.exit(main())
