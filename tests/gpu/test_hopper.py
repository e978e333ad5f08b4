"""The sm_90a tensor-core kernels on an H100/H200, from Tessera source through tessera.executor and
libtessera's CUDA backend (TMA tensor maps encoded at launch): GEMMs with fused epilogues and flash attention,
at sizes that are not multiples of the tiles, against float64 references of the bf16-rounded inputs.

Tolerances: results are rounded to bf16 (8 significant bits), so 2^-8 relative to the largest output plus the
fp32 accumulation's error; f32 results of f16 GEMMs 1e-5 relative to the scale of the sums."""

import math

import numpy as np
import pytest

RNG = np.random.default_rng(7)


def randn(*shape, scale=1.0):
    """Standard normal float32 values (times `scale`): the functions take float32 arrays of values for their
    f32, bf16 and fp8 parameters (docs/runtime.md, "Argument dtypes")."""
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.fixture(scope="module")
def hopper(cuda):
    from tessera import runtime
    if not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a kernels need an H100/H200 (compute capability 9.0)")


def bf16(x):
    """x rounded to bf16 (nearest even), as float64: what the kernels see of an f32 input."""
    from tessera.numerics.rounding import round_to
    return round_to(np.asarray(x, np.float64), "bf16")


def close(got, want, rel):
    scale = np.abs(want).max() + 1e-30
    err = np.abs(np.asarray(got, np.float64) - want).max() / scale
    assert err <= rel, f"max error {err:.3g} of the largest |value| {scale:.3g} exceeds {rel:.3g}"


@pytest.mark.parametrize("M, K, N", [(300, 136, 264), (1024, 1024, 1024), (129, 8, 520)])
def test_gemm_bf16(program, hopper, M, K, N):
    prog = program("hopper_gemm")
    A, B = randn(M, K), randn(K, N)
    close(prog.gemm_bf16(A, B), bf16(A) @ bf16(B), 2 ** -8)


def test_gemm_bf16_192_wide_tiles(program, hopper, cuda):
    """3000 x 512 x 3000 on 132 SMs: the plan takes the 128x192 kernel (gemm_bf16__gemm0_n192: 384 tiles, 3 rounds;
    test_ptx_gemm.py checks the choice), its last tiles ragged in both M (3000 = 23 x 128 + 56) and N (3000 =
    15 x 192 + 120: the second store pass's 64-column box lies wholly past N there, and TMA clips it)."""
    from tessera import runtime
    if runtime.capabilities(cuda)["threads"] != 132:
        pytest.skip("the 192-wide tile is the plan's choice for this shape on 132 SMs (H100 SXM, H200)")
    prog = program("hopper_gemm")
    A, B = randn(3000, 512), randn(512, 3000)
    close(prog.gemm_bf16(A, B), bf16(A) @ bf16(B), 2 ** -8)


@pytest.mark.parametrize("M, K, N", [(300, 136, 264), (129, 8, 520), (1024, 1024, 1024), (2100, 256, 4000)])
def test_gemm_bf16_in_clusters(program, hopper, M, K, N):
    """gemm.py's kernels in clusters of two CTAs on vertically adjacent tiles, B's boxes multicast to both
    (TESSERA_SM90_GEMM_CLUSTER=2, compile_env.py). 300 rows are 3 tile rows: the last pair's second tile lies
    wholly past M (its A zeros, its stores clipped); 2100 x 4000 are 17 tile rows by 16 (of 256), 144 pairs
    striding over at most 66 clusters of a persistent grid; K = 8 is one partial K step."""
    prog = program("hopper_gemm_cluster")
    A, B = randn(M, K), randn(K, N)
    close(prog.gemm_bf16(A, B), bf16(A) @ bf16(B), 2 ** -8)


def test_gemm_epilogues_in_clusters(program, hopper):
    """Clusters of two CTAs with f32 results (plain stores; 257 rows: an odd 3 tile rows) and a fused epilogue."""
    prog = program("hopper_gemm_cluster")
    A, B = (RNG.standard_normal(s).astype(np.float16) for s in ((257, 320), (320, 136)))
    close(prog.gemm_f16_f32(A, B), A.astype(np.float64) @ B.astype(np.float64), 1e-5)
    X, W, b = randn(200, 256), randn(256, 392, scale=1 / 16), randn(392)
    h = bf16(X) @ bf16(W) + bf16(b)
    close(prog.linear_gelu(X, W, b), 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))), 2 ** -8)


