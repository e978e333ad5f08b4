"""bf16 GEMM on the CPU: Tessera's compiled bf16 x bf16 -> f32 matmul (backends/cpu/gemm_bf16.py) against
XLA's (jax.jit of jnp.dot with preferred_element_type=float32 on bfloat16 operands) and numpy's f32 matmul of
the same values, in the same process.

    python bench/bf16_gemm_cpu.py [--sizes 512,1024,2048] [--rounds 5] [--path auto|amx|avx512|plain]

Rows at M = N = K = size: C = A·B, A and B bf16, C f32 (`op.matmul(A, B, out_dtype=f32)`, compiled from
Graph IR as a user's would be and called through the executor on DeviceArrays, as XLA's on arrays
jax.device_put placed: each call includes allocating C, as XLA's returns a new array). numpy has no bf16
GEMM: its row multiplies the same values widened to f32 (the widening not timed). Results are checked
against numpy's to a tolerance (f32 sums in different orders). `--path` pins the kernel's path
(TESSERA_CPU_BF16_GEMM). Both sides use every core (TESSERA_NUM_THREADS, XLA's own pool); timed in
alternation, best of `rounds` (common.best_times). GFLOP/s count 2·M·N·K per product.

`--cpu-time`: for a machine other processes load (where wall times swing 2-4x), each side on one thread
(TESSERA_NUM_THREADS=1; XLA with --xla_cpu_multi_thread_eigen=false) timed by the process's CPU time per
call (all its threads: the work, not the waiting), call by call in alternation, best of `rounds` calls.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import time  # noqa: E402
from common import best_times, machine, parse_args, report_row  # noqa: E402

SRC = """
@function
def mm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B, out_dtype=f32)
"""


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16, as the runtime takes bf16 tensors), rounding to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="512,1024,2048")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--path", default="auto", choices=("auto", "amx", "avx512", "plain"))
    ap.add_argument("--cpu-time", action="store_true", help="one thread each, CPU time per call (a loaded machine)")
    args = parse_args(ap)
    if args.cpu_time:   # before the runtime and XLA start their threads
        os.environ["TESSERA_NUM_THREADS"] = "1"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    os.environ["TESSERA_CPU_BF16_GEMM"] = args.path   # before the compiler reads its options

    import jax  # lazy: the peer is optional for the rest of the benchmarks
    import jax.numpy as jnp
    from tessera import compiler, executor, runtime
    from tessera.backends.cpu import gemm_bf16, target

    print(machine())
    print(f"bf16 GEMM path: {gemm_bf16.choose_path(target.host(), args.path)} "
          f"(available here: {', '.join(gemm_bf16.available_paths(target.host()))}); jax {jax.__version__}")
    mod = executor.load(compiler.compile_source(SRC, "bf16_gemm.py").image)
    xla = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    rng = np.random.default_rng(0)
    for n in (int(s) for s in args.sizes.split(",")):
        flops = 2.0 * n ** 3 / 1e9
        a, b = bf16_bits(rng.standard_normal((n, n))), bf16_bits(rng.standard_normal((n, n)))
        ja, jb = (jax.device_put(x.view(jnp.bfloat16)) for x in (a, b))
        da, db = runtime.DeviceArray.from_numpy(a), runtime.DeviceArray.from_numpy(b)
        a32, b32 = ((x.astype(np.uint32) << 16).view(np.float32) for x in (a, b))
        c32 = np.empty((n, n), np.float32)
        ours = mod.mm(da, db).numpy()
        ref = np.matmul(a32, b32)
        # |error| of an f32 sum of n products of unit-variance values: a few ulps of its sqrt(n) magnitude
        tol = 1e-5 * n
        np.testing.assert_allclose(ours, ref, atol=tol, rtol=0)
        np.testing.assert_allclose(np.asarray(xla(ja, jb)), ref, atol=tol, rtol=0)
        row = {"shape": (n, n, n), "dtype": "bf16", "bytes": 2 * 2 * n * n + 4 * n * n}   # bf16 A, B; f32 C
        if args.cpu_time:   # numpy's OpenBLAS threads spin, which CPU time would count: not timed
            t_ours, t_xla = best_times([lambda: mod.mm(da, db), lambda: xla(ja, jb).block_until_ready()],
                                       args.rounds, budget=0, settle=0, clock=time.process_time)
            report_row(f"bf16 gemm {n} (CPU time, 1 thread)", {"tessera": t_ours, "XLA": t_xla}, "GFLOP/s", flops,
                       **row)
            continue
        t_ours, t_xla, t_np = best_times([lambda: mod.mm(da, db), lambda: xla(ja, jb).block_until_ready(),
                                          lambda: np.matmul(a32, b32, out=c32)], args.rounds)
        report_row(f"bf16 gemm {n}", {"tessera": t_ours, "XLA": t_xla, "numpy f32": t_np}, "GFLOP/s", flops, **row)



if __name__ == "__main__":
    main()
