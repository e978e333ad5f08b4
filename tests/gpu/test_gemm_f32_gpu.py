"""f32 GEMMs on the GPU (kernels.py's GEMM_F32, compiled for sm_80 and sm_90a): on FMA units by default
(backends/ptx/gemm_fma.py), with the tensor cores' epilogues, at extents that are not multiples of the tile nor
of 4, and batched; and on tf32 tensor cores where a function asks (input_precision="tf32": on sm_90a, K static,
wgmma's tf32 kind on Cᵀ = Bᵀ·Aᵀ, B's copy to [N, K] only where N is static and not a multiple of 4) — against
float64 references.

Tolerances: the FMA kernel rounds once a k (fma.rn.f32), so 1e-5 relative to the largest output covers K up to
a few thousand of standard normal operands (the error grows as sqrt(K)·2^-24 of the sums' scale). The tf32
kernel reads each operand's top 19 bits: its reference cuts the operands so (truncation, not rounding to
nearest — test_tf32_truncates tells them apart), then sums in f32 (1e-5 again).
"""

import math

import numpy as np
import pytest

RNG = np.random.default_rng(18)


@pytest.fixture(scope="module", params=["gemm_f32", "gemm_f32_sm90a"])
def prog(request, cuda, program):
    from tessera import runtime
    arch = runtime.capabilities(cuda)["arch"]
    if request.param.endswith("sm90a") and arch not in ("sm_90", "sm_90a"):
        pytest.skip(f"{request.param} runs on compute capability 9.0 only, this GPU is {arch}")
    return program(request.param)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(got, want, rel):
    scale = np.abs(want).max() + 1e-30
    err = np.abs(np.asarray(got, np.float64) - want).max() / scale
    assert err <= rel, f"max error {err:.3g} of the largest |value| {scale:.3g} exceeds {rel:.3g}"


def cut(x):
    """f32 values with the low 13 fraction bits cleared: what tf32 tensor cores read of them, as float64."""
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("M, K, N", [(1, 1, 1), (300, 136, 264), (129, 77, 130), (1024, 1024, 1024),
                                     (77, 2056, 71), (4096, 8, 4)])
def test_gemm(prog, M, K, N):
    A, B = randn(M, K), randn(K, N)
    got = prog.gemm(A, B)
    close(got, A.astype(np.float64) @ B, 1e-5)
    assert np.array_equal(prog.gemm(A, B), got)   # one thread a result, k ascending: the same bits each run


def test_epilogues(prog):
    X, W, b = randn(200, 96), randn(96, 130) / 8, randn(130)
    h = X.astype(np.float64) @ W + b
    close(prog.linear_gelu(X, W, b), 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))), 1e-5)
    A, B, R = randn(65, 48), randn(48, 33), randn(65, 33)
    close(prog.scaled_residual(A, B, R), 0.5 * (A.astype(np.float64) @ B) + R, 1e-5)


def test_batched(prog):
    A, B = randn(3, 70, 40), randn(3, 40, 90)
    close(prog.batched(A, B), A.astype(np.float64) @ B, 1e-5)


@pytest.mark.parametrize("M, K, N", [(300, 136, 264), (513, 260, 1028), (64, 30, 64), (50, 64, 37)])
def test_tf32(prog, M, K, N):
    """K and N multiples of 4 run on tensor cores; (64, 30, 64) and (50, 64, 37) on FMA units (exact then)."""
    A, B = randn(M, K), randn(K, N)
    want = cut(A) @ cut(B) if K % 4 == 0 and N % 4 == 0 else A.astype(np.float64) @ B
    close(prog.gemm_tf32(A, B), want, 1e-5)


@pytest.mark.parametrize("T, F", [(300, 132), (129, 70), (1000, 516)])
def test_tf32_static_k(prog, T, F):
    """K static (264): on sm_90a wgmma's tf32 kind on Cᵀ = Bᵀ·Aᵀ (gemm_sm90_tf32.py) where F is a multiple of 4,
    on sm_80 the mma.sync kernel there; F not a multiple of 4 (known at the launch) runs on FMA units (exact)."""
    X, W, b = randn(T, 264), randn(264, F) / 8, randn(F)
    tensor_cores = F % 4 == 0
    h = (cut(X) @ cut(W) if tensor_cores else X.astype(np.float64) @ W) + b
    close(prog.linear_tf32(X, W, b), 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))), 1e-5)


@pytest.mark.parametrize("M, N", [(130, 260), (65, 70), (4000, 4096)])
def test_tf32_residual(prog, M, N):
    """A scale and a residual add (indexed as C is) on tf32 products, M not a multiple of the tile; (4000, 4096)
    takes sm_90a's 256-row tile (the cost model's choice there), the others its 128-row one; N = 70 runs on FMA
    units."""
    A, B, R = randn(M, 136), randn(136, N), randn(M, N)
    prod = cut(A) @ cut(B) if N % 4 == 0 else A.astype(np.float64) @ B
    close(prog.residual_tf32(A, B, R), 0.5 * prod + R, 1e-5)


def test_tf32_batched(prog):
    A, B = randn(3, 70, 72), randn(3, 72, 92)
    close(prog.batched_tf32(A, B), cut(A) @ cut(B), 1e-5)


def test_tf32_static_n_not_a_multiple_of_4(prog, request):
    """N = 70 static: on sm_90a B copied to [N, K] for gemm_sm90.py's tf32 kernel (tensor cores); on sm_80 FMA units."""
    A, B = randn(129, 264), randn(264, 70)
    want = cut(A) @ cut(B) if "sm90a" in request.node.callspec.id else A.astype(np.float64) @ B
    close(prog.odd_n_tf32(A, B), want, 1e-5)


def test_tf32_bf16_result(prog):
    """A bf16 result, ReLU'd: pairs of adjacent columns rounded and stored together (8 significant bits: 2^-8
    relative to the largest output, as tests/gpu/test_ampere.py's bf16 results)."""
    A, B = randn(77, 96), randn(96, 132)
    close(prog.relu_bf16_tf32(A, B), np.maximum(cut(A) @ cut(B), 0), 2 ** -8)


def test_tf32_truncates(prog):
    """1 + 0.75·2^-10 lies between the tf32 values 1 and 1 + 2^-10: truncation reads 1, rounding to nearest
    1 + 2^-10, so 64 such products sum to 64 or to 64.0625 (the mma.sync kernel; FMA units give the exact sum)."""
    A = np.full((16, 64), 1 + 0.75 * 2 ** -10, np.float32)
    B = np.ones((64, 16), np.float32)
    assert np.array_equal(prog.gemm_tf32(A, B), np.full((16, 16), 64, np.float32))
    # the static-K function (wgmma on sm_90a): 264 products, gelu(264) = 264 in f32 (264.25 if rounded)
    X = np.full((16, 264), 1 + 0.75 * 2 ** -10, np.float32)
    got = prog.linear_tf32(X, np.ones((264, 16), np.float32), np.zeros(16, np.float32))
    assert np.array_equal(got, np.full((16, 16), 264, np.float32))
    # the other operand so (on sm_90a the one read from registers, Bᵀ's fragments)
    W = np.full((264, 16), 1 + 0.75 * 2 ** -10, np.float32)
    got = prog.linear_tf32(np.ones((16, 264), np.float32), W, np.zeros(16, np.float32))
    assert np.array_equal(got, np.full((16, 16), 264, np.float32))
    assert np.array_equal(prog.gemm(A, B), A.astype(np.float64) @ B)
