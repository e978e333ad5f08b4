"""The sm_90a flash-attention kernel without a GPU: what Graph IR flash_attention lowers to on ptx, the
metadata the runtime needs (3-D tensor maps), ptxas's view, and located refusals.

Running it needs an H100/H200: tests/gpu/test_hopper.py."""

import pathlib

import pytest

from tessera import compiler, image
from tessera.backends.ptx import attention_sm90, ptxas
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "gpu" / "attention.py"


@pytest.fixture(scope="module")
def example():
    return compiler.compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target="ptx", arch="sm_90a"))


@pytest.mark.parametrize("kw, message", [({"head_dim": 96}, "head dimension 64 or 128"),
                                         ({"dtype": "f32"}, "bf16 or f16"),
                                         ({"scale": -1.0}, "positive scale"),
                                         ({"stages": 5}, "do not fit"),
                                         ({"block_n": 100}, "a multiple of 16"),
                                         ({"block_n": 192}, "do not fit")])  # 3 stages of 192 keys at D=128
def test_spec_refuses(kw, message):
    with pytest.raises(ValueError, match=message):
        attention_sm90.Sm90AttentionSpec("a", **kw)


def test_spec_geometry():
    s = attention_sm90.Sm90AttentionSpec("a", head_dim=128, causal=True, scale=0.1)
    # O leaves through shared memory and TMA bulk stores: 64 rows of a warpgroup a box
    assert s.tensor_maps == "Q:0:64x128x1:128;K:1:64x128x1:128;V:2:64x128x1:128;O:3:64x64x1:128"
    # Q, three K/V stages of 128 keys (the tuned default at D=128), mbarriers, alignment
    assert (s.stages, s.block_n) == (3, 128)
    assert s.smem_bytes == 2 * 16384 + 3 * 65536 + 8 * 7 + 1024
    d64 = attention_sm90.Sm90AttentionSpec("a", head_dim=64)
    assert (d64.stages, d64.block_n, d64.tensor_maps) == (3, 192, "Q:0:64x128x1:128;K:1:64x192x1:128;V:2:64x192x1:128;O:3:64x64x1:128")
    # causal: query i attends keys 0..i; 3 queries and 2 keys give 1 + 2 + 2 pairs
    assert s.flops(1, 3, 2) == 4.0 * 5 * 128


def test_kernels_and_plans(example):
    kernels = {k.name: k for k in image.read_image(example.image).kernels}
    k = kernels["causal_d128__attention0"]
    assert [a.name for a in k.args] == ["Q", "K", "V", "O", "BH", "SQ", "SK"]
    assert k.props["attention.causal"] == "true" and k.props["tile.K"] == "128"
    assert kernels["attention_d64__attention0"].props["ptx.tensor_maps"].count(":64x192x1:128") == 2
    assert (k.props["tile.N"], k.props["pipeline.stages"]) == ("128", "3")
    step = example.metadata["plans"]["causal_d128"]["steps"][0]
    assert step["grid"] == ["ceil(SQ/128)", "BH", "1"] and step["block"] == [384, 1, 1]
    assert step["env"] == {"BH": "B*H", "SQ": "S", "SK": "T"}


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
def test_ptxas_assembles_without_spills(example):
    for k in image.read_image(example.image).kernels:
        assert "ptx.spill_bytes" not in k.props, k.name


@pytest.mark.parametrize("body, dtype", [
    ("Q: tensor[bf16, 'S', 'D'], K: tensor[bf16, 'T', 'D'], V: tensor[bf16, 'T', 'D']", "bf16"),
    ("Q: tensor[bf16, 'S', 32], K: tensor[bf16, 'T', 32], V: tensor[bf16, 'T', 32]", "bf16"),
    ("Q: tensor[f32, 'S', 64], K: tensor[f32, 'T', 64], V: tensor[f32, 'T', 64]", "f32"),
])
def test_what_the_kernel_does_not_take_is_decomposed(body, dtype):
    """sm_90a's kernel takes bf16/f16 by head dimension 64 or 128 (TargetFacts.attention_kernels); a
    symbolic or other head dimension, or f32, runs as two GEMMs and a softmax instead, recorded."""
    src = f"@function\ndef f({body}):\n    return op.flash_attention(Q, K, V, scale=0.125)\n"
    plan = compiler.compile_source(src, "user.py", CompileOptions(target="ptx", arch="sm_90a")).metadata["plans"]["f"]
    assert f"flash_attention ({dtype}) as two GEMMs and a softmax (the probabilities materialised)" in plan["fallbacks"]
    assert not any("attention" in s.get("kernel", "") for s in plan["steps"])
