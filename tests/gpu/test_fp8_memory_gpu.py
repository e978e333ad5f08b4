"""fp8 one byte wide on a GPU (docs/language.md, "fp8 in memory"): tests/unit/fp8_memory_programs.py's kernels,
compiled for ptx sm_80 (integer conversions) and sm_90a (cvt.rn.satfinite / cvt.rn.f16x2), narrow the f32 and
f64 sweep to the same e4m3/e5m2 bytes as the CPU image, widen all 256 bytes to the same f32 bits, and the
Graph IR function's one-byte parameter and result give the CPU's bytes and bits, and a quantize feeding a
matmul (issue 17: one byte into sm_90a's wgmma GEMM, the f16 container into sm_80's mma.sync) gives the CPU's
bytes and its sums within the fp8 tensor cores' rounding. The CPU image is held equal to the interpreter's
rounding by tests/unit/test_fp8_memory.py and tests/unit/test_fp8_one_byte_gemm.py. An f32 NaN is compared
as a NaN: its sign and payload are the hardware's (NVIDIA's arithmetic and cvt write 0x7FFFFFFF, x86 keeps the
operand's)."""

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


def qgemm_inputs(name: str):
    """X and W (qgemm_t: Wᵀ) over most of e4m3's and e5m2's ranges after the scales (X / sx to about 300,
    W / sw to 2^10), with M and N not multiples of the tiles."""
    rng = np.random.default_rng(1717)
    x = (rng.standard_normal((300, 208)) * 3).astype(np.float32)
    w = (rng.standard_normal((208, 136)) * 2).astype(np.float32)
    return x, (w.T.copy() if name == "qgemm_t" else w), np.array(0.01, np.float32), np.array(0.002, np.float32)


def run_qgemm(image: bytes, ctx, name: str):
    """`name` of `image` on `ctx` (None: the host): the quantized X's bytes and the product, as numpy arrays."""
    from tessera import executor, runtime
    f = executor.load(image, ctx).function(name)
    q, y = f(*(runtime.DeviceArray.from_numpy(a, ctx) for a in qgemm_inputs(name)))
    return q.numpy(), y.numpy()


@pytest.mark.parametrize("name", ["qgemm", "qgemm_t"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_quantize_feeding_a_matmul_gives_the_cpus_bytes_and_sums(cuda, arch, name):
    """sm_90a multiplies the quantizing kernels' bytes on wgmma's e4m3 x e5m2 kind (no packing; qgemm_t's
    transposed B read in place), sm_80 the f16 containers on mma.sync; the CPU image widens the bytes in its
    f32 GEMM. The quantized bytes are
    equal; the sums within the fp8 tensor cores' rounding on sm_90a (2^-11 of the sum of the products'
    magnitudes, as test_hopper.close_fp8) and f32 summation order on sm_80."""
    from tessera import runtime
    from tessera.numerics.rounding import fp8_bits, fp8_values
    if arch == "sm_90a" and not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("sm_90a code needs an sm_90 GPU")
    got_q, got = run_qgemm(_image(fp8_memory_gpu.image_name(arch), arch), cuda, name)
    want_q, want = run_qgemm(_image(fp8_memory_gpu.image_name("cpu"), "cpu"), None, name)
    assert want_q.dtype == np.uint8
    if arch == "sm_90a":   # returned as the bytes the GEMM read
        assert got_q.dtype == np.uint8
        _same(got_q, want_q, f"{arch} {name}[0]")
    else:                  # the f16 container both the GEMM and the caller read: the same values
        got_q = got_q.view(np.float16) if got_q.dtype == np.uint16 else got_q
        np.testing.assert_array_equal(got_q.astype(np.float32), fp8_values(want_q, "fp8_e4m3").astype(np.float32))
    _, w, _, sw = qgemm_inputs("qgemm")
    a = fp8_values(want_q, "fp8_e4m3")
    b = fp8_values(fp8_bits((w / sw).astype(np.float64), "fp8_e5m2"), "fp8_e5m2")
    # both sides' f32 sums of 208 exact products (n·u each), plus sm_90a's 13-bit step sums
    rel = 2 * 208 * 2.0 ** -24 + (2.0 ** -11 if arch == "sm_90a" else 0)
    bound = rel * (np.abs(a) @ np.abs(b)) + 1e-30
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert (err <= bound).all(), f"{arch} {name}: error {(err / bound).max():.3g} times the bound"
