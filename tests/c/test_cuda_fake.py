"""The CUDA backend's logic without a GPU: host_cuda_streams.c against tests/c/fake_cuda.c installed as
libcuda.so.1. What the fake driver logs shows how the backend drives CUDA: each Tessera stream a CUstream of
its own, launches and copies handed over without a synchronize each, events recorded in streams, graphs
captured once and replayed by cuGraphLaunch, pinned memory from the driver, a kernel's fault reported by the
next synchronize. (tests/gpu/test_cuda_async.py runs the same host on a GPU.)"""
import json
import os
import re
import subprocess
import sys

import pytest

from hostutil import HERE, allocation_streams, run, without_allocation_waits


def run_host(build_host, test_image, driver_dir, tmp_path, *args, env=None):
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(driver_dir), FAKE_CUDA_LOG=str(log), **(env or {}))
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([str(build_host("host_cuda_streams.c")), str(test_image), *args], capture_output=True,
                       text=True, timeout=300, env=environ)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    phases, name = {}, None
    for line in log.read_text().splitlines():
        if line.startswith("## "):
            name = line[3:]
            phases[name] = []
        elif name:
            phases[name].append(line)
    return p.stdout, phases


def calls(lines, name):
    return [line for line in lines if line.split()[0] == name]


def split_log(lines):
    """A driver log split at the host's "## NAME" marks: {"": lines before the first, NAME: lines after it}."""
    phases, name = {"": []}, ""
    for line in lines:
        if line.startswith("## "):
            name = line[3:]
            phases[name] = []
        else:
            phases[name].append(line)
    return phases


def test_streams_events_copies_and_graphs_drive_cuda_asynchronously(build_host, test_image, fake_driver, tmp_path):
    stdout, phases = run_host(build_host, test_image, fake_driver(), tmp_path)

    two = phases["two streams"]
    streams = {line.split()[1] for line in calls(two, "cuLaunchKernel")}
    assert len(streams) == 2 and "ptds" not in streams  # each Tessera stream is a CUstream of its own
    assert len(calls(two, "cuLaunchKernel")) == 128
    assert len(calls(two, "cuEventRecord")) == 16 and len(calls(two, "cuStreamWaitEvent")) == 16
    # no synchronize between launches; the streams are waited for by tsrSynchronize and when destroyed (the
    # NULL stream's copies wait on the per-thread stream)
    launches = [i for i, line in enumerate(two) if line.startswith("cuLaunchKernel")]
    assert not [line for line in two[launches[0]:launches[-1]] if "Synchronize" in line]
    every = (tmp_path / "cuda.log").read_text().splitlines()
    waits = [line.split()[1] for line in calls(without_allocation_waits(two, every), "cuStreamSynchronize")]
    assert sorted(w for w in waits if w != "ptds") == sorted(list(streams) * 2)

    copies = phases["async copies"]
    assert calls(copies, "cuMemHostAlloc") == ["cuMemHostAlloc portable+devicemap ptds"] * 2
    assert calls(copies, "cuMemHostRegister") == ["cuMemHostRegister portable+devicemap ptds"]
    stream = calls(copies, "cuLaunchKernel")[0].split()[1]
    assert [line.split()[0] for line in copies if line.endswith(f" {stream}")][:6] == [
        "cuEventRecord", "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync", "cuLaunchKernel", "cuMemcpyDtoHAsync",
        "cuMemcpyAsync"]
    assert "cuEventSynchronize ptds" in copies and calls(copies, "cuMemHostUnregister")

    graphs = phases["graphs"]
    capture = re.search(r"cuStreamBeginCapture (s\d+) mode=2", "\n".join(graphs)).group(1)  # relaxed mode
    captured = [line for line in graphs if line.endswith(f"{capture} capturing") and "EndCapture" not in line]
    assert [line.split()[0] for line in captured] == ["cuLaunchKernel"] * 4 + ["cuMemcpyDtoDAsync",
                                                                              "cuEventRecordWithFlags"]
    assert "cuEventRecordWithFlags external" in captured[-1]  # an event node, not a capture-internal event
    assert "cuGraphInstantiate nodes=6" in graphs
    assert len(calls(graphs, "cuGraphLaunch")) == 101  # 100 on the stream, 1 on the NULL stream
    assert "cuGraphLaunch ptds" in graphs
    assert re.search(r"timing: host time to submit 400 launches: direct [\d.]+ us per launch, graph replay", stdout)

    fault = phases["fault"]
    assert calls(fault, "cuLaunchKernel") and calls(fault, "cuStreamSynchronize")


