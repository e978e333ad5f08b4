"""op.flash_attention_fp8 (issue 17, item 2; docs/language.md, "fp8 attention"): the interpreter against numpy
written from the definition, the fallback on a target without an fp8 attention kernel (the CPU: dequantized
e4m3 through flash_attention, recorded) against the interpreter, the sm_90a plan of four kernels, and what is
refused at the user's line. The kernel itself runs in tests/gpu/test_attention_fp8_gpu.py."""

import numpy as np
import pytest

from tessera import compiler, executor, image, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.numerics.rounding import round_to
from tessera.options import CompileOptions

SOURCE = """
@function
def causal(q: tensor[f32, "B", "S", 128], k: tensor[f32, "B", "T", 128], v: tensor[f32, "B", "T", 128]):
    return op.flash_attention_fp8(q, k, v, causal=True)

@function
def scaled(q: tensor[bf16, "S", 64], k: tensor[bf16, "T", 64], v: tensor[bf16, "T", 64]):
    return op.flash_attention_fp8(q, k, v, scale="amax_dynamic", softmax_scale=0.2)
"""
RNG = np.random.default_rng(17)


def e4m3_per_tensor(x):
    s = np.float32(max(np.float32(np.abs(x).max()), np.float32(2.0 ** -126)) / np.float32(448.0))
    return round_to((x.astype(np.float32) / s).astype(np.float64), "fp8_e4m3"), np.float64(s)


def definition(q, k, v, scale, causal):
    (q, sq), (k, sk), (v, sv) = (e4m3_per_tensor(x) for x in (q, k, v))
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * (sq * sk * np.float64(np.float32(scale)))
    if causal:
        s = np.where(np.arange(s.shape[-1])[None, :] > np.arange(s.shape[-2])[:, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.matmul(round_to(p, "fp8_e4m3"), v) * sv / p.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def programs():
    return executor.load(compiler.compile_source(SOURCE, "a.py").image), \
        tessera_frontend_compile(SOURCE, {"filename": "a.py"})


def inputs(*shape_t):
    (b, s, t, d) = shape_t
    return [(RNG.standard_normal((*b, n, d)) * m).astype(np.float32) for n, m in ((s, 1.0), (t, 4.0), (t, 0.25))]


def test_the_interpreter_is_the_definition(programs):
    _, ref = programs
    q, k, v = inputs((2,), 40, 70, 128)
    got = ref.interpret("causal", q, k, v)
    np.testing.assert_allclose(got, definition(q, k, v, 128 ** -0.5, True), rtol=2e-6, atol=1e-6)
    # bf16 inputs, an explicit softmax scale; the result rounded to bf16
    q, k, v = (round_to(x, "bf16").astype(np.float32) for x in inputs((), 33, 20, 64))
    want = round_to(definition(q, k, v, 0.2, False), "bf16")
    np.testing.assert_allclose(ref.interpret("scaled", q, k, v), want, rtol=2 ** -8, atol=1e-6)


def test_the_cpu_falls_back_and_says_so(programs):
    mod, ref = programs
    q, k, v = inputs((2,), 40, 70, 128)
    got, want = mod.function("causal")(q, k, v), ref.interpret("causal", q, k, v)
    # the same e4m3 Q, K, V; only P is not rounded to e4m3 (2^-4 a weight): about 1.5e-2 rms here
    rms = np.sqrt(((got - want) ** 2).mean() / (want ** 2).mean())
    assert rms < 4e-2 and np.abs(got - want).max() < 8e-2 * np.abs(want).max()
    plan = compiler.compile_source(SOURCE, "a.py").metadata["plans"]["causal"]
    assert "flash_attention_fp8 (f32, head dimension 128) as flash_attention of its dequantized e4m3 Q, K, V " \
           "(P not rounded to e4m3)" in plan["fallbacks"]


def test_sm90a_plans_four_kernels():
    src = """
@function
def f(q: tensor[bf16, "B", "S", 128], k: tensor[bf16, "B", "T", 128], v: tensor[bf16, "B", "T", 128]):
    return op.flash_attention_fp8(q, k, v)
"""
    r = compiler.compile_source(src, "a.py", CompileOptions(target="ptx", arch="sm_90a"))
    steps = r.metadata["plans"]["f"]["steps"]
    assert [s["kernel"] for s in steps] == ["f__attention_fp80_amax", "f__attention_fp80_quant",
                                             "f__attention_fp80_vt", "f__attention_fp80"]
    assert steps[2]["env"]["SKP"] == "ceil((T)/16)*16" and steps[3]["grid"] == ["ceil(SQ/128)", "BH", "1"]
    assert steps[1]["grid"] == ["ceil(max(NQ, NK)/4096)", "2", "1"]   # 16 elements a thread of 256
    kernels = {k.name: k for k in image.read_image(r.image).kernels}
    assert [a.name for a in kernels["f__attention_fp80"].args] == ["Q8", "K8", "VT", "O", "DS", "BH", "SQ", "SK",
                                                                  "SKP"]
    assert not r.metadata["plans"]["f"].get("fallbacks")
    for k in kernels.values():   # ptxas's report, where it ran
        assert "ptx.spill_bytes" not in k.props, k.name


@pytest.mark.parametrize("line, message", [
    ("op.flash_attention_fp8(q, k, v, scale='delayed')",
     "op.flash_attention_fp8 scales by scale=\"amax_dynamic\" (each tensor's own amax / 448) or scale=(sq, sk, sv) "
     "(the f32 descales of e4m3 Q, K, V), not 'delayed'"),
    ("op.flash_attention_fp8(i, i, i)", "Q, K and V must share a floating-point dtype"),
    ("op.flash_attention_fp8(q, k, v, softmax_scale=-1.0)", "softmax_scale must be a positive number, got -1.0"),
    ("op.flash_attention_fp8(d, d, d)", "the head dimension 'D' is symbolic: give softmax_scale=… explicitly"),
    ("op.flash_attention_fp8(q, k, v, block=2)", "block"),
])
def test_mistakes_are_refused_at_the_users_line(line, message):
    src = f"""
@function
def f(q: tensor[f32, 8, 128], k: tensor[f32, 9, 128], v: tensor[f32, 9, 128], i: tensor[i8, 8, 128],
      d: tensor[f32, 8, "D"]):
    return {line}
"""
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "bad.py")
    assert "bad.py:5:12: error: " in str(e.value) and message in str(e.value), str(e.value)


@pytest.mark.parametrize("switch", ["0", "1"])
def test_a_target_without_attention_kernels_takes_both_fallbacks(monkeypatch, switch):
    """ptx sm_80 has no fp8 attention kernel: the fp8 fallback's flash_attention goes to its bf16 mma.sync kernel,
    or, with that switched off (TESSERA_ATTENTION_SM80=0), is decomposed in turn."""
    monkeypatch.setenv("TESSERA_ATTENTION_SM80", switch)
    src = """
@function
def f(q: tensor[bf16, 8, 128], k: tensor[bf16, 16, 128], v: tensor[bf16, 16, 128]):
    return op.flash_attention_fp8(q, k, v)
"""
    plan = compiler.compile_source(src, "bad.py", CompileOptions(target="ptx", arch="sm_80")).metadata["plans"]["f"]
    fallbacks = plan["fallbacks"]
    assert any(f.startswith("flash_attention_fp8 (bf16, head dimension 128) as flash_attention") for f in fallbacks)
    decomposed = "flash_attention (bf16) as two GEMMs and a softmax (the probabilities materialised)" in fallbacks
    assert decomposed == (switch == "0")
    assert any("attention" in s.get("kernel", "") for s in plan["steps"]) == (switch == "1")
