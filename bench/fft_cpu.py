"""Batched complex FFTs on the CPU: op.fft (passes/fft.py: Stockham radix-4 stages, each a kernel; Bluestein's
chirp-z on those stages for other sizes) against numpy.fft and jax.numpy.fft under jax.jit (XLA's CPU FFT), in the
same process.

    [TESSERA_NUM_THREADS=1] python bench/fft_cpu.py [--min-log 10] [--max-log 20] [--total 1048576]
                                                   [--dtype c64|c128] [--rounds 5] [--other 1000,6000,10007]

Each row transforms a batch of B = max(1, total / n) complex signals of length n (numpy's c64 [B, n] —
[B, n, 1] for op.fft, whose columns are the last axis; one storage), unitary (norm="ortho") on every side,
for n = 2^min-log .. 2^max-log and the sizes of --other that are not powers of two (Bluestein: three FFTs of
the power of two m ≥ 2n − 1, so ~4-8x a power of two's work; `--other ""` for none). Every side's result is
checked against numpy's first (f32 within 1e-5·log2 n of the largest magnitude, f64 within 1e-12). Throughput
counts 5·n·log2(n) flops a signal (the usual FFT convention, for every n); the ratios are Tessera's speed over
each peer's (above 1: Tessera faster). Times include each side's call overhead (Tessera's: the arguments
checked and the result allocated). numpy's FFT is single-threaded; Tessera's pool and XLA's take
TESSERA_NUM_THREADS threads (default: every core).
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import machine, optional_jax, parse_args, report_sides, xla_call  # noqa: E402


def source(sizes: list[int], total: int, dtype: str) -> str:
    real = "f32" if dtype == "c64" else "f64"
    lines = [f"from tessera import {dtype}, {real}, function, op, tensor", ""]
    for n in sizes:
        b = max(1, total // n)
        lines += ["@function", f"def fft{n}(z: tensor[{dtype}, {b}, {n}, 1]):",
                  f"    return op.fft({n}, dtype={real}) @ z", ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-log", type=int, default=10)
    p.add_argument("--max-log", type=int, default=20)
    p.add_argument("--total", type=int, default=1 << 20, help="complex elements a row transforms (B·n)")
    p.add_argument("--dtype", choices=("c64", "c128"), default="c64")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--other", default="1000,6000,10007", help="sizes that are not powers of two, comma-separated")
    p.add_argument("--tile", default="2048,2047", help="tile.fft rows of [64, n] f32 tiles (a power of two: "
                                                     "Stockham stages; other n: the DFT as GEMMs); '' for none")
    args = parse_args(p)
    from tessera.backends.cpu import target
    threads = target.worker_threads()
    jax = optional_jax(threads)
    if jax is not None and args.dtype == "c128":
        jax.config.update("jax_enable_x64", True)
    from tessera import compiler, executor   # after jax: optional_jax sets XLA's flags before anything imports it

    print(f"machine: {machine()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; Tessera and XLA "
          f"threads: {threads}, numpy's FFT: 1")
    sizes = [1 << m for m in range(args.min_log, args.max_log + 1)] + [int(n) for n in args.other.split(",") if n]
    program = executor.load(compiler.compile_source(source(sizes, args.total, args.dtype), "fft_bench.py").image)
    cdt = np.complex64 if args.dtype == "c64" else np.complex128
    rng = np.random.default_rng(0)
    for n in sizes:
        m = math.log2(n)
        b = max(1, args.total // n)
        z = (rng.standard_normal((b, n)) + 1j * rng.standard_normal((b, n))).astype(cdt)
        z3 = z.reshape(b, n, 1)
        ours = getattr(program, f"fft{n}")
        want = np.fft.fft(z, axis=-1, norm="ortho")
        tol = (1e-5 * m if args.dtype == "c64" else 1e-12) * float(np.abs(want).max())
        np.testing.assert_allclose(ours(z3).reshape(b, n), want, rtol=0, atol=tol)
        xla = xla_call(jax, lambda jnp, x: jnp.fft.fft(x, axis=-1, norm="ortho"), z)
        if jax is not None:
            got = np.asarray(jax.jit(lambda x: jax.numpy.fft.fft(x, axis=-1, norm="ortho"))(z))
            np.testing.assert_allclose(got, want, rtol=0, atol=tol)
        sides = {"tessera": lambda: ours(z3), "numpy": lambda: np.fft.fft(z, axis=-1, norm="ortho"), "XLA": xla}
        size = f"2^{m:.0f}" if not n & (n - 1) else str(n)
        report_sides(f"fft {args.dtype} n={size} B={b}", sides, args.rounds, "GFLOP/s", 5.0 * n * m * b / 1e9,
                     shape=(b, n), dtype=args.dtype)
    tile_sizes = [int(n) for n in args.tile.split(",") if n]
    if tile_sizes:
        tile_fft(compiler, executor, jax, tile_sizes, args.rounds, rng)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


TILE = """
@kernel
def tile{n}(X: tensor[f32, 64, {n}], Re: tensor[f32, 64, {n}], Im: tensor[f32, 64, {n}]):
    re, im = tile.fft(X)
    Re[:] = re
    Im[:] = im
"""


def tile_fft(compiler, executor, jax, sizes: list[int], rounds: int, rng) -> None:
    """tile.fft of the rows of a real [64, n] f32 tile (numpy's unnormalized fft, as real and imaginary parts)
    against numpy.fft.fft and XLA's of the same rows, each checked against numpy in f64 first (1e-5·log2 n of
    the largest magnitude)."""
    src = "from tessera import f32, kernel, tensor, tile\n" + "".join(TILE.format(n=n) for n in sizes)
    program = executor.load(compiler.compile_source(src, "tile_fft_bench.py").image)
    for n in sizes:
        x = rng.standard_normal((64, n)).astype(np.float32)
        re, im = (np.zeros((64, n), np.float32) for _ in range(2))
        ours = getattr(program, f"tile{n}")
        want = np.fft.fft(x.astype(np.float64), axis=-1)
        got = ours(x, re, im)
        tol = 1e-5 * math.log2(n) * float(np.abs(want).max())
        np.testing.assert_allclose(got[0] + 1j * got[1], want, rtol=0, atol=tol)
        xla = xla_call(jax, lambda jnp, v: jnp.fft.fft(v, axis=-1), x)
        sides = {"tessera": lambda: ours(x, re, im), "numpy": lambda: np.fft.fft(x, axis=-1), "XLA": xla}
        kind = "stages" if not n & (n - 1) else "DFT"
        report_sides(f"tile.fft f32 [64, {n}] ({kind})", sides, rounds, "GFLOP/s", 5.0 * n * math.log2(n) * 64 / 1e9,
                     shape=(64, n), dtype="f32")


if __name__ == "__main__":
    main()