def test_without_cuda_graphs_in_the_driver_instantiation_says_so(build_host, test_image, fake_driver, tmp_path):
    stdout, _ = run_host(build_host, test_image, fake_driver(graphs=False), tmp_path, "no-graphs")
    assert "lacks" in stdout and "cuEventRecordWithFlags" in stdout


def test_stream_priority_maps_to_cuda_priorities(fake_driver, tmp_path):
    """Higher Tessera priority runs first: CUDA's lower numbers, clamped to the device's range."""
    pytest.importorskip("tessera._runtime")
    log = tmp_path / "cuda.log"
    script = ("from tessera import _runtime\n"
              "ctx = _runtime.Context('cuda')\n"
              "streams = [_runtime.Stream(ctx, p, 0) for p in (0, 3, 100, -2)]\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(log)))
    assert p.returncode == 0, p.stdout + p.stderr
    created = calls(log.read_text().splitlines(), "cuStreamCreateWithPriority")
    # the context's allocation stream first (non-blocking, the lowest priority: cuda_backend.c, ALLOC_STREAM)
    assert created[0].split()[2:] == ["flags=1", "priority=0"], created
    created = created[1:]
    assert [line.split()[3] for line in created] == ["priority=0", "priority=-3", "priority=-5", "priority=0"]
    assert all("flags=0" in line for line in created)  # blocking: ordered with the legacy default stream


def test_metrics_of_stream_work_are_device_times_written_at_synchronize(build_host, test_image, fake_driver,
                                                                        tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    run_host(build_host, test_image, fake_driver(), tmp_path, env={"TESSERA_METRICS": str(metrics)})
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    kernels = [r for r in records if r["kind"] == "kernel"]
    on_streams = [r for r in kernels if r["stream"] != 0]
    assert len(on_streams) >= 128 + 1 + 400  # two streams, the copy phase's launch, the direct launches
    assert all(r["name"] == "saxpy" and r["time_ms"] >= 0 for r in on_streams)
    assert any(r["kind"] == "copy" and r["name"] == "memcpy HtoD" and r["stream"] != 0 for r in records)
    assert [r for r in records if r["status"] == "TSR_ERROR_LAUNCH_FAILED"]  # the faulting launch's record


@pytest.fixture(scope="session")
def tma_image(cc, runtime_prefix, tmp_path_factory):
    """An image of make_image.tma_kernels() (a CPU section too: images carry kernels_cpu.so's code)."""
    import make_image
    out = tmp_path_factory.mktemp("tma_image")
    so = out / "kernels_cpu.so"
    run([cc, "-shared", "-fPIC", "-nostartfiles", "-O2", f"-I{runtime_prefix / 'include'}", HERE / "kernels_cpu.c",
         "-o", so])
    image = out / "tma.tessera"
    image.write_bytes(make_image.build(so.read_bytes(), make_image.tma_kernels()))
    return image


def test_tensor_maps_are_encoded_at_launch_and_passed_first(build_host, tma_image, fake_driver, tmp_path):
    """A kernel whose ptx.tensor_maps property names two operands gets two maps before its arguments: A [300,
    136] bf16 as a 2-D map (innermost extent first, 272-byte rows), Q [6, 77, 64] as a 3-D one (and [6, 77, 2,
    32] as a 4-D one by another kernel); tensors TMA
    cannot describe and malformed properties are refused before the driver is asked to launch."""
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(log))
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([str(build_host("host_tensor_maps.c")), str(tma_image)], capture_output=True, text=True,
                       timeout=120, env=environ)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    lines = log.read_text().splitlines()
    encoded = calls(lines, "cuTensorMapEncodeTiled")
    assert encoded[:3] == ["cuTensorMapEncodeTiled dtype=9 rank=2 dims=136x300 strides=272 box=64x128 swizzle=3",
                           "cuTensorMapEncodeTiled dtype=9 rank=3 dims=64x77x6 strides=128x9856 box=64x128x1 "
                           "swizzle=3",
                           "cuTensorMapEncodeTiled dtype=9 rank=4 dims=32x2x77x6 strides=64x128x9856 box=32x1x64x1 "
                           "swizzle=2"]
    launches = calls(lines, "cuLaunchKernel")
    assert len(launches) == 2  # the refused launches never reached the driver
    params = calls(lines, "params:")
    assert len(params) == 2 and params[0].startswith("params: map rank 2, map rank 3, then A at 0x")
    assert params[1].startswith("params: map rank 4")   # the fake driver logs two maps; this kernel has one


# A kernel that reads one past the end of X (tests/gpu/test_gpu_bounds_checks.py runs it on a GPU). The fake
# driver makes a kernel whose name ends in _oob fail its first check, as the compiled code would.
OOB_SOURCE = '''
from tessera import kernel, launch, tensor, f32

@kernel
def shift(X: tensor[f32, "N"], Out: tensor[f32, "N"]):
    i = launch.thread_id()
    if i + 1 < X.shape[0]:
        Out[i] = X[i + 1]

@kernel
def shift_oob(X: tensor[f32, "N"], Out: tensor[f32, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = X[i + 1]
'''

OOB_HOST = '''
import sys
import numpy as np
from tessera import _runtime, runtime, stream as streams
checked, unchecked = (open(p, "rb").read() for p in sys.argv[1:3])
ctx = _runtime.Context("cuda")
if sys.argv[3] == "debug":
    try:
        runtime.load(unchecked, ctx)
    except runtime.Error as e:
        print("REFUSED", e.status_name, e)
mod = runtime.load(checked, ctx)
X, Out = (runtime.DeviceArray.from_numpy(np.zeros(96, np.float32), ctx) for _ in range(2))
for name in ("shift_oob", "shift", "shift_oob"):
    try:
        getattr(mod, name)(X, Out, grid=3, block=32)
        print(name, "OK")
    except runtime.Error as e:
        print(name, e.status_name, e)
stream = streams.Stream(context=ctx)
mod.shift_oob(X, Out, grid=3, block=32, stream=stream)
try:
    stream.synchronize()
    print("stream OK")
except runtime.Error as e:
    print("stream", e.status_name, e)
mod.shift(X, Out, grid=3, block=32, stream=stream)
stream.synchronize()
print("stream then OK")
'''


@pytest.mark.parametrize("mode", ["normal", "debug"])
def test_failed_bounds_checks_are_read_back_from_the_module(fake_driver, tmp_path, mode):
    """A module compiled with gpu_bounds_checks has a fault record the runtime reads after each wait: a launch
    on the NULL stream, or a stream's synchronize, fails with TSR_ERROR_MEMORY_FAULT naming kernel, block,
    tensor and line; the record is cleared, so the next launch succeeds. Debug mode refuses unchecked PTX."""
    pytest.importorskip("tessera._runtime")
    compiler = pytest.importorskip("tessera.compiler")
    from tessera.options import CompileOptions
    paths = []
    for checks in (True, False):
        result = compiler.compile_source(OOB_SOURCE, "oob.py", CompileOptions(target="ptx", gpu_bounds_checks=checks))
        paths.append(tmp_path / f"oob-{checks}.tessera")
        paths[-1].write_bytes(result.image)
    log = tmp_path / "cuda.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(log))
    env.pop("TESSERA_DEBUG", None)
    if mode == "debug":
        env["TESSERA_DEBUG"] = "1"
    p = subprocess.run([sys.executable, "-c", OOB_HOST, *map(str, paths), mode], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    report = "kernel 'shift_oob' block (2, 0, 0): tensor 'X' accessed outside its extents at oob.py:14"
    if mode == "debug":
        refusal = lines.pop(0)
        assert refusal.startswith("REFUSED TSR_ERROR_UNSUPPORTED") and "compiled without bounds checks" in refusal
        assert "--gpu-bounds-checks" in refusal
    assert lines[0] == f"shift_oob TSR_ERROR_MEMORY_FAULT {report}", p.stdout
    assert lines[1] == "shift OK" and lines[2] == lines[0]
    assert lines[3] == f"stream TSR_ERROR_MEMORY_FAULT a kernel queued on the stream failed a bounds check: {report}"
    assert lines[4] == "stream then OK"


# ---- tsrFunctionCall on the CUDA backend ----------------------------------------------------------------

@pytest.fixture(scope="session")
def axpy_image(test_image, tmp_path_factory):
    """The standard test image with function_images.INPLACE_AXPY_VIA_ALIAS's plan and a PTX fill_fixed record:
    its result is an alias of an intermediate, so every call has an intermediate and copies the result out (a
    result computed in its output's memory: tests/c/test_function_direct.py)."""
    import function_images
    path = tmp_path_factory.mktemp("axpy") / "axpy.tessera"
    path.write_bytes(function_images.with_plan(test_image.read_bytes(), function_images.INPLACE_AXPY_VIA_ALIAS,
                                               [function_images.PTX_FILL]))
    return path


def run_function_host(build_host, image, backend, coefficients, tmp_path, driver_dir=None, args=()):
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, FAKE_CUDA_LOG=str(log))
    if driver_dir:
        environ["LD_LIBRARY_PATH"] = str(driver_dir)
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([str(build_host("host_function_device.c")), str(image), backend,
                        *map(str, coefficients), *args], capture_output=True, text=True, timeout=300, env=environ)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    return p.stdout, log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_a_function_runs_on_device_memory(build_host, axpy_image, fake_driver, tmp_path, backend):
    """tsrFunctionCall on the CPU and (fake) CUDA backends: the same plan, tensors in tsrAlloc memory of the
    context's DLPack device type, the same bits; on CUDA the launches and the result's copy go to the call's
    stream (cuMemcpyDtoDAsync), in order, and the call returns without a synchronize (an event recorded after
    its work marks when its intermediates are free); a call captured on a stream replays as one
    cuGraphLaunch."""
    import function_images
    _, log = run_function_host(build_host, axpy_image, backend, function_images.INPLACE_AXPY_COEFFICIENTS,
                               tmp_path, fake_driver() if backend == "cuda" else None)
    if backend == "cuda":
        phases = split_log(log)
        lines = phases[""] + phases["threads done"]  # the host's other calls
        launches = calls(lines, "cuLaunchKernel")
        stream = launches[3].split()[1]  # 3 steps on the NULL stream, then on the stream
        assert stream != "ptds" and launches[:6] == ["cuLaunchKernel ptds"] * 3 + [f"cuLaunchKernel {stream}"] * 3
        on_stream = [line.split()[0] for line in lines if line.endswith(f" {stream}")]
        assert on_stream[:4] == ["cuLaunchKernel"] * 3 + ["cuMemcpyDtoDAsync"], lines
        # the captured call: two instances, each a device graph of its 3 launches and copy, replayed 4 times;
        # then a call on strided views
        assert len(launches) == 6 + 2 * 3 + 3 and len(calls(lines, "cuGraphLaunch")) == 4, lines
        # 21 calls on the stream without a wait: each call's work, then the event its intermediates are
        # released after; the stream is waited for once, by the host
        queued = [line.split()[0] for line in phases["calls without waiting"]]
        assert queued == (["cuLaunchKernel"] * 3 + ["cuMemcpyDtoDAsync", "cuEventRecord"]) * 21, queued
        assert calls(phases["calls returned"], "cuStreamSynchronize") == [f"cuStreamSynchronize {stream}"]
        # two threads' 200 calls each, on a stream each, then on one, and a call on the second stream before
        # it is destroyed: the workers' waits and the destroy's only
        threads = phases["threads"]  # the allocations' waits hold no kernel (cuda_backend.c, ALLOC_STREAM)
        waits = [line for line in without_allocation_waits(threads, log)
                 if "Synchronize" in line and not line.endswith(" ptds")]
        assert len(calls(threads, "cuLaunchKernel")) == 2 * 2 * 200 * 3 + 3 and len(waits) == 4 + 1, waits


def test_memory_of_the_driver_registers_as_device_memory(build_host, fake_driver, tmp_path):
    """tsrDeviceRegister on the CUDA backend (host_device_register.c): memory from the driver's own cuMemAlloc,
    as another library's, taken by the runtime's copies once registered, and refused again after; the copies
    are the driver's device copies (cuMemcpy*), not host memcpy."""
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(log))
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([str(build_host("host_device_register.c")), "cuda"], capture_output=True, text=True,
                       timeout=300, env=environ)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    names = {line.split()[0] for line in log.read_text().splitlines()}
    assert {"cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync"} <= names, sorted(names)


