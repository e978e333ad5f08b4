"""The HIP and Level Zero backends of libtessera on a machine with neither GPU: what they say when the driver
is absent, and their whole path — loading, device queries, code objects, memory, launches, streams/queues and
events, error mapping — against mock drivers (tests/c/mock) that the loader opens through
TESSERA_HIP_LIBRARY / TESSERA_LEVEL_ZERO_LIBRARY.

The mocks log every driver call and run saxpy on the host from the arguments exactly as the loader packed
them, so these tests check the loader's call sequence, argument packing and error mapping; they cannot show
that a real driver accepts our code objects (that needs the hardware, docs/portability.md).

A backend loads its driver once per process, so each scenario runs in a fresh Python process."""

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostutil import run

HERE = Path(__file__).resolve().parent
MOCK = HERE / "mock"
RUNTIME_SRC = HERE.parents[1] / "runtime" / "src"

SAXPY = """
@kernel
def saxpy(a: float, X: tensor[float, "N"], Y: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""

# Runs in the child: saxpy on the backend, its result, and the context's properties and capabilities.
SAXPY_RUN = """
import json, os, sys
import numpy as np
from tessera import runtime
ctx = runtime.select_backend(sys.argv[1])
mod = runtime.load(open(sys.argv[2], "rb").read(), ctx)
x = np.arange(100, dtype=np.float32)
y = np.full(100, 0.5, np.float32)
X, Y = runtime.DeviceArray.from_numpy(x, ctx), runtime.DeviceArray.from_numpy(y, ctx)
out = runtime.DeviceArray(100, np.float32, ctx)
mod.saxpy(2.0, X, Y, out, grid=2, block=64)
first = out.numpy().tolist()
mod.saxpy(-1.0, X, Y, out, grid=2, block=64)
print(json.dumps({"first": first, "second": out.numpy().tolist(), "properties": ctx.properties,
                  "capabilities": runtime.capabilities(ctx), "default": runtime.default_context().backend}))
"""

# Runs in the child: opens a context and reports the error, if any.
OPEN = """
import json, sys
from tessera import runtime
try:
    ctx = runtime._runtime.Context(sys.argv[1])
    print(json.dumps({"backend": ctx.backend}))
except runtime.Error as e:
    print(json.dumps({"status": e.status_name, "message": str(e)}))
"""


def child(code: str, *args, **env) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "TESSERA_HIP", "TESSERA_LEVEL"))}
    full.update({k: str(v) for k, v in env.items()})
    # From outside the repository, whose tessera/ folder would shadow the installed package.
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=full,
                       cwd="/")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mocks(cc, tmp_path_factory):
    out = tmp_path_factory.mktemp("mock_drivers")
    built = {}
    for name, source, flags in (("hip", "mock_hip.c", []), ("hip_rocm5", "mock_hip.c", ["-DMOCK_HIP_ROCM5"]),
                                ("level_zero", "mock_level_zero.c", [])):
        lib = out / f"libmock_{name}.so"
        run([cc, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden",
             *flags, MOCK / source, "-o", lib, "-pthread"])
        built[name] = lib
    return built


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    from tessera import compiler
    from tessera.backends.amdgpu import link
    from tessera.options import CompileOptions
    if link.find() is None:
        pytest.skip("no ld.lld >= 16 to link the HSACO (pip install ziglang)")
    path = tmp_path_factory.mktemp("image") / "saxpy.tessera"
    path.write_bytes(compiler.compile_source(SAXPY, "saxpy.py", CompileOptions(target="amdgpu,spirv")).image)
    return path


def log_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def index(lines: list[str], prefix: str, start: int = 0) -> int:
    """Position of the first line at or after `start` beginning with `prefix` (fails the test if none)."""
    for i in range(start, len(lines)):
        if lines[i].startswith(prefix):
            return i
    pytest.fail(f"no call '{prefix}' after line {start} in the driver log:\n" + "\n".join(lines))


# ---- absent drivers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend,variable,what", [("hip", "TESSERA_HIP_LIBRARY", "the HIP runtime (ROCm)"),
                                                   ("level_zero", "TESSERA_LEVEL_ZERO_LIBRARY",
                                                    "the Level Zero loader")])
def test_a_missing_driver_library_is_named(backend, variable, what):
    got = child(OPEN, backend, **{variable: "/nonexistent/libdriver.so"})
    assert got["status"] == "TSR_ERROR_UNSUPPORTED"
    assert f"backend '{backend}'" in got["message"]
    assert f"{what} could not be loaded from {variable}=/nonexistent/libdriver.so" in got["message"]
    assert "available: cpu" in got["message"]


def test_without_rocm_the_hip_backend_says_it_is_not_installed():
    if ctypes.util.find_library("amdhip64"):
        pytest.skip("this machine has a HIP runtime")
    got = child(OPEN, "rocm")  # the alias names the same backend
    assert got["status"] == "TSR_ERROR_UNSUPPORTED"
    assert "the HIP runtime (ROCm) is not installed: no libamdhip64.so could be loaded" in got["message"]


def test_the_real_level_zero_loader_without_a_gpu_driver():
    """Debian's libze1 (the loader alone) is what a machine without an Intel GPU driver has."""
    if not ctypes.util.find_library("ze_loader"):
        pytest.skip("no Level Zero loader (libze1) on this machine")
    got = child(OPEN, "level_zero")
    if "backend" in got:
        pytest.skip("this machine has a Level Zero GPU driver")
    assert got["status"] == "TSR_ERROR_UNSUPPORTED"
    assert "Level Zero" in got["message"] and "ZE_RESULT_" in got["message"], got["message"]


