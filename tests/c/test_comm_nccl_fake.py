"""The NCCL transport of communicators (runtime/src/comm_nccl.c) without GPUs: host_comm_nccl.c on
tests/c/fake_nccl.c (as $TESSERA_NCCL_LIBRARY) and tests/c/fake_cuda.c (as libcuda.so.1). The fake NCCL's log
shows what NCCL is asked: a non-blocking communicator from ncclGetUniqueId's id, NCCL_NVLS_ENABLE=0 in its
environment (unless the user set it), split at once into the blocking one every operation runs on (the fake
refuses an operation on a non-blocking one), each operation with NCCL's datatype and op codes on the Tessera
stream's CUstream; a peer that never comes yields TSR_ERROR_TIMEOUT or a peer error and ncclCommAbort, never a hang.
tests/gpu/test_nccl_gpu.py runs the real thing on two GPUs."""
import os
import subprocess
import sys

import pytest

from hostutil import HERE, run, run_chunked_on_fakes, without_allocation_waits

# NCCL's codes (nccl.h): datatypes int8 0, uint8 1, int32 2, int64 4, float16 6, float32 7, float64 8,
# bfloat16 9; ops sum 0, prod 1, max 2, min 3, avg 4.
F32, F64, F16, BF16, I32, I64, U8 = 7, 8, 6, 9, 2, 4, 1


def run_host(build_host, fake_driver, fake_nccl, tmp_path, mode, **env):
    log = tmp_path / "nccl.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
                   FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(tmp_path / "cuda.log"), **env)
    for name in ("TESSERA_BACKEND", "NCCL_NVLS_ENABLE", "NCCL_RUNTIME_CONNECT", "FAKE_NCCL_HANG",
                 "TESSERA_COMM_BACKEND", "TESSERA_COMM_TIMEOUT_MS", "TESSERA_WAIT_TIMEOUT_MS", "TESSERA_COMM_UNITS"):
        if name not in env:
            environ.pop(name, None)
    p = subprocess.run([str(build_host("host_comm_nccl.c")), mode], capture_output=True, text=True, timeout=120,
                       env=environ)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    return log.read_text().splitlines()


def test_every_operation_reaches_nccl_on_the_stream(build_host, fake_driver, fake_nccl, tmp_path):
    lines = run_host(build_host, fake_driver, fake_nccl, tmp_path, "ops")
    init = [line for line in lines if line.startswith("ncclCommInitRankConfig")]
    assert init == [f"ncclCommInitRankConfig nranks=2 rank=1 id=fake-nccl-id-{n} magic=0xcafebeef version=21700 "
                    "blocking=0 NCCL_NVLS_ENABLE=0" for n in (1, 2)]  # the second: the deterministic one
    assert lines[0] == "ncclGetUniqueId"
    reduces = [line for line in lines if line.startswith("ncclAllReduce")]
    stream = reduces[0].split()[-1]
    assert stream.startswith("s")  # the Tessera stream's own CUstream
    want = []
    for op in range(5):
        want += [f"ncclAllReduce count=8 type={t} op={op} {stream}" for t in (F32, F64, F16, BF16)]
        if op != 4:
            want += [f"ncclAllReduce count=8 type={t} op={op} {stream}" for t in (I32, I64)]
    assert reduces[:len(want)] == want
    # the NULL stream's: on a stream of the communicator's, never the per-thread stream, whose handle would name
    # NCCL's own thread's stream (NVIDIA/nccl#1976; the host checks the result is there when the call returns);
    # then one on the parent and one on the new communicator right after a split
    own = reduces[len(want)].split()[-1]
    assert own.startswith("s") and own != stream and not [line for line in lines if line.endswith("ptds")]
    assert reduces[len(want):] == [f"ncclAllReduce count=8 type=7 op=0 {s}" for s in (own, stream, stream)]
    assert not [line for line in lines if line.startswith("refused")]
    others = lines[lines.index(reduces[len(want) - 1]) + 1:]
    assert others[:11] == [
        f"ncclReduceScatter count=4 type={BF16} op=0 {stream}",
        f"ncclAllGather count=8 type={F32} {stream}",
        "ncclGroupStart",  # all_to_all: a send and a receive per peer, 4 elements each
        f"ncclSend count=4 type={I64} peer=0 {stream}", f"ncclRecv count=4 type={I64} peer=0 {stream}",
        f"ncclSend count=4 type={I64} peer=1 {stream}", f"ncclRecv count=4 type={I64} peer=1 {stream}",
        "ncclGroupEnd",
        f"ncclBroadcast count=8 type={F64} root=0 {stream}",
        f"ncclSend count=8 type={U8} peer=0 {stream}",  # fp8, which NCCL 2.17 lacks, moves as bytes
        f"ncclRecv count=8 type={U8} peer=0 {stream}",
    ]
    # deterministic: NCCL gathers every rank's buffer on the stream, the host combines in the tree's order
    assert f"ncclAllGather count=8 type={F32} {stream}" in lines[lines.index(others[10]) + 1:]
    assert "ncclCommSplit color=3 key=7 blocking=0" in lines and "ncclCommSplit color=-1 key=0 blocking=0" in lines
    assert lines[-1] == "ncclCommDestroy rank=1" and not [line for line in lines if "Abort" in line]


def test_a_host_buffer_is_refused_before_nccl(build_host, fake_driver, fake_nccl, tmp_path):
    """A host pointer given to an NCCL communicator is TSR_ERROR_INVALID_VALUE naming the argument, and NCCL is
    never asked (on a GPU it faults, which loses the context); tsrDeviceRegister'ed memory goes through."""
    lines = run_host(build_host, fake_driver, fake_nccl, tmp_path, "host")
    ops = [line for line in lines if line.split()[0] in ("ncclAllGather", "ncclAllReduce", "ncclBroadcast",
                                                         "ncclSend", "ncclGroupStart")]
    assert len(ops) == 1 and ops[0].startswith("ncclAllGather count=8 type=7 "), lines


STAGED = r"""
import numpy as np
from tessera import comm, runtime, stream
ctx = runtime.select_backend("cuda")
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx)
x = np.arange(1, 9, dtype=np.float32)
gathered = c.all_gather(x)  # the fake's other rank contributes zeros
assert gathered.shape == (2, 8) and (gathered[0] == 0).all() and (gathered[1] == x).all(), gathered
s = stream.new(context=ctx)
every = np.full(16, -1, np.float32)
assert c.all_gather(x, every, stream=s) is every and (every == gathered.ravel()).all(), every
y = x.copy()
assert c.all_reduce(y, out=y, stream=s) is y and (y == x).all(), y  # the fake's sum is this rank's values
assert (c.reduce_scatter(x) == x[4:]).all()
assert (c.broadcast(x, root=1) == x).all()
on_device = runtime.DeviceArray.from_numpy(x, ctx)
assert (c.all_gather(on_device, stream=s).numpy() == 0).sum() == 8  # DeviceArrays as they were: not staged
s.synchronize()
c.close()
print("ok")
"""