STRIDED_DLPACK = """
import gc
import sys
import numpy as np
from tessera import _runtime, executor
from tessera._runtime import DLPACK_DEVICE

class Producer:  # another library's CUDA tensor; the fake driver's device memory is host memory
    def __init__(self, array):
        self.array = array
    def __dlpack_device__(self):
        return (DLPACK_DEVICE["cuda"], 0)
    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

ctx = _runtime.Context("cuda")
prog = executor.load(sys.argv[1], ctx)
rng = np.random.default_rng(5)
x, y = rng.standard_normal(80).astype(np.float32), rng.standard_normal(40).astype(np.float32)
xs, ys = x[1::2], y[::-1]  # sliced with an offset, reversed: negative strides
compact = prog.axpy(Producer(xs.copy()), Producer(ys.copy()))
strided = prog.axpy(Producer(xs), Producer(ys))
print(type(strided).__name__, np.array_equal(strided.numpy(), compact.numpy()),
      np.array_equal(compact.numpy(), ys + (2 * xs + 1)))  # fill 1, saxpy 2x, saxpy y: in that order
# a tile program's output passed strided (reversed, every other element): written through its strides, the
# elements between untouched, and returned as the result
buf = np.full(81, -7, np.float32)
out = buf[79::-2]
result = prog.axpy_into(Producer(xs), Producer(ys), Producer(out))
print(np.array_equal(out, compact.numpy()), bool((buf[::2] == -7).all()), np.array_equal(result.numpy(), out))
try:
    prog.axpy(Producer(x.astype(np.float64)[1::2]), Producer(ys))
except TypeError as e:
    print(e)
before = sys.getrefcount(x)
prog.axpy(Producer(xs), Producer(ys))
gc.collect()
print(ctx.memory_stats()["registered_bytes"], sys.getrefcount(x) == before)
"""