# ---- HIP through the mock ------------------------------------------------------------------------------

def coarsening(image: Path) -> int:
    """The amdgpu saxpy's elements per thread (passes/simt_coarsen.py), which the mock's saxpy does too."""
    from tessera import image as images
    kernel = next(k for k in images.read_image(image.read_bytes()).kernels if k.target == "amdgpu")
    return int(kernel.props.get("simt.coarsen", 1))


def test_hip_runs_saxpy_through_the_mock_driver(mocks, image, tmp_path):
    log = tmp_path / "hip.log"
    got = child(SAXPY_RUN, "hip", image, TESSERA_HIP_LIBRARY=mocks["hip"], MOCK_LOG=log,
                MOCK_HIP_COARSEN=coarsening(image))
    x = [float(i) for i in range(100)]
    assert got["first"] == [2 * v + 0.5 for v in x] and got["second"] == [-v + 0.5 for v in x]
    assert got["default"] == "hip"
    p, caps = got["properties"], got["capabilities"]
    assert (p["backend"], p["arch"], p["name"], p["warp_size"]) == ("hip", "gfx942", "Mock AMD Instinct", 64)
    assert (p["compute_units"], p["max_shared_bytes_per_block"], p["total_memory_bytes"]) == (304, 65536, 192 << 30)
    assert caps["warp_size"] == 64 and caps["tensorcore"] == {"fp16": True, "bf16": True, "fp8_e4m3": True,
                                                              "fp8_e5m2": True}
    lines = log_of(log)
    # The code object reaches the runtime whole (an AMDGPU ELF shared object) and has the kernel's symbol.
    assert "hipModuleLoadData elf=amdgpu-dyn machine=224" in lines
    assert "hipModuleGetFunction saxpy found=1" in lines
    # A launch goes to a non-blocking stream; an event with blocking sync (1) and no timing (2) is recorded
    # after it on that stream and waited for. The second launch reuses the lane.
    stream = index(lines, "hipStreamCreateWithFlags flags=1 -> S")
    s = lines[stream].rsplit("-> ", 1)[1]
    event = index(lines, "hipEventCreateWithFlags flags=3 -> E", stream)
    e = lines[event].rsplit("-> ", 1)[1]
    for launch in (index(lines, "hipModuleLaunchKernel saxpy"),
                   index(lines, "hipModuleLaunchKernel saxpy", index(lines, "hipModuleLaunchKernel saxpy") + 1)):
        # coarsened by 4: the 2 blocks of 64 asked for are 1 block doing 4 elements a thread
        assert lines[launch] == f"hipModuleLaunchKernel saxpy grid=1,1,1 block=64,1,1 smem=0 {s} extra=null"
        assert lines[launch + 2] == "  coarsened by 4 threads=128"
        assert lines[launch + 3:launch + 5] == [f"hipEventRecord {e} {s}", f"hipEventSynchronize {e}"]
    assert sum(line.startswith("hipStreamCreate") for line in lines) == 1
    assert [line for line in lines if line.startswith("hipMemcpy")] == \
        ["hipMemcpy 400 kind=1", "hipMemcpy 400 kind=1", "hipMemcpy 400 kind=2", "hipMemcpy 400 kind=2"]
    # Teardown releases what the context made.
    assert lines[-2:] == [f"hipEventDestroy {e}", f"hipStreamDestroy {s}"]
    assert lines.count("hipFree") == sum(line.startswith("hipMalloc") for line in lines) == 3


