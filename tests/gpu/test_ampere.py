"""The sm_80 … sm_90 tensor-core GEMM (backends/ptx/gemm_sm80.py: mma.sync, cp.async, ldmatrix) on the GPU, from
Tessera source through tessera.executor and libtessera's CUDA backend, compiled for sm_80 (which every later
GPU runs) and for sm_90: bf16, f16 -> f32 and tf32 GEMMs at sizes that are not multiples of the 128x128 tile,
fused epilogues, and the SIMT GEMM the plan takes for K or N that are not whole 16-byte chunks — against float64
references of the rounded inputs.

Tolerances: bf16 results carry 8 significant bits, so 2^-8 relative to the largest output (plus fp32
accumulation error, far smaller); f32 results of f16 and tf32 products (each exact in fp32) 1e-5 relative to
the scale of the sums, the fp32 accumulation's error."""

import math

import numpy as np
import pytest

RNG = np.random.default_rng(8)


def randn(*shape, scale=1.0):
    """Standard normal float32 values (times `scale`): the functions take float32 arrays of values for their
    bf16 and tf32 parameters (docs/runtime.md, "Argument dtypes")."""
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.fixture(scope="module", params=["ampere_gemm", "ampere_gemm_sm90"])
def prog(request, cuda, program):
    from tessera import runtime
    arch = runtime.capabilities(cuda)["arch"]
    need = 90 if request.param.endswith("sm90") else 80
    if int(arch[3:].rstrip("a")) < need:
        pytest.skip(f"{request.param} needs compute capability {need // 10}.0 or later, this GPU is {arch}")
    return program(request.param)


def rounded(x, dt):
    """x rounded to `dt` (nearest even), as float64: what the kernels see of an f32 input."""
    from tessera.numerics.rounding import round_to
    return round_to(np.asarray(x, np.float64), dt)


def close(got, want, rel):
    scale = np.abs(want).max() + 1e-30
    err = np.abs(np.asarray(got, np.float64) - want).max() / scale
    assert err <= rel, f"max error {err:.3g} of the largest |value| {scale:.3g} exceeds {rel:.3g}"


@pytest.mark.parametrize("M, K, N", [(300, 136, 264), (1024, 1024, 1024), (129, 8, 520), (1, 16, 8), (77, 2056, 72)])
def test_gemm_bf16(prog, M, K, N):
    A, B = randn(M, K), randn(K, N)
    close(prog.gemm_bf16(A, B), rounded(A, "bf16") @ rounded(B, "bf16"), 2 ** -8)


def test_gemm_f16_with_f32_result(prog):
    A, B = (RNG.standard_normal(s).astype(np.float16) for s in ((257, 320), (320, 136)))
    close(prog.gemm_f16_f32(A, B), A.astype(np.float64) @ B.astype(np.float64), 1e-5)


@pytest.mark.parametrize("M, K, N", [(77, 100, 36), (513, 260, 1028), (128, 4, 128)])
def test_gemm_tf32(prog, M, K, N):
    A, B = randn(M, K), randn(K, N)
    close(prog.gemm_tf32(A, B), rounded(A, "tf32") @ rounded(B, "tf32"), 1e-5)


def test_fused_epilogues(prog):
    X, W, b = randn(200, 256), randn(256, 392, scale=1 / 16), randn(392)
    h = rounded(X, "bf16") @ rounded(W, "bf16") + rounded(b, "bf16")
    close(prog.linear_gelu(X, W, b), 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))), 2 ** -8)
    A, B, R = randn(96, 72), randn(72, 136), randn(96, 136)
    close(prog.scaled_residual(A, B, R), 0.5 * (rounded(A, "bf16") @ rounded(B, "bf16")) + rounded(R, "bf16"),
          2 ** -8)


def test_unaligned_rows_take_the_simt_gemm(prog):
    """K = 100 or N = 9 bf16 elements (200- and 18-byte rows) and N = 30 tf32 ones are not whole 16-byte chunks,
    which the kernel's copies move: the plan's SIMT GEMM alternative runs them (backends/simt_gemm.py: f32
    accumulation, one rounding). Before, the plan refused them at the call."""
    for M, K, N in ((64, 100, 64), (70, 64, 9)):
        A, B = randn(M, K), randn(K, N)
        close(prog.gemm_bf16(A, B), rounded(A, "bf16") @ rounded(B, "bf16"), 2 ** -8)
    A, B = randn(64, 32), randn(32, 30)
    close(prog.gemm_tf32(A, B), rounded(A, "tf32") @ rounded(B, "tf32"), 1e-5)