def test_strided_device_dlpack_tensors_are_executor_arguments(axpy_image, fake_driver, tmp_path):
    """Strided producers' CUDA tensors (sliced, reversed) and a strided tile-program output go to an executor
    call as they are (no DeviceArray: those are compact), their strides passed to libtessera, which gathers
    and scatters them: the compact call's bits; their spans are registered with the context during the call
    (libtessera's staging copies need it) and released, with the producer's tensor, after."""
    import function_images
    doc = json.loads(json.dumps(function_images.INPLACE_AXPY))
    into = dict(doc["functions"]["axpy"], params=["x", "y", "out"], args=["v0", "v1", "v3"], outputs=[2])
    into["values"] = dict(into["values"], v3=into["values"]["v0"])
    doc["functions"]["axpy_into"] = into
    image = tmp_path / "axpy.tessera"
    image.write_bytes(function_images.with_plan(axpy_image.read_bytes(), doc))
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(tmp_path / "cuda.log"))
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([sys.executable, "-c", STRIDED_DLPACK, str(image)], capture_output=True, text=True,
                       timeout=300, env=environ)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == [
        "DeviceArray True True",
        "True True True",
        "argument 'x' of 'axpy' must have dtype f32, got a device tensor of float64: pass a device tensor of f32 "
        "(float32); no dtype is converted implicitly",
        "0 True",
    ]


