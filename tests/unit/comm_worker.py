"""One rank of the communicator tests (test_comm_mpi.py starts it under mpiexec): runs a scenario and writes what
it got to OUT/rank<r>.npz for the test to compare. Inputs come from `inputs`, which the test calls too.

    python comm_worker.py SCENARIO OUT
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

K = 12  # elements per rank: a multiple of 2, 3 and 4
DTYPES = ("f32", "f64", "bf16", "i32", "i64")
FLOAT_OPS = ("sum", "prod", "max", "min", "avg")
INT_OPS = ("sum", "prod", "max", "min")


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values that are bf16 values, as their bf16 bits."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def inputs(rank: int, dtype: str) -> np.ndarray:
    """Rank `rank`'s buffer: floats spread over 7 decades, so that the order of a sum shows in its last bits."""
    rng = np.random.default_rng(1000 + rank)
    if dtype in ("i32", "i64"):
        return rng.integers(-50, 50, K).astype(np.int32 if dtype == "i32" else np.int64)
    x = rng.standard_normal(K) * 10.0 ** rng.integers(-3, 4, K)
    if dtype == "f64":
        return x
    if dtype == "f32":
        return x.astype(np.float32)
    # lazy: the worker needs the rounding only for bf16
    from tessera.numerics.rounding import round_to
    return bf16_bits(round_to(x, "bf16").astype(np.float32))


def _args(dtype):
    return {"dtype": "bf16"} if dtype == "bf16" else {}


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def collectives(c, out: dict) -> None:
    from tessera import comm, runtime  # lazy: imported by the rank, after mpiexec started it
    from tessera.stream import Stream  # lazy: as above

    rank, size = c.rank, c.size
    det = comm.Communicator.from_env(backend="mpi", deterministic=True, timeout=60)
    for dtype in DTYPES:
        x = inputs(rank, dtype)
        for op in (FLOAT_OPS if dtype not in ("i32", "i64") else INT_OPS):
            out[f"ar_{dtype}_{op}"] = c.all_reduce(x, op, **_args(dtype))
            out[f"ard_{dtype}_{op}"] = det.all_reduce(x, op, **_args(dtype))
            out[f"rs_{dtype}_{op}"] = c.reduce_scatter(x, op, **_args(dtype))
            out[f"rsd_{dtype}_{op}"] = det.reduce_scatter(x, op, **_args(dtype))
        out[f"ag_{dtype}"] = c.all_gather(x, **_args(dtype))
        out[f"a2a_{dtype}"] = c.all_to_all(x, **_args(dtype))
        out[f"bc_{dtype}"] = c.broadcast(x, root=size - 1, **_args(dtype))
    # in place, and on a stream after a copy queued on it
    x = inputs(rank, "f32")
    y = x.copy()
    c.all_reduce(y, "max", out=y)
    out["inplace_max"] = y
    # the stream first copies 4 x 64 MiB, then writes the buffer: a collective that did not wait for the
    # stream's earlier work would read it before it holds x
    s, ctx = Stream(), runtime.default_context()
    big, big2 = (runtime.DeviceArray((1 << 24,), np.float32) for _ in range(2))
    src, d = runtime.DeviceArray.from_numpy(x), runtime.DeviceArray.from_numpy(np.zeros(K, np.float32))
    device_to_device = 3  # TSR_MEMCPY_DEVICE_TO_DEVICE
    for _ in range(4):
        ctx.memcpy(big2.address, big.address, big.nbytes, device_to_device, s.native)
    ctx.memcpy(d.address, src.address, d.nbytes, device_to_device, s.native)
    c.all_reduce(d, "sum", out=d, stream=s)
    s.synchronize()
    out["stream_sum"] = d.numpy()
    # send/recv around the ring, even ranks sending first
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = np.empty(K, np.float64)
    if rank % 2 == 0:
        c.send(inputs(rank, "f64"), nxt)
        c.recv(got, prv)
    else:
        c.recv(got, prv)
        c.send(inputs(rank, "f64"), nxt)
    out["p2p"] = got
    # sub-communicators: even/odd ranks, reversed by key; rank 0 alone, the others in none
    half = c.split(rank % 2, key=-rank)
    out["half_rank"], out["half_size"] = np.array(half.rank), np.array(half.size)
    out["half_sum"] = half.all_reduce(np.array([float(rank)]), "sum")
    alone = c.split(0 if rank == 0 else -1)
    out["alone"] = np.array(-1 if alone is None else alone.size)
    # refusals: statuses, and the communicator still works afterwards
    statuses = {}
    for name, call in [
        ("rs_indivisible", lambda: c.reduce_scatter(np.ones(size * 2 + 1, np.float32))),
        ("a2a_indivisible", lambda: c.all_to_all(np.ones(size + 1, np.float32))),
        ("avg_int", lambda: c.all_reduce(np.ones(4, np.int32), "avg")),
        ("bad_root", lambda: c.broadcast(np.ones(4), root=size)),
        ("self_send", lambda: c.send(np.ones(4), rank)),
        ("bad_peer", lambda: c.recv(np.ones(4), -1)),
    ]:
        try:
            call()
            statuses[name] = "TSR_SUCCESS"
        except runtime.Error as e:
            statuses[name] = e.status_name
    for name, call in [  # refused in Python, before the C API
        ("strided", lambda: c.all_reduce(np.ones((4, 4), np.float32)[:, 0])),
        ("bf16_of_f32", lambda: c.all_reduce(np.ones(4, np.float32), dtype="bf16")),
        ("unknown_op", lambda: c.all_reduce(np.ones(4, np.float32), "mean")),
        ("read_only_out", lambda: c.all_reduce(np.ones(4, np.float32), out=_read_only(np.zeros(4, np.float32)))),
    ]:
        try:
            call()
            statuses[name] = "accepted"
        except (TypeError, ValueError) as e:
            statuses[name] = f"{type(e).__name__}: {e}"
    for name, status in statuses.items():
        out[f"status_{name}"] = np.array(status)
    out["after"] = c.all_reduce(np.ones(3, np.float32))


