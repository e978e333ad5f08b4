"""The main job: load a compiled image, launch saxpy and warp_reduce_sum on the CPU, check them against numpy.

    tessera-cc examples/saxpy.py -o saxpy.tessera
    python examples/run_saxpy.py saxpy.tessera
"""

import sys

import numpy as np

from tessera import ceil_div, runtime


def main(path: str) -> int:
    mod = runtime.load(path)
    rng = np.random.default_rng(0)

    n, a = 1_000_003, np.float32(2.5)
    X, Y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    Out = np.empty_like(X)
    mod.saxpy(a, X, Y, Out, grid=(ceil_div(n, 256),), block=(256,))
    err = float(np.max(np.abs(Out - (a * X + Y))))
    ok_saxpy = err <= 1e-6
    print(f"saxpy            n={n:>9}  max |error| vs numpy = {err:.2e}  {'OK' if ok_saxpy else 'FAILED'}")

    warps = 4096
    X = rng.standard_normal(warps * 32, dtype=np.float32)
    Out = np.zeros(warps, dtype=np.float32)
    mod.warp_reduce_sum(X, Out, grid=(warps * 32 // 128,), block=(128,))
    ref = X.reshape(warps, 32).sum(axis=1, dtype=np.float64)
    err = float(np.max(np.abs(Out - ref)))
    ok_reduce = err <= 1e-4
    print(f"warp_reduce_sum  warps={warps:>5}  max |error| vs numpy = {err:.2e}  {'OK' if ok_reduce else 'FAILED'}")
    return 0 if ok_saxpy and ok_reduce else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "saxpy.tessera"))