def test_gemm_f16_with_f32_result(program, hopper):
    prog = program("hopper_gemm")
    A, B = (RNG.standard_normal(s).astype(np.float16) for s in ((257, 320), (320, 136)))
    close(prog.gemm_f16_f32(A, B), A.astype(np.float64) @ B.astype(np.float64), 1e-5)


def test_fused_epilogues(program, hopper):
    prog = program("hopper_gemm")
    X, W, b = randn(200, 256), randn(256, 392, scale=1 / 16), randn(392)
    h = bf16(X) @ bf16(W) + bf16(b)
    gelu = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    close(prog.linear_gelu(X, W, b), gelu, 2 ** -8)
    A, B, R = randn(96, 64), randn(64, 128), randn(96, 128)
    close(prog.scaled_residual(A, B, R), 0.5 * (bf16(A) @ bf16(B)) + bf16(R), 2 ** -8)


def test_mlp_block(program, hopper):
    """Two GEMM kernels in one plan: gelu(X·W1 + b1) rounded to bf16 between them, then ·W2 + b2."""
    prog = program("hopper_gemm")
    X, W1, W2 = randn(300, 256), randn(256, 1024, scale=1 / 16), randn(1024, 256, scale=1 / 32)
    b1, b2 = randn(1024), randn(256)
    h = bf16(X) @ bf16(W1) + bf16(b1)
    h = bf16(0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))))
    close(prog.mlp(X, W1, b1, W2, b2), h @ bf16(W2) + bf16(b2), 2 ** -7)


def close_fp8(got, A, B):
    """fp8 tensor cores sum the products of a K step (128 elements) with about 13 fraction bits (2e-4 of the
    largest |value| in one step, measured on an H200), the kernel sums the steps in fp32: each result is
    within 2^-11 of the sum of its products' magnitudes, |A|·|B| (a wrong product is off by O(1) of it)."""
    err = np.abs(np.asarray(got, np.float64) - A @ B)
    bound = 2 ** -11 * (np.abs(A) @ np.abs(B)) + 1e-30
    assert (err <= bound).all(), f"error {(err / bound).max():.3g} times the bound 2^-11 |A||B|"


@pytest.mark.parametrize("name, fmt", [("gemm_e4m3", "fp8_e4m3"), ("gemm_e5m2", "fp8_e5m2")])
@pytest.mark.parametrize("M, K, N", [(200, 272, 136), (130, 80, 45), (256, 512, 512), (128, 8192, 256)])
def test_fp8_gemm(program, hopper, name, fmt, M, K, N):
    """fp8 parameters one byte wide (the executor rounds and encodes float32 values), A read in place, B
    copied to [N, K] (any N, odd ones included), multiplied by wgmma's fp8 kind, returned in f32."""
    from tessera.numerics.rounding import round_to
    prog = program("hopper_fp8")
    A, B = round_to(RNG.standard_normal((M, K)) * 4, fmt), round_to(RNG.standard_normal((K, N)) * 4, fmt)
    close_fp8(getattr(prog, name)(A.astype(np.float32), B.astype(np.float32)), A, B)  # fp8 values, exact


def test_fp8_gemm_k_not_a_multiple_of_16_is_refused(program, hopper):
    """One-byte parameters are read by TMA in 16-byte rows: K = 77 (and 264) is refused at the launch, as
    torch._scaled_mm refuses it (an fp8 value a kernel makes is packed with K padded instead)."""
    with pytest.raises(Exception, match="K = 77 is not a multiple of 16"):
        program("hopper_fp8").gemm_e4m3(randn(130, 77), randn(77, 45))


def test_fp8_gemm_kinds_mix(program, hopper):
    from tessera.numerics.rounding import round_to
    prog = program("hopper_gemm")
    A, B = randn(192, 320), randn(320, 264)
    close_fp8(prog.gemm_e4m3_e5m2(A, B), round_to(A, "fp8_e4m3"), round_to(B, "fp8_e5m2"))
    close(prog.gemm_fp8(A, B), round_to(A, "fp8_e4m3") @ round_to(B, "fp8_e4m3"), 2 ** -8)


