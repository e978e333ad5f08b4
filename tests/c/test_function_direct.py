"""Where tsrFunctionCall computes a result in its output's memory, and where it keeps the copy out of an
intermediate (docs/c-api.md, "Functions"): host_function_direct.c on the CPU and on the fake CUDA driver
(tests/c/fake_cuda.c), whose log shows each call's device-to-device copies; and through tessera.executor on
the fake driver."""
import os
import subprocess
import sys

import pytest

from test_cuda_fake import calls, split_log

IN_PLACE = ["direct", "direct on a stream", "direct 64 bytes in", "direct into unknown memory", "a slot of its own",
            "a result read by a later step"]
COPIED = ["misaligned by 4 bytes", "misaligned by 32 bytes", "the output is an argument",
          "the output overlaps an argument", "pinned host memory", "a slot shared"]


@pytest.fixture(scope="session")
def direct_image(test_image, tmp_path_factory):
    import function_images
    path = tmp_path_factory.mktemp("direct") / "direct.tessera"
    path.write_bytes(function_images.with_plan(test_image.read_bytes(), function_images.DIRECT,
                                               [function_images.PTX_FILL]))
    return path


def run_direct_host(build_host, image, backend, tmp_path, driver_dir=None, env=None):
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, FAKE_CUDA_LOG=str(log), **(env or {}))
    if driver_dir:
        environ["LD_LIBRARY_PATH"] = str(driver_dir)
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([str(build_host("host_function_direct.c")), str(image), backend], capture_output=True,
                       text=True, timeout=300, env=environ)
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr
    return p.stdout, split_log(log.read_text().splitlines()) if log.exists() else {}


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_results_are_computed_in_the_outputs_memory_where_they_can(build_host, direct_image, fake_driver, tmp_path,
                                                                   backend):
    """Every case's result bit for bit, and nothing around an output written (the host checks). On CUDA: an
    output of device memory (tsrAlloc's, 64 bytes into it, or memory the context does not know), compact,
    TSR_ALLOC_ALIGNMENT-aligned and apart from the arguments is written by the kernels, with no copy; a result
    alone in its buffer slot too, and one a later step reads. Misaligned outputs (4 and 32 bytes), an output
    that is or overlaps an argument, pinned host memory, and a result sharing its buffer slot with the
    intermediate it is computed in keep the device-to-device copy; a reversed output is scattered through the
    host; a captured call records the copy, and its replays write the output."""
    _, phases = run_direct_host(build_host, direct_image, backend, tmp_path,
                                fake_driver() if backend == "cuda" else None)
    if backend != "cuda":
        return
    for name in IN_PLACE:
        lines = phases[name]
        launches = 5 if name == "a result read by a later step" else 3
        assert len(calls(lines, "cuLaunchKernel")) == launches, (name, lines)
        assert not [line for line in lines if line.startswith("cuMemcpy")], (name, lines)
    for name in COPIED:
        lines = phases[name]
        assert len(calls(lines, "cuLaunchKernel")) == 3, (name, lines)
        assert len(calls(lines, "cuMemcpyDtoDAsync")) == 1, (name, lines)
        assert [line.split()[0] for line in lines if line.startswith(("cuLaunchKernel", "cuMemcpy"))][-1] == \
            "cuMemcpyDtoDAsync", (name, lines)  # after the launches
    scattered = phases["reversed"]
    assert not calls(scattered, "cuMemcpyDtoDAsync") and calls(scattered, "cuMemcpyDtoHAsync") and \
        calls(scattered, "cuMemcpyHtoDAsync"), scattered
    captured = phases["captured"]
    assert len(calls(captured, "cuLaunchKernel")) == 3 and len(calls(captured, "cuMemcpyDtoDAsync")) == 1, captured
    assert len(calls(phases["replays"], "cuGraphLaunch")) == 2, phases["replays"]


def test_tessera_device_direct_results_0_keeps_every_copy(build_host, direct_image, fake_driver, tmp_path):
    """TESSERA_DEVICE_DIRECT_RESULTS=0 (to compare): every result on the device is copied out of an
    intermediate, with the same values."""
    _, phases = run_direct_host(build_host, direct_image, "cuda", tmp_path, fake_driver(),
                                {"TESSERA_DEVICE_DIRECT_RESULTS": "0"})
    for name in IN_PLACE:
        copies = 2 if name == "a result read by a later step" else 1
        assert len(calls(phases[name], "cuMemcpyDtoDAsync")) == copies, (name, phases[name])


EXECUTOR = """
import sys
import numpy as np
from tessera import _runtime, executor, runtime
ctx = _runtime.Context("cuda")
f = executor.load(sys.argv[1], ctx).axpy
x = runtime.DeviceArray.from_numpy(np.arange(40, dtype=np.float32), ctx)
y = runtime.DeviceArray.from_numpy(np.full(40, 0.25, np.float32), ctx)
with open(sys.argv[2], "a") as log:
    log.write("## call\\n")
out = f(x, y)
with open(sys.argv[2], "a") as log:
    log.write("## checks\\n")
print(type(out).__name__, np.array_equal(out.numpy(), 2 * np.arange(40, dtype=np.float32) + 0.25 + 1))
"""


@pytest.mark.parametrize("quick", ["1", "0"])
def test_an_executor_call_on_device_arrays_writes_its_result_in_place(direct_image, fake_driver, tmp_path, quick):
    """tessera.executor's device call (the quick path and the full one) allocates the result's DeviceArray and
    libtessera's kernels write it: no device-to-device copy on the fake CUDA driver, the same values."""
    log = tmp_path / "cuda.log"
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver()), FAKE_CUDA_LOG=str(log),
                   TESSERA_DEVICE_QUICK_CALL=quick)
    environ.pop("TESSERA_BACKEND", None)
    p = subprocess.run([sys.executable, "-c", EXECUTOR, str(direct_image), str(log)], capture_output=True, text=True,
                       timeout=120, env=environ)
    assert p.returncode == 0 and p.stdout.split() == ["DeviceArray", "True"], p.stdout + p.stderr
    lines = split_log(log.read_text().splitlines())["call"]
    assert len(calls(lines, "cuLaunchKernel")) == 3 and not calls(lines, "cuMemcpyDtoDAsync"), lines
