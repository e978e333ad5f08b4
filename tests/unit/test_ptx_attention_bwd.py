"""The sm_90a flash-attention backward without a GPU: the forward kernel's LSE option, what the vjp of
flash_attention lowers to on ptx (the attention group with its attention_lse; the attention_bwd group as the
dK/dV and dQ kernels, or dK or dV alone), the metadata the runtime needs (six 3-D tensor maps), ptxas's view
(assembles, no spills) and located refusals.

Running them needs an H100/H200: tests/gpu/test_attention_bwd_gpu.py."""

import pathlib

import pytest

from tessera import compiler, image
from tessera.backends.ptx import attention_bwd_sm90 as bwd, attention_sm90, ptxas
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "gpu" / "attention_backward.py"
needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed")


@pytest.fixture(scope="module")
def example():
    """The example with dQ in a kernel of its own (TESSERA_ATTENTION_FUSED_DQ=0; by default every head
    dimension has dQ in the dK/dV kernel, which `fused_example` covers)."""
    return _compile_fused(env="0")


def _compile_fused(numerics: str = "default", env: str = "1"):
    """The example with TESSERA_ATTENTION_FUSED_DQ=`env` ("1": the dK/dV kernel adds dQ by bulk reductions at
    every head dimension), under `numerics`."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TESSERA_ATTENTION_FUSED_DQ", env)
        return compiler.compile_source(EXAMPLE.read_text(), str(EXAMPLE),
                                       CompileOptions(target="ptx", arch="sm_90a", numerics=numerics))


@pytest.fixture(scope="module")
def fused_example():
    return _compile_fused()


@pytest.mark.parametrize("kw, message", [({"kind": "dx"}, "kernels dkdv, dk, dv, dq"),
                                         ({"head_dim": 96}, "head dimension 64 or 128"),
                                         ({"dtype": "f32"}, "bf16 or f16"),
                                         ({"scale": 0.0}, "positive scale"),
                                         ({"block_n": 40}, "a multiple of 16"),
                                         ({"block_n": 256}, "16 … 128 rows"),
                                         ({"kind": "dq", "block_n": 128, "stages": 3}, "do not fit"),
                                         ({"kind": "dkdvdq", "head_dim": 64, "block_n": 96}, "64 or 128 queries")])
def test_spec_refuses(kw, message):
    with pytest.raises(ValueError, match=message):
        bwd.Sm90AttentionBwdSpec("a", **{"kind": "dkdv", **kw})


def test_spec_geometry():
    s = bwd.Sm90AttentionBwdSpec("a", "dkdv", head_dim=128, scale=0.1)
    # K and V are held (128 rows), Q and dO stream in blocks of TUNED's 48 queries, three stages; dK, dV leave
    # 64 rows a box
    assert (s.block_n, s.stages) == (48, 3) and s.params == ("Q", "K", "V", "dO", "LSE", "Delta", "dK", "dV")
    assert s.tensor_maps == ("Q:0:64x48x1:128;K:1:64x128x1:128;V:2:64x128x1:128;dO:3:64x48x1:128;"
                             "dK:6:64x64x1:128;dV:7:64x64x1:128")
    assert s.smem_bytes == 2 * 2 * 16384 + 3 * 2 * 2 * 64 * 48 * 2 + 8 * 7 + 1024
    q = bwd.Sm90AttentionBwdSpec("a", "dq", head_dim=64, causal=True)
    assert q.tensor_maps == "Q:0:64x128x1:128;K:1:64x128x1:128;V:2:64x128x1:128;dO:3:64x128x1:128;dQ:6:64x64x1:128"
    assert bwd.Sm90AttentionBwdSpec("a", "dv").params[6:] == ("dV",)
    # dkdvdq adds two dSᵀ tiles (128 keys × 64 queries, 16-bit), a dQ buffer a warpgroup (f32, 32 of the
    # block's 64 queries × 64 head dimensions at D = 64, where the warpgroups split the queries) and a copy a
    # warpgroup of the block's statistics (64 −lse·log2 e and 64 deltas, f32)
    f = bwd.Sm90AttentionBwdSpec("a", "dkdvdq", head_dim=64, block_n=64, stages=3)
    assert (f.block_n, f.dq_rows) == (64, 32) and f.tensor_maps.endswith(";dQacc:8:32x32x1:128")
    assert f.smem_bytes == 2 * 16384 + 3 * 2 * 64 * 64 * 2 + 2 * 16384 + 2 * 32 * 64 * 4 + 2 * 128 * 4 + 8 * 7 + 1024
    # tuned at D = 64: blocks of 128 queries (64 a warpgroup's dQ), two stages, dS from P rounded to bf16 (P's
    # f32 registers would spill); at D = 128 P stays f32 beside 64-query blocks
    t = bwd.Sm90AttentionBwdSpec("a", "dkdvdq", head_dim=64)
    assert (t.block_n, t.stages, t.dq_rows, t.rounded_p) == (128, 2, 64, True)
    assert not bwd.Sm90AttentionBwdSpec("a", "dkdvdq", head_dim=128).rounded_p
    # 3 queries and 2 keys: 6 pairs, 5 when causal; dkdv multiplies four products of them, dq three
    assert s.flops(1, 3, 2) == 8 * 6 * 128 and q.flops(1, 3, 2) == 6 * 5 * 64


@needs_ptxas
@pytest.mark.parametrize("kind", list(bwd.RESULTS))
@pytest.mark.parametrize("d, causal, dtype", [(128, False, "bf16"), (128, True, "bf16"), (64, False, "f16"),
                                              (64, True, "bf16")])
def test_kernels_assemble_without_spills(kind, d, causal, dtype):
    """Every kernel at its tuned blocks through LLVM's optimizer and ptxas for sm_90a, as the compiler's llir
    and ptx stages take it."""
    import llvmlite.binding as llvm
    from tessera.backends.ptx import compiler as ptx_compiler
    from tessera.backends.ptx.options import PTXOptions
    options = PTXOptions(arch="sm_90a")
    spec = bwd.Sm90AttentionBwdSpec("k", kind, head_dim=d, causal=causal, scale=0.125, dtype=dtype)
    tm = ptx_compiler._target_machine(options)
    mod = llvm.parse_assembly(bwd.generate(spec))
    mod.data_layout = str(tm.target_data)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=options.opt_level))
    pb.getModulePassManager().run(mod, pb)
    meta = {"signatures": []}
    ptx_compiler.make_ptx(str(mod), meta, options)
    assert "kernel_props" not in meta, meta.get("kernel_props")   # no stack frame, no spills


def test_forward_writes_the_lse():
    plain = attention_sm90.generate(attention_sm90.Sm90AttentionSpec("a", head_dim=64))
    text = attention_sm90.generate(attention_sm90.Sm90AttentionSpec("a", head_dim=64, lse=True))
    assert "%LSE" not in plain and "ptr addrspace(1) %LSE, i64 %BH" in text
    assert text.count("lg2.approx.f32") == 2 and text.count("store float") == 2   # the thread's two rows


def test_kernels_and_plans(example):
    kernels = {k.name: k for k in image.read_image(example.image).kernels}
    fwd = kernels["vjp_causal_d128__attention0"]
    assert [a.name for a in fwd.args] == ["Q", "K", "V", "O", "LSE", "BH", "SQ", "SK"]
    assert [a.name for a in kernels["causal_d128__attention0"].args] == ["Q", "K", "V", "O", "BH", "SQ", "SK"]
    kv, q = kernels["vjp_causal_d128__attention_bwd1"], kernels["vjp_causal_d128__attention_bwd1_dq"]
    assert [a.name for a in kv.args] == ["Q", "K", "V", "dO", "LSE", "Delta", "dK", "dV", "BH", "SQ", "SK"]
    assert (kv.props["attention.backward"], kv.props["attention.causal"], kv.props["tile.N"]) == ("dkdv", "true", "32")
    assert [a.name for a in q.args][6:] == ["dQ", "BH", "SQ", "SK"] and q.props["tile.N"] == "128"
    assert kernels["vjp_v_d64__attention_bwd1"].props["attention.backward"] == "dv"
    assert "vjp_v_d64__attention_bwd1_dq" not in kernels
    assert kernels["vjp_qk_causal_d128__attention_bwd1"].props["attention.backward"] == "dk"
    steps = [s for s in example.metadata["plans"]["vjp_causal_d128"]["steps"] if "kernel" in s]
    by_kernel = {s["kernel"]: s for s in steps}
    assert by_kernel["vjp_causal_d128__attention_bwd1"]["grid"] == ["ceil(SK/128)", "BH", "1"]
    assert by_kernel["vjp_causal_d128__attention_bwd1_dq"]["grid"] == ["ceil(SQ/128)", "BH", "1"]
    assert by_kernel["vjp_causal_d128__attention_bwd1"]["env"] == {"BH": "B*H", "SQ": "S", "SK": "T"}
    # the forward's LSE feeds both backward kernels
    lse = by_kernel["vjp_causal_d128__attention0"]["args"][4]["value"]
    assert by_kernel["vjp_causal_d128__attention_bwd1"]["args"][4]["value"] == lse
    assert by_kernel["vjp_causal_d128__attention_bwd1_dq"]["args"][4]["value"] == lse


def test_fused_dq_plan(fused_example):
    """With TESSERA_ATTENTION_FUSED_DQ=1, dQ, dK and dV come from one kernel adding dQ into an f32 accumulator
    (an intermediate of the plan), zeroed before and rounded to dQ after; dQ, dK or dV wanted alone keep their
    kernels. The "deterministic" profile and TESSERA_ATTENTION_FUSED_DQ=0 keep dQ's own kernel (additions
    in a fixed order); without the variable D = 64 and 128 (FUSED_DQ_HEAD_DIMS) have dQ in the dK/dV kernel."""
    example = fused_example
    kernels = {k.name: k for k in image.read_image(example.image).kernels}
    name = "vjp_causal_d128__attention_bwd1"
    kv = kernels[name]
    assert [a.name for a in kv.args] == ["Q", "K", "V", "dO", "LSE", "Delta", "dK", "dV", "dQacc", "BH", "SQ", "SK"]
    assert (kv.props["attention.backward"], kv.props["tile.N"]) == ("dkdvdq", "64")
    # dQ's f32 boxes (32 head dimensions × the block's 64 queries) for the bulk tensor reductions
    assert kv.props["ptx.tensor_maps"].endswith(";dV:7:64x64x1:128;dQacc:8:32x64x1:128")
    assert f"{name}_dq" not in kernels
    assert [a.name for a in kernels[f"{name}_dq_cast"].args] == ["dQacc", "dQ", "BH", "SQ"]
    assert kernels["vjp_v_d64__attention_bwd1"].props["attention.backward"] == "dv"
    doc = example.metadata["plans"]["vjp_causal_d128"]
    steps = [s for s in doc["steps"] if s.get("kernel", "").startswith(name)]
    # the preprocessing kernel zeroes the accumulator as it computes delta (test_delta_in_the_backward_group)
    assert [s["kernel"] for s in steps] == [f"{name}_pre", name, f"{name}_dq_cast"]
    acc = steps[0]["args"][3]["value"]
    assert steps[1]["args"][8]["value"] == acc == steps[2]["args"][0]["value"]
    assert doc["values"][acc]["dtype"] == "f32" and acc not in doc["results"] and acc not in doc["params"]
    assert doc["values"][acc]["dims"] == doc["values"][steps[2]["args"][1]["value"]]["dims"]   # dQ's
    assert steps[2]["grid"] == ["ceil(SQ/8)", "BH", "1"] and steps[2]["env"] == {"BH": "B*H", "SQ": "S"}
    ordered = {k.name: k for k in image.read_image(_compile_fused("deterministic").image).kernels}
    assert f"{name}_dq" in ordered and f"{name}_dq_zero" not in ordered
    assert [a.name for a in ordered[f"{name}_pre"].args] == ["O", "dO", "Delta", "BH", "SQ"]
    d64 = "vjp_attn_d64__attention_bwd1"
    assert f"{d64}_dq" in {k.name for k in image.read_image(_compile_fused(env="0").image).kernels}
    default = {k.name: k for k in image.read_image(_compile_fused(env="").image).kernels}
    assert default[d64].props["attention.backward"] == "dkdvdq" and f"{d64}_dq_cast" in default
    assert default[name].props["attention.backward"] == "dkdvdq" and f"{name}_dq" not in default


def test_delta_in_the_backward_group(fused_example):
    """delta = rowsum(dO ∘ O) of the vjp (a cast of each, a product, a row sum) joins the attention_bwd group:
    one preprocessing kernel reads the forward's O and the cotangent dO and writes the Delta the dK/dV kernel
    reads (and zeroes dQ's accumulator), so no elementwise or row kernel is left in the plan."""
    doc = fused_example.metadata["plans"]["vjp_attn_d64"]
    kernels = {k.name: k for k in image.read_image(fused_example.image).kernels}
    by_kernel = {s["kernel"]: s for s in doc["steps"] if "kernel" in s}
    assert sorted(by_kernel) == ["vjp_attn_d64__attention0", "vjp_attn_d64__attention_bwd1",
                                 "vjp_attn_d64__attention_bwd1_dq_cast", "vjp_attn_d64__attention_bwd1_pre"]
    pre, kv = by_kernel["vjp_attn_d64__attention_bwd1_pre"], by_kernel["vjp_attn_d64__attention_bwd1"]
    assert [a.name for a in kernels["vjp_attn_d64__attention_bwd1_pre"].args] == ["O", "dO", "Delta", "dQacc",
                                                                                  "BH", "SQ"]
    assert pre["args"][0]["value"] == by_kernel["vjp_attn_d64__attention0"]["args"][3]["value"]   # O
    assert pre["args"][1]["value"] == kv["args"][3]["value"]                                       # dO
    assert pre["args"][2]["value"] == kv["args"][5]["value"]                                       # Delta
    assert pre["grid"] == ["ceil(SQ/32)", "BH", "1"]


def test_preprocessing_kernel():
    d128 = bwd.generate_pre("p", 128, "f16", zero=True)
    d64 = bwd.generate_pre("p", 64)
    # 16 (8) threads a row: four (three) butterfly steps; 16-byte loads of each operand
    assert d128.count("call float @llvm.nvvm.shfl.sync.bfly.f32(") == 4 and "load <8 x half>" in d128
    assert d64.count("call float @llvm.nvvm.shfl.sync.bfly.f32(") == 3 and "load <8 x bfloat>" in d64
    assert d128.count("store <4 x float> zeroinitializer") == 2 and "%dQacc" not in d64


@needs_ptxas
@pytest.mark.parametrize("d", [64, 128])
def test_preprocessing_kernel_assembles(d):
    from tessera.backends.ptx import compiler as ptx_compiler
    from tessera.backends.ptx.options import PTXOptions
    meta = {"signatures": []}
    ptx = ptx_compiler.make_ptx(bwd.generate_pre("p", d, zero=True), meta, PTXOptions(arch="sm_90a"))
    assert "shfl.sync.bfly.b32" in ptx and "kernel_props" not in meta


def test_accumulator_kernels():
    zero = bwd.generate_acc("z", 64, "zero")
    cast = bwd.generate_acc("c", 128, "cast", "f16", 0.125)
    assert "store <4 x float> zeroinitializer" in zero and "%dQ," not in zero
    assert "fptrunc <4 x float>" in cast and "to <4 x half>" in cast and "0x3FC0000000000000" in cast


@needs_ptxas
@pytest.mark.parametrize("fixture", ["example", "fused_example"])
def test_images_kernels_assemble_without_spills(fixture, request):
    for k in image.read_image(request.getfixturevalue(fixture).image).kernels:
        if k.props.get("attention.persistent") == "true":   # the causal D = 64 forward: a few, outside its loop
            assert int(k.props.get("ptx.spill_bytes", 0)) <= attention_sm90.LOOPING_SPILL_BYTES, k.name
        else:
            assert "ptx.spill_bytes" not in k.props, k.name


def test_a_symbolic_head_dimension_takes_the_fallback():
    """The fused kernels take head dimension 64 or 128: the forward and its backward are decomposed."""
    src = ("from tessera import vjp\n@function\ndef f(Q: tensor[bf16, 'S', 'D'], K: tensor[bf16, 'T', 'D'], "
           "V: tensor[bf16, 'T', 'D']):\n    return op.flash_attention(Q, K, V, scale=0.125)\ng = vjp(f)\n")
    plan = compiler.compile_source(src, "user.py", CompileOptions(target="ptx", arch="sm_90a")).metadata["plans"]["g"]
    assert plan["fallbacks"][:2] == ["attention's backward (bf16) as GEMMs (P and dS materialised)",
                                     "flash_attention (bf16) as two GEMMs and a softmax (the probabilities "
                                     "materialised)"]
    assert not any("attention" in s.get("kernel", "") for s in plan["steps"])
