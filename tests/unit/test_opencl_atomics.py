"""The atomics of test_atomics.py on the OpenCL CPU runtime (SPIR-V: OpAtomicIAdd, OpAtomicSMax,
OpAtomicCompareExchange, a compare-and-swap loop for f32 add and max, OpMemoryBarrier), with the same checks:
exact histograms, tickets, scatter-adds, maxima and elections against numpy. Needs the OpenCL runtime (the `opencl`
fixture: skips without it, fails in CI where the test extra installs it)."""

import numpy as np
import pytest

from tessera import compiler, runtime
from tessera.options import CompileOptions

from test_atomics import CHECKS, KERNELS, check_out_of_bounds_atomic_faults
from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)


@pytest.fixture(scope="module")
def device(opencl):  # noqa: F811
    """launch(name, *arrays, grid=, block=) on the OpenCL device, the arrays copied there and back."""
    image = compiler.compile_source(KERNELS, "atomics.py", CompileOptions(target="spirv")).image
    mod = runtime.load(image, opencl)

    def launch(name, *arrays, grid, block):
        on_device = [runtime.DeviceArray.from_numpy(a, opencl) for a in arrays]
        getattr(mod, name)(*on_device, grid=grid, block=block)
        for a, d in zip(arrays, on_device):
            a[...] = d.numpy()
    return launch


@pytest.mark.parametrize("check", list(CHECKS))
def test_atomics_match_numpy(device, check):
    CHECKS[check](device)


def test_plain_stores_lose_counts(device):
    """The histogram with a load and a store in place of the atomic loses counts here too (so the exact counts
    above prove the SPIR-V atomics are atomic)."""
    n = 100_000
    X = np.random.default_rng(3).integers(0, 4, n).astype(np.int32)
    H = np.zeros(4, dtype=np.int32)
    device("plain_hist", X, H, grid=(n + 255) // 256, block=256)
    assert H.sum() < n


def test_out_of_bounds_atomic_faults_with_gpu_bounds_checks(opencl):  # noqa: F811
    image = compiler.compile_source(KERNELS, "atomics.py", CompileOptions(target="spirv", gpu_bounds_checks=True))
    mod = runtime.load(image.image, opencl)

    def launch(X, whole, n):
        on_device = runtime.DeviceArray.from_numpy(whole, opencl)
        try:
            mod.atomic_hist(runtime.DeviceArray.from_numpy(X, opencl), on_device.view(np.int32, (n,)), grid=1,
                            block=32)
        finally:
            whole[...] = on_device.numpy()
    check_out_of_bounds_atomic_faults(launch, runtime)