# ---- the device allocator: a CUDA memory pool, stream-ordered ---------------------------------------------

POOL_HOST = """
import os
import sys
import numpy as np
from tessera import _runtime, executor, graph, runtime, stream as streams
log = os.environ["FAKE_CUDA_LOG"]
def mark(name):
    with open(log, "a") as f:
        f.write(f"## {name}\\n")
ctx = _runtime.Context("cuda")
prog = executor.load(sys.argv[1], ctx)
x = runtime.DeviceArray.from_numpy(np.arange(40, dtype=np.float32), ctx)
y = runtime.DeviceArray.from_numpy(np.ones(40, np.float32), ctx)
s = streams.new(context=ctx)
mark("first calls")
first = [prog.axpy(x, y, stream=s) for _ in range(3)]
s.synchronize()
print(all(np.array_equal(r.numpy(), np.ones(40) + (2 * np.arange(40) + 1)) for r in first))
del first
mark("later calls")
for _ in range(3):
    prog.axpy(x, y, stream=s)
s.synchronize()
mark("trim")
a = runtime.DeviceArray((1 << 20,), np.uint8, ctx)
address = a.address
del a
ctx.trim_memory()
mark("after trim")
b = runtime.DeviceArray((1 << 20,), np.uint8, ctx)
print(b.address == address)  # the pool's block again, through the driver's pool
del b
mark("capture")
with graph.capture(context=ctx) as g:
    out = prog.axpy(x, y)
g.launch()
streams.synchronize(ctx)
print(np.array_equal(out.numpy(), np.ones(40) + (2 * np.arange(40) + 1)))
del g, out
mark("full")
try:
    runtime.DeviceArray((int(sys.argv[2]),), np.uint8, ctx)
except runtime.Error as e:
    print(e.status_name, e)
mark("close")
del x, y, s
ctx.close()
"""


def run_pool_host(axpy_image, driver_dir, tmp_path, env=None):
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(driver_dir), FAKE_CUDA_LOG=str(log), FAKE_CUDA_LOG_MEMORY="1",
                   FAKE_CUDA_MEMORY_LIMIT=str(64 << 20), **(env or {}))
    for name in ("TESSERA_BACKEND", "TESSERA_CUDA_MEMPOOL", "TESSERA_DEBUG"):
        if name not in (env or {}):
            environ.pop(name, None)
    p = subprocess.run([sys.executable, "-c", POOL_HOST, str(axpy_image), str(80 << 20)], capture_output=True,
                       text=True, timeout=300, env=environ)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout.splitlines(), split_log(log.read_text().splitlines())