COARSENED_RUN = """
import json, sys
import numpy as np
from tessera import runtime
ctx = runtime.select_backend("hip")
mod = runtime.load(open(sys.argv[1], "rb").read(), ctx)
x = np.arange(100, dtype=np.float32)
X, out = runtime.DeviceArray.from_numpy(x, ctx), runtime.DeviceArray.from_numpy(np.full(100, -1, np.float32), ctx)
got = {}
for grid, block in json.loads(sys.argv[2]):
    mod.saxpy(2.0, X, X, out, grid=grid, block=block)
    got[f"{grid}x{block}"] = out.numpy().tolist()
print(json.dumps(got))
"""


@pytest.mark.parametrize("grid,block", [(1, 64), (3, 8), (5, 4), (1, 1), (7, 16), (40, 32)])
def test_hip_launches_a_coarsened_kernel_as_the_threads_asked_for(mocks, image, tmp_path, grid, block):
    """The runtime launches a coarsened kernel over ceil(grid / 4) blocks and passes grid × block: the
    elements below min(n, grid × block) are done, the rest left as they were, whether the launch covers n
    (40 × 32), falls short of it by a multiple of 4 or not (3 × 8, 5 × 4, 1 × 1)."""
    log = tmp_path / "hip.log"
    got = child(COARSENED_RUN, image, json.dumps([[grid, block]]), TESSERA_HIP_LIBRARY=mocks["hip"], MOCK_LOG=log,
                MOCK_HIP_COARSEN=coarsening(image))[f"{grid}x{block}"]
    done = min(100, grid * block)
    assert got == [3.0 * i for i in range(done)] + [-1.0] * (100 - done)
    lines = log_of(log)
    launch = index(lines, "hipModuleLaunchKernel saxpy")
    assert lines[launch].startswith(f"hipModuleLaunchKernel saxpy grid={-(-grid // 4)},1,1 block={block},1,1 ")
    assert lines[launch + 2] == f"  coarsened by 4 threads={grid * block}"


def test_hip_loads_only_code_for_the_devices_processor(mocks, image):
    code = OPEN.replace("print(json.dumps({\"backend\": ctx.backend}))",
                        "ctx.load_module(open(sys.argv[2], 'rb').read()).kernel('saxpy')")
    got = child(code, "hip", image, TESSERA_HIP_LIBRARY=mocks["hip"], MOCK_HIP_ARCH="gfx90a:sramecc+:xnack-")
    assert got["status"] == "TSR_ERROR_NOT_FOUND"
    assert "no code this runtime can run (amdgpu/gfx90a)" in got["message"] and "amdgpu/gfx942" in got["message"]


@pytest.mark.parametrize("env,expected", [
    ({"MOCK_FAIL": "hipInit=100"}, "the HIP runtime did not start (hipInit): hipErrorNoDevice"),
    ({"MOCK_HIP_DEVICES": "0"}, "the HIP runtime sees no GPU"),
    ({"MOCK_FAIL": "hipGetDevicePropertiesR0600=3"}, "cannot query GPU 0: hipErrorNotInitialized"),
])
def test_hip_start_failures_are_reported(mocks, env, expected):
    got = child(OPEN, "hip", TESSERA_HIP_LIBRARY=mocks["hip"], **env)
    assert got["status"] == "TSR_ERROR_UNSUPPORTED" and expected in got["message"], got


