"""Attention over heads split from [B, S, H, D] tensors by `op.transpose(…, (0, 2, 1, 3))` and merged back the
same way (a transformer block's layout): on sm_90a and sm_80 passes/fold_transposes.attention folds the
transposes into the flash_attention (`tessera.seq_heads`), whose kernel reads Q, K, V and writes O in place
(sm_90a's through 4-D TMA maps, one head a box; sm_80's cp.async rows at their strides); elsewhere (the CPU,
attention decomposed) the copies stay.

Without a GPU: the interpreter gives bit-identical results on the folded IR as on the transposes (f16 inputs,
float64 arithmetic either way: the same numbers in another order of axes); the CPU image (copies kept) agrees
with the interpreter within f16 attention's tolerance (rtol 2e-2, atol 2e-3: the CPU decomposes attention
into f16 GEMMs and a softmax); the sm_90a and sm_80 images have no layout kernel and their attention step
the [B, S, H, D] arguments (sm_80's kernel on the emulator: tests/unit/test_ptx_attention_sm80.py); ptxas
assembles them. tests/gpu/test_attention_seq_heads_gpu.py runs sm_90a's against torch's SDPA."""

import numpy as np
import pytest

from tessera import compiler, executor, image
from tessera.backends.ptx import attention_sm90, ptxas
from tessera.options import CompileOptions

SOURCE = '''
from tessera import f16, function, op, tensor


@function
def heads(Q: tensor[f16, "B", "S", 4, 64], K: tensor[f16, "B", "T", 4, 64],
          V: tensor[f16, "B", "T", 4, 64]) -> tensor[f16, "B", "S", 4, 64]:
    A = op.flash_attention(op.transpose(Q, (0, 2, 1, 3)), op.transpose(K, (0, 2, 1, 3)),
                           op.transpose(V, (0, 2, 1, 3)), causal=True, scale=0.125)
    return op.transpose(A, (0, 2, 1, 3))


@function
def both(X: tensor[f16, "S", 2, 64]):
    A = op.flash_attention(op.transpose(X, (1, 0, 2)), op.transpose(X, (1, 0, 2)), op.transpose(X, (1, 0, 2)),
                           causal=False, scale=0.125)
    return op.transpose(A, (1, 0, 2)), A
'''


def _inputs(seed: int = 3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float16) for s in ((2, 40, 4, 64), (2, 56, 4, 64), (2, 56, 4, 64))]


def _canonical_modules():
    """The canonical stage's module, and a copy after the attention fold (both parsed in one context)."""
    from tessera.dialects import make_context
    from tessera.mlir import ir
    from tessera.passes.registry import build_pass_manager
    stages = {}
    compiler.compile_source(SOURCE, "heads.py", CompileOptions(target="cpu"), stop_after="canonical",
                            on_stage=lambda name, text: stages.setdefault(name, text))
    ctx = make_context()
    plain, folded = (ir.Module.parse(stages["canonical"], context=ctx) for _ in range(2))
    with ctx:
        build_pass_manager("builtin.module(tessera-fold-transposes{attention=f16})").run(folded.operation)
    return plain, folded


def test_the_interpreter_gives_the_same_bits_folded():
    from tessera import interpret
    plain, folded = _canonical_modules()
    text = str(folded)
    assert text.count("tessera.seq_heads") == 2 and text.count("ttensor.transpose") == 1   # `both`'s A
    q, k, v = _inputs()
    np.testing.assert_array_equal(interpret.run(folded, "heads", q, k, v), interpret.run(plain, "heads", q, k, v))
    x = q[0, :, :2]
    for f, p in zip(interpret.run(folded, "both", x), interpret.run(plain, "both", x)):
        np.testing.assert_array_equal(f, p)


