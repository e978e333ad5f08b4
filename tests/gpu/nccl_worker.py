"""One rank of tests/gpu/test_nccl_gpu.py: libtessera's communicator C API through ctypes, on this process's
GPU 0 (the test sets CUDA_VISIBLE_DEVICES), NCCL backend.

    nccl_worker.py SCENARIO WORLD RANK DIR

SCENARIO: probe (can NCCL start here: prints {"ok": …, "why": …}), collectives (every operation, checked
against numpy: one JSON line each), dead-peer (rank 1 leaves after creation; rank 0 reports what its waits
return), captured and captured-dead-peer (tests/gpu/test_comm_capture_gpu.py: collectives in a CUDA graph).
The ranks share the unique id through DIR/id. Each rank's inputs follow from (case, rank), so every
rank computes every rank's inputs and the expected result with numpy."""
import ctypes
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from tessera import _runtime

lib = ctypes.CDLL(str(Path(_runtime.__file__).parent / "lib" / "libtessera.so"))  # the one _runtime loaded
lib.tsrGetLastErrorMessage.restype = ctypes.c_char_p
lib.tsrGetStatusName.restype = ctypes.c_char_p

F32, F64, F16, BF16, I32, I64 = 1, 2, 3, 4, 7, 8
SUM, PROD, MAX, MIN, AVG = 0, 1, 2, 3, 4
H2D, D2H = 1, 2
NCCL = 2
NUMPY = {F32: np.float32, F64: np.float64, F16: np.float16, BF16: np.float32, I32: np.int32, I64: np.int64}
SIZE = {F32: 4, F64: 8, F16: 2, BF16: 2, I32: 4, I64: 8}


class ContextOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("flags", ctypes.c_uint32), ("worker_threads", ctypes.c_uint32),
                ("wait_timeout_ms", ctypes.c_uint32)]


class CommOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("timeout_ms", ctypes.c_uint64),
                ("units", ctypes.c_uint32)]


class UniqueId(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 128)]


def name(status):
    return lib.tsrGetStatusName(status).decode()


def must(status):
    if status:
        raise RuntimeError(f"{name(status)}: {lib.tsrGetLastErrorMessage().decode()}")


def context():
    o = ContextOptions()
    must(lib.tsrContextOptionsInitialize(ctypes.byref(o)))
    o.backend = b"cuda"
    ctx = ctypes.c_void_p()
    must(lib.tsrCreateContextWithOptions(ctypes.byref(o), ctypes.byref(ctx)))
    return ctx


def comm_options(timeout_ms=60000, flags=0):
    o = CommOptions()
    must(lib.tsrCommOptionsInitialize(ctypes.byref(o)))
    o.backend, o.flags, o.timeout_ms = NCCL, flags, timeout_ms
    return o


def shared_id(ctx, o, world, rank, directory):
    """Rank 0 makes the id and writes it; the others read it."""
    path = Path(directory) / "id"
    uid = UniqueId()
    if rank == 0:
        must(lib.tsrCommGetUniqueId(ctx, ctypes.byref(o), ctypes.byref(uid)))
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(bytes(uid.bytes))
        tmp.rename(path)
    else:
        deadline = time.monotonic() + 60
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("rank 0 wrote no id")
            time.sleep(0.01)
        ctypes.memmove(uid.bytes, path.read_bytes(), 128)
    return uid


def to_bits(values, dtype):
    """Host bytes of `values` in `dtype` (bf16: the upper half of float32, exact for the small integers used)."""
    if dtype == BF16:
        return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return np.asarray(values, NUMPY[dtype])


def from_bits(raw, dtype):
    if dtype == BF16:
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return raw.view(NUMPY[dtype])


