"""Graph replay against the same launches made one by one, on the CPU backend: host overhead per launch.

    python bench/graph_replay_cpu.py [--launches 32] [--n 256]

A step is `--launches` small kernel launches (y = a * x + y over `--n` floats, one block: the kernel itself
takes about a microsecond, so the time is the launch path). "direct" makes them through tessera.runtime, each
one checked and packed by the Python launcher, then validated and run by libtessera; "graph" captures the
step once with tessera.graph.capture and replays it with graph.launch. Both run on the synchronous default
stream, and then on a stream (synchronized once per step). Results are checked equal.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, machine, parse_args, record_row  # noqa: E402

import tessera  # noqa: E402
from tessera import graph, runtime, stream  # noqa: E402

SOURCE = """
@kernel
def axpy(a: float, X: tensor[float, "N"], Y: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Y[i] = a * X[i] + Y[i]
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launches", type=int, default=32)
    p.add_argument("--n", type=int, default=256)
    args = parse_args(p)
    print(f"machine: {machine()}; {runtime.capabilities()['threads']} worker threads")
    mod = runtime.load(tessera.compile(SOURCE, "axpy.py"))
    k, n = args.launches, args.n
    x = np.ones(n, np.float32)
    y_direct, y_graph = np.zeros(n, np.float32), np.zeros(n, np.float32)
    coefficients = [np.float32(i % 3) for i in range(k)]

    def direct(y, s=None):
        for a in coefficients:
            mod.axpy(a, x, y, grid=1, block=n, stream=s)
        if s is not None:
            s.synchronize()

    with graph.capture() as g:
        direct(y_graph)
    s = stream.new()

    rows = [("NULL stream", lambda: direct(y_direct), lambda: graph.launch(g)),
            ("a stream", lambda: direct(y_direct, s), lambda: (graph.launch(g, s), s.synchronize()))]
    for where, run_direct, run_graph in rows:
        r = record_row(f"{k} launches on {where}", {"graph replay": best_time(run_graph, repeat=30) / k,
                                                      "direct": best_time(run_direct, repeat=30) / k},
                       shape=(k, n), dtype="f32", note="time per launch")
        t_graph, t_direct = r["ours"]["time_s"], r["peers"][0]["time_s"]
        print(f"{k} launches on {where:<12} direct {t_direct * 1e6:8.2f} us/launch   "
              f"graph replay {t_graph * 1e6:8.2f} us/launch   direct/replay {r['ratio']:5.1f}x")
    y_direct[:], y_graph[:] = 0, 0
    direct(y_direct)
    graph.launch(g)
    assert np.array_equal(y_direct, y_graph), "replay and direct launches differ"


if __name__ == "__main__":
    main()
