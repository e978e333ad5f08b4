"""int4 on a GPU (kernels.py's quantize_i4: tests/unit/quantize_i4_programs.py, compiled for ptx sm_80 and for
the CPU): quantize per tensor, channel, row and block into i4 bytes (two a byte, element 2j in the low nibble),
dequantize of those bytes (f32 and bf16 results) and the round trip give the GPU the same bytes and bits as
the CPU image, which tests/unit/test_quantize_i4.py holds equal to the interpreter and to numpy's definition.
No target has int4 units: the packing and unpacking are the shifts the schedule stage writes (docs/language.md,
"Quantization")."""

import numpy as np
import pytest

NAME = "quantize_i4"


@pytest.fixture(scope="module")
def both(cuda, image_of, cpu_image_of):
    from tessera import executor
    return executor.load(image_of(NAME), cuda), executor.load(cpu_image_of(NAME))


def _same(name: str, gpu_out, cpu_out) -> None:
    gpu_out = gpu_out if isinstance(gpu_out, tuple) else (gpu_out,)
    cpu_out = cpu_out if isinstance(cpu_out, tuple) else (cpu_out,)
    for k, (g, c) in enumerate(zip(gpu_out, cpu_out, strict=True)):
        g, c = np.asarray(g), np.asarray(c)
        assert g.dtype == c.dtype and g.shape == c.shape, (name, k, g.dtype, c.dtype, g.shape, c.shape)
        bits = {1: np.uint8, 2: np.uint16, 4: np.uint32}[g.dtype.itemsize]
        np.testing.assert_array_equal(g.view(bits), c.view(bits), err_msg=f"{name}[{k}]: GPU against CPU")


def _inputs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, 32)) * 3).astype(np.float32)
    x.flat[:8] = [1.25, -1.25, 0.25, -0.75, 1e6, -1e6, 3.75, -0.0]   # ties, saturation, a signed zero
    scales = (np.array(0.5, np.float32), rng.uniform(0.2, 1.0, 32).astype(np.float32),
              rng.uniform(0.2, 1.0, n).astype(np.float32), rng.uniform(0.2, 1.0, (n, 4)).astype(np.float32))
    return x, scales


# 65537 rows: the packing's row kernel has 32·65537/2/4 blocks of work, past the 65535 a grid dimension holds
# (they loop over the capped grid; the launch was refused before)
@pytest.mark.parametrize("n", [6, 1000, 65537])
def test_quantize_gives_the_cpus_bytes(both, n):
    gpu, cpu = both
    x, scales = _inputs(n, n)
    _same("quantize4", gpu.quantize4(x, *scales), cpu.quantize4(x, *scales))


@pytest.mark.parametrize("n", [6, 4097])
def test_dequantize_and_round_trip_give_the_cpus_bits(both, n):
    gpu, cpu = both
    x, (s, c, _, b) = _inputs(n, 7 * n)
    q = np.random.default_rng(n).integers(0, 256, (n, 16)).astype(np.uint8)   # every nibble pair
    _same("dequantize4", gpu.dequantize4(q, s, c, b), cpu.dequantize4(q, s, c, b))
    _same("round_trip", gpu.round_trip(x, b), cpu.round_trip(x, b))