def test_numpy_arrays_are_staged_through_device_memory(fake_driver, fake_nccl, tmp_path):
    """tessera.comm on NCCL copies numpy arrays into DeviceArrays of the context and results back (libtessera
    refuses host pointers there), on the NULL stream and on a stream, in place too."""
    log = tmp_path / "nccl.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(tmp_path / "cuda.log"))
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", STAGED], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["ok"], p.stdout + p.stderr
    ops = [line.split()[0] for line in log.read_text().splitlines() if line.startswith("nccl") and "count=" in line]
    assert ops == ["ncclAllGather", "ncclAllGather", "ncclAllReduce", "ncclReduceScatter", "ncclBroadcast",
                   "ncclAllGather"], ops


def test_the_user_s_nccl_settings_are_kept(build_host, fake_driver, fake_nccl, tmp_path):
    lines = run_host(build_host, fake_driver, fake_nccl, tmp_path, "ops", NCCL_NVLS_ENABLE="1",
                     NCCL_RUNTIME_CONNECT="1")
    assert {line.split()[-1] for line in lines if line.startswith("ncclCommInitRankConfig")} == {"NCCL_NVLS_ENABLE=1"}
    derived = [line for line in lines if line.startswith("ncclCommSplit") and " blocking=1 " in line]
    assert derived and {line.split()[-1] for line in derived} == {"NCCL_RUNTIME_CONNECT=1"}, derived


@pytest.mark.parametrize("mode", ["init", "gpu", "async"])
def test_a_missing_peer_is_a_status_and_an_abort(build_host, fake_driver, fake_nccl, tmp_path, mode):
    """A peer that never joins (init: TSR_ERROR_TIMEOUT at the timeout), an operation that never completes (gpu:
    a blocking enqueue returns at once and the kernel spins, so the communicator's monitor finds it at the
    deadline and aborts), NCCL's asynchronous error (async): each returns a status, and NCCL's communicators are
    aborted, not destroyed (which could wait for the peer): past initialization both the blocking one and its
    non-blocking parent."""
    lines = run_host(build_host, fake_driver, fake_nccl, tmp_path, mode, FAKE_NCCL_HANG=mode)
    assert not [line for line in lines if "Destroy" in line], lines
    assert lines.count("ncclCommAbort rank=0") == (1 if mode == "init" else 2), lines


def test_a_blocking_communicator_s_split_is_bounded(build_host, fake_driver, fake_nccl, tmp_path):
    """A peer gone between initialization and the split into the blocking communicator: creation returns
    TSR_ERROR_TIMEOUT at the timeout (the host checks it) and the non-blocking parent is aborted."""
    lines = run_host(build_host, fake_driver, fake_nccl, tmp_path, "init", FAKE_NCCL_HANG="split")
    assert "ncclCommSplit color=0 key=0 blocking=1 NCCL_RUNTIME_CONNECT=0" in lines, lines
    assert "ncclCommAbort rank=0" in lines and not [line for line in lines if "Destroy" in line], lines


def test_blocking_communicators_are_split_from_the_bounded_non_blocking_ones(build_host, fake_driver, fake_nccl,
                                                                            tmp_path):
    """Each communicator is created non-blocking (its wait bounded by polling), then
    split, every rank in color 0 keyed by its rank, into a blocking one with the same units, on which every
    operation runs (no NCCL thread per operation); NCCL_RUNTIME_CONNECT=0 connects the peers during that bounded
    split, not in an enqueue. tsrCommSplit splits the non-blocking parent, then derives the new communicator's
    blocking one. Teardown destroys both."""
    lines = run_host(build_host, fake_driver, fake_nccl, tmp_path, "ops", TESSERA_COMM_UNITS="3")
    assert not [line for line in lines if line.startswith("refused") or "Abort" in line], lines
    inits = [i for i, line in enumerate(lines) if line.startswith("ncclCommInitRankConfig")]
    assert len(inits) == 2 and all(" blocking=0 " in lines[i] and lines[i].endswith(" maxCTAs=3") for i in inits)
    derived = "ncclCommSplit color=0 key=1 blocking=1 maxCTAs=3 NCCL_RUNTIME_CONNECT=0"
    assert [lines[i + 1] for i in inits] == [derived, derived]
    user = lines.index("ncclCommSplit color=3 key=7 blocking=0 maxCTAs=3")
    assert lines[user + 1] == "ncclCommSplit color=0 key=0 blocking=1 maxCTAs=3 NCCL_RUNTIME_CONNECT=0"
    assert "ncclCommSplit color=-1 key=0 blocking=0 maxCTAs=3" in lines
    reduces = [line for line in lines if line.startswith("ncclAllReduce")]
    assert len(reduces) == 31 and reduces[0].split()[-1].startswith("s")
    assert lines[-2:] == ["ncclCommDestroy rank=1", "ncclCommDestroy rank=1"]


LOOKUP = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])  # libtessera in a site-packages/tessera/lib of its own
if len(sys.argv) > 2:
    ctypes.CDLL(sys.argv[2])  # an NCCL the process loaded first, as `import torch` loads PyTorch's

class ContextOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("flags", ctypes.c_uint32), ("worker_threads", ctypes.c_uint32),
                ("wait_timeout_ms", ctypes.c_uint32)]

class CommOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("timeout_ms", ctypes.c_uint64),
                ("units", ctypes.c_uint32)]

lib.tsrGetLastErrorMessage.restype = ctypes.c_char_p
o, ctx = ContextOptions(), ctypes.c_void_p()
lib.tsrContextOptionsInitialize(ctypes.byref(o))
o.backend = b"cuda"
c, uid = CommOptions(), (ctypes.c_ubyte * 128)()
lib.tsrCommOptionsInitialize(ctypes.byref(c))
c.backend = 2  # TSR_COMM_BACKEND_NCCL
st = lib.tsrCreateContextWithOptions(ctypes.byref(o), ctypes.byref(ctx)) or \
    lib.tsrCommGetUniqueId(ctx, ctypes.byref(c), uid)
assert st == 0, lib.tsrGetLastErrorMessage()
with open("/proc/self/maps") as f:
    print("\n".join(sorted({line.split()[-1] for line in f if "libnccl" in line})))