def test_device_memory_comes_from_a_stream_ordered_pool(axpy_image, fake_driver, tmp_path):
    """The CUDA backend allocates from a memory pool of its own (cuMemAllocFromPoolAsync) and frees into it
    (cuMemFreeAsync): never cuMemAlloc or cuMemFree (which waits for the whole device). An allocation is made on
    the context's allocation stream (non-blocking, holding nothing else) and waited for there — never on CUDA's
    legacy default stream, where it would make every stream's later work wait for every other's earlier work
    (the gradient buckets of a data-parallel step joined back into its backward) — and a free is queued on the
    legacy stream, after the work of every stream, without a wait on the host. Later calls take the runtime's
    cached blocks (no driver call); blocks tsrTrimMemory gives back stay in the driver's pool (release
    threshold: all), which hands the same memory out again. A captured call never allocates on the capturing
    stream (the fake refuses that, as CUDA would record it into the graph). A device too full for an
    allocation, after the pool's free memory went back to it, is TSR_ERROR_OUT_OF_MEMORY in the driver's words.
    Destroying the context frees every block and destroys the pool: its memory goes back to the system."""
    out, phases = run_pool_host(axpy_image, fake_driver(), tmp_path)
    assert out[:3] == ["True", "True", "True"], out
    assert out[3] == "TSR_ERROR_OUT_OF_MEMORY tsrAlloc: cuMemAllocFromPoolAsync: CUDA_ERROR_OUT_OF_MEMORY (out of " \
                     "memory)", out
    every = [line for lines in phases.values() for line in lines]
    assert calls(phases[""], "cuMemPoolCreate")
    assert not calls(every, "cuMemAlloc") and not calls(every, "cuMemFree")
    allocs, frees = calls(every, "cuMemAllocFromPoolAsync"), calls(every, "cuMemFreeAsync")
    (stream,) = allocation_streams(every)
    assert allocs and {line.split()[1] for line in allocs} == {stream}  # never "legacy" nor "capturing"
    assert frees and {line.split()[1] for line in frees} == {"legacy"}
    # each allocation waited for on the allocation stream alone; nothing waits on the host for a free
    waits = [line for line in every if line.startswith("cuStreamSynchronize") and line.split()[1] == stream]
    assert waits and all(line == f"cuStreamSynchronize {stream}" for line in waits)
    for name in ("first calls", "after trim"):  # (the device has room there: each allocation succeeds)
        lines = phases[name]
        assert all(lines[i + 1] == f"cuStreamSynchronize {stream}" for i, line in enumerate(lines)
                   if line == f"cuMemAllocFromPoolAsync {stream}"), lines
    for name in ("", "first calls", "trim", "after trim", "capture"):
        assert not [line for line in phases[name] if "Synchronize legacy" in line], phases[name]
    assert calls(phases["first calls"], "cuMemAllocFromPoolAsync")
    assert not calls(phases["later calls"], "cuMemAllocFromPoolAsync") and not calls(phases["later calls"],
                                                                                       "cuMemFreeAsync")
    assert calls(phases["trim"], "cuMemFreeAsync") and not calls(phases["trim"], "cuMemPoolTrimTo")
    assert calls(phases["after trim"], "cuMemAllocFromPoolAsync")
    assert calls(phases["capture"], "cuGraphLaunch")
    # full: one try, the pool trimmed once its frees are done, one more (then the runtime trims its cache)
    full = [line for line in phases["full"] if line.startswith(("cuMemAllocFromPoolAsync", "cuMemPoolTrimTo",
                                                                 "cuStreamSynchronize legacy"))]
    assert full[:4] == [f"cuMemAllocFromPoolAsync {stream}", "cuStreamSynchronize legacy", "cuMemPoolTrimTo ptds",
                        f"cuMemAllocFromPoolAsync {stream}"], full
    close = phases["close"]
    frees = [i for i, line in enumerate(close) if line.startswith("cuMemFreeAsync")]
    assert frees and close.index("cuMemPoolDestroy ptds") > max(frees), close


