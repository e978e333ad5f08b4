"""int8 GEMM on the CPU: Tessera's compiled i8 x i8 -> i32 matmul (backends/cpu/gemm_i8.py) against XLA's
(jax.jit of jax.lax.dot with preferred_element_type=int32 on int8 operands) and numpy's int32 matmul, in the
same process.

    python bench/int8_gemm_cpu.py [--sizes 1024,2048] [--rounds 5] [--path auto|amx|vnni|plain]
                                  [--numpy-up-to 1024]

Rows at M = N = K = size: C = A·B, A and B int8, C int32. The program is compiled from Graph IR as a user's
would be (`A @ B` of two i8 tensors) and called through the executor on DeviceArrays (as XLA's on arrays
jax.device_put placed), so each call includes allocating C, as XLA's returns a new array. numpy has no int8
GEMM kernel (its integer matmul is a plain loop, minutes at 2048): it runs only up to --numpy-up-to. Results are checked equal to XLA's (exact integers).
`--path` pins the kernel's path (TESSERA_CPU_INT8_GEMM). Both sides use every core (TESSERA_NUM_THREADS,
XLA's own pool); timed in alternation, best of `rounds` (common.best_times). TOPS count 2·M·N·K per product.

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
from common import best_times, machine, parse_args, report  # noqa: E402

SRC = """
@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--path", default="auto", choices=("auto", "amx", "vnni", "plain"))
    ap.add_argument("--numpy-up-to", type=int, default=1024)
    ap.add_argument("--cpu-time", action="store_true", help="one thread each, CPU time per call (a loaded machine)")
    args = parse_args(ap)
    if args.cpu_time:   # before the runtime and XLA start their threads
        os.environ["TESSERA_NUM_THREADS"] = "1"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    os.environ["TESSERA_CPU_INT8_GEMM"] = args.path   # before the compiler reads its options

    import jax  # lazy: the peer is optional for the rest of the benchmarks
    import jax.numpy as jnp
    from tessera import compiler, executor, runtime
    from tessera.backends.cpu import gemm_i8, target

    print(machine())
    print(f"int8 GEMM path: {gemm_i8.choose_path(target.host(), args.path)} "
          f"(available here: {', '.join(gemm_i8.available_paths(target.host()))}); jax {jax.__version__}")
    mod = executor.load(compiler.compile_source(SRC, "int8_gemm.py").image)
    xla = jax.jit(lambda a, b: jax.lax.dot(a, b, preferred_element_type=jnp.int32))
    rng = np.random.default_rng(0)
    for n in (int(s) for s in args.sizes.split(",")):
        ops = 2.0 * n ** 3 / 1e12
        a = rng.integers(-128, 128, (n, n)).astype(np.int8)
        b = rng.integers(-128, 128, (n, n)).astype(np.int8)
        ja, jb = jax.device_put(a), jax.device_put(b)
        da, db = runtime.DeviceArray.from_numpy(a), runtime.DeviceArray.from_numpy(b)
        ours = mod.mm(da, db).numpy()
        np.testing.assert_array_equal(ours, np.asarray(xla(ja, jb)))
        row = {"shape": (n, n, n), "dtype": "i8", "bytes": 2 * n * n + 4 * n * n}   # i8 A, B; i32 C
        if args.cpu_time:
            t_ours, t_xla = best_times([lambda: mod.mm(da, db), lambda: xla(ja, jb).block_until_ready()],
                                       args.rounds, budget=0, settle=0, clock=time.process_time)
            report(f"int8 gemm {n} (CPU time, 1 thread)", t_ours, t_xla, "XLA", "TOPS", ops, **row)
            continue
        t_ours, t_xla = best_times([lambda: mod.mm(da, db), lambda: xla(ja, jb).block_until_ready()], args.rounds)
        report(f"int8 gemm {n}", t_ours, t_xla, "XLA", "TOPS", ops, **row)
        if n <= args.numpy_up_to:
            a32, b32, c32 = a.astype(np.int32), b.astype(np.int32), np.empty((n, n), np.int32)
            t_ours, t_np = best_times([lambda: mod.mm(da, db), lambda: np.matmul(a32, b32, out=c32)], args.rounds)
            np.testing.assert_array_equal(ours, c32)
            report(f"int8 gemm {n}", t_ours, t_np, "numpy", "TOPS", ops, **row)



if __name__ == "__main__":
    main()