"""


@pytest.mark.parametrize("preloaded", [False, True])
def test_nccl_lookup_prefers_a_loaded_copy_then_the_wheel(cc, runtime_prefix, fake_driver, tmp_path, preloaded):
    """Without $TESSERA_NCCL_LIBRARY: a libnccl.so.2 the process has loaded (PyTorch's, once torch is imported)
    is the one used, not a second copy; else the nvidia-nccl wheel's beside the installed package
    (site-packages/nvidia/nccl/lib, two levels above tessera/lib/libtessera.so)."""
    site = tmp_path / "site-packages"
    (site / "tessera" / "lib").mkdir(parents=True)
    libtessera = site / "tessera" / "lib" / "libtessera.so"
    libtessera.write_bytes((runtime_prefix / "lib" / "libtessera.so").read_bytes())
    wheel, loaded = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", tmp_path / "torch_lib" / "libnccl.so.2"
    for out in (wheel, loaded):
        out.parent.mkdir(parents=True)
        run([cc, "-shared", "-fPIC", "-O1", HERE / "fake_nccl.c", "-ldl", "-Wl,-soname,libnccl.so.2", "-o", out])
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_NCCL_LOG=str(tmp_path / "nccl.log"),
               FAKE_CUDA_LOG=str(tmp_path / "cuda.log"))
    env.pop("TESSERA_NCCL_LIBRARY", None)
    p = run([sys.executable, "-c", LOOKUP, libtessera, *([loaded] if preloaded else [])], env=env, timeout=120)
    assert p.stdout.split() == [str(loaded if preloaded else wheel)], p.stdout + p.stderr
    assert (tmp_path / "nccl.log").read_text().splitlines() == ["ncclGetUniqueId"]


CAPTURED = r"""
import os
import numpy as np
from tessera import comm, graph, runtime, stream
ctx = runtime.select_backend("cuda")
log = os.environ["FAKE_NCCL_LOG"]
def ops():
    return [line.split()[0] for line in open(log).read().splitlines() if line.startswith("nccl") and "count=" in line]
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx)
x = runtime.DeviceArray.from_numpy(np.arange(1, 9, dtype=np.float32), ctx)
y, every = runtime.DeviceArray((8,), np.float32, ctx), runtime.DeviceArray((2, 8), np.float32, ctx)
s = stream.new(context=ctx)
with graph.capture(s) as g:
    c.all_reduce(x, out=y)
    c.all_gather(x, out=every, stream=s)
    try:
        c.all_reduce(np.ones(8, np.float32))
    except ValueError as e:
        print("numpy refused:", "graph capture cannot record" in str(e))
print("recorded", g.node_count, len(ops()))
g.launch()
g.launch(s)
s.synchronize()
print("launched", len(ops()))
det = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", deterministic=True, timeout=5,
                               context=ctx)
with graph.capture(s) as g2:
    try:
        det.all_reduce(x, out=y)
    except runtime.Error as e:
        print(e.status_name, "cannot be captured" in str(e))
    det.all_gather(x, out=every)  # the capture goes on
print("recorded", g2.node_count)
c.close()
det.close()
print("ok")
"""


def test_operations_captured_on_nccl_are_issued_into_the_cuda_graph(fake_driver, fake_nccl, tmp_path):
    """On a capturing stream NCCL operations are recorded, not issued; tsrGraphInstantiate issues them on its
    capture stream (so that NCCL's kernels are in the CUDA graph), and launches only launch the graph. Refused at
    the call, the capture staying usable: numpy arrays (their staging is not stream work) and a deterministic
    reduction (it combines on the host)."""
    log, cuda_log = tmp_path / "nccl.log", tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(cuda_log))
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG", "TESSERA_DETERMINISTIC"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", CAPTURED], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == ["numpy refused: True", "recorded 2 0", "launched 2",
                                     "TSR_ERROR_UNSUPPORTED True", "recorded 1", "ok"], p.stdout + p.stderr
    issued = [line for line in log.read_text().splitlines() if line.startswith("nccl") and "count=" in line]
    assert [line.split()[0] for line in issued] == ["ncclAllReduce", "ncclAllGather"], issued
    capture = [line.split()[1] for line in cuda_log.read_text().splitlines() if line.startswith("cuStreamBeginCapture")]
    assert len(capture) == 1 and all(line.split()[-1] == capture[0] for line in issued), (capture, issued)
    # each launch is watched: an event after it on its stream (the NULL stream's on a stream of its own, waited
    # for), which the monitor holds against the timeout
    cuda = cuda_log.read_text().splitlines()
    launches = [i for i, line in enumerate(cuda) if line.startswith("cuGraphLaunch")]
    assert len(launches) == 2 and all(line.startswith("cuGraphLaunch s") for line in map(cuda.__getitem__, launches))
    for i in launches:
        stream = cuda[i].split()[1]
        assert f"cuEventRecord {stream}" in cuda[i + 1:i + 4], cuda[i:i + 4]


DEAD_REPLAY = r"""
import time
import numpy as np
from tessera import comm, graph, runtime, stream
ctx = runtime.select_backend("cuda")
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=1, context=ctx)
x = runtime.DeviceArray.from_numpy(np.arange(1, 9, dtype=np.float32), ctx)
y, every = runtime.DeviceArray((8,), np.float32, ctx), runtime.DeviceArray((2, 8), np.float32, ctx)
s = stream.new(context=ctx)
c.all_reduce(x, out=y, stream=s)  # directly first: completes (the peer is alive)
s.synchronize()
with graph.capture(s) as g:
    c.all_reduce(x, out=y, stream=s)
    c.all_gather(x, out=every, stream=s)
start = time.monotonic()
try:
    g.launch()  # the NULL stream: the replay waits for the graph, and the peer died after the instantiation
    print("no error", flush=True)
except runtime.Error as e:
    print(e.status_name, round(time.monotonic() - start, 1), flush=True)
