"""Bounds checks of PTX kernels on a GPU (passes/gpu_bounds_checks.py, runtime/src/cuda_fault.c): a kernel
compiled with them that writes one past the end of its tensor fails with TSR_ERROR_MEMORY_FAULT naming
kernel, tensor and line; the memory after the tensor is untouched, the CUDA context stays usable, and
in-bounds results are those of the unchecked kernel. Debug mode refuses PTX compiled without the checks.
(tests/c/test_cuda_fake.py runs the read-back path against a fake driver.)"""

import os
import subprocess
import sys

import numpy as np
import pytest

from kernels import SOURCES

RNG = np.random.default_rng(13)
N, NEIGHBOURS = 1000, 64
LINE = SOURCES["bounds_checked"][0].splitlines().index("        Out[i + 1] = X[i]") + 1


def dev(x, ctx):
    from tessera.runtime import DeviceArray
    return DeviceArray.from_numpy(x, ctx)


def report(block: int) -> str:
    return (f"kernel 'shift_right' block ({block}, 0, 0): tensor 'Out' accessed outside its extents at "
            f"bounds_checked.py:{LINE}")


@pytest.fixture
def shifted(cuda):
    """X, and Out: the first N floats of an allocation whose next NEIGHBOURS floats we watch."""
    X = RNG.standard_normal(N, dtype=np.float32)
    memory = np.full(N + NEIGHBOURS, -7.0, np.float32)
    whole = dev(memory, cuda)
    return X, dev(X, cuda), whole, whole.view(np.float32, (N,)), memory


def test_a_write_past_the_end_is_a_memory_fault_and_the_neighbours_are_untouched(load, cuda, shifted):
    from tessera import runtime
    X, x, whole, out, before = shifted
    mod = load("bounds_checked")
    with pytest.raises(runtime.Error) as e:
        mod.shift_right(x, out, grid=(N + 255) // 256, block=256)
    assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT"
    assert report((N - 1) // 256) in str(e.value)
    after = whole.numpy()
    np.testing.assert_array_equal(after[1:N], X[:N - 1])   # the accesses in bounds happened
    np.testing.assert_array_equal(after[N:], before[N:])   # the one past the end did not
    assert after[0] == before[0]
    # the context goes on: the same module, in bounds
    mod.shift_right_guarded(x, out, grid=(N + 255) // 256, block=256)
    np.testing.assert_array_equal(whole.numpy()[1:N], X[:N - 1])


def test_a_failed_check_on_a_stream_fails_its_synchronize(load, cuda, shifted):
    from tessera import runtime, stream
    X, x, whole, out, before = shifted
    mod = load("bounds_checked")
    s = stream.Stream(context=cuda)
    mod.shift_right(x, out, grid=(N + 127) // 128, block=128, stream=s)
    with pytest.raises(runtime.Error, match="failed a bounds check") as e:
        s.synchronize()
    assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT" and report((N - 1) // 128) in str(e.value)
    np.testing.assert_array_equal(whole.numpy()[N:], before[N:])
    s.synchronize()  # reported once


@pytest.mark.parametrize("n, block", [(1, 32), (4097, 128), (1_000_003, 1024), (777, 100)])
def test_in_bounds_results_are_the_unchecked_ones(load, cuda, n, block):
    X, Y = (RNG.standard_normal(n, dtype=np.float32) for _ in range(2))
    a = np.float32(0.625)
    results = []
    for name in ("saxpy", "bounds_checked"):
        Out = dev(np.full(n, np.nan, np.float32), cuda)
        load(name).saxpy(a, dev(X, cuda), dev(Y, cuda), Out, grid=(n + block - 1) // block, block=block)
        results.append(Out.numpy())
    np.testing.assert_array_equal(results[0], a * X + Y)
    np.testing.assert_array_equal(results[1], results[0])


DEBUG_HOST = """
import sys
from tessera import _runtime, runtime
ctx = _runtime.Context("cuda")
for path in sys.argv[1:]:
    try:
        runtime.load(open(path, "rb").read(), ctx)
        print("loaded")
    except runtime.Error as e:
        print(e.status_name, e)
"""


def test_debug_mode_refuses_unchecked_ptx(cuda, image_of, tmp_path):
    paths = []
    for name in ("saxpy", "bounds_checked"):
        paths.append(tmp_path / f"{name}.tessera")
        paths[-1].write_bytes(image_of(name))
    p = subprocess.run([sys.executable, "-c", DEBUG_HOST, *map(str, paths)], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, env=dict(os.environ, TESSERA_DEBUG="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    refused, loaded = p.stdout.splitlines()
    assert refused.startswith("TSR_ERROR_UNSUPPORTED") and "compiled without bounds checks" in refused
    assert loaded == "loaded"
