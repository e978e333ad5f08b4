"""fp32 GEMM on the CPU: Tessera's packed GEMM kernels against XLA (jax.jit) and numpy (OpenBLAS), in the
same process.

    python bench/gemm_cpu.py [--sizes 512,1024,2048] [--rounds 10] [--bounds-checks]

Rows, each at M = N = K = size:
- `gemm`: C = A·B. Peers: XLA's jitted `a @ b` (on arrays jax.device_put placed once; each call returns a new
  array) and np.matmul(A, B, out=C) into a preallocated C.
- `gemm+bias+gelu`: C = gelu(A·B + bias), one fused kernel. Peers: XLA's jit of the same formula (fused as XLA
  will) and numpy's passes over C, all in place (matmul, + bias, then the tanh-form gelu as ufuncs with
  out=). numpy has no erf, so all use gelu_tanh.
- `mlp`: gelu(X·W1 + b1)·W2 with W1 size×4·size and W2 4·size×size, two Tessera kernels (the first fused)
  against XLA's jit of the formula and numpy's matmul, bias, gelu passes and matmul.
- `gemm Aᵀ·B`, `gemm A·Bᵀ`: an operand stored transposed, read in place while packing (GemmSpec trans_a /
  trans_b, what a matmul's backward runs: passes/fold_transposes.py). Peers: XLA's jit of `a.T @ b` (a dot
  with transposed dimension numbers) and np.matmul of the transposed view (OpenBLAS reads it in place too).
- `gemm … 2 B panels`: the schedule multi-buffered (stages=2: the next K chunk's B panel packed during this
  chunk's micro-kernels) against the same schedule with one panel (packed between chunks). Peer: the latter.

The sides are timed in alternation (best of `rounds`), so that a busy machine slows them alike, with a pause
after each turn (see best_times); all use every core (Tessera's pool: TESSERA_NUM_THREADS, XLA's Eigen pool,
matched to one thread where ours is one: common.optional_jax; OpenBLAS: OPENBLAS_NUM_THREADS). XLA is the
optional `bench` extra: without jax its column is left out and every row says so. Every side's result is
checked against numpy's. GFLOP/s count 2·M·N·K per product.

--cpu-time also times Tessera and XLA by process CPU time (the work of all the process's threads, best of
`rounds` in alternation), after each row: on a machine that others share, wall times say as much about the
scheduler as about the kernels (docs/performance.md, "Against XLA").
"""

import argparse
import dataclasses
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import (best_times, machine, optional_jax, parse_args, report, report_checks,  # noqa: E402
                    report_sides, xla_call)

from tessera import runtime  # noqa: E402
from tessera.backends.cpu import gemm, target  # noqa: E402
from tessera.backends.cpu.gemm_schedule import choose_schedule  # noqa: E402
from tessera.options import CompileOptions  # noqa: E402
from tessera.tools.kernels import compile_gemm  # noqa: E402

SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))


def numpy_gelu_tanh(x, tmp):
    """x = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) in place, `tmp` a scratch array like x."""
    np.multiply(x, x, out=tmp)
    tmp *= np.float32(0.044715)
    tmp += np.float32(1.0)
    tmp *= x
    tmp *= SQRT_2_OVER_PI
    np.tanh(tmp, out=tmp)
    tmp += np.float32(1.0)
    x *= np.float32(0.5)
    x *= tmp


def gelu_tanh(jnp, x):
    """XLA's side of numpy_gelu_tanh, the same formula (XLA fuses it with the dot as it will)."""
    return np.float32(0.5) * x * (1 + jnp.tanh(SQRT_2_OVER_PI * (x + np.float32(0.044715) * x * x * x)))


CPU_TIME = {"on": False}   # --cpu-time


def cpu_times(fns: list, rounds: int) -> list[float]:
    """Best process CPU time (every thread of this process) per call of each function, in turn each round."""
    return best_times(fns, rounds, settle=0.05, clock=time.process_time)


def sides_row(workload: str, sides: dict, rounds: int, unit: str, amount: float, **row) -> None:
    """report_sides, then with --cpu-time Tessera's and XLA's process CPU time per call and their ratio."""
    report_sides(workload, sides, rounds, unit, amount, **row)
    if CPU_TIME["on"] and sides.get("XLA") is not None:
        ours, xla = cpu_times([sides["tessera"], sides["XLA"]], rounds)
        print(f"  {workload}: process CPU time per call: tessera {ours * 1e3:.3f} ms, XLA {xla * 1e3:.3f} ms, "
              f"ratio vs XLA {xla / ours:.3f}")


