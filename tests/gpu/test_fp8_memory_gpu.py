"""fp8 one byte wide on a GPU (docs/language.md, "fp8 in memory"): tests/unit/fp8_memory_programs.py's kernels,
compiled for ptx sm_80 (integer conversions) and sm_90a (cvt.rn.satfinite / cvt.rn.f16x2), narrow the f32 and
f64 sweep to the same e4m3/e5m2 bytes as the CPU image, widen all 256 bytes to the same f32 bits, and the
Graph IR function's one-byte parameter and result give the CPU's bytes and bits. The CPU image is held equal to
the interpreter's rounding by tests/unit/test_fp8_memory.py. An f32 NaN is compared as a NaN: its sign and
payload are the hardware's (NVIDIA's arithmetic and cvt write 0x7FFFFFFF, x86 keeps the operand's)."""

import numpy as np
import pytest

import fp8_memory_gpu
from conftest import _images

_image = _images(fp8_memory_gpu.compile_image)


def _same(got, want, what: str) -> None:
    """Equal bytes; for floats equal bits, a NaN where the other has a NaN."""
    bits = {1: np.uint8, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaNs")
        got, want = np.where(nan, 0, got), np.where(nan, 0, want)
    np.testing.assert_array_equal(got.view(bits), want.view(bits), err_msg=what)


def _run(mod, ctx, name, *arrays):
    from tessera import runtime
    n = arrays[0].shape[0]
    args = [runtime.DeviceArray.from_numpy(a, ctx) if ctx is not None else a for a in arrays]
    mod.kernel(name)[((n + 127) // 128,), (128,)](*args)
    return [a.numpy() if ctx is not None else a for a in args]


@pytest.fixture(scope="module")
def cpu():
    from tessera import runtime
    return runtime.load(_image(fp8_memory_gpu.image_name("cpu"), "cpu"))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_kernels_give_the_cpus_bytes(cuda, cpu, arch):
    from tessera import runtime
    if arch == "sm_90a" and not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("sm_90a code needs an sm_90 GPU")
    gpu = runtime.load(_image(fp8_memory_gpu.image_name(arch), arch), cuda)
    p = fp8_memory_gpu.programs()
    x = p.sweep()
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    b = np.arange(256, dtype=np.uint8)
    cases = [("narrow", (x, np.zeros(x.size, np.uint8), np.zeros(x.size, np.uint8))),
             ("narrow64", (x64, np.zeros(x.size, np.uint8), np.zeros(x.size, np.uint8))),
             ("widen", (b, b.copy(), np.zeros(256, np.float32), np.zeros(256, np.float32))),
             ("rounded", (x, np.zeros_like(x), np.zeros_like(x)))]
    for name, arrays in cases:
        got = _run(gpu, cuda, name, *[a.copy() for a in arrays])
        want = _run(cpu, None, name, *[a.copy() for a in arrays])
        for k, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{arch} {name}[{k}]")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_one_byte_parameter_and_result_give_the_cpus_bytes(cuda, arch):
    from tessera import executor, runtime
    from tessera.numerics.rounding import fp8_bits
    if arch == "sm_90a" and not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("sm_90a code needs an sm_90 GPU")
    gpu = executor.load(_image(fp8_memory_gpu.image_name(arch), arch), cuda).function("q8")
    host = executor.load(_image(fp8_memory_gpu.image_name("cpu"), "cpu")).function("q8")
    x = fp8_memory_gpu.programs().sweep()
    x = x[:x.size // 64 * 64].reshape(-1, 64)
    e = fp8_bits(np.nan_to_num(x[::-1], nan=1.0).astype(np.float64), "fp8_e5m2")
    with np.errstate(invalid="ignore", over="ignore"):
        got = gpu(runtime.DeviceArray.from_numpy(x, cuda), runtime.DeviceArray.from_numpy(e, cuda))
        want = host(runtime.DeviceArray.from_numpy(x, None), runtime.DeviceArray.from_numpy(e, None))
    assert got[0].dtype == np.uint8 and want[0].dtype == np.uint8
    _same(got[0].numpy(), want[0].numpy(), f"{arch} q8[0]")
    _same(got[1].numpy(), want[1].numpy(), f"{arch} q8[1]")