del g  # the graph goes: NCCL's abort, waiting for it, completes
c.close()
print("closed", flush=True)
"""


def test_a_replay_whose_peer_died_returns_at_the_timeout(fake_driver, fake_nccl, tmp_path):
    """Regression (tests/gpu/test_comm_capture_gpu.py's dead peer hung on 4x H200): ncclCommAbort (NCCL 2.26
    and later) waits until the CUDA graphs holding the communicator's operations are destroyed, and the monitor
    called it under the state's lock, so the replay of such a graph whose peer died, waiting for the monitor's
    fault, never returned. The fake NCCL waits so (up to 20 s, then gives up), its graph's operations spinning
    until the abort: the replay on the NULL stream returns TSR_ERROR_TIMEOUT at the communicator's 1 s timeout,
    the abort completing only once the graph is gone."""
    log = tmp_path / "nccl.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(tmp_path / "cuda.log"), FAKE_NCCL_HANG="graph")
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "TESSERA_DETERMINISTIC"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", DEAD_REPLAY], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    status, seconds, closed = p.stdout.split()
    assert status == "TSR_ERROR_TIMEOUT" and 1.0 <= float(seconds) < 5 and closed == "closed", p.stdout
    lines = log.read_text().splitlines()
    after = lines[max(i for i, line in enumerate(lines) if line.startswith("ncclAllGather")) + 1:]
    assert after == ["ncclCommAbort rank=1", "ncclCommAbort rank=1 waits for the graphs holding it",
                     "ncclCommAbort rank=1"], lines  # the blocking one waits for the graph; then its parent


def _reduce(input, output, n=2):
    return {"collective": "all_reduce", "input": input, "output": output, "mesh_axes": ["dp"], "mesh_shape": [n],
            "axis": "dp", "reduce": "sum", "deterministic": False, "algo": "ring"}


def _kernel(name, args, extent):
    return {"kernel": name, "env": {"N": extent}, "args": args, "block": [64, 1, 1],
            "grid": ["ceil(N/64)", "1", "1"]}


def _t(value):
    return {"value": value, "shape": ["N"]}


BIG = 1 << 18  # f32 elements: 1 MiB, the size from which a bucket member is reduced without packing
# bucket: a 1 MiB member and a small one (one bucket); then kernels touching none of the bucket's storage but
# the small member's input (packed: free once copied), and one reading its result. single: in place on two aliases of one storage at one offset (a chunk of
# a pipelined collective), then x -> out (both >= 1 MiB: direct); a kernel on other storage, then one writing
# the storage the in-place reduction reads and writes. alone: the same on a mesh of one device.
OVERLAP_PLAN = {"version": 6, "functions": {
    "bucket": {
        "params": ["x", "s"], "args": ["x", "s"], "results": ["gx", "g1", "y"],
        "values": {"x": {"dtype": "f32", "dims": ["N"]}, "gx": {"dtype": "f32", "dims": ["N"]},
                   **{v: {"dtype": "f32", "dims": ["M"]} for v in ("s", "g1", "y")}},
        "steps": [_reduce("x", "gx"), _reduce("s", "g1"),
                  _kernel("fill_fixed", [_t("y"), {"f32": 3.0}], "M"),
                  _kernel("fill_fixed", [_t("s"), {"f32": 5.0}], "M"),
                  _kernel("saxpy", [{"f32": 1.0}, _t("g1"), _t("y")], "M")],
        "fallbacks": [], "outputs": []},
    **{name: {
        "params": ["x"], "args": ["x"], "results": ["out", "t", "u"],
        "values": {**{v: {"dtype": "f32", "dims": ["N"]} for v in ("x", "out", "t", "u")},
                   "hi_in": {"dtype": "f32", "dims": ["N//2"]}, "hi_out": {"dtype": "f32", "dims": ["N//2"]}},
        "steps": [_kernel("fill_fixed", [_t("t"), {"f32": 2.0}], "N"),
                  {"alias": "hi_in", "of": "t", "offset": "N//2"}, {"alias": "hi_out", "of": "t", "offset": "N//2"},
                  _reduce("hi_in", "hi_out", n), _reduce("x", "out", n),
                  _kernel("fill_fixed", [_t("u"), {"f32": 1.0}], "N"),
                  _kernel("saxpy", [{"f32": 1.0}, _t("x"), _t("t")], "N")],
        "fallbacks": [], "outputs": []} for name, n in (("single", 2), ("alone", 1))},
    "chunks": {  # two row chunks of one result, each written by a kernel and reduced in place (PIPE's plans)
        "params": ["x"], "args": ["x"], "results": ["t"],
        "values": {"x": {"dtype": "f32", "dims": ["N"]}, "t": {"dtype": "f32", "dims": ["N"]},
                   **{v: {"dtype": "f32", "dims": ["N//2"]} for v in ("a_in", "a_out", "b_in", "b_out")}},
        "steps": [{"alias": "a_in", "of": "t", "offset": "0*N"}, {"alias": "a_out", "of": "t", "offset": "0*N"},
                  _kernel("fill_fixed", [_t("a_in"), {"f32": 2.0}], "N//2"), _reduce("a_in", "a_out"),
                  {"alias": "b_in", "of": "t", "offset": "N//2"}, {"alias": "b_out", "of": "t", "offset": "N//2"},
                  _kernel("fill_fixed", [_t("b_in"), {"f32": 4.0}], "N//2"), _reduce("b_in", "b_out"),
                  _kernel("saxpy", [{"f32": 1.0}, _t("x"), _t("t")], "N")],
        "fallbacks": [], "outputs": []}}}

OVERLAP = r"""
import sys
import numpy as np
from tessera import comm, executor, runtime, stream
ctx = runtime.select_backend("cuda")
prog = executor.load(sys.argv[1], ctx)
s = stream.new(context=ctx)
dev = lambda a: runtime.DeviceArray.from_numpy(a, ctx)
x, small = np.arange(2 * BIG, dtype=np.float32), np.arange(8, dtype=np.float32)
for name, size, rank in (("bucket", 2, 1), ("single", 2, 1), ("alone", 1, 0), ("chunks", 2, 1), ("bucket", 2, 1)):
    c = comm.Communicator.create(size, rank, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx)
    args = (dev(x[:BIG]), dev(small)) if name == "bucket" else (dev(x),)
    s.synchronize()
    with open(sys.argv[2], "a") as log:  # the fake driver's log: where the call's work begins
        print("call", name, file=log)
    out = getattr(prog, name)(*args, stream=s, comm=c)
    s.synchronize()
    out = [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]
    if name == "bucket":  # the fake's sum is this rank's values
        ok = (out[0] == x[:BIG]).all() and (out[1] == small).all() and (out[2] == 3 + small).all()
    elif name == "chunks":
        ok = (out[0] == np.repeat([2, 4], BIG) + x).all()
    else:
        ok = (out[0] == x).all() and (out[1] == 2 + x).all() and (out[2] == 1).all()
    print(name, bool(ok), flush=True)
    c.close()