def test_a_hip_older_than_rocm6_is_refused_rather_than_misread(mocks):
    got = child(OPEN, "hip", TESSERA_HIP_LIBRARY=mocks["hip_rocm5"])
    assert got["status"] == "TSR_ERROR_UNSUPPORTED"
    assert "has no hipGetDevicePropertiesR0600 (a HIP older than ROCm 6?)" in got["message"]


# Runs in the child: each step with one driver call made to fail (MOCK_FAIL is read at each call).
ERRORS = """
import json, os, sys
import numpy as np
from tessera import runtime
ctx = runtime._runtime.Context(sys.argv[1])
data = open(sys.argv[2], "rb").read()
X = runtime.DeviceArray.from_numpy(np.ones(64, np.float32), ctx)
steps = {
    "alloc": lambda: runtime.DeviceArray(64, np.float32, ctx),
    "load": lambda: ctx.load_module(data).kernel("saxpy"),
    "copy": lambda: X.copy_from(np.zeros(64, np.float32)),
    "launch": lambda: runtime.load(data, ctx).saxpy(1.0, X, X, X, grid=1, block=64),
    # a new context, whose first copy makes its first lane
    "first copy": lambda: runtime.DeviceArray.from_numpy(np.ones(4, np.float32), runtime._runtime.Context(sys.argv[1])),
}
out = {}
for name, fail in json.loads(sys.argv[3]):
    os.environ["MOCK_FAIL"] = fail
    try:
        steps[name]()
        out[fail] = None
    except runtime.Error as e:
        out[fail] = [e.status_name, str(e)]
    os.environ["MOCK_FAIL"] = ""
print(json.dumps(out))
"""


def test_hip_errors_become_statuses_with_the_runtimes_words(mocks, image):
    cases = [("alloc", "hipMalloc=2", "TSR_ERROR_OUT_OF_MEMORY", "tsrAlloc: hipMalloc: hipErrorOutOfMemory"),
             ("load", "hipModuleLoadData=209", "TSR_ERROR_BAD_IMAGE",
              "could not load the code object of section .tessera.code.amdgpu on Mock AMD Instinct (gfx942): "
              "hipErrorNoBinaryForGpu"),
             ("copy", "hipMemcpy=1", "TSR_ERROR_INVALID_VALUE", "tsrMemcpy: hipMemcpy: hipErrorInvalidValue"),
             # first among the launches: later ones reuse the lane (stream and event) that a launch made
             ("launch", "hipStreamCreateWithFlags=2", "TSR_ERROR_OUT_OF_MEMORY",
              "tsrLaunch: hipStreamCreateWithFlags: hipErrorOutOfMemory"),
             ("launch", "hipModuleLaunchKernel=719", "TSR_ERROR_LAUNCH_FAILED",
              "(hipModuleLaunchKernel): hipErrorLaunchFailure"),
             ("launch", "hipEventSynchronize=700", "TSR_ERROR_LAUNCH_FAILED",
              "(hipEventSynchronize): hipErrorIllegalAddress (injected by the mock driver); the GPU cannot be used "
              "again in this process")]
    got = child(ERRORS, "hip", image, json.dumps([c[:2] for c in cases]), TESSERA_HIP_LIBRARY=mocks["hip"])
    for _, fail, status, words in cases:
        assert got[fail] is not None, f"{fail}: no error"
        assert got[fail][0] == status and words in got[fail][1], (fail, got[fail])


# ---- bounds checks (passes/gpu_bounds_checks.py) through the mock ---------------------------------------

# Two unproven accesses, the sites 0 and 1 of the module's table.
SHIFT = """
@kernel
def shift(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i + 1] = X[i]

@kernel
def stretch(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[2 * i] = X[i]
"""
SHIFT_LINE = SHIFT.splitlines().index("        Out[i + 1] = X[i]") + 1

