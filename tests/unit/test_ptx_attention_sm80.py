"""The sm_80 flash-attention kernel (backends/ptx/attention_sm80.py: mma.sync, FlashAttention-2's schedule)
without a GPU: what the generator accepts, its numerics on the NVPTX emulator (tests/unit/nvptx_emulator.py:
the LLVM IR as generated, every thread of a CTA in lock step, cp.async landing at its wait, bank conflicts
counted), what Graph IR flash_attention lowers to on sm_80 with PTXOptions.attention_sm80 on (the default)
and off (TESSERA_ATTENTION_SM80=0: two GEMMs and a softmax), and ptxas's view.

Tolerances, relative to the largest |value| of O: P is rounded to the operand dtype before its product with V
(as FlashAttention does) and O to the dtype: 2^-7 in bf16, 2^-9 in f16 (tests/gpu/test_attention_sm80_gpu.py's,
which runs the kernel on a GPU)."""

import numpy as np
import pytest

import nvptx_emulator as emu
from tessera import compiler, image
from tessera.backends.ptx import attention_sm80, ptxas
from tessera.options import CompileOptions

TOL = {"bf16": 2 ** -7, "f16": 2 ** -9}
SRC = """
@function
def f(Q: tensor[{dt}, "B", "S", {d}], K: tensor[{dt}, "B", "T", {d}], V: tensor[{dt}, "B", "T", {d}]):
    return op.flash_attention(Q, K, V, causal=True, scale=0.125)
"""


@pytest.mark.parametrize("kw, message", [({"head_dim": 96}, "head dimension 64 or 128"),
                                         ({"dtype": "f32"}, "bf16 or f16"),
                                         ({"scale": 0.0}, "positive scale"),
                                         ({"block_m": 32}, "blocks of 64 or 128 queries"),
                                         ({"block_m": 64, "warps": 8}, "16 or 32 a warp"),
                                         ({"block_n": 48}, "32, 64 or 128 keys"),
                                         ({"arch": "sm_90a"}, "targets sm_80"),
                                         ({"arch": "sm_86", "block_m": 128, "block_n": 128, "warps": 4},
                                          "99 KiB a block")])
def test_spec_refuses(kw, message):
    with pytest.raises(ValueError, match=message):
        attention_sm80.Sm80AttentionSpec("a", **kw)


def test_spec_geometry():
    s = attention_sm80.Sm80AttentionSpec("a", head_dim=128)
    # the defaults: 128 query rows on 8 warps (one m16 tile each), 64-key blocks, Q then two K and two V buffers
    assert (s.block_m, s.block_n, s.warps, s.m_tiles, s.threads) == (128, 64, 8, 1, 256)
    assert s.smem_bytes == 128 * 256 + 4 * 64 * 256
    d64 = attention_sm80.Sm80AttentionSpec("a", head_dim=64, block_m=128, warps=4)
    assert (d64.block_n, d64.m_tiles, d64.smem_bytes) == (128, 2, 128 * 128 + 4 * 128 * 128)