def test_a_full_device_takes_back_the_pools_free_memory(axpy_image, fake_driver, tmp_path):
    """Memory the runtime cached and the driver's pool kept counts against the device: an allocation that
    fits only once both gave theirs back succeeds (the runtime trims its cache and asks again; the backend
    trims the driver's pool and asks again)."""
    script = """
import numpy as np
from tessera import _runtime, runtime
ctx = _runtime.Context("cuda")
a = runtime.DeviceArray((3 << 20,), np.uint8, ctx)
del a                                                   # cached by the runtime: 3 MiB still held
b = runtime.DeviceArray((5 << 20,), np.uint8, ctx)      # 8 MiB > the 6 MiB device: fits after both trims
print(b.nbytes)
"""
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(log), FAKE_CUDA_LOG_MEMORY="1",
                   FAKE_CUDA_MEMORY_LIMIT=str(6 << 20))
    for name in ("TESSERA_BACKEND", "TESSERA_CUDA_MEMPOOL"):
        environ.pop(name, None)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=environ)
    assert p.returncode == 0 and p.stdout.split() == [str(5 << 20)], p.stdout + p.stderr
    names = [line.split()[0] for line in log.read_text().splitlines() if line.startswith("cuMem")]
    # 3 MiB, then 5 MiB: full; the pool trimmed (empty); full; the runtime frees its 3 MiB into the pool, asks
    # again: full; the pool trimmed; the 5 MiB fit
    assert names[:8] == ["cuMemPoolCreate", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", "cuMemPoolTrimTo",
                         "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync", "cuMemPoolTrimTo"], names
    assert names[8] == "cuMemAllocFromPoolAsync" and names[9:] == ["cuMemFreeAsync", "cuMemPoolTrimTo",
                                                                   "cuMemPoolDestroy"], names


@pytest.mark.parametrize("why", ["TESSERA_CUDA_MEMPOOL=0", "driver without pools"])
def test_without_a_pool_allocation_is_cumemalloc(axpy_image, fake_driver, tmp_path, why):
    """TESSERA_CUDA_MEMPOOL=0, or a driver older than CUDA 11.2 (no pool entry points; the GPU says it has no
    pools): cuMemAlloc and cuMemFree as before, the same results, OOM the same status."""
    env = {"TESSERA_CUDA_MEMPOOL": "0"} if why.startswith("TESSERA") else {}
    out, phases = run_pool_host(axpy_image, fake_driver(pools=bool(env)), tmp_path, env=env)
    assert out[0] == out[2] == "True", out  # (out[1]: cuMemAlloc may give the trimmed block's address or not)
    assert out[3] == "TSR_ERROR_OUT_OF_MEMORY tsrAlloc: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", out
    every = [line for lines in phases.values() for line in lines]
    assert calls(every, "cuMemAlloc") and calls(every, "cuMemFree")
    assert not [line for line in every if line.startswith(("cuMemPool", "cuMemAllocFromPoolAsync", "cuMemFreeAsync"))]


CROSS_STREAM = """
import ctypes
import os
import sys
import numpy as np
from tessera import _runtime, executor, runtime, stream as streams
log = os.environ["FAKE_CUDA_LOG"]
def mark(name):
    with open(log, "a") as f:
        f.write(f"## {name}\\n")
ctx = _runtime.Context("cuda")
prog = executor.load(sys.argv[1], ctx)
x = runtime.DeviceArray.from_numpy(np.arange(40, dtype=np.float32), ctx)
y = runtime.DeviceArray.from_numpy(np.ones(40, np.float32), ctx)
flag = runtime.DeviceArray.from_numpy(np.zeros(1, np.int32), ctx)
seen = runtime.DeviceArray.from_numpy(np.zeros(1, np.int32), ctx)
a, b = streams.new(context=ctx), streams.new(context=ctx)
prog.module.kernel("spin_until")(flag, seen, grid=1, block=1, stream=a)   # stream a is busy until the flag
mark("busy")
on_a = prog.axpy(x, y, stream=a)     # its intermediate is in use on a until a passes the call's event
on_b = prog.axpy(x, y, stream=b)     # needs one of the same size: never a's
ctx.trim_memory()                    # frees what is idle; a's intermediate is not
mark("done")
ctypes.c_int32.from_address(flag.address).value = 1
a.synchronize()
ctx.trim_memory()
mark("end")
b.synchronize()
print(ctypes.c_int32.from_address(seen.address).value, np.array_equal(on_a.numpy(), on_b.numpy()))
"""


