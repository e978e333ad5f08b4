"""One rank of the graph-capture communicator tests (test_comm_capture_mpi.py starts it under mpiexec): captures
communicator operations into a graph with a kernel launch between them, replays it, and writes what it saw to
<folder>/rank<r>.npz for the test to check against numpy.

Usage: comm_capture_worker.py SCENARIO FOLDER IMAGE, IMAGE holding the kernel `scale(s, X, Out)`: Out = s * X
(scenarios function and tree: the function `scaled_sum(X)` = the ranks' sum of 2X, test_comm_capture_mpi's
FUNCTION; bucket: its BUCKET's `step(X, W)`)."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

K = 48          # elements per rank: a multiple of 2 and 3 (reduce_scatter, all_to_all)
REPLAYS = 2
BLOCK = 32


def data(rank: int, replay: int) -> np.ndarray:
    """What rank `rank` writes into its input before replay `replay`: exact in f32 whatever the order of sums."""
    return (np.arange(K, dtype=np.float32) + 100 * rank + 1000 * replay) / 4


def capture(c, mod, out: dict) -> None:
    """all_reduce, all_gather, broadcast, reduce_scatter, all_to_all and a send/recv pair captured between two
    launches, an event recorded after the all_reduce; the graph replayed REPLAYS times, new data written into
    the same inputs each time."""
    from tessera import graph, stream  # lazy: after the communicator, as in comm_worker.py

    root = c.size - 1
    X, A = np.zeros(K, np.float32), np.zeros(K, np.float32)
    S, Y = np.zeros(K, np.float32), np.zeros(K, np.float32)
    G = np.zeros((c.size, K), np.float32)
    Bsrc, B = np.zeros(K, np.float32), np.zeros(K, np.float32)
    P, T = np.zeros(K, np.float32), np.zeros(K, np.float32)
    R = np.zeros(K // c.size, np.float32)
    grid = (K + BLOCK - 1) // BLOCK
    done = stream.Event()
    with graph.capture() as g:
        mod.scale(2.0, X, A, grid=grid, block=BLOCK)       # A = 2X: the collectives read it
        c.all_reduce(A, out=S)
        done.record(g.stream)
        c.all_gather(A, out=G)
        c.broadcast(Bsrc, root=root, out=B)
        c.reduce_scatter(A, out=R)
        c.all_to_all(A, out=T)
        if c.rank == 0:                                      # ranks 0 and 1 swap A: 1 receives first
            c.send(A, 1)
            c.recv(P, 1)
        elif c.rank == 1:
            c.recv(P, 0)
            c.send(A, 0)
        mod.scale(3.0, S, Y, grid=grid, block=BLOCK)       # Y = 3S: after the all_reduce wrote S
        c.all_reduce(A[:0], out=S[:0])                      # count 0: no node
    out["nodes"] = np.array(g.node_count)
    out["before"] = np.concatenate([S, Y, G.ravel(), B, P, R, T])  # recorded, not run: still zeros
    for replay in range(REPLAYS):
        X[:] = data(c.rank, replay)
        Bsrc[:] = -data(c.rank, replay)
        g.launch()
        for name, a in (("S", S), ("Y", Y), ("G", G), ("B", B), ("P", P), ("R", R), ("T", T)):
            out[f"{name}{replay}"] = a.copy()
    out["event_done"] = np.array(done.query())


def function(c, image: str, out: dict) -> None:
    """A compiled function whose all_reduce step (algo ring: the communicator's own) is captured with its
    launches, replayed twice with new data written into the same input DeviceArray."""
    from tessera import executor, graph, runtime  # lazy: see capture

    prog = executor.load(open(image, "rb").read())
    X = runtime.DeviceArray((8, 4), np.float32, runtime.default_context())
    with graph.capture() as g:
        y = prog.scaled_sum(X, comm=c)
    for replay in range(REPLAYS):
        X.copy_from(data(c.rank, replay)[:32].reshape(8, 4))
        g.launch()
        out[f"Y{replay}"] = y.numpy()


def bucket(c, image: str, out: dict) -> None:
    """A compiled function with a gradient bucket of three all_reduces and an all_gather along dim 1 (whose
    temporaries the graph keeps) captured, replayed twice with new data in the same input DeviceArrays; after
    each replay a direct call on the same data, for the test to compare."""
    from tessera import executor, graph, runtime  # lazy: see capture

    prog = executor.load(open(image, "rb").read())
    ctx = runtime.default_context()
    X, W = runtime.DeviceArray((8, 4), np.float32, ctx), runtime.DeviceArray((4, 6), np.float32, ctx)
    with graph.capture() as g:
        results = prog.step(X, W, comm=c)
    for replay in range(REPLAYS):
        x, w = data(c.rank, replay)[:32].reshape(8, 4), data(c.rank, replay)[24:].reshape(4, 6)
        X.copy_from(x)
        W.copy_from(w)
        g.launch()
        direct = prog.step(x, w, comm=c)
        for name, got, want in zip("ABCG", results, direct):
            out[f"{name}{replay}"], out[f"direct_{name}{replay}"] = got.numpy(), np.asarray(want)


def tree(c, image: str, out: dict) -> None:
    """A compiled function whose all_reduce step reduces in tree order (deterministic) called on a capturing
    stream: refused before anything is recorded."""
    from tessera import executor, graph, runtime  # lazy: see capture

    prog = executor.load(open(image, "rb").read())
    X = runtime.DeviceArray((8, 4), np.float32, runtime.default_context())
    with graph.capture() as g:
        try:
            prog.scaled_sum(X, comm=c)
            out["status"] = np.array("TSR_SUCCESS")
        except runtime.Error as e:
            out["status"], out["message"] = np.array(e.status_name), np.array(str(e))
    out["nodes"] = np.array(g.node_count)


def deterministic(c, out: dict) -> None:
    """A deterministic bf16 all_reduce (comm.c's host tree) captured and replayed: the same bits as a direct call."""
    from tessera import graph  # lazy: see capture

    x = ((np.arange(K, dtype=np.float32) * 0.37 + c.rank * 1.3).view(np.uint32) >> 16).astype(np.uint16)
    direct = c.all_reduce(x, dtype="bf16")
    got = np.zeros_like(x)
    with graph.capture() as g:
        c.all_reduce(x, out=got, dtype="bf16")
    g.launch()
    out["direct"], out["replayed"] = direct, got


def dead(c, out: dict) -> None:
    """Every rank captures an all_reduce; the last exits before the replay, which must end in a status within
    the timeout on the others, then the communicator stays broken."""
    from tessera import graph, runtime  # lazy: see capture

    x = np.ones(K, np.float32)
    with graph.capture() as g:
        c.all_reduce(x, out=x)
    if c.rank == c.size - 1:
        os._exit(7)
    start = time.monotonic()
    try:
        g.launch()
        out["status"] = np.array("TSR_SUCCESS")
    except runtime.Error as e:
        out["status"], out["message"] = np.array(e.status_name), np.array(str(e))
    out["seconds"] = np.array(time.monotonic() - start)
    try:  # broken now: a second replay returns the same status at once
        g.launch()
        out["again"] = np.array("TSR_SUCCESS")
    except runtime.Error as e:
        out["again"] = np.array(e.status_name)


def main() -> int:
    scenario, folder, image = sys.argv[1], sys.argv[2], sys.argv[3]
    from tessera import comm, runtime  # lazy: after argument parsing, so that a usage error costs no import

    scenarios = {"capture": lambda c, out: capture(c, runtime.load(image), out), "deterministic": deterministic,
                 "dead": dead, "function": lambda c, out: function(c, image, out),
                 "bucket": lambda c, out: bucket(c, image, out), "tree": lambda c, out: tree(c, image, out)}
    if scenario not in scenarios:
        raise SystemExit(f"unknown scenario {scenario}")
    c = comm.Communicator.from_env(backend="mpi", timeout=3 if scenario == "dead" else 60,
                                   deterministic=scenario == "deterministic")
    results: dict = {}
    scenarios[scenario](c, results)
    np.savez(os.path.join(folder, f"rank{c.rank}.npz"), **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
