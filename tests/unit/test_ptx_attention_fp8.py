"""The sm_90a fp8 flash-attention kernel without a GPU (backends/ptx/attention_fp8_sm90.py): its spec's checks
and geometry, the order of Vᵀ's keys that matches P's 8-bit fragments, and ptxas's view of the kernels.

Running them needs an H100/H200: tests/gpu/test_attention_fp8_gpu.py."""

import re

import pytest

from tessera.backends.ptx import attention_fp8_sm90 as f8, attention_sm90


@pytest.mark.parametrize("kw, message", [({"head_dim": 64}, "head dimension 128"),
                                         ({"dtype": "fp8_e5m2"}, "fp8_e4m3"),
                                         ({"scale": 0.0}, "positive scale"),
                                         ({"lse": True}, "no log-sum-exp"),
                                         ({"block_n": 192}, "128 or 256 keys"),
                                         ({"block_m": 256}, "128 or 192 query rows"),
                                         ({"block_n": 256, "stages": 4}, "do not fit")])
def test_spec_refuses(kw, message):
    with pytest.raises(ValueError, match=message):
        f8.Sm90AttentionFp8Spec("a", **kw)


def test_spec_geometry():
    s = f8.Sm90AttentionFp8Spec("a", scale=0.1)
    assert (s.block_n, s.stages, s.out_dtype) == (128, 3, "bf16")
    # Q and K boxes of 128 one-byte columns; Vᵀ's box: 128 keys of the 128 head-dimension rows; O as bf16
    assert s.tensor_maps == "Q:0:128x128x1:128;K:1:128x128x1:128;V:2:128x128x1:128;O:3:64x64x1:128"
    # Q's 16 KiB plus the rest of O's 32 KiB staging, three stages of K and Vᵀ (16 KiB each), barriers, alignment
    assert s.smem_bytes == 32768 + 3 * 32768 + 8 * 7 + 1024


def test_spec_geometry_192_rows():
    """block_m=192: three consumer warpgroups, Q's box of 192 rows, O's staging twice Q's 24 KiB."""
    s = f8.Sm90AttentionFp8Spec("a", scale=0.1, block_m=192)
    assert (s.bm, s.consumers, s.threads) == (192, 3, 512)
    assert s.tensor_maps.startswith("Q:0:128x192x1:128;K:1:128x128x1:128;")
    assert s.smem_bytes == 2 * 24576 + 3 * 32768 + 8 * 7 + 1024
    text = f8.generate(s)
    assert "setmaxnreg.inc.sync.aligned.u32 160;" in text and "m64n128k32.f32.e4m3.e4m3" in text


def test_env_override(monkeypatch):
    """$TESSERA_SM90_ATTENTION_FP8 (benchmarks' variants) sets what the caller left at 0, refuses unknown keys."""
    monkeypatch.setenv(f8.ENV, "block_m=192,stages=2")
    assert (f8.Sm90AttentionFp8Spec("a").bm, f8.Sm90AttentionFp8Spec("a").stages) == (192, 2)
    assert f8.Sm90AttentionFp8Spec("a", stages=3).stages == 3
    monkeypatch.setenv(f8.ENV, "block_k=64")
    with pytest.raises(ValueError, match="no setting 'block_k'"):
        f8.Sm90AttentionFp8Spec("a")


def test_vt_loads_before_the_scale():
    """The Vᵀ kernel issues its bf16 load before reducing the amax partials to V's scale (their latencies
    overlap), then divides each element by the scale once (div.rn, the interpreter's rounding) before e4m3's
    rounding; the quantize kernel computes the scale first (loading first with four runs a thread was slower)."""
    text = f8.generate_vt("v", 128)
    loads = [m.start() for m in re.finditer(r"load <16 x bfloat>", text)]
    assert len(loads) == 1 and loads[0] < text.index("call i32 @llvm.nvvm.shfl.sync")
    assert text.count("fdiv float") == 16 + 1   # and the scale's max(amax, 2^-126) / 448
    quant = f8.generate_quant("q")
    assert quant.index("call i32 @llvm.nvvm.shfl.sync") < quant.index("load <16 x bfloat>")


def test_vt_order_is_the_fragment_order():
    # a permutation within each 16 keys
    for base in (0, 16, 48):
        assert sorted(f8.vt_order(base + i) for i in range(16)) == list(range(base, base + 16))
    # thread t's A-fragment bytes 4t … 4t+3 carry S's accumulator columns 2t, 2t+1, 8+2t, 9+2t
    assert [f8.vt_order(4 * 3 + e) for e in range(4)] == [6, 7, 14, 15]
    assert [f8.vt_order(16 + e) for e in range(4)] == [16, 17, 24, 25]