def test_memory_in_use_on_one_stream_is_neither_freed_nor_taken_by_another(axpy_image, fake_driver, tmp_path):
    """No use after free across streams: a call's intermediate, in use on stream a (busy behind a spinning
    kernel), is not handed to the same call on stream b (which allocates its own) and is not freed to the
    driver's pool by a trim while a runs; once a passed it, the next trim frees it (cuMemFreeAsync)."""
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(log), FAKE_CUDA_LOG_MEMORY="1")
    for name in ("TESSERA_BACKEND", "TESSERA_CUDA_MEMPOOL"):
        environ.pop(name, None)
    p = subprocess.run([sys.executable, "-c", CROSS_STREAM, str(axpy_image)], capture_output=True, text=True,
                       timeout=120, env=environ)
    assert p.returncode == 0 and p.stdout.split() == ["1", "True"], p.stdout + p.stderr
    phases = split_log(log.read_text().splitlines())
    busy, done = phases["busy"], phases["done"]
    # b's call: its own intermediate and result (the pool had none); a's intermediate stays allocated
    assert len(calls(busy, "cuMemAllocFromPoolAsync")) == 2 + 2, busy
    freed_while_busy = len(calls(busy, "cuMemFreeAsync"))
    assert freed_while_busy == 1, busy   # b's intermediate, idle once b passed its call
    assert len(calls(done, "cuMemFreeAsync")) == 1, done   # a's, once a passed it


# ---- the executor's quick device call (tessera/executor.py, Function._device_call) --------------------------

QUICK_CALL = """
import sys
import numpy as np
from tessera import _runtime, executor, graph, runtime, stream as streams
ctx, other = _runtime.Context("cuda"), _runtime.Context("cuda")
prog = executor.load(sys.argv[1], ctx)
f = prog.axpy
full = []
take = runtime._dlpack_argument
def check(name, quick):
    f._device_quick = quick
    try:
        return name, f(*args, stream=s) if s is not None else f(*args)
    except Exception as e:
        return name, f"{type(e).__name__}: {e}"
s = None
def both(name):
    a, b = check(name, False), check(name, True)
    if isinstance(a[1], str) or isinstance(b[1], str):
        print(name, a[1] == b[1], b[1])
    else:
        got = [r.numpy() if isinstance(r, runtime.DeviceArray) else r for r in (a[1], b[1])]
        print(name, type(b[1]).__name__, got[0].shape, np.array_equal(got[0], got[1]))
for n in (40, 7, 40):   # shapes of another signature, then the first again (its result shapes cached)
    x = runtime.DeviceArray.from_numpy(np.arange(n, dtype=np.float32), ctx)
    y = runtime.DeviceArray.from_numpy(np.ones(n, np.float32), ctx)
    args = (x, y)
    both(f"n={n}")
print(sorted(f._shapes))
s = streams.new(context=ctx)
both("stream")
s.synchronize()
args = (x, runtime.DeviceArray.from_numpy(np.ones(40, np.float64), ctx))
both("f64")
args = (x, runtime.DeviceArray.from_numpy(np.ones(41, np.float32), ctx))
both("extent")
args = (x, runtime.DeviceArray.from_numpy(np.ones(40, np.float32), other))
both("context")
args = (x,)
both("count")
args = (x, np.ones(40, np.float32))
both("numpy")
s = None
with graph.capture(context=ctx) as g:   # the full path: a capture's arrays are kept by the graph
    f._device_quick = True
    captured = f(x, runtime.DeviceArray.from_numpy(np.ones(40, np.float32), ctx))
g.launch()
streams.synchronize(ctx)
print("capture", np.array_equal(captured.numpy(), np.ones(40) + 2 * np.arange(40) + 1))
"""


def test_the_quick_device_call_is_the_full_calls_result_and_errors(axpy_image, fake_driver, tmp_path):
    """An executor call on DeviceArrays of a device function takes the quick path (no per-argument checks in
    Python, result shapes cached per signature of input shapes): the same results as the full path, on a
    stream or none, for each signature; everything else (another dtype, a wrong extent or count, another
    context's array, a numpy array, a capture) goes the full way, with the same error."""
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()))
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([sys.executable, "-c", QUICK_CALL, str(axpy_image)], capture_output=True, text=True,
                       timeout=120, env=environ)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[:5] == ["n=40 DeviceArray (40,) True", "n=7 DeviceArray (7,) True", "n=40 DeviceArray (40,) True",
                         "[((7,), (7,)), ((40,), (40,))]", "stream DeviceArray (40,) True"], lines
    assert lines[5].startswith("f64 True TypeError: argument 'y' of 'axpy' must have dtype f32"), lines
    assert lines[6].startswith("extent True ArgumentError: "), lines
    assert lines[7] == "context True ValueError: argument 'y' of 'axpy' is a DeviceArray of another context", lines
    assert lines[8].startswith("count True TypeError: 'axpy' takes 2 arguments"), lines
    assert lines[9] == "numpy DeviceArray (40,) True" and lines[10] == "capture True", lines