# Runs in the child: shift launched with the driver's fault injection as argv[3] asks, then without.
CHECKED_RUN = """
import json, os, sys
import numpy as np
from tessera import runtime
ctx = runtime._runtime.Context(sys.argv[1])
out = {}
try:
    mod = runtime.load(open(sys.argv[2], "rb").read(), ctx)
except runtime.Error as e:
    print(json.dumps({"load": [e.status_name, str(e)]}))
    raise SystemExit
X, Out = (runtime.DeviceArray.from_numpy(np.ones(64, np.float32), ctx) for _ in range(2))
for name, fault in (("faulted", sys.argv[3]), ("after", "")):
    os.environ[sys.argv[4]] = fault
    try:
        mod.shift(X, Out, grid=1, block=64)
        out[name] = None
    except runtime.Error as e:
        out[name] = [e.status_name, str(e)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def checked_image(tmp_path_factory):
    from tessera import compiler
    from tessera.backends.amdgpu import link
    from tessera.options import CompileOptions
    if link.find() is None:
        pytest.skip("no ld.lld >= 16 to link the HSACO (pip install ziglang)")
    path = tmp_path_factory.mktemp("image") / "shift.tessera"
    options = CompileOptions(target="amdgpu", gpu_bounds_checks=True)
    path.write_bytes(compiler.compile_source(SHIFT, "k.py", options).image)
    return path


def test_hip_reads_back_a_failed_bounds_check(mocks, checked_image, tmp_path):
    """The record's site 0 is shift's Out[i + 1]; the launch fails naming kernel, block, tensor and line, the
    record is cleared (the next launch succeeds), and the loader found the record with hipModuleGetGlobal."""
    log = tmp_path / "hip.log"
    got = child(CHECKED_RUN, "hip", checked_image, "0,3", "MOCK_HIP_FAULT", TESSERA_HIP_LIBRARY=mocks["hip"],
                MOCK_LOG=log)
    assert got["faulted"][0] == "TSR_ERROR_MEMORY_FAULT", got
    assert (f"kernel 'shift' block (3, 0, 0): tensor 'Out' accessed outside its extents at "
            f"k.py:{SHIFT_LINE}") in got["faulted"][1], got
    assert got["after"] is None
    lines = log_of(log)
    assert "hipModuleGetGlobal __tessera_fault found=1" in lines
    assert "hipModuleGetGlobal __tessera_fault_sites found=1" in lines


def test_hip_names_a_failure_of_another_kernel(mocks, checked_image):
    got = child(CHECKED_RUN, "hip", checked_image, "1,0", "MOCK_HIP_FAULT", TESSERA_HIP_LIBRARY=mocks["hip"])
    assert got["faulted"][0] == "TSR_ERROR_MEMORY_FAULT"
    assert (f"tensor 'Out' accessed outside its extents at k.py:{SHIFT_LINE + 6}, in kernel 'stretch' running on "
            f"another stream") in got["faulted"][1], got


def test_hip_debug_mode_refuses_unchecked_code_objects(mocks, image, checked_image):
    unchecked = child(CHECKED_RUN, "hip", image, "", "MOCK_HIP_FAULT", TESSERA_HIP_LIBRARY=mocks["hip"],
                      TESSERA_DEBUG=1)
    assert unchecked["load"][0] == "TSR_ERROR_UNSUPPORTED"
    assert "compiled without bounds checks" in unchecked["load"][1] and "--gpu-bounds-checks" in unchecked["load"][1]
    checked = child(CHECKED_RUN, "hip", checked_image, "", "MOCK_HIP_FAULT", TESSERA_HIP_LIBRARY=mocks["hip"],
                    TESSERA_DEBUG=1)
    assert checked == {"faulted": None, "after": None}


# Runs in the child: the checked SPIR-V's shift over a view of the first 64 floats of 72, twice.
ZE_CHECKED_RUN = """
import json, sys
import numpy as np
from tessera import runtime
ctx = runtime._runtime.Context("level_zero")
mod = runtime.load(open(sys.argv[1], "rb").read(), ctx)
X = runtime.DeviceArray.from_numpy(np.arange(64, dtype=np.float32), ctx)
whole = runtime.DeviceArray.from_numpy(np.full(72, -7.0, np.float32), ctx)
out = {"launches": []}
for _ in range(2):
    try:
        mod.shift(X, whole.view(np.float32, (64,)), grid=2, block=32)
        out["launches"].append(None)
    except runtime.Error as e:
        out["launches"].append([e.status_name, str(e)])