""".replace("BIG", str(BIG))


def test_collective_steps_overlap_on_the_communication_stream(fake_driver, fake_nccl, test_image, tmp_path):
    """tsrFunctionCall on a stream with an NCCL communicator (the fake driver and NCCL): every all_reduce that
    the communicator reduces runs on the function's communication stream (created once, at the driver's
    highest priority) — a single one (before: on the call's stream) and
    a bucket's 1 MiB member directly from its input to its output, with no packing copy; only the small member
    is packed (copied in on the call's stream, out on the communication stream), so a kernel writing its
    input does not wait; two aliases of one
    storage at one offset reduce in place; the call's stream waits for the collectives (an event) only before
    a step that touches their storage — an output, or the input of a direct reduction through an alias of it —
    and a kernel on other storage runs before that wait, as do a kernel and an all_reduce on another row chunk
    of a storage being reduced. On a mesh of one device the in-place step copies
    nothing, x -> out one copy."""
    import function_images
    image = tmp_path / "overlap.tessera"
    image.write_bytes(function_images.with_plan(test_image.read_bytes(), OVERLAP_PLAN, [function_images.PTX_FILL]))
    log, cuda_log = tmp_path / "nccl.log", tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(cuda_log))
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", OVERLAP, str(image), str(cuda_log)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["bucket", "True", "single", "True", "alone", "True",
                                                      "chunks", "True", "bucket", "True"], p.stdout + p.stderr
    reduces = [line for line in log.read_text().splitlines() if line.startswith("ncclAllReduce")]
    assert len(reduces) == 8, reduces
    # each function's communication stream
    side, other, third = reduces[0].split()[-1], reduces[2].split()[-1], reduces[4].split()[-1]
    bucket = [f"ncclAllReduce count={BIG} type=7 op=0 {side}",  # the large member, directly
              f"ncclAllReduce count=8 type=7 op=0 inplace {side}"]  # the small one, packed
    assert reduces == bucket + [f"ncclAllReduce count={BIG} type=7 op=0 inplace {other}",  # the chunk, in place
                                f"ncclAllReduce count={2 * BIG} type=7 op=0 {other}"] + \
        [f"ncclAllReduce count={BIG} type=7 op=0 inplace {third}"] * 2 + bucket  # chunks; bucket again
    lines = cuda_log.read_text().splitlines()
    # created once per function, at the driver's highest priority (the fake's range: 0 to -5)
    created = [line for line in lines if line.startswith("cuStreamCreateWithPriority")]
    assert [line for line in created if line.split()[1] in (side, other)] == [
        f"cuStreamCreateWithPriority {side} flags=0 priority=-5",
        f"cuStreamCreateWithPriority {other} flags=0 priority=-5"], created
    calls = {}
    marks = [i for i, line in enumerate(lines) if line.startswith("call ")] + [len(lines)]
    for begin, after in zip(marks, marks[1:]):  # each call's work up to its last launch (then its results' copies)
        end = max(i for i in range(begin, after) if lines[i].startswith("cuLaunchKernel"))
        calls.setdefault(lines[begin].split()[1], lines[begin + 1:end + 1])
    main = calls["bucket"][-1].split()[1]  # the call's stream
    assert side != main

    def on(name, stream):
        return [line.split()[0] for line in calls[name] if line.endswith(f" {stream}")
                and not line.startswith(("cuMemcpyHtoD", "cuStreamSynchronize"))]
    # packing: the small member copied in on the call's stream, an event the communication stream waits for,
    # the packed result copied out there, an event; the kernels on other storage and on the packed input (a
    # buffer slot's next tenant, in a compiled plan), the wait, then the reader
    assert on("bucket", main) == ["cuMemcpyDtoDAsync", "cuEventRecord", "cuLaunchKernel", "cuLaunchKernel",
                                  "cuStreamWaitEvent", "cuLaunchKernel"], calls["bucket"]
    def waited(name, stream):  # what the communication stream runs, less NCCL's own events, and its last event
        queued = on(name, stream)
        assert queued[-1] == "cuEventRecord", calls[name]
        return [c for c in queued if c != "cuEventRecord"]
    assert waited("bucket", side) == ["cuStreamWaitEvent", "cuMemcpyDtoDAsync"], calls["bucket"]
    # single: no copy on either stream before the launches; the writer of the in-place storage waits
    assert [c for c in on("single", main) if c != "cuEventRecord"] == [
        "cuLaunchKernel", "cuLaunchKernel", "cuStreamWaitEvent", "cuLaunchKernel"], calls["single"]
    assert waited("single", other) == ["cuStreamWaitEvent"], calls["single"]
    # chunks: the second chunk's kernel and all_reduce run while the first is reduced (other rows of one
    # storage); the kernel on the whole storage waits for both
    assert [c for c in on("chunks", main) if c != "cuEventRecord"] == [
        "cuLaunchKernel", "cuLaunchKernel", "cuStreamWaitEvent", "cuStreamWaitEvent", "cuLaunchKernel"], calls["chunks"]
    # one device: x -> out is a copy, the in-place step none; no collective, no wait
    assert on("alone", main) == ["cuLaunchKernel", "cuMemcpyDtoDAsync", "cuLaunchKernel", "cuLaunchKernel"], \
        calls["alone"]


DP_STEP = '''
from tessera import bf16, dist, f32, function, op, tensor, value_and_grad

mesh = dist.Mesh(axes=["dp"], devices=range(2))


@function
def loss(X: tensor[f32, "T", 512], Y: tensor[f32, "T", 512], W1: tensor[f32, 512, 512], b1: tensor[f32, 512],
         W2: tensor[f32, 512, 512], b2: tensor[f32, 512]):
    H = op.gelu(op.bias_add(op.matmul(op.cast(X, bf16), op.cast(W1, bf16), out_dtype=f32), b1))
    E = op.bias_add(op.matmul(op.cast(H, bf16), op.cast(W2, bf16), out_dtype=f32), b2) - Y
    return op.mean(E * E)


loss_and_grads = value_and_grad(loss, argnums=(2, 3, 4, 5))


@function
def step(X: tensor[f32, "T", 512], Y: tensor[f32, "T", 512], W1: tensor[f32, 512, 512], b1: tensor[f32, 512],
         W2: tensor[f32, 512, 512], b2: tensor[f32, 512], lr: f32):
    value, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, W1, b1, W2, b2)
    gW1 = op.all_reduce(gW1, mesh=mesh, op="mean", bucket="1MiB")
    gb1 = op.all_reduce(gb1, mesh=mesh, op="mean", bucket="1MiB")
    gW2 = op.all_reduce(gW2, mesh=mesh, op="mean", bucket="1MiB")
    gb2 = op.all_reduce(gb2, mesh=mesh, op="mean", bucket="1MiB")
    return value, W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2
'''

# how every script running DP_STEP's image starts: the arguments' shapes follow DP_STEP's signature
DP_SETUP = r"""
import sys
import numpy as np
from tessera import comm, executor, runtime, stream
ctx = runtime.select_backend("cuda")
prog = executor.load(open(sys.argv[1], "rb").read(), ctx)
s = stream.new(context=ctx)
args = [runtime.DeviceArray.from_numpy(np.zeros(shape, np.float32), ctx)
        for shape in ((64, 512), (64, 512), (512, 512), (512,), (512, 512), (512,))]
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx)
"""

DP_CALLS = DP_SETUP + r"""for call in range(2):  # the second takes its intermediates from the first's
    s.synchronize()
    with open(sys.argv[2], "a") as log:
        print("call", call, file=log)
    out = prog.step(*args, np.float32(0.5), stream=s, comm=c)
    with open(sys.argv[2], "a") as log:
        print("returned", call, file=log)
    s.synchronize()
    del out
c.close()
print("ok")
"""


def test_a_compiled_step_waits_for_its_buckets_only_at_the_update(fake_driver, fake_nccl, tmp_path):
    """The compiled data-parallel step (value_and_grad, 1 MiB buckets: each weight gradient reduced directly from
    its buffer, each bias packed; sm_90a) on the fake driver and NCCL: the call's stream waits for no bucket
    before the optimizer update, the first step reading a reduced gradient. The issue 16 suspicion for
    bench/data_parallel_gpu.py (4x H200, T=16384: step = grads + reduce) was a reduced gradient's buffer slot
    given to a later backward kernel, which libtessera orders after the whole collective; 325bb15 keeps the
    slot until the result is read (test_data_parallel_mpi checks the plans), and this checks the ordering
    libtessera derives from a compiled plan: the backward runs on while the buckets are reduced."""
    compiler = pytest.importorskip("tessera.compiler")
    from tessera import plan
    from tessera.image import read_image
    image = compiler.compile_source(DP_STEP, "dp_step.py", compiler.CompileOptions(target="ptx", arch="sm_90a")).image
    steps = plan.decode(read_image(image).plan)["step"].steps
    last = max(i for i, s in enumerate(steps) if isinstance(s, plan.CollectiveStep))
    kernels = [i for i, s in enumerate(steps) if isinstance(s, (plan.ViewStep, plan.ArgsStep))]  # one launch each
    update = len([i for i in kernels if i > last])  # the SGD update's kernels, after the last bucket
    assert update and [i for i in kernels if i < last], steps
    # the first bucket (b2's and W2's gradients) between W2's weight-gradient GEMM and the input gradient's,
    # both reading dE: tessera-bucketize produces the weight gradient first, so its bucket starts one GEMM earlier
    first = next(i for i, s in enumerate(steps) if isinstance(s, plan.CollectiveStep))
    gemms = [i for i, s in enumerate(steps) if isinstance(s, plan.ArgsStep) and "gemm" in s.kernel]
    dw, dx = steps[max(i for i in gemms if i < first)], steps[min(i for i in gemms if i > first)]
    assert set(plan.uses(dw)) & set(plan.uses(dx)), (dw, dx)
    (tmp_path / "dp.tessera").write_bytes(image)
    log, cuda_log = tmp_path / "nccl.log", tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(cuda_log))
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG", "TESSERA_COMM_UNITS"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", DP_CALLS, str(tmp_path / "dp.tessera"), str(cuda_log)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["ok"], p.stdout + p.stderr
    reduces = [line for line in log.read_text().splitlines() if line.startswith("ncclAllReduce")]
    assert len(reduces) == 2 * 4 and len({line.split()[-1] for line in reduces}) == 1, reduces
    lines = cuda_log.read_text().splitlines()
    for call in range(2):
        work = lines[lines.index(f"call {call}") + 1:lines.index(f"returned {call}")]
        main = [line for line in work if line.startswith("cuLaunchKernel")][-1].split()[1]
        launches = [i for i, line in enumerate(work) if line == f"cuLaunchKernel {main}"]
        assert len(launches) == len(kernels) and reduces[0].split()[-1] != main, work
        waits = [i for i, line in enumerate(work) if line == f"cuStreamWaitEvent {main}"]
        # every wait after the backward's last kernel, before the update's first
        assert waits and launches[-update - 1] < min(waits) and max(waits) < launches[-update], (call, work)


BENCH_LOOP = DP_SETUP + r"""for call in range(4):  # as bench/data_parallel_gpu.py's timing loop: back to back, the results kept by the stream
    with open(sys.argv[2], "a") as log:
        print("call", call, file=log)
    prog.step(*args, np.float32(0.5), stream=s, comm=c)
    with open(sys.argv[2], "a") as log:
        print("returned", call, file=log)
s.synchronize()
c.close()
print("ok")
"""


def test_allocations_never_join_the_streams_doing_work(fake_driver, fake_nccl, tmp_path):
    """Regression (found looking for why bench/data_parallel_gpu.py's buckets do not hide behind the backward, issue
    16; on GPUs it was not that cause: docs/performance.md). Calls back to back whose results the stream keeps
    take the runtime's cached blocks for their results, so each call allocates intermediates from the driver in
    the middle of its work, some while a bucket is in flight. The CUDA pool allocated on CUDA's legacy default
    stream, which waits for the work queued on every blocking stream and makes their later work wait for it: the
    communication stream's all_reduces joined back into the call's stream at each such allocation, and the
    backward's next kernels waited for them. Now the allocations go to a non-blocking stream of their own: in
    every call nothing is queued on the legacy stream, and the call's stream waits for its buckets only after its
    last backward kernel (test_a_compiled_step_waits_for_its_buckets_only_at_the_update)."""
    compiler = pytest.importorskip("tessera.compiler")
    image = compiler.compile_source(DP_STEP, "dp_step.py", compiler.CompileOptions(target="ptx", arch="sm_90a")).image
    (tmp_path / "dp.tessera").write_bytes(image)
    log, cuda_log = tmp_path / "nccl.log", tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(cuda_log), FAKE_CUDA_LOG_MEMORY="1")
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG", "TESSERA_COMM_UNITS",
                 "TESSERA_CUDA_MEMPOOL"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", BENCH_LOOP, str(tmp_path / "dp.tessera"), str(cuda_log)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["ok"], p.stdout + p.stderr
    lines = cuda_log.read_text().splitlines()
    for call in range(1, 4):  # the first allocates everything; the later ones are the steady state
        work = lines[lines.index(f"call {call}") + 1:lines.index(f"returned {call}")]
        launches = [i for i, line in enumerate(work) if line.startswith("cuLaunchKernel")]
        main = work[launches[-1]].split()[1]
        first_bucket = next(i for i, line in enumerate(work) if line.startswith("cuStreamWaitEvent ")
                            and not line.endswith(f" {main}"))
        during = work[first_bucket:launches[-1]]
        # what made this a regression: the driver's allocations while a bucket is in flight
        assert [line for line in during if line.startswith("cuMemAllocFromPoolAsync")], (call, work)
        assert not [line for line in work if line.endswith(" legacy")], (call, work)


def test_the_step_timeline_places_buckets_among_the_steps(fake_driver, fake_nccl, tmp_path):
    """$TESSERA_STEP_TIMELINE (function.c, "the step timeline"): each call of the compiled step on a stream appends
    a line per step (the kernel's name, the device time its event completed, from the call's first) and per
    bucket reduced on the communication stream (start and end), read back once the call's stream is done: every
    kernel step of the plan, in plan order and time order, each bucket between its producer and the update that
    reads it. Without the variable no file is written (the other tests)."""
    compiler = pytest.importorskip("tessera.compiler")
    import json
    from tessera import plan
    from tessera.image import read_image
    image = compiler.compile_source(DP_STEP, "dp_step.py", compiler.CompileOptions(target="ptx", arch="sm_90a")).image
    steps = plan.decode(read_image(image).plan)["step"].steps
    kernels = [i for i, s in enumerate(steps) if isinstance(s, (plan.ViewStep, plan.ArgsStep))]
    (tmp_path / "dp.tessera").write_bytes(image)
    timeline = tmp_path / "timeline.jsonl"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(tmp_path / "nccl.log"), FAKE_CUDA_LOG=str(tmp_path / "cuda.log"),
               TESSERA_STEP_TIMELINE=str(timeline))
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG", "TESSERA_COMM_UNITS"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", BENCH_LOOP, str(tmp_path / "dp.tessera"), str(tmp_path / "cuda.log")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["ok"], p.stdout + p.stderr
    lines = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert {line["call"] for line in lines} == {0, 1, 2, 3} and {line["function"] for line in lines} == {"step"}
    for call in range(4):
        mine = [line for line in lines if line["call"] == call]
        marks = [line for line in mine if "step" in line]
        buckets = [line for line in mine if "bucket" in line]
        assert [m["step"] for m in marks if m["kernel"] != "(collective)"] == kernels, marks
        assert [m["kernel"] for m in marks if m["step"] in kernels] == [steps[i].kernel for i in kernels]
        ends = [m["end_ms"] for m in marks]
        assert ends == sorted(ends) and ends[0] >= 0, marks
        assert buckets and all(0 <= b["start_ms"] <= b["end_ms"] for b in buckets), buckets
        update = min(i for i in kernels if i > max(b["bucket"][1] for b in buckets) - 1)
        for b in buckets:  # after its producer's kernel, before the update's end
            producer = max((m for m in marks if m["step"] < b["bucket"][0]), key=lambda m: m["step"])
            assert producer["end_ms"] <= b["start_ms"], (b, producer)
            assert b["end_ms"] <= next(m["end_ms"] for m in marks if m["step"] == update), (b, marks)
        # host times: in issue order (the lines are), a bucket's start issued before its end
        issued = [line["host_ms"] for line in mine]
        assert issued == sorted(issued) and issued[0] >= 0, mine
        assert all(0 <= b["host_start_ms"] <= b["host_ms"] for b in buckets), buckets
        # the call's stream waits for each bucket once, right before the update (the plan's only reader of
        # the reduced gradients; test_a_compiled_step_waits_for_its_buckets_only_at_the_update), after its end
        waits = [line for line in mine if "wait" in line]
        assert sorted(w["wait"] for w in waits) == sorted(b["bucket"] for b in buckets), (waits, buckets)
        for w in waits:
            assert w["before_step"] == update, (w, update)
            assert w["end_ms"] >= next(b["end_ms"] for b in buckets if b["bucket"] == w["wait"]), (w, buckets)
            following = mine[mine.index(w) + 1:]
            assert all("wait" in line or line["step"] >= update for line in following if "bucket" not in line)

UNITS = r"""
import sys
import numpy as np
from tessera import comm, executor, runtime, stream
ctx = runtime.select_backend("cuda")
prog = executor.load(open(sys.argv[1], "rb").read(), ctx).function("tp")
s = stream.new(context=ctx)
H, W = runtime.DeviceArray((512, 256), np.uint16, ctx), runtime.DeviceArray((256, 1024), np.uint16, ctx)
for units in (0, 2):
    c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx,
                                 units=units)
    with open(sys.argv[2], "a") as log:
        print("call", units, file=log)
    prog(H, W, comm=c, stream=s)
    s.synchronize()
    c.close()