def dead_peer(c, out: dict, mode: str) -> None:
    """The last rank exits or stops; the others' next collective must come back with a status in time (or at
    once when another thread aborts the communicator meanwhile)."""
    from tessera import runtime  # lazy: see collectives

    if c.rank == c.size - 1:
        if mode == "exit":
            os._exit(7)
        time.sleep(12)  # past the survivors' 3 s timeout
        os._exit(0)
    if mode == "abort":  # another thread gives up on the communicator while the collective waits
        import threading  # lazy: only this scenario has a second thread
        threading.Timer(0.5, c.abort).start()
    start = time.monotonic()
    try:
        c.all_reduce(np.ones(K, np.float32))
        out["status"] = np.array("TSR_SUCCESS")
    except runtime.Error as e:
        out["status"], out["message"] = np.array(e.status_name), np.array(str(e))
    out["seconds"] = np.array(time.monotonic() - start)
    start = time.monotonic()
    try:  # broken now: at once, the same status
        c.all_gather(np.ones(K, np.float32))
        out["again"] = np.array("TSR_SUCCESS")
    except runtime.Error as e:
        out["again"] = np.array(e.status_name)
    out["again_seconds"] = np.array(time.monotonic() - start)
    try:
        c.check()
        out["async"] = np.array("TSR_SUCCESS")
    except runtime.Error as e:
        out["async"] = np.array(e.status_name)


def main() -> int:
    scenario, folder = sys.argv[1], sys.argv[2]
    from tessera import comm  # lazy: after argument parsing, so that a usage error costs no import

    timeout = 3 if scenario.startswith("dead") else 60
    c = comm.Communicator.from_env(backend="mpi", timeout=timeout)
    out: dict = {"size": np.array(c.size)}
    if scenario == "collectives":
        collectives(c, out)
    elif scenario in ("dead_exit", "dead_stop", "dead_abort"):
        dead_peer(c, out, scenario.split("_")[1])
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    np.savez(os.path.join(folder, f"rank{c.rank}.npz"), **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