class Device:
    def __init__(self, ctx):
        self.ctx = ctx

    def put(self, host):
        p = ctypes.c_void_p()
        must(lib.tsrAlloc(self.ctx, ctypes.c_size_t(max(host.nbytes, 1)), 0, ctypes.byref(p)))
        must(lib.tsrMemcpy(self.ctx, p, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host.nbytes), H2D))
        return p

    def get(self, p, count, dtype):
        raw = np.zeros(count * SIZE[dtype], np.uint8)
        must(lib.tsrMemcpy(self.ctx, raw.ctypes.data_as(ctypes.c_void_p), p, ctypes.c_size_t(raw.nbytes), D2H))
        return from_bits(raw, dtype)


def inputs(case, rank, count, op):
    rng = np.random.default_rng(1000 * case + rank)
    low, high = (1, 3) if op == PROD else (-8, 9)  # small integers: every dtype holds them and their combinations
    return rng.integers(low, high, count).astype(np.float64)


def combine(blocks, op, dtype):
    stacked = np.stack(blocks)
    if op == SUM or op == AVG:
        out = stacked.sum(0)
        return out / len(blocks) if op == AVG else out
    return {PROD: np.prod, MAX: np.max, MIN: np.min}[op](stacked, 0)


def collectives(world, rank, directory):
    ctx = context()
    dev = Device(ctx)
    o = comm_options()
    uid = shared_id(ctx, o, world, rank, directory)
    comm = ctypes.c_void_p()
    must(lib.tsrCommCreate(ctx, ctypes.byref(o), world, rank, ctypes.byref(uid), ctypes.byref(comm)))
    stream = ctypes.c_void_p()
    must(lib.tsrCreateStream(ctx, None, ctypes.byref(stream)))
    count = 64 * world
    case = 0

    def report(what, got, want):
        ok = bool(np.array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64)))
        print(json.dumps({"what": what, "ok": ok, **({} if ok else {"got": list(map(float, got[:8])),
                                                                      "want": list(map(float, want[:8]))})}),
              flush=True)

    def run(what, call, s, dtype, out, n):
        st = call(s)
        if not st and s:
            st = lib.tsrStreamSynchronizeTimeout(s, 60000)
        if st:
            print(json.dumps({"what": what, "ok": False, "status": name(st),
                              "message": lib.tsrGetLastErrorMessage().decode()}), flush=True)
            return None
        return dev.get(out, n, dtype)

    for s_name, s in (("stream", stream), ("null", None)):
        for op in (SUM, PROD, MAX, MIN, AVG):
            for dtype in (F32, F64, F16, BF16, I32, I64):
                if op == AVG and dtype in (I32, I64):
                    continue
                case += 1
                mine = inputs(case, rank, count, op)
                want = combine([inputs(case, r, count, op) for r in range(world)], op, dtype)
                send, recv = dev.put(to_bits(mine, dtype)), dev.put(to_bits(np.zeros(count), dtype))
                got = run(f"all_reduce {s_name} op={op} dtype={dtype}", lambda st_: lib.tsrCommAllReduce(
                    comm, send, recv, ctypes.c_size_t(count), dtype, op, st_), s, dtype, recv, count)
                if got is not None:
                    report(f"all_reduce {s_name} op={op} dtype={dtype}", got, want)
        for dtype in (F32, BF16):
            case += 1
            mine = inputs(case, rank, count, SUM)
            total = combine([inputs(case, r, count, SUM) for r in range(world)], SUM, dtype)
            part = count // world
            send, recv = dev.put(to_bits(mine, dtype)), dev.put(to_bits(np.zeros(part), dtype))
            got = run("reduce_scatter", lambda st_: lib.tsrCommReduceScatter(
                comm, send, recv, ctypes.c_size_t(count), dtype, SUM, st_), s, dtype, recv, part)
            if got is not None:
                report(f"reduce_scatter {s_name} dtype={dtype}", got, total[rank * part:(rank + 1) * part])
        case += 1
        mine = inputs(case, rank, count, SUM)
        send, recv = dev.put(to_bits(mine, F32)), dev.put(to_bits(np.zeros(count * world), F32))
        got = run("all_gather", lambda st_: lib.tsrCommAllGather(comm, send, recv, ctypes.c_size_t(count), F32, st_),
                  s, F32, recv, count * world)
        if got is not None:
            report(f"all_gather {s_name}", got, np.concatenate([inputs(case, r, count, SUM) for r in range(world)]))
        case += 1
        mine = inputs(case, rank, count, SUM)
        send, recv = dev.put(to_bits(mine, I64)), dev.put(to_bits(np.zeros(count), I64))
        got = run("all_to_all", lambda st_: lib.tsrCommAllToAll(comm, send, recv, ctypes.c_size_t(count), I64, st_),
                  s, I64, recv, count)
        part = count // world
        if got is not None:
            report(f"all_to_all {s_name}", got, np.concatenate(
                [inputs(case, r, count, SUM)[rank * part:(rank + 1) * part] for r in range(world)]))
        case += 1
        root = world - 1
        mine = inputs(case, rank, count, SUM)
        send, recv = dev.put(to_bits(mine, F64)), dev.put(to_bits(np.zeros(count), F64))
        got = run("broadcast", lambda st_: lib.tsrCommBroadcast(comm, send, recv, ctypes.c_size_t(count), F64, root,
                                                                 st_), s, F64, recv, count)
        if got is not None:
            report(f"broadcast {s_name}", got, inputs(case, root, count, SUM))
        if world > 1:  # a ring: each rank sends to the next and receives from the previous
            case += 1
            mine = inputs(case, rank, count, SUM)
            send, recv = dev.put(to_bits(mine, F32)), dev.put(to_bits(np.zeros(count), F32))
            nxt, prev = (rank + 1) % world, (rank - 1) % world
            first, second = ((lib.tsrCommSend, send, nxt), (lib.tsrCommRecv, recv, prev))
            if rank % 2:
                first, second = second, first
            got = run("send/recv", lambda st_: first[0](comm, first[1], ctypes.c_size_t(count), F32, first[2], st_)
                      or second[0](comm, second[1], ctypes.c_size_t(count), F32, second[2], st_), s, F32, recv, count)
            if got is not None:
                report(f"send/recv {s_name}", got, inputs(case, prev, count, SUM))
    must(lib.tsrCommGetAsyncError(comm))
    must(lib.tsrDestroyStream(stream))
    must(lib.tsrReleaseComm(comm))
    must(lib.tsrDestroyContext(ctx))