"""

TP = '''
from tessera import bf16, dist, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function
def tp(H: tensor[bf16, "T", 256], W: tensor[bf16, 256, 1024]):
    return op.all_reduce(op.matmul(H, W), mesh=mesh)
'''


def test_units_are_left_free_for_the_collectives_in_flight(fake_driver, fake_nccl, tmp_path):
    """Communicator units (comm.h): NCCL is created with maxCTAs = units, and a compiled function's persistent
    GEMM launched while one of its all_reduces is in flight leaves min(units, slack) SMs free, never a round
    more (function.c, spare_units): each pipelined chunk (tessera-pipeline-collectives, four of 128 rows) is 4
    tiles, one round on the fake device's 4 SMs, which 2 fewer would make two, so every chunk launches 4 CTAs
    with units=2 as without units. tests/c/test_tp_chunks_fake.py has units left free where there is slack
    (before spare_units the chunks after the first launched 2)."""
    nccl, lines = run_chunked_on_fakes(TP, UNITS, tmp_path, fake_driver(), fake_nccl)
    inits = [line for line in nccl if line.startswith("ncclCommInitRankConfig")]
    assert len(inits) == 2 and "maxCTAs" not in inits[0] and inits[1].endswith(" maxCTAs=2"), inits
    at = [lines.index("call 0"), lines.index("call 2"), len(lines)]
    grids = [[int(line.rsplit(" ", 1)[1]) for line in lines[a:b] if line.startswith("params:")]
             for a, b in zip(at, at[1:])]
    assert grids == [[4, 4, 4, 4], [4, 4, 4, 4]], grids


GRID = r"""
import sys
import numpy as np
from tessera import comm, executor, runtime, stream
ctx = runtime.select_backend("cuda")
prog = executor.load(open(sys.argv[1], "rb").read(), ctx).function("tp")
s = stream.new(context=ctx)
H, W = runtime.DeviceArray((512, 256), np.uint16, ctx), runtime.DeviceArray((256, 2048), np.uint16, ctx)
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx,
                             units=int(sys.argv[2]))