def test_the_cpu_keeps_the_copies_and_agrees():
    from tessera import interpret
    plain, _ = _canonical_modules()
    q, k, v = _inputs(4)
    got = executor.load(compiler.compile_source(SOURCE, "heads.py").image).function("heads")(q, k, v)
    np.testing.assert_allclose(np.asarray(got, np.float64), interpret.run(plain, "heads", q, k, v).astype(np.float64),
                               rtol=2e-2, atol=2e-3)


@pytest.fixture(scope="module")
def sm90():
    return compiler.compile_source(SOURCE, "heads.py", CompileOptions(target="ptx", arch="sm_90a"))


def test_sm90a_reads_the_heads_in_place(sm90):
    steps = sm90.metadata["plans"]["heads"]["steps"]
    assert len(steps) == 1, steps   # the attention alone: no head split or merge copy
    step = steps[0]
    # causal at D = 64: a persistent grid (attention_sm90's TUNED), the tiles of all B·H (batch, head)s
    assert step["grid"] == ["min(ceil(SQ/192)*H*B, 132)", "1", "1"] and step["env"] == {"B": "B", "SQ": "S", "H": "4", "SK": "T"}
    k = {k.name: k for k in image.read_image(sm90.image).kernels}["heads__attention0"]
    assert [a.name for a in k.args] == ["Q", "K", "V", "O", "B", "SQ", "H", "SK"]
    assert k.props["ptx.tensor_maps"] == "Q:0:64x1x192x1:128;K:1:64x1x128x1:128;V:2:64x1x128x1:128;O:3:64x1x64x1:128"
    # `both` also returns A as [H, S, D]: a transpose of the folded result (one layout step) besides attention
    assert len(sm90.metadata["plans"]["both"]["steps"]) == 2


def test_sm80_reads_the_heads_in_place(monkeypatch):
    monkeypatch.delenv("TESSERA_ATTENTION_SM80", raising=False)
    res = compiler.compile_source(SOURCE, "heads.py", CompileOptions(target="ptx", arch="sm_80"))
    (step,) = res.metadata["plans"]["heads"]["steps"]
    assert step["grid"][1] == "B*H" and step["env"] == {"B": "B", "SQ": "S", "H": "4", "SK": "T"}
    k = {k.name: k for k in image.read_image(res.image).kernels}["heads__attention0"]
    assert [a.name for a in k.args] == ["Q", "K", "V", "O", "B", "SQ", "H", "SK"]


def test_decomposed_attention_keeps_the_copies(monkeypatch):
    monkeypatch.setenv("TESSERA_ATTENTION_SM80", "0")   # sm_80's kernel off: GEMMs and a softmax
    res = compiler.compile_source(SOURCE, "heads.py", CompileOptions(target="ptx", arch="sm_80"))
    assert len(res.metadata["plans"]["heads"]["steps"]) > 3


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
def test_ptxas_assembles_without_spills(sm90, monkeypatch):
    monkeypatch.delenv("TESSERA_ATTENTION_SM80", raising=False)
    sm80 = compiler.compile_source(SOURCE, "heads.py", CompileOptions(target="ptx", arch="sm_80"))
    for k in image.read_image(sm90.image).kernels + image.read_image(sm80.image).kernels:
        if k.props.get("attention.persistent") == "true":   # the causal D = 64 one: a few, outside its loop
            assert int(k.props.get("ptx.spill_bytes", 0)) <= attention_sm90.LOOPING_SPILL_BYTES, k.name
        else:
            assert "ptx.spill_bytes" not in k.props, k.name


def test_spec_layout():
    s = attention_sm90.Sm90AttentionSpec("a", head_dim=128, seq_heads=True)
    assert s.tensor_maps == "Q:0:64x1x128x1:128;K:1:64x1x128x1:128;V:2:64x1x128x1:128;O:3:64x1x64x1:128"
    assert s.extents == ("B", "SQ", "H", "SK")
    assert attention_sm90.Sm90AttentionSpec("a").extents == ("BH", "SQ", "SK")
