"""SAXPY on the CPU: Tessera's warp-vectorized kernel against numpy, in the same process.

    python bench/saxpy_cpu.py [--n 16777216] [--bounds-checks]

--bounds-checks times the kernel compiled with bounds checks (the default: here Y and Out are checked, X is
proven by the kernel's guard) against the same kernel compiled with --no-bounds-checks, at n and at 2^16
(in cache, where the checks' instructions weigh most).

numpy's peer is the fastest numpy spelling that writes into a preallocated output (two passes:
np.multiply(X, a, out=Out); Out += Y). Bandwidth counts 12 bytes per element (read X and Y, write Out).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, machine, parse_args, report, report_checks  # noqa: E402

from tessera import ceil_div, runtime  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "saxpy.py")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--bounds-checks", action="store_true", help="checked against --no-bounds-checks")
    args = parse_args(p)
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as d:
        image = os.path.join(d, "saxpy.tessera")
        t0 = time.perf_counter()
        subprocess.run(["tessera-cc", EXAMPLE, "-o", image], check=True, cwd=os.sep)
        print(f"compile (fresh tessera-cc process, 2 kernels): {time.perf_counter() - t0:.2f} s")
        mod = runtime.load(image)
        if args.bounds_checks:
            subprocess.run(["tessera-cc", EXAMPLE, "--no-bounds-checks", "-o", image], check=True, cwd=os.sep)
            unchecked = runtime.load(image)
            for n in (args.n, 1 << 16):
                checks_cost(mod, unchecked, n)
            return
    n, a = args.n, np.float32(1.5)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    Out, Ref = np.empty_like(X), np.empty_like(X)

    def ours():
        mod.saxpy(a, X, Y, Out, grid=(ceil_div(n, 1024),), block=(1024,))

    def peer():
        np.multiply(X, a, out=Ref)
        np.add(Ref, Y, out=Ref)

    t_ours, t_peer = best_time(ours), best_time(peer)
    assert np.array_equal(Out, Ref), "results differ"
    report(f"saxpy n={n}", t_ours, t_peer, "numpy", "GB/s", 12 * n / 1e9, shape=(n,), dtype="f32", flops=2 * n)


def checks_cost(checked, unchecked, n: int) -> None:
    a, rng = np.float32(1.5), np.random.default_rng(0)
    X, Y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    Out, Ref = np.empty_like(X), np.empty_like(X)
    grid = (ceil_div(n, 1024),)
    # Both write the same array while timed: two arrays' placement alone moved the ratio by up to 20%.
    report_checks(f"saxpy n={n}", lambda: checked.saxpy(a, X, Y, Out, grid=grid, block=(1024,)),
                  lambda: unchecked.saxpy(a, X, Y, Out, grid=grid, block=(1024,)), rounds=30)
    checked.saxpy(a, X, Y, Out, grid=grid, block=(1024,))
    unchecked.saxpy(a, X, Y, Ref, grid=grid, block=(1024,))
    assert np.array_equal(Out, Ref), "results differ"


if __name__ == "__main__":
    main()