def test_kernel_text():
    text = f8.generate(f8.Sm90AttentionFp8Spec("a", scale=0.1, causal=True))
    assert "m64n128k32.f32.e4m3.e4m3" in text                     # S and P·V on the fp8 tensor cores
    # P rounded to e4m3: a thread's 64 probabilities of a block in 32 pairs, after the first block and in the loop
    assert text.count("cvt.rn.satfinite.e4m3x2.f32") == 2 * 32
    assert re.search(r"%O, ptr addrspace\(1\) %DS, i64 %BH, i64 %SQ, i64 %SK, i64 %SKP\)", text)
    # the bf16 kernel is generated as before: 16-bit products, no descales
    plain = attention_sm90.generate(attention_sm90.Sm90AttentionSpec("a", scale=0.1))
    assert "e4m3" not in plain and "%DS" not in plain and "m64n128k16.f32.bf16.bf16" in plain


def test_exp2_by_polynomial():
    """poly_every=4: every fourth exponential of the softmax on the FMA pipe, the rest on ex2.approx."""
    base = f8.generate(f8.Sm90AttentionFp8Spec("a", scale=0.1))
    poly = f8.generate(f8.Sm90AttentionFp8Spec("a", scale=0.1, poly_every=4))
    ex2 = "call float @llvm.nvvm.ex2.approx.ftz.f"
    # a thread's 64 probabilities a block, in the first block and the loop, and each row's rescale factor
    assert base.count(ex2) == 2 * (64 + 2) and poly.count(ex2) == 2 * (48 + 2)
    assert poly.count("1262485504") == 2 * 16



def _loop_checks(text: str) -> tuple[bool, bool]:
    """(late_wait's branch before the loop's P·V wait, after all 64 + 2 exponentials; early_rescale's second
    wgmma.fence, before P·V) in a kernel's key-block loop."""
    loop = text[text.index("\nckv:"):text.index("\nclast:")]
    at = loop.index("wgmma.wait_group.sync.aligned 1;")
    body = loop[at:loop.index("wgmma.wait_group.sync.aligned 0;", at)]
    late = "never" in body and "pvwait" in body
    assert not late or body.count("@llvm.nvvm.ex2.approx.ftz.f(") == 64 + 2
    return late, loop.count("wgmma.fence.sync.aligned") == 2


def test_late_wait_and_early_rescale_causal_only():
    """TUNED_CAUSAL: the causal kernel has late_wait (its never-taken branch before the loop's P·V wait; ptxas
    otherwise hoists that wait and the slot's release above the 64 exponentials, as in bf16: nvdisasm shows
    WARPGROUP.DEPBAR.LE gsb0, 0x0 before the loop's MUFU.EX2s) and early_rescale (O·α between the two issues);
    measured faster on an H200 causal, not otherwise (docs/performance.md, session 34). Not causal: neither."""
    causal = f8.Sm90AttentionFp8Spec("a", scale=0.1, causal=True)
    plain = f8.Sm90AttentionFp8Spec("a", scale=0.1)
    assert (causal.late_wait, causal.early_rescale, plain.late_wait, plain.early_rescale) == (1, 1, 0, 0)
    assert (causal.block_m, causal.block_n, causal.stages) == (plain.block_m, plain.block_n, plain.stages)
    assert _loop_checks(f8.generate(causal)) == (True, True)
    assert _loop_checks(f8.generate(plain)) == (False, False)
    # an explicit late_wait=0 is kept (-1 is TUNED's)
    assert f8.Sm90AttentionFp8Spec("a", scale=0.1, causal=True, late_wait=0).late_wait == 0


def test_late_wait_and_early_rescale_from_the_environment(monkeypatch):
    """late_wait and early_rescale (attention_sm90's switches) reach the fp8 spec through
    $TESSERA_SM90_ATTENTION_FP8 (benchmarks' variants): on for the non-causal kernel, off for the causal one."""
    monkeypatch.setenv(f8.ENV, "late_wait=1,early_rescale=1")
    s = f8.Sm90AttentionFp8Spec("a", scale=0.1)
    assert (s.late_wait, s.early_rescale) == (1, 1)
    assert _loop_checks(f8.generate(s)) == (True, True)
    monkeypatch.setenv(f8.ENV, "late_wait=0,early_rescale=0")
    s = f8.Sm90AttentionFp8Spec("a", scale=0.1, causal=True)
    assert (s.late_wait, s.early_rescale) == (0, 0)
    assert _loop_checks(f8.generate(s)) == (False, False)