out["memory"] = whole.numpy().tolist()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def checked_spirv(tmp_path_factory):
    from tessera import compiler
    from tessera.options import CompileOptions
    path = tmp_path_factory.mktemp("image") / "shift_spirv.tessera"
    path.write_bytes(compiler.compile_source(SHIFT, "k.py", CompileOptions(target="spirv", gpu_bounds_checks=True)).image)
    return path


def test_level_zero_reports_a_failed_check_of_spirv_through_its_hidden_record(mocks, checked_spirv, tmp_path):
    """The record is the kernel's last argument (set after N), zeroed per launch: each launch reports its own
    failure, naming kernel, block, tensor and line; the write past the end did not happen."""
    log = tmp_path / "ze.log"
    got = child(ZE_CHECKED_RUN, checked_spirv, TESSERA_LEVEL_ZERO_LIBRARY=mocks["level_zero"], MOCK_LOG=log)
    for launch in got["launches"]:
        assert launch[0] == "TSR_ERROR_MEMORY_FAULT", got
        assert (f"kernel 'shift' block (1, 0, 0): tensor 'Out' accessed outside its extents at k.py:{SHIFT_LINE}"
                in launch[1]), launch
    assert got["memory"] == [-7.0] + [float(i) for i in range(63)] + [-7.0] * 8
    assert any("zeKernelSetArgumentValue shift 3 size=8" in line for line in log_of(log))


@pytest.mark.parametrize("checks", [False, True])
def test_level_zero_debug_mode_loads_only_checked_spirv(mocks, image, checked_spirv, checks):
    code = OPEN.replace("print(json.dumps({\"backend\": ctx.backend}))",
                        "ctx.load_module(open(sys.argv[2], 'rb').read()).kernel(sys.argv[3]); print('{}')")
    got = child(code, "level_zero", checked_spirv if checks else image, "shift" if checks else "saxpy",
                TESSERA_LEVEL_ZERO_LIBRARY=mocks["level_zero"], TESSERA_DEBUG=1)
    if checks:
        assert got == {}, got
    else:
        assert got["status"] == "TSR_ERROR_UNSUPPORTED"
        assert "the SPIR-V of section .tessera.code.spirv was compiled without bounds checks" in got["message"], got


# ---- Level Zero through the mock -----------------------------------------------------------------------

def test_level_zero_runs_saxpy_through_the_mock_driver(mocks, image, tmp_path):
    log = tmp_path / "ze.log"
    got = child(SAXPY_RUN, "level_zero", image, TESSERA_LEVEL_ZERO_LIBRARY=mocks["level_zero"], MOCK_LOG=log)
    x = [float(i) for i in range(100)]
    assert got["first"] == [2 * v + 0.5 for v in x] and got["second"] == [-v + 0.5 for v in x]
    p = got["properties"]
    assert (p["backend"], p["arch"], p["name"]) == ("level_zero", "spirv1.4", "Mock Intel Data Center GPU")
    # 32: the subgroup size our SPIR-V kernels require, among those the device offers (8, 16, 32).
    assert (p["warp_size"], p["compute_units"], p["max_shared_bytes_per_block"]) == (32, 4 * 8 * 16, 128 << 10)
    assert p["total_memory_bytes"] == 64 << 30  # both memories of the device
    lines = log_of(log)
    assert "zeModuleCreate format=0 size=" in lines[index(lines, "zeModuleCreate")]
    assert lines[index(lines, "zeModuleCreate")].endswith("spirv=yes entries=1")
    assert "zeKernelCreate saxpy" in lines
    # The lane: a queue and list of the compute group (ordinal 1: group 0 of the mock copies only),
    # asynchronous (2), and a host-visible event (pool flags 1, scopes host 4).
    q = lines[index(lines, "zeCommandQueueCreate ordinal=1 mode=2 -> Q")].rsplit("-> ", 1)[1]
    lst = lines[index(lines, "zeCommandListCreate ordinal=1 -> L")].rsplit("-> ", 1)[1]
    index(lines, "zeEventPoolCreate flags=1 count=1")
    e = lines[index(lines, "zeEventCreate ")].rsplit("-> ", 1)[1]
    assert "signal=4 wait=4" in lines[index(lines, "zeEventCreate ")]
    first = index(lines, "zeKernelSetGroupSize saxpy 64,1,1")
    assert lines[first + 1:first + 6] == [f"zeKernelSetArgumentValue saxpy {i} size={n}"
                                          for i, n in enumerate((4, 8, 8, 8, 8))]
    assert lines[first + 6:first + 13] == [
        f"zeCommandListAppendLaunchKernel {lst} saxpy groups=2,1,1 signal={e} waits=0", f"zeCommandListClose {lst}",
        f"zeCommandQueueExecuteCommandLists {q} count=1 fence=null", "  saxpy a=2 n=100",
        f"zeEventHostSynchronize {e} timeout=max", f"zeEventHostReset {e}", f"zeCommandListReset {lst}"]
    assert sum(line.startswith("zeCommandQueueCreate") for line in lines) == 1  # the lane is reused
    assert lines[-5:] == [f"zeEventDestroy {e}", f"zeEventPoolDestroy {lines[index(lines, 'zeEventPoolCreate')][-2:]}",
                          f"zeCommandListDestroy {lst}", f"zeCommandQueueDestroy {q}",
                          lines[index(lines, "zeContextDestroy")]]