def dead_peer(world, rank, directory):
    ctx = context()
    dev = Device(ctx)
    o = comm_options(timeout_ms=3000)
    uid = shared_id(ctx, o, world, rank, directory)
    comm = ctypes.c_void_p()
    must(lib.tsrCommCreate(ctx, ctypes.byref(o), world, rank, ctypes.byref(uid), ctypes.byref(comm)))
    if rank != 0:
        os._exit(0)  # dies without a word: no destroy, no finalize
    stream = ctypes.c_void_p()
    must(lib.tsrCreateStream(ctx, None, ctypes.byref(stream)))
    buf = dev.put(np.ones(1 << 20, np.float32))
    start = time.monotonic()
    st = lib.tsrCommAllReduce(comm, buf, buf, ctypes.c_size_t(1 << 20), F32, SUM, stream)
    print(json.dumps({"what": "enqueue", "status": name(st), "seconds": time.monotonic() - start}), flush=True)
    st = lib.tsrStreamSynchronizeTimeout(stream, 30000)
    print(json.dumps({"what": "stream", "status": name(st), "seconds": time.monotonic() - start}), flush=True)
    st = lib.tsrCommGetAsyncError(comm)
    print(json.dumps({"what": "async_error", "status": name(st), "seconds": time.monotonic() - start,
                      "message": lib.tsrGetLastErrorMessage().decode()}), flush=True)
    lib.tsrReleaseComm(comm)
    lib.tsrDestroyStream(stream)
    lib.tsrDestroyContext(ctx)


