"""All-reduce between CPU processes over MPI: the deterministic tree (TSR_COMM_DETERMINISTIC: every rank gathers
all buffers and combines them in tessera.interpret's order) against MPI's own MPI_Iallreduce, on the same
communicator setup, f32 sums of 1 MiB and 16 MiB. What determinism costs (docs/c-api.md, "Determinism").

    tessera-run -n 2 bench/allreduce_cpu.py [--rounds 10]

Rank 0 prints the best time of each, the bus bandwidth (2·(n−1)/n · bytes / time, nccl-tests' convention) and
the ratio. Every rank makes the same number of calls (a collective's timing loop cannot adapt per rank).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import machine, parse_args, record_row  # noqa: E402

from tessera import comm  # noqa: E402


def best(c: comm.Communicator, x: np.ndarray, out: np.ndarray, rounds: int) -> float:
    c.all_reduce(x, out=out)  # warm: buffers touched, connections made
    times = []
    for _ in range(rounds):
        c.all_reduce(np.zeros(1, np.float32))  # start together
        t0 = time.perf_counter()
        c.all_reduce(x, out=out)
        times.append(time.perf_counter() - t0)
    # the slowest rank's time is the collective's
    return float(c.all_reduce(np.array([min(times)]), "max")[0])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=10)
    args = parse_args(p)
    native = comm.Communicator.from_env(backend="mpi", timeout=120)
    tree = comm.Communicator.from_env(backend="mpi", deterministic=True, timeout=120)
    n = native.size
    if native.rank == 0:
        print(f"{machine()}; {n} ranks over MPI ({native.backend})")
    for mib in (1, 16):
        x = np.random.default_rng(native.rank).standard_normal(mib * 2**18).astype(np.float32)
        out = np.empty_like(x)
        t_native = best(native, x, out, args.rounds)
        t_tree = best(tree, x, out, args.rounds)
        if native.rank == 0:
            bus = 2 * (n - 1) / n * x.nbytes / 1e9
            r = record_row(f"all_reduce f32 {mib} MiB", {"deterministic": t_tree, "MPI": t_native}, "GB/s", bus,
                           shape=(x.size,), dtype="f32", note=f"{n} ranks; bus bandwidth 2(n-1)/n bytes/time")
            (t_tree, g_tree), (t_native, g_native) = ((s["time_s"], s["throughput"]) for s in (r["ours"], *r["peers"]))
            print(f"all_reduce f32 {mib:>2} MiB: MPI {t_native * 1e3:8.2f} ms ({g_native:6.2f} GB/s bus)   "
                  f"deterministic {t_tree * 1e3:8.2f} ms ({g_tree:6.2f} GB/s bus)   "
                  f"deterministic/MPI time {t_tree / t_native:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