@pytest.mark.parametrize("env", [{"MOCK_ZE_SUBGROUPS": "8,16"}, {"MOCK_ZE_SPIRV": "0x10002"}])
def test_level_zero_refuses_kernels_the_device_cannot_run(mocks, image, env):
    """Our kernels need subgroups of 32 and SPIR-V 1.3."""
    code = OPEN.replace("print(json.dumps({\"backend\": ctx.backend}))",
                        "ctx.load_module(open(sys.argv[2], 'rb').read()).kernel('saxpy')")
    got = child(code, "level_zero", image, TESSERA_LEVEL_ZERO_LIBRARY=mocks["level_zero"], **env)
    assert got["status"] == "TSR_ERROR_NOT_FOUND" and "the image has it for" in got["message"]
    assert "spirv/spirv1.3" in got["message"]


@pytest.mark.parametrize("env,expected", [
    ({"MOCK_FAIL": "zeInit=0x78000001"},
     "the Level Zero loader found no GPU driver (zeInit): ZE_RESULT_ERROR_UNINITIALIZED"),
    ({"MOCK_ZE_GPUS": "0"}, "Level Zero sees no GPU (1 driver)"),
    ({"MOCK_FAIL": "zeContextCreate=0x70000002"},
     "creating a Level Zero context (zeContextCreate): ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"),
])
def test_level_zero_start_failures_are_reported(mocks, env, expected):
    got = child(OPEN, "level_zero", TESSERA_LEVEL_ZERO_LIBRARY=mocks["level_zero"], **env)
    assert got.get("status") in ("TSR_ERROR_UNSUPPORTED", "TSR_ERROR_OUT_OF_MEMORY") and expected in got["message"], got