def _run(spec, S, T, BH=2, seed=0):
    """(the kernel's O on the emulator, the float64 reference of the rounded inputs, the kernel)."""
    rng = np.random.default_rng(seed)
    d, dt = spec.head_dim, spec.dtype

    def operand(n):
        x = rng.standard_normal((BH, n, d)).astype(np.float32)
        bits = emu.bf16_bits(x) if dt == "bf16" else x.astype(np.float16).view(np.uint16)
        return bits, emu.f32_of(bits, dt).astype(np.float64)
    (qb, q), (kb, k), (vb, v) = operand(S), operand(T), operand(T)
    out = np.zeros((BH, S, d), np.uint16)
    kernel = emu.Kernel(attention_sm80.generate(spec))
    kernel.launch([qb, kb, vb, out, BH, S, T], (-(-S // spec.block_m), BH, 1), (spec.threads, 1, 1),
                  spec.smem_bytes)
    s = np.einsum("bqd,bkd->bqk", q, k) * spec.scale
    if spec.causal:
        s = np.where(np.arange(T)[None, None, :] > np.arange(S)[None, :, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return emu.f32_of(out, dt), (p / p.sum(-1, keepdims=True)) @ v, kernel


@pytest.mark.parametrize("d, causal, dt, S, T, blocks", [
    (128, False, "bf16", 70, 90, {}),                 # one key block, partly masked; Q rows past the end
    (128, True, "bf16", 150, 260, {}),                # causal across CTAs, the last key block masked
    (64, False, "f16", 300, 77, {}),
    (64, True, "bf16", 129, 200, {}),
    (128, False, "f16", 1, 65, {}),                   # a single query row
    (128, True, "bf16", 130, 200, {"block_m": 128, "block_n": 64, "warps": 4}),   # two m tiles a warp: Q reread
    (64, True, "f16", 65, 65, {"block_m": 64, "block_n": 32, "warps": 4}),
])
def test_emulated_numerics(d, causal, dt, S, T, blocks):
    spec = attention_sm80.Sm80AttentionSpec("k", head_dim=d, causal=causal, scale=d ** -0.5, dtype=dt, **blocks)
    got, want, kernel = _run(spec, S, T)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= TOL[dt], f"max error {err:.3g} of the largest |value| exceeds {TOL[dt]:.3g}"
    # the swizzle: no ldmatrix phase or copy meets a bank twice
    assert kernel.conflicts == {"ldmatrix": 0, "ld.shared": 0, "cp.async": 0}


@pytest.mark.parametrize("d, causal, dt, S, T", [(64, True, "bf16", 70, 70), (128, False, "f16", 40, 90)])
def test_emulated_seq_heads_match_the_heads_copied(d, causal, dt, S, T):
    """`seq_heads`: Q, K, V and O [B, S, H, D] read and written at their strides (passes/fold_transposes.
    attention) give bit for bit what the kernel gives on the heads copied to [B·H, S, D]."""
    B, H = 2, 3
    rng = np.random.default_rng(5)

    def bits(n):
        x = rng.standard_normal((B, n, H, d)).astype(np.float32)
        return emu.bf16_bits(x) if dt == "bf16" else x.astype(np.float16).view(np.uint16)
    q, k, v = bits(S), bits(T), bits(T)
    outs = []
    for seq_heads in (True, False):
        spec = attention_sm80.Sm80AttentionSpec("k", head_dim=d, causal=causal, scale=d ** -0.5, dtype=dt,
                                                seq_heads=seq_heads)
        ins = [q, k, v] if seq_heads else [np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(B * H, -1, d)
                                           for x in (q, k, v)]
        out = np.zeros((B, S, H, d) if seq_heads else (B * H, S, d), np.uint16)
        extents = [B, S, H, T] if seq_heads else [B * H, S, T]
        emu.Kernel(attention_sm80.generate(spec)).launch(ins + [out] + extents, (-(-S // spec.block_m), B * H, 1),
                                                         (spec.threads, 1, 1), spec.smem_bytes)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1].reshape(B, H, S, d).transpose(0, 2, 1, 3))


def _compile(src: str, monkeypatch, switch: str | None, arch: str = "sm_80"):
    """Compiles with TESSERA_ATTENTION_SM80 set to `switch`, or unset (the default) where None."""
    if switch is None:
        monkeypatch.delenv("TESSERA_ATTENTION_SM80", raising=False)
    else:
        monkeypatch.setenv("TESSERA_ATTENTION_SM80", switch)
    return compiler.compile_source(src, "user.py", CompileOptions(target="ptx", arch=arch))


@pytest.mark.parametrize("dt, d, switch, arch", [("bf16", 64, None, "sm_80"), ("bf16", 128, None, "sm_86"),
                                                 ("f16", 64, "1", "sm_89"), ("f16", 128, None, "sm_80")])
def test_lowering_takes_the_kernel_by_default(monkeypatch, dt, d, switch, arch):
    result = _compile("from tessera import bf16, f16, function, op, tensor\n" + SRC.format(dt=dt, d=d), monkeypatch,
                      switch, arch)
    plan = result.metadata["plans"]["f"]
    assert plan["fallbacks"] == []
    (step,) = plan["steps"]
    spec = attention_sm80.Sm80AttentionSpec("f", head_dim=d)
    assert step["kernel"] == "f__attention0" and step["block"] == [spec.threads, 1, 1]
    assert step["grid"] == [f"ceil(SQ/{spec.block_m})", "BH", "1"] and step["smem"] == spec.smem_bytes
    (k,) = [k for k in image.read_image(result.image).kernels if k.name == "f__attention0"]
    assert [a.name for a in k.args] == ["Q", "K", "V", "O", "BH", "SQ", "SK"]
    assert k.props["attention.causal"] == "true" and k.props["tile.K"] == str(d)
    if ptxas.find():   # assembled while compiling: within the registers, nothing spilled
        assert "ptx.spill_bytes" not in k.props


@pytest.mark.parametrize("dt, d, switch, arch", [("bf16", 128, "0", "sm_80"),   # switched off: decomposed
                                                 ("bf16", 96, None, "sm_80"),   # a head dimension it does not take
                                                 ("f32", 64, None, "sm_86")])   # nor f32
def test_what_the_kernel_does_not_take_is_decomposed(monkeypatch, dt, d, switch, arch):
    result = _compile("from tessera import bf16, f32, function, op, tensor\n" + SRC.format(dt=dt, d=d), monkeypatch,
                      switch, arch)
    plan = result.metadata["plans"]["f"]
    assert f"flash_attention ({dt}) as two GEMMs and a softmax (the probabilities materialised)" in plan["fallbacks"]
    assert not any("attention" in s.get("kernel", "") for s in plan["steps"])


def test_sm90a_keeps_its_kernel(monkeypatch):
    """The option changes nothing on sm_90a: its warp-specialized wgmma kernel (384 threads) stays."""
    result = _compile("from tessera import bf16, function, op, tensor\n" + SRC.format(dt="bf16", d=128), monkeypatch,
                      "1", "sm_90a")
    (step,) = result.metadata["plans"]["f"]["steps"]
    assert step["block"] == [384, 1, 1]