def schedule_for(m: int, n: int, k: int):
    """The cost model's schedule on this machine, as the compiler's CPU options default to it."""
    return choose_schedule(m, n, k, target.host(), target.worker_threads(), target.cache_sizes())


def runtime_buffer(shape) -> np.ndarray:
    """An f32 array for a kernel's output as the runtime allocates one (TSR_ALLOC_ALIGNMENT, 64 bytes): numpy's
    large arrays start 16 or 32 bytes past a cache line, where the GEMM keeps plain stores (gemm.NT_STORES)."""
    count = math.prod(shape)
    backing = np.empty(count + 16, np.float32)
    off = (-backing.ctypes.data % 64) // 4
    return backing[off:off + count].reshape(shape)


def kernel(spec, options: CompileOptions | None = None):
    return getattr(runtime.load(compile_gemm(spec, options)), spec.name)


def bench_checks(n: int, rounds: int, rng) -> None:
    """Each kernel of the rows at size n compiled with bounds checks (the default) and without."""
    A, B = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    C = np.empty((n, n), np.float32)
    schedule = schedule_for(n, n, n)
    for spec, extra in ((gemm.GemmSpec("gemm", schedule=schedule), ()),
                        (gemm.GemmSpec("gemm_bias_gelu", epilogue=("bias", "gelu_tanh"), schedule=schedule), (bias,))):
        grid = gemm.gemm_grid(spec, n, n)
        checked, unchecked = kernel(spec), kernel(spec, CompileOptions(bounds_checks=False))
        report_checks(f"{spec.name} {n}", lambda: checked(A, B, C, *extra, grid=grid, block=1),
                      lambda: unchecked(A, B, C, *extra, grid=grid, block=1), rounds)


def bench_size(n: int, jax, rounds: int, rng) -> None:
    flops = 2.0 * n ** 3 / 1e9
    row = {"shape": (n, n, n), "dtype": "f32", "bytes": 3 * 4 * n * n}   # [M, N, K]; A, B read, C written once
    schedule = schedule_for(n, n, n)
    print(f"size {n}: schedule MB={schedule.mb} NC={schedule.nc} MC={schedule.mc} KC={schedule.kc} "
          f"micro-tile {schedule.mr}x{schedule.nr}, grid {gemm.gemm_grid(gemm.GemmSpec('g', schedule=schedule), n, n)}")
    A, B = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    C, (ref, tmp) = runtime_buffer((n, n)), (np.empty((n, n), np.float32) for _ in range(2))

    plain = gemm.GemmSpec("gemm", schedule=schedule)
    mm = kernel(plain)
    grid = gemm.gemm_grid(plain, n, n)
    tol = {"rtol": 1e-3, "atol": 1e-3 * math.sqrt(n)}
    want = np.matmul(A, B)

    def close(*got, want=want):
        for g in got:
            np.testing.assert_allclose(g, want, **tol)
    xla = xla_call(jax, lambda jnp, a, b: a @ b, A, B)
    sides_row(f"gemm {n}", {"tessera": lambda: mm(A, B, C, grid=grid, block=1), "XLA": xla,
                               "numpy": lambda: np.matmul(A, B, out=ref)}, rounds, "GFLOP/s", flops, **row)
    close(C, ref, *([xla()] if xla else []))

    for label, trans_a, trans_b in (("Aᵀ·B", True, False), ("A·Bᵀ", False, True)):
        spec = gemm.GemmSpec("gemm_t", schedule=schedule, trans_a=trans_a, trans_b=trans_b)
        mt = kernel(spec)
        At, Bt = (np.ascontiguousarray(A.T) if trans_a else A), (np.ascontiguousarray(B.T) if trans_b else B)
        a_view, b_view = (At.T if trans_a else A), (Bt.T if trans_b else B)
        xla = xla_call(jax, lambda jnp, a, b, ta=trans_a, tb=trans_b: (a.T if ta else a) @ (b.T if tb else b),
                       At, Bt)
        sides_row(f"gemm {label} {n}", {"tessera": lambda: mt(At, Bt, C, grid=grid, block=1), "XLA": xla,
                                           "numpy": lambda: np.matmul(a_view, b_view, out=ref)},
                     rounds, "GFLOP/s", flops, **row)
        close(C, ref, *([xla()] if xla else []))

    if n > schedule.kc:   # more than one K chunk: a next panel to pack ahead
        single = kernel(gemm.GemmSpec("gemm_single", schedule=dataclasses.replace(schedule, stages=1)))
        double = kernel(gemm.GemmSpec("gemm_double", schedule=dataclasses.replace(schedule, stages=2)))
        C1 = runtime_buffer((n, n))
        t_ours, t_peer = best_times([lambda: double(A, B, C, grid=grid, block=1),
                                     lambda: single(A, B, C1, grid=grid, block=1)], rounds)
        np.testing.assert_array_equal(C, C1)
        report(f"gemm {n} 2 B panels", t_ours, t_peer, "1 panel", "GFLOP/s", flops, **row)

    fused = kernel(gemm.GemmSpec("gemm_bias_gelu", epilogue=("bias", "gelu_tanh"), schedule=schedule))

    def peer_fused():
        np.matmul(A, B, out=ref)
        np.add(ref, bias, out=ref)
        numpy_gelu_tanh(ref, tmp)

    peer_fused()
    want = ref.copy()
    xla = xla_call(jax, lambda jnp, a, b, c: gelu_tanh(jnp, a @ b + c), A, B, bias)
    sides_row(f"gemm+bias+gelu {n}", {"tessera": lambda: fused(A, B, C, bias, grid=grid, block=1), "XLA": xla,
                                         "numpy": peer_fused}, rounds, "GFLOP/s", flops,
                 **dict(row, bytes=row["bytes"] + 4 * n))   # and the bias
    close(C, ref, *([xla()] if xla else []), want=want)


