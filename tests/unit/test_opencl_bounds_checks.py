"""Bounds checks of SPIR-V kernels, run on Intel's OpenCL CPU runtime (passes/gpu_bounds_checks.py's "flat"
abi: the fault record is a hidden trailing argument; runtime/src/opencl_backend.c reads it after the launch).
A kernel compiled with them that writes one past the end of its tensor fails with TSR_ERROR_MEMORY_FAULT
naming kernel, block, tensor and line; the memory after the tensor is untouched, the context stays usable,
and in-bounds results are those of the unchecked kernel. Debug mode refuses SPIR-V compiled without checks."""

import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tessera import compiler, image, runtime
from tessera.options import CompileOptions

from test_opencl import REPO, dev, opencl  # noqa: F401 (the fixture)

with open(os.path.join(REPO, "examples", "saxpy.py"), encoding="utf-8") as _f:
    SAXPY = _f.read()
SOURCE = SAXPY + """

@kernel
def shift_right(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i + 1] = X[i]


@kernel
def shift_right_guarded(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i + 1 < Out.shape[0]:
        Out[i + 1] = X[i]
"""
LINE = SOURCE.splitlines().index("        Out[i + 1] = X[i]") + 1
RNG = np.random.default_rng(13)
N, NEIGHBOURS = 1000, 64


def compiled(source: str, checks: bool) -> bytes:
    return compiler.compile_source(source, "checked.py",
                                   CompileOptions(target="spirv", gpu_bounds_checks=checks)).image


@pytest.fixture(scope="module")
def checked(opencl):  # noqa: F811
    return runtime.load(compiled(SOURCE, True), opencl)


def test_a_write_past_the_end_is_a_memory_fault_and_the_neighbours_are_untouched(checked, opencl):  # noqa: F811
    X = RNG.standard_normal(N, dtype=np.float32)
    before = np.full(N + NEIGHBOURS, -7.0, np.float32)
    whole = dev(before, opencl)
    out = whole.view(np.float32, (N,))
    with pytest.raises(runtime.Error) as e:
        checked.shift_right(dev(X, opencl), out, grid=(N + 127) // 128, block=128)
    assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT"
    assert (f"kernel 'shift_right' block ({(N - 1) // 128}, 0, 0): tensor 'Out' accessed outside its extents at "
            f"checked.py:{LINE}") in str(e.value)
    after = whole.numpy()
    np.testing.assert_array_equal(after[1:N], X[:N - 1])   # the accesses in bounds happened
    np.testing.assert_array_equal(after[N:], before[N:])   # the one past the end did not
    # the context goes on, and the record was the launch's own: the same module, in bounds
    checked.shift_right_guarded(dev(X, opencl), out, grid=(N + 127) // 128, block=128)
    checked.saxpy(1.0, dev(X, opencl), dev(X, opencl), dev(X, opencl), grid=(N + 127) // 128, block=128)


@pytest.mark.parametrize("n, block", [(1, 32), (4097, 128), (100_003, 256), (777, 100)])
def test_in_bounds_results_are_the_unchecked_ones(checked, opencl, n, block):  # noqa: F811
    X, Y = (RNG.standard_normal(n, dtype=np.float32) for _ in range(2))
    a = np.float32(0.625)
    results = []
    for mod in (runtime.load(compiled(SAXPY, False), opencl), checked):
        Out = dev(np.full(n, np.nan, np.float32), opencl)
        mod.saxpy(a, dev(X, opencl), dev(Y, opencl), Out, grid=(n + block - 1) // block, block=block)
        results.append(Out.numpy())
    np.testing.assert_array_equal(results[1], results[0])


def op_strings(spv: bytes) -> list[str]:
    words = struct.unpack(f"<{len(spv) // 4}I", spv)
    found, i = [], 5
    while i < len(words):
        count = words[i] >> 16
        if words[i] & 0xFFFF == 7:  # OpString
            found.append(spv[4 * (i + 2):4 * (i + count)].split(b"\0")[0].decode())
        i += count
    return found


def test_the_site_table_is_in_the_spirv():
    """docs/image-format.md: OpString "__tessera_fault_sites", then each site's kernel and report."""
    spv = image.read_image(compiled(SOURCE, True)).section(".tessera.code.spirv")
    strings = op_strings(spv)
    assert strings[0] == "__tessera_fault_sites" and len(strings) % 2 == 1
    sites = list(zip(strings[1::2], strings[2::2]))
    assert ("shift_right", f"tensor 'Out' accessed outside its extents at checked.py:{LINE}") in sites
    assert ("saxpy", "tensor 'Y' accessed outside its extents at checked.py:14") in sites   # X[i] is proven
    assert not any(k == "saxpy" and "'X'" in r for k, r in sites)
    assert op_strings(image.read_image(compiled(SOURCE, False)).section(".tessera.code.spirv")) == []


DEBUG_LOAD = textwrap.dedent("""
    import sys
    from tessera import opencl_icd, runtime
    opencl_icd.register()
    try:
        runtime.load(open(sys.argv[1], "rb").read(), runtime._runtime.Context("opencl"))
        print("loaded")
    except runtime.Error as e:
        print(e.status_name, e)
    """)


@pytest.mark.parametrize("checks", [False, True])
def test_debug_mode_loads_only_checked_spirv(opencl, tmp_path, checks):  # noqa: F811
    path = tmp_path / "saxpy.tessera"
    path.write_bytes(compiled(SAXPY, checks))
    p = subprocess.run([sys.executable, "-c", DEBUG_LOAD, str(path)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, TESSERA_DEBUG="1"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    if checks:
        assert p.stdout.strip() == "loaded", p.stdout
    else:
        assert p.stdout.startswith("TSR_ERROR_UNSUPPORTED") and "compiled without bounds checks" in p.stdout, p.stdout