def captured(world, rank, directory, dead=False):
    """all_reduce and all_gather recorded on a capturing stream, the graph instantiated (NCCL's kernels go into
    the CUDA graph) and launched twice, new data written into the same input between (on the stream, then on
    the NULL stream): a JSON line per result. `dead`: after a direct all_reduce (NCCL connects its peers) and
    the instantiation, every rank but 0 exits; rank 0's replay on the NULL stream must return a status within
    the 3 s timeout."""
    ctx = context()
    dev = Device(ctx)
    o = comm_options(timeout_ms=3000 if dead else 60000)
    uid = shared_id(ctx, o, world, rank, directory)
    comm, stream, graph, run = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    must(lib.tsrCommCreate(ctx, ctypes.byref(o), world, rank, ctypes.byref(uid), ctypes.byref(comm)))
    must(lib.tsrCreateStream(ctx, None, ctypes.byref(stream)))
    n = 1 << 16
    x, y = dev.put(np.zeros(n, np.float32)), dev.put(np.zeros(n, np.float32))
    every = dev.put(np.zeros(n * world, np.float32))
    if dead:
        must(lib.tsrCommAllReduce(comm, x, y, ctypes.c_size_t(n), F32, SUM, stream))
        must(lib.tsrStreamSynchronize(stream))
    must(lib.tsrStreamBeginCapture(stream))
    must(lib.tsrCommAllReduce(comm, x, y, ctypes.c_size_t(n), F32, SUM, stream))
    must(lib.tsrCommAllGather(comm, x, every, ctypes.c_size_t(n), F32, stream))
    must(lib.tsrStreamEndCapture(stream, ctypes.byref(graph)))
    must(lib.tsrGraphInstantiate(graph, ctypes.byref(run)))
    if dead and rank != 0:
        os._exit(0)  # dies without a word
    for replay in range(1 if dead else 2):
        def data(r):
            return (np.arange(n) % 1000 + 10 * r + 1000 * replay).astype(np.float32)  # sums exact in f32
        host = data(rank)
        must(lib.tsrMemcpy(ctx, x, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host.nbytes), H2D))
        start = time.monotonic()
        st = lib.tsrGraphLaunch(run, None if dead or replay else stream)
        if dead:
            print(json.dumps({"what": "replay", "status": name(st), "seconds": time.monotonic() - start,
                              "message": lib.tsrGetLastErrorMessage().decode()}), flush=True)
            break
        must(st)
        must(lib.tsrStreamSynchronize(stream))
        want = sum(data(r).astype(np.float64) for r in range(world))
        got = dev.get(y, n, F32)
        print(json.dumps({"what": f"all_reduce, replay {replay}", "ok": bool(np.array_equal(got, want))}), flush=True)
        got = dev.get(every, n * world, F32)
        want = np.concatenate([data(r) for r in range(world)])
        print(json.dumps({"what": f"all_gather, replay {replay}", "ok": bool(np.array_equal(got, want))}), flush=True)
    if not dead:
        must(lib.tsrDestroyGraphExec(run))
        must(lib.tsrDestroyGraph(graph))
        must(lib.tsrReleaseComm(comm))
    lib.tsrDestroyStream(stream)
    lib.tsrDestroyContext(ctx)


def probe(directory):
    ctx = ctypes.c_void_p()
    o = ContextOptions()
    lib.tsrContextOptionsInitialize(ctypes.byref(o))
    o.backend = b"cuda"
    st = lib.tsrCreateContextWithOptions(ctypes.byref(o), ctypes.byref(ctx))
    if not st:
        uid = UniqueId()
        st = lib.tsrCommGetUniqueId(ctx, ctypes.byref(comm_options()), ctypes.byref(uid))
    print(json.dumps({"ok": not st, "why": lib.tsrGetLastErrorMessage().decode() if st else ""}), flush=True)


if __name__ == "__main__":
    scenario, world, rank, directory = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if scenario == "probe":
        probe(directory)
    elif scenario == "collectives":
        collectives(world, rank, directory)
    elif scenario in ("captured", "captured-dead-peer"):
        captured(world, rank, directory, dead=scenario == "captured-dead-peer")
    else:
        dead_peer(world, rank, directory)