def test_fp8_gemm_batched_and_epilogue(program, hopper):
    from tessera.numerics.rounding import round_to
    prog = program("hopper_fp8")
    A, B = (round_to(RNG.standard_normal(s), "fp8_e4m3") for s in ((3, 70, 96), (3, 96, 136)))
    got = prog.batched_e4m3(A.astype(np.float32), B.astype(np.float32))  # fp8 values, exact
    for i in range(3):
        close_fp8(got[i], A[i], B[i])
    # the epilogue runs on the fp32 accumulator, as the bf16 kernels' does; one rounding to bf16 at the end
    X, W = round_to(RNG.standard_normal((150, 64)), "fp8_e4m3"), round_to(RNG.standard_normal((64, 264)) * 0.2, "fp8_e4m3")
    b = randn(264)
    h = X @ W + bf16(b)
    got = prog.linear_gelu_e4m3(X.astype(np.float32), W.astype(np.float32), b)  # fp8 values, exact
    close(got, 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))), 2 ** -8)


@pytest.mark.parametrize("M, K, N", [(192, 320, 264), (1100, 512, 1000)])
def test_fp8_gemm_in_clusters(program, hopper, M, K, N):
    """fp8 kernels in clusters of two CTAs: B [N, K] (packed, or a stored Bt read in place) split into two
    boxes of 64 K-rows, one from each CTA, multicast to both. 1100 rows: 9 tile rows (odd), 40 pairs; the scaled
    GEMM's sa·sb in the epilogue."""
    from tessera.numerics.rounding import round_to
    prog = program("hopper_gemm_cluster")
    A, B = randn(M, K), randn(K, N)
    close_fp8(prog.gemm_e4m3_e5m2(A, B), round_to(A, "fp8_e4m3"), round_to(B, "fp8_e5m2"))
    close(prog.gemm_fp8(A, B), round_to(A, "fp8_e4m3") @ round_to(B, "fp8_e4m3"), 2 ** -8)
    sa, sb = np.array(0.5, np.float32), np.array(0.25, np.float32)
    Aq, Bt = round_to(A, "fp8_e4m3"), round_to(B.T.copy(), "fp8_e4m3")
    got = prog.gemm_fp8_scaled(Aq.astype(np.float32), Bt.astype(np.float32), sa, sb)
    close(got, (Aq @ Bt.T) * (0.5 * 0.25), 2 ** -8)


def close_fp8_bf16(got, want, magnitudes):
    """An fp8 GEMM's bf16 results: each within close_fp8's bound 2^-11 |A|·|B| (`magnitudes`) of the exact
    `want`, plus its rounding to bf16 (2^-9 of |want|; 2^-8 allowed)."""
    err = np.abs(np.asarray(got, np.float64) - want)
    bound = 2 ** -8 * np.abs(want) + 2 ** -11 * magnitudes + 1e-30
    assert (err <= bound).all(), f"error {(err / bound).max():.3g} times the bound 2^-8 |C| + 2^-11 |A||B|"


@pytest.mark.parametrize("image", ["hopper_gemm", "hopper_gemm_fp8_wide", "hopper_gemm_fp8_wide_rs",
                                   "hopper_gemm_fp8_promote1"])
@pytest.mark.parametrize("M, K, N", [(192, 320, 264), (1100, 512, 1000), (130, 80, 40), (128, 8192, 512),
                                     (2100, 256, 4200)])
def test_fp8_gemm_wide_tiles(program, hopper, image, M, K, N):
    """fp8 GEMMs with bf16 results in 128x256 tiles: each K step's product in two halves of N, each added to its
    half of the fp32 sums. Ragged M, N (1000: a last tile of 232 columns, past its first half; 264: 8 columns into
    a second tile; 40: inside the first half, bf16 rows being TMA's 16-byte units) and K (320 and 80: a last step
    of 64 or 80 of 128); K = 8192: 64 steps, where summing in the tensor cores' own precision would exceed the bound;
    2100x4200: 17x17 = 289 tiles, more than an H100's or H200's 132 SMs (the persistent loop's later tiles).
    The scaled GEMM's sa·sb in the epilogue. gemm_e4m3_e5m2's f32 results keep 128-wide tiles. hopper_gemm: the
    default (128x256 for 16-bit results, two K steps (256 elements) summed in the product before each promotion:
    K = 320 a pair, then an odd last step; K = 8192 32 pairs); `_wide`: asked for (TESSERA_SM90_GEMM_FP8_BN=256);
    `_rs`: with A read into registers once a K step (=256rs, promoted every step); `_promote1`: the default tiles
    promoting every K step (TESSERA_SM90_GEMM_FP8_PROMOTE=1), within the same bounds."""
    from tessera.numerics.rounding import round_to
    prog = program(image)
    A, B = randn(M, K), randn(K, N)
    Aq, Bq = round_to(A, "fp8_e4m3"), round_to(B, "fp8_e4m3")
    close_fp8_bf16(prog.gemm_fp8(A, B), Aq @ Bq, np.abs(Aq) @ np.abs(Bq))
    close_fp8(prog.gemm_e4m3_e5m2(A, B), Aq, round_to(B, "fp8_e5m2"))
    sa, sb = np.array(0.5, np.float32), np.array(0.25, np.float32)
    Bt = round_to(B.T.copy(), "fp8_e4m3")
    got = prog.gemm_fp8_scaled(Aq.astype(np.float32), Bt.astype(np.float32), sa, sb)
    close_fp8_bf16(got, (Aq @ Bt.T) * (0.5 * 0.25), (np.abs(Aq) @ np.abs(Bt.T)) * (0.5 * 0.25))