prog(H, W, comm=c, stream=s)
s.synchronize()
c.close()
"""


@pytest.mark.parametrize("mode, units", [(None, 0), ("persistent", 2), ("tiles", 0), ("tiles", 2), ("comm", 0),
                                         ("comm", 2), ("tile", 0)])
def test_gemm_grid_launches_one_cta_per_tile_where_asked(fake_driver, fake_nccl, tmp_path, mode, units):
    """$TESSERA_GEMM_GRID (function.c, uncap_grid): the persistent sm_90a GEMM (grid min(tiles, DEVICE_UNITS), its
    CTAs striding over the tiles) launches one CTA per tile with `tiles`, and with `comm` only while a collective
    of the call is in flight (the pipelined chunks after the first), whatever units the communicator leaves free;
    by default (or `persistent`) at most the fake device's 4 SMs, still 4 with units=2 while a chunk is reduced:
    each chunk (128 of 512 rows, N=2048) has 8 or 16 tiles, as the launch's tile choice gives, 2 or 4 rounds on
    4 SMs that fewer would not keep (function.c, spare_units: units never cost a round). An unknown value
    fails."""
    compiler = pytest.importorskip("tessera.compiler")
    image = tmp_path / "tp.tessera"
    image.write_bytes(compiler.compile_source(TP.replace("256, 1024]", "256, 2048]"), "tp.py",
                                              compiler.CompileOptions(target="ptx", arch="sm_90a",
                                                                      collective_chunks=4)).image)
    cuda_log = tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(tmp_path / "nccl.log"), FAKE_CUDA_LOG=str(cuda_log))
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG", "TESSERA_COMM_UNITS",
                 "TESSERA_GEMM_GRID"):
        env.pop(name, None)
    if mode:
        env["TESSERA_GEMM_GRID"] = mode
    p = subprocess.run([sys.executable, "-c", GRID, str(image), str(units)], capture_output=True, text=True,
                       timeout=120, env=env)
    if mode == "tile":
        assert p.returncode != 0 and "TESSERA_GEMM_GRID=tile is not persistent, tiles or comm" in p.stderr, p.stderr
        return
    assert p.returncode == 0, p.stdout + p.stderr
    grids = [int(line.rsplit(" ", 1)[1]) for line in cuda_log.read_text().splitlines() if line.startswith("params:")]
    assert len(grids) == 4, grids
    tiles = grids[-1] if mode in ("tiles", "comm") else None
    expected = {None: [4, 4, 4, 4], "persistent": [4, 4, 4, 4],
                "tiles": [tiles] * 4, "comm": [4, tiles, tiles, tiles]}[mode]
    assert grids == expected and (tiles is None or tiles in (8, 16)), grids

RING = 20  # buckets in one call: more than 17, the 416 MiB of bench/data_parallel_gpu.py's step in 25 MiB buckets
# each bucket's gradient written by a kernel, then reduced alone (the kernel between closes the bucket), as the
# backward produces them; a last kernel on storage of its own
MANY_PLAN = {"version": 6, "functions": {"many": {
    "params": ["x"], "args": ["x"], "results": [f"g{i}" for i in range(RING)] + ["y"],
    "values": {"x": {"dtype": "f32", "dims": ["N"]},
               **{f"{v}{i}": {"dtype": "f32", "dims": ["N"]} for i in range(RING) for v in "tg"},
               "y": {"dtype": "f32", "dims": ["N"]}},
    "steps": [s for i in range(RING) for s in (_kernel("fill_fixed", [_t(f"t{i}"), {"f32": float(i)}], "N"),
                                               _reduce(f"t{i}", f"g{i}"))] +
             [_kernel("fill_fixed", [_t("y"), {"f32": 7.0}], "N")],
    "fallbacks": [], "outputs": []}}}

MANY = r"""
import sys
import numpy as np
from tessera import comm, executor, runtime, stream
ctx = runtime.select_backend("cuda")
prog = executor.load(sys.argv[1], ctx)
s = stream.new(context=ctx)
x = runtime.DeviceArray.from_numpy(np.zeros(64, np.float32), ctx)
c = comm.Communicator.create(2, 1, comm.unique_id("nccl", ctx), backend="nccl", timeout=5, context=ctx)
for call in range(2):  # the second call takes its intermediates from the first's, released in stream order
    s.synchronize()
    with open(sys.argv[2], "a") as log:
        print("call", call, file=log)
    out = prog.many(x, stream=s, comm=c)
    with open(sys.argv[2], "a") as log:
        print("returned", call, file=log)
    s.synchronize()
    print(all((o.numpy() == i).all() for i, o in enumerate(out[:-1])) and (out[-1].numpy() == 7).all(), flush=True)
    del out  # back to the pool, as a training loop's last step's results are: else the next ones take the blocks
