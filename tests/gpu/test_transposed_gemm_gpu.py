"""sm_90a GEMMs reading an operand stored transposed (passes/fold_transposes.py: tessera.transpose_a/_b;
gemm_sm90.py: Aᵀ loaded MN-major with wgmma's transpose-A bit, Bᵀ K-major) on an H100/H200, for the four
layouts (A, Aᵀ) × (B, Bᵀ), batched, and with a fused epilogue, at sizes that are not multiples of the tiles
(TMA needs rows of a multiple of 16 bytes: M, N and K multiples of 8; other rows take the SIMT GEMM), against
torch.matmul on the GPU and a float64 reference of the rounded inputs.

Tolerances: bf16 results, 2^-8 of the largest |value| (one rounding to bf16, 8 significant bits, plus the fp32
accumulation's error); against torch's own bf16 GEMM (its rounding and summation order differ) 2^-7; f32
results of f16 operands 1e-5 of the largest (fp32 sums of exact products)."""

import math

import numpy as np
import pytest

RNG = np.random.default_rng(15)
SIZES = [(200, 136, 264), (1024, 1024, 1024), (72, 8, 520), (136, 4104, 64)]
LAYOUTS = {"nn": (False, False), "tn": (True, False), "nt": (False, True), "tt": (True, True)}


@pytest.fixture(scope="module")
def hopper(cuda):
    from tessera import runtime
    if not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a kernels need an H100/H200 (compute capability 9.0)")


def rounded(x, fmt="bf16"):
    from tessera.numerics.rounding import round_to
    return round_to(np.asarray(x, np.float64), fmt)


def close(got, want, rel):
    scale = np.abs(want).max() + 1e-30
    err = np.abs(np.asarray(got, np.float64) - want).max() / scale
    assert err <= rel, f"max error {err:.3g} of the largest |value| {scale:.3g} exceeds {rel:.3g}"


def torch_matmul(a, b):
    """torch.matmul of the bf16 operands on the GPU, as float64 (None where torch with CUDA is missing)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    ta, tb = (torch.from_numpy(np.ascontiguousarray(x, np.float32)).cuda().to(torch.bfloat16) for x in (a, b))
    return (ta @ tb).double().cpu().numpy()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("M, K, N", SIZES)
def test_layouts(program, hopper, layout, M, K, N):
    prog = program("hopper_gemm_transposed")
    trans_a, trans_b = LAYOUTS[layout]
    A, B = RNG.standard_normal((M, K)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    stored_a = np.ascontiguousarray(A.T) if trans_a else A
    stored_b = np.ascontiguousarray(B.T) if trans_b else B
    got = getattr(prog, layout)(stored_a, stored_b)
    close(got, rounded(A) @ rounded(B), 2 ** -8)
    ref = torch_matmul(A, B)
    if ref is not None:
        close(got, ref, 2 ** -7)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("M, K, N", [(70, 100, 9), (64, 64, 777), (72, 8, 36)])
def test_rows_not_16_bytes_take_the_simt_gemm(program, hopper, layout, M, K, N):
    """Rows TMA cannot move (K, N, or M of a stored Aᵀ, not a multiple of 8 bf16 elements): the plan's SIMT GEMM
    alternative (backends/simt_gemm.py), reading Aᵀ and Bᵀ as stored. Before: ArgumentError at the call."""
    prog = program("hopper_gemm_transposed")
    trans_a, trans_b = LAYOUTS[layout]
    A, B = RNG.standard_normal((M, K)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    stored_a = np.ascontiguousarray(A.T) if trans_a else A
    stored_b = np.ascontiguousarray(B.T) if trans_b else B
    got = getattr(prog, layout)(stored_a, stored_b)
    close(got, rounded(A) @ rounded(B), 2 ** -8)


def test_batched_f16_with_f32_result(program, hopper):
    prog = program("hopper_gemm_transposed")
    A = RNG.standard_normal((3, 136, 80)).astype(np.float16)    # [B, K, M]: Aᵀ stored
    B = RNG.standard_normal((3, 264, 136)).astype(np.float16)   # [B, N, K]: Bᵀ stored
    got = prog.batched_tt(A, B)
    want = np.swapaxes(A.astype(np.float64), 1, 2) @ np.swapaxes(B.astype(np.float64), 1, 2)
    close(got, want, 1e-5)


def test_transposed_lhs_with_fused_epilogue(program, hopper):
    prog = program("hopper_gemm_transposed")
    A, B, b = (RNG.standard_normal(s).astype(np.float32) for s in ((256, 200), (256, 392), (392,)))
    B /= 16
    h = rounded(A).T @ rounded(B) + rounded(b)
    gelu = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    close(prog.tn_bias_gelu(A, B, b), gelu, 2 ** -8)
