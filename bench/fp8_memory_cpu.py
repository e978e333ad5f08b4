"""fp8 kept one byte wide on the CPU (docs/language.md, "fp8 in memory"): a per-tensor e4m3 quantize whose result
stays one byte (passes/fp8_convert.py's integer conversion) against the same quantize into the f16 container
(what an fp8 tensor mma.sync reads still pays) and numpy's f32 → f16 cast of x / s; and two quantizes feeding
a GEMM, whose packing widens the bytes (backends/cpu/gemm.py), against the same into f16 containers (what the
CPU's GEMM read before), in the same process.

    python bench/fp8_memory_cpu.py [--rows 4096] [--cols 4096] [--gemm 2048] [--json PATH]

Times per call (ratios: above 1, one byte is faster); the quantize sides move 5 bytes an element one byte
wide, 6 in f16.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_times, machine, parse_args, report_row  # noqa: E402

from tessera import compiler, executor, runtime  # noqa: E402

SOURCE = '''
@function
def one_byte(X: tensor[f32, "M", "N"], s: tensor[f32]):
    return op.quantize(X, fp8_e4m3, scale=s)


@function
def container(X: tensor[f32, "M", "N"], s: tensor[f32]):
    return op.cast(op.quantize(X, fp8_e4m3, scale=s), f16)


@function
def gemm_one_byte(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"], s: tensor[f32]):
    return op.quantize(X, fp8_e4m3, scale=s) @ op.quantize(W, fp8_e4m3, scale=s)


@function
def gemm_container(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"], s: tensor[f32]):
    return op.cast(op.quantize(X, fp8_e4m3, scale=s), f16) @ op.cast(op.quantize(W, fp8_e4m3, scale=s), f16)
'''


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--gemm", type=int, default=2048, help="M = K = N of the quantize-GEMM row (0: none)")
    p.add_argument("--rounds", type=int, default=7)
    args = parse_args(p)
    print(f"machine: {machine()}")
    mod = executor.load(compiler.compile_source(SOURCE, "fp8_memory_cpu.py").image)
    shape = (args.rows, args.cols)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    s = np.array(0.01, np.float32)
    xd, sd = runtime.DeviceArray.from_numpy(x), runtime.DeviceArray.from_numpy(s)   # results stay bytes
    one_byte, container = mod.function("one_byte"), mod.function("container")
    out16 = np.empty(shape, np.float16)

    def numpy_f16():
        np.divide(x, s, out=out16, casting="unsafe")
    t_byte, t_f16, t_np = best_times([lambda: one_byte(xd, sd), lambda: container(xd, sd), numpy_f16], args.rounds)
    report_row(f"e4m3 quantize {args.rows}x{args.cols}", {"tessera one byte": t_byte, "tessera f16 container": t_f16,
                                                         "numpy f32->f16": t_np}, shape=shape, dtype="fp8_e4m3")
    if args.gemm:
        n = args.gemm
        g = [runtime.DeviceArray.from_numpy(np.random.default_rng(1).standard_normal((n, n)).astype(np.float32))
             for _ in range(2)]
        byte, f16 = mod.function("gemm_one_byte"), mod.function("gemm_container")
        t_byte, t_f16 = best_times([lambda: byte(*g, sd), lambda: f16(*g, sd)], args.rounds)
        report_row(f"e4m3 quantize -> GEMM {n}^3", {"tessera one byte": t_byte, "tessera f16 containers": t_f16},
                   shape=(n, n, n), dtype="fp8_e4m3")


if __name__ == "__main__":
    main()