c.close()
"""


def test_buckets_in_flight_never_block_the_backward(fake_driver, fake_nccl, test_image, tmp_path):
    """Regression (4x H200, bench/data_parallel_gpu.py at T=16384: the step was the backward plus nearly the
    whole reduce): with more buckets in flight than the call kept room for (8), each further bucket made the
    call's stream wait for the bucket just before it (the ring's slots were reused out of order), so the
    backward's next kernels waited for the collectives. Now RING buckets, each reduced on the communication
    stream while the kernels after it run: between the call's start and its last kernel the call's stream
    waits for no bucket, and nothing waits on the host (no stream, context or event synchronize, no cuMemFree,
    which synchronizes a real device; the second call allocates nothing); the buckets are waited for once each,
    on the device, after the last kernel."""
    import function_images
    image = tmp_path / "many.tessera"
    image.write_bytes(function_images.with_plan(test_image.read_bytes(), MANY_PLAN, [function_images.PTX_FILL]))
    log, cuda_log = tmp_path / "nccl.log", tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), TESSERA_NCCL_LIBRARY=str(fake_nccl),
               FAKE_NCCL_LOG=str(log), FAKE_CUDA_LOG=str(cuda_log), FAKE_CUDA_LOG_MEMORY="1")
    for name in ("TESSERA_BACKEND", "TESSERA_COMM_BACKEND", "FAKE_NCCL_HANG"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", MANY, str(image), str(cuda_log)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["True", "True"], p.stdout + p.stderr
    reduces = [line for line in log.read_text().splitlines() if line.startswith("ncclAllReduce")]
    assert len(reduces) == 2 * RING, reduces
    lines = cuda_log.read_text().splitlines()
    for call in range(2):
        every = lines[lines.index(f"call {call}") + 1:lines.index(f"returned {call}")]
        # an allocation waits on the host for the allocation stream, which holds no kernel; nothing is queued on
        # CUDA's legacy default stream, which would join the communication stream to the call's
        work = without_allocation_waits(every, lines)
        assert not [line for line in every if line.endswith(" legacy")], (call, every)
        launches = [i for i, line in enumerate(work) if line.startswith("cuLaunchKernel")]
        assert len(launches) == RING + 1, work
        main = work[launches[-1]].split()[1]
        before = work[:launches[-1]]
        assert not [line for line in before if line.startswith(f"cuStreamWaitEvent {main}")], (call, work)
        assert not [line for line in work if line.startswith(("cuStreamSynchronize", "cuCtxSynchronize",
                                                              "cuEventSynchronize", "cuMemFree"))], (call, work)
        # the first call allocates its results and intermediates (the pool is empty); the second, the first's
        assert call == 0 or not [line for line in work if line.startswith("cuMemAlloc")], work
        waits = [line for line in work[launches[-1]:] if line.startswith(f"cuStreamWaitEvent {main}")]
        assert len(waits) == RING, (call, work)
