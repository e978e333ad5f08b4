"""What the numerics profiles cost on the CPU: one program compiled under fast, deterministic and strict, run
in the same process, timed in turn (common.best_times). strict computes f32 exp, erf and division in f64
(scalar libm calls, where fast calls libmvec's vector functions) and runs the one-product-one-sum GEMM
instead of the blocked FMA kernel; deterministic compiles the same code as fast on the CPU (it refuses float
atomics and restricts autotuning, neither used here).

    python bench/numerics_profiles_cpu.py [--rounds 5]

Prints the best time of each profile per program and its ratio to fast (docs/performance.md)."""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_times, machine, parse_args, record_row  # noqa: E402

from tessera import compiler, executor  # noqa: E402
from tessera.options import CompileOptions  # noqa: E402

SOURCE = """
@function
def gemm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return op.matmul(A, B)

@function
def maths(X: tensor[f32, "N", "D"]):
    return op.gelu(X), op.softmax(X), op.exp(X) / (X * X + 1.0)
"""
PROFILES = ("fast", "deterministic", "strict")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    args = parse_args(p)
    progs = {name: executor.load(compiler.compile_source(SOURCE, "profiles.py",
                                                         CompileOptions(numerics=name)).image)
             for name in PROFILES}
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((512, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    X = rng.standard_normal((1024, 1024), np.float32)
    print(machine())
    for what, call in (("gemm 512^3", lambda p: p.gemm(A, B)), ("gelu+softmax+exp/div 1024^2", lambda p: p.maths(X))):
        times = best_times([lambda p=progs[n]: call(p) for n in PROFILES], args.rounds)
        r = record_row(what, dict(zip(PROFILES, times)), dtype="f32", note="numerics profiles against fast")
        print(f"{what}: " + ", ".join(f"{s['name']} {s['time_s'] * 1e3:.2f} ms "
                                      f"({s['time_s'] / r['ours']['time_s']:.2f}x fast)"
                                      for s in (r["ours"], *r["peers"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