def test_batched_gemm(program, hopper):
    prog = program("hopper_gemm")
    A, B = randn(3, 130, 72), randn(3, 72, 264)
    close(prog.batched(A, B), bf16(A) @ bf16(B), 2 ** -8)


def test_rows_tma_cannot_read_take_the_simt_gemm(program, hopper):
    """N = 100 bf16 columns are 200-byte rows: not a multiple of 16 bytes, so no TMA map describes B; the plan's
    launch-time alternative runs the SIMT GEMM instead (it was refused at the call before 18c5ab3)."""
    prog = program("hopper_gemm")
    A, B = randn(64, 64), randn(64, 100)
    close(prog.gemm_bf16(A, B), bf16(A) @ bf16(B), 2 ** -8)


def reference_attention(Q, K, V, scale, causal):
    s = np.einsum("bhsd,bhtd->bhst", Q, K) * scale
    if causal:
        s = np.where(np.arange(s.shape[-1])[None, :] > np.arange(s.shape[-2])[:, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhst,bhtd->bhsd", p / p.sum(-1, keepdims=True), V)


@pytest.mark.parametrize("name, d, scale, causal", [("attention_d128", 128, 128 ** -0.5, False),
                                                     ("causal_d128", 128, 128 ** -0.5, True),
                                                     ("attention_d64", 64, 0.125, False),
                                                     ("causal_d64", 64, 0.125, True)])
@pytest.mark.parametrize("S, T", [(200, 200), (77, 300), (300, 77), (1024, 1024)])
def test_flash_attention(program, hopper, name, d, scale, causal, S, T):
    prog = program("hopper_attention")
    Q, K, V = randn(2, 3, S, d), randn(2, 3, T, d), randn(2, 3, T, d)
    want = reference_attention(bf16(Q), bf16(K), bf16(V), scale, causal)
    # P is rounded to bf16 before its product with V (as FlashAttention does): 2^-8 of each weight
    close(getattr(prog, name)(Q, K, V), want, 2 ** -7)


@pytest.mark.parametrize("name, d, scale, causal", [("attention_d128", 128, 128 ** -0.5, False),
                                                     ("causal_d128", 128, 128 ** -0.5, True),
                                                     ("attention_d64", 64, 0.125, False),
                                                     ("causal_d64", 64, 0.125, True)])
@pytest.mark.parametrize("S, T", [(1000, 1000), (777, 1029)])
def test_flash_attention_more_tiles_than_sms(program, hopper, name, d, scale, causal, S, T):
    """32 (batch, head)s of 5 … 8 query tiles each: more tiles than an H100's or H200's 132 SMs, so that where
    the kernel's CTAs loop over tiles (attention_sm90's `persistent`) each takes several, the K/V ring and the
    Q buffer's barriers running on from one to the next (and without it, a CTA a tile as before)."""
    prog = program("hopper_attention")
    Q, K, V = randn(2, 16, S, d), randn(2, 16, T, d), randn(2, 16, T, d)
    q, k, v = bf16(Q), bf16(K), bf16(V)
    s = (q @ k.swapaxes(-1, -2)) * scale      # BLAS products (np.einsum's would take minutes at this size)
    if causal:
        s = np.where(np.arange(T)[None, :] > np.arange(S)[:, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    close(getattr(prog, name)(Q, K, V), (p / p.sum(-1, keepdims=True)) @ v, 2 ** -7)