def bench_mlp(n: int, jax, rounds: int, rng) -> None:
    h = 4 * n
    X = rng.standard_normal((n, n), dtype=np.float32)
    W1 = rng.standard_normal((n, h), dtype=np.float32) / np.float32(math.sqrt(n))
    W2 = rng.standard_normal((h, n), dtype=np.float32) / np.float32(math.sqrt(h))
    b1 = rng.standard_normal(h, dtype=np.float32)
    up_spec = gemm.GemmSpec("mlp_up", epilogue=("bias", "gelu_tanh"), schedule=schedule_for(n, h, n))
    down_spec = gemm.GemmSpec("mlp_down", schedule=schedule_for(n, n, h))
    up, down = kernel(up_spec), kernel(down_spec)
    H, Y = runtime_buffer((n, h)), runtime_buffer((n, n))
    Href, Yref, tmp = (np.empty(s, np.float32) for s in ((n, h), (n, n), (n, h)))

    def ours():
        up(X, W1, H, b1, grid=gemm.gemm_grid(up_spec, n, h), block=1)
        down(H, W2, Y, grid=gemm.gemm_grid(down_spec, n, n), block=1)

    def peer():
        np.matmul(X, W1, out=Href)
        np.add(Href, b1, out=Href)
        numpy_gelu_tanh(Href, tmp)
        np.matmul(Href, W2, out=Yref)

    peer()
    want = Yref.copy()

    xla = xla_call(jax, lambda jnp, x, w1, b, w2: gelu_tanh(jnp, x @ w1 + b) @ w2, X, W1, b1, W2)
    sides_row(f"mlp {n}x{h}x{n}", {"tessera": ours, "XLA": xla, "numpy": peer}, rounds, "GFLOP/s",
                 2 * 2.0 * n * n * h / 1e9, shape=(n, n, h),
                 dtype="f32", bytes=4 * (2 * n * n + 2 * n * h + h))   # [T, D, F]; X, W1, b1, W2 read, Y written
    for got in (Y, Yref, *([xla()] if xla else [])):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * math.sqrt(h))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="512,1024,2048", help="comma-separated M = N = K")
    p.add_argument("--mlp", default="512", help="comma-separated MLP sizes (tokens = model width); '' for none")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--bounds-checks", action="store_true",
                   help="time each GEMM kernel with bounds checks against --no-bounds-checks instead of numpy")
    p.add_argument("--cpu-time", action="store_true", help="also compare Tessera's and XLA's process CPU time")
    args = parse_args(p)
    CPU_TIME["on"] = args.cpu_time
    threads = target.worker_threads()
    # Other work on the machine slows the sides, unequally: the load average says how busy it was.
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}; Tessera threads: {threads}, "
          f"OpenBLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    rng = np.random.default_rng(0)
    if args.bounds_checks:
        for n in (int(s) for s in args.sizes.split(",") if s):
            bench_checks(n, args.rounds, rng)
        return
    jax = optional_jax(threads)
    for n in (int(s) for s in args.sizes.split(",") if s):
        bench_size(n, jax, args.rounds, rng)
    for n in (int(s) for s in args.mlp.split(",") if s):
        bench_mlp(n, jax, args.rounds, rng)


if __name__ == "__main__":
    main()