def test_level_zero_errors_become_statuses_with_their_names(mocks, image):
    cases = [("alloc", "zeMemAllocDevice=0x70000003", "TSR_ERROR_OUT_OF_MEMORY",
              "tsrAlloc: zeMemAllocDevice: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
             ("load", "zeModuleCreate=0x70000004", "TSR_ERROR_BAD_IMAGE",
              "could not build the SPIR-V of section .tessera.code.spirv for Mock Intel Data Center GPU: "
              "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE (error occurred when building module); build log: mock build "
              "log: error: unsupported capability"),
             ("copy", "zeCommandListAppendMemoryCopy=0x78000004", "TSR_ERROR_INVALID_VALUE",
              "ZE_RESULT_ERROR_INVALID_ARGUMENT"),
             ("first copy", "zeCommandQueueCreate=0x70000002", "TSR_ERROR_OUT_OF_MEMORY",
              "preparing a command queue (zeCommandQueueCreate): ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"),
             ("launch", "zeKernelSetArgumentValue=0x78000016", "TSR_ERROR_INVALID_VALUE",
              "(zeKernelSetArgumentValue of argument 0 ('a')): ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE"),
             ("launch", "zeCommandQueueExecuteCommandLists=0x70000001", "TSR_ERROR_LAUNCH_FAILED",
              "(zeCommandQueueExecuteCommandLists): ZE_RESULT_ERROR_DEVICE_LOST"),
             ("launch", "zeEventHostSynchronize=0x7ffffffe", "TSR_ERROR_LAUNCH_FAILED",
              "(zeEventHostSynchronize): ZE_RESULT_ERROR_UNKNOWN")]
    got = child(ERRORS, "level_zero", image, json.dumps([c[:2] for c in cases]),
                TESSERA_LEVEL_ZERO_LIBRARY=mocks["level_zero"])
    for _, fail, status, words in cases:
        assert got[fail] is not None, f"{fail}: no error"
        assert got[fail][0] == status and words in got[fail][1], (fail, got[fail])


OVERLAP = """
import json, sys
import numpy as np
from tessera import runtime
ctx = runtime._runtime.Context("level_zero")
a = runtime.DeviceArray.from_numpy(np.arange(16, dtype=np.float32), ctx)
ctx.copy_device(a.address + 8, a.address, 48)   # elements 0..11 to 2..13, overlapping
print(json.dumps(a.numpy().tolist()))
"""


def test_level_zero_device_copies_may_overlap(mocks):
    """Level Zero refuses overlapping copies; the runtime promises memmove."""
    got = child(OVERLAP, TESSERA_LEVEL_ZERO_LIBRARY=mocks["level_zero"])
    assert got == [0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15]


def test_our_level_zero_declarations_match_ze_api_h(cc, tmp_path):
    """Where the official header is installed (Debian's libze-dev), every structure we declare has its layout."""
    header = Path("/usr/include/level_zero/ze_api.h")
    if not header.exists():
        pytest.skip("ze_api.h is not installed (Debian: libze-dev)")
    exe = tmp_path / "layout"
    run([cc, "-std=c11", "-Wall", "-Werror", f"-I{RUNTIME_SRC}", MOCK / "ze_layout_check.c", "-o", exe])
    run([exe])


# ---- tsrFunctionCall through the mocks ------------------------------------------------------------------

@pytest.mark.parametrize("backend,variable", [("hip", "TESSERA_HIP_LIBRARY"),
                                              ("level_zero", "TESSERA_LEVEL_ZERO_LIBRARY")])
def test_a_function_runs_through_the_mock_driver(build_host, mocks, image, tmp_path, backend, variable):
    """tsrFunctionCall from C on HIP (kDLROCM) and Level Zero (kDLOneAPI) tensors: a plan of two compiled saxpy
    launches through an intermediate (function_images.OUT_OF_PLACE_AXPY), the result computed in the output's
    memory (a captured call copies it, at each replay), and replays of a captured call; host_function_device.c
    checks the bits, the device checks and the freed intermediates."""
    import function_images
    path = tmp_path / "axpy.tessera"
    path.write_bytes(function_images.with_plan(image.read_bytes(), function_images.OUT_OF_PLACE_AXPY))
    log = tmp_path / "driver.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "TESSERA_"))}
    env.update({variable: str(mocks[backend]), "MOCK_LOG": str(log), "MOCK_HIP_COARSEN": str(coarsening(image))})
    p = subprocess.run([str(build_host("host_function_device.c")), str(path), backend,
                        *map(str, function_images.OUT_OF_PLACE_AXPY_COEFFICIENTS)], capture_output=True, text=True,
                       timeout=300, env=env)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    # one per call: on the NULL stream and a stream, 21 not waited for, two threads' 2 x 200, one on a second
    # stream, the last; per graph replay (4); the strided call
    assert sum("saxpy a=2" in line for line in log_of(log)) == 2 + 21 + 2 * 2 * 200 + 1 + 1 + 4 + 1
    if backend == "hip":  # the result is computed in the output (docs/c-api.md, "Functions"): the only
        # device-to-device copies of it are a captured call's, one per replay
        assert sum(line == "hipMemcpy 400 kind=3" for line in log_of(log)) == 4, log_of(log)
