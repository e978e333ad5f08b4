"""op.flash_attention_fp8(Q8, K8, V8, scale=(sq, sk, sv)): Q, K, V already e4m3 (one byte an element, op.quantize's
or the caller's), sq, sk, sv their f32 0-d descales (issue 17 item 1, docs/language.md "fp8 attention"). The
interpreter against the amax-dynamic op after its quantization step (the same semantics), the CPU fallback against
the interpreter (recorded), the sm_90a plan (no amax, no quantize, no f16 container: a Vt kernel and the e4m3
attention), and the refusals at the user's line. The kernel runs in tests/gpu/test_attention_fp8_gpu.py."""

import numpy as np
import pytest

from tessera import compiler, executor, image, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.numerics.rounding import fp8_values, round_to
from tessera.options import CompileOptions

SOURCE = """
@function
def pre(q: tensor[fp8_e4m3, "B", "S", 128], k: tensor[fp8_e4m3, "B", "T", 128], v: tensor[fp8_e4m3, "B", "T", 128],
        sq: tensor[f32], sk: tensor[f32], sv: tensor[f32]):
    return op.flash_attention_fp8(q, k, v, scale=(sq, sk, sv), causal=True)

@function
def amax(q: tensor[bf16, "B", "S", 128], k: tensor[bf16, "B", "T", 128], v: tensor[bf16, "B", "T", 128]):
    return op.flash_attention_fp8(q, k, v, causal=True)

@function
def inside(q: tensor[f32, "S", 128], k: tensor[f32, "T", 128], v: tensor[f32, "T", 128], sq: tensor[f32],
           sk: tensor[f32], sv: tensor[f32]):
    q8, k8 = op.quantize(q, fp8_e4m3, scale=sq), op.quantize(k, fp8_e4m3, scale=sk)
    return op.flash_attention_fp8(q8, k8, op.quantize(v, fp8_e4m3, scale=sv), scale=[sq, sk, sv], softmax_scale=0.2)
"""
RNG = np.random.default_rng(170)
FALLBACK = ("flash_attention_fp8 (e4m3 with descales, head dimension 128) as flash_attention of its Q, K, V "
            "dequantized to bf16 (P not rounded to e4m3)")


def e4m3_per_tensor(x):
    """amax-dynamic quantization (the op's step, dialects/ttensor.py): the e4m3 values and the f32 descale."""
    s = np.float32(max(np.float32(np.abs(x).max()), np.float32(2.0 ** -126)) / np.float32(448.0))
    return round_to((x.astype(np.float32) / s).astype(np.float64), "fp8_e4m3").astype(np.float32), s


def to_bytes(x):
    """The e4m3 bit patterns of values already on the e4m3 grid (the executor's uint8 view of fp8)."""
    table = np.arange(256, dtype=np.uint8)
    values = fp8_values(table, "fp8_e4m3")
    ok = np.isfinite(values) & ~((table == 0x80))   # one byte per value: +0 for zero
    lookup = {float(v): b for v, b in zip(values[ok], table[ok])}
    return np.vectorize(lambda e: lookup[float(e)], otypes=[np.uint8])(x)


def bf16_inputs(b, s, t, d=128):
    return [round_to((RNG.standard_normal((b, n, d)) * m), "bf16").astype(np.float32)
            for n, m in ((s, 1.0), (t, 4.0), (t, 0.25))]


@pytest.fixture(scope="module")
def programs():
    return executor.load(compiler.compile_source(SOURCE, "a.py").image), \
        tessera_frontend_compile(SOURCE, {"filename": "a.py"})


def test_the_interpreter_is_the_amax_op_after_its_quantization(programs):
    _, ref = programs
    q, k, v = bf16_inputs(2, 40, 70)
    (q8, sq), (k8, sk), (v8, sv) = (e4m3_per_tensor(x) for x in (q, k, v))
    got = np.asarray(ref.interpret("pre", q8, k8, v8, sq, sk, sv), np.float32)
    want = np.asarray(ref.interpret("amax", q, k, v), np.float32)
    np.testing.assert_array_equal(got, want)   # the same e4m3 values and descales: the same bf16 result
    # and the definition, from numpy: P rounded to e4m3, row sums of the unrounded P, O times sv
    s = np.matmul(q8.astype(np.float64), np.swapaxes(k8, -1, -2)) * (np.float64(sq) * np.float64(sk) *
                                                                     np.float64(np.float32(128 ** -0.5)))
    s = np.where(np.arange(70)[None, :] > np.arange(40)[:, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    o = np.matmul(round_to(p, "fp8_e4m3"), v8) * np.float64(sv) / p.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, round_to(o, "bf16"), rtol=2 ** -8, atol=1e-6)


def test_the_cpu_falls_back_and_says_so(programs):
    mod, ref = programs
    q, k, v = bf16_inputs(2, 40, 70)
    (q8, sq), (k8, sk), (v8, sv) = (e4m3_per_tensor(x) for x in (q, k, v))
    want = np.asarray(ref.interpret("pre", q8, k8, v8, sq, sk, sv), np.float32)
    got = np.asarray(mod.function("pre")(*(to_bytes(x) for x in (q8, k8, v8)), sq, sk, sv), np.float32)
    # float32 values on the e4m3 grid are the same arguments as their bytes
    same = np.asarray(mod.function("pre")(q8, k8, v8, sq, sk, sv), np.float32)
    np.testing.assert_array_equal(got, same)
    # the same e4m3 Q, K, V; P not rounded to e4m3 (2^-4 a weight) and Q, K, V dequantized to bf16: 0.8-0.9e-2 rms
    rms = np.sqrt(((got - want) ** 2).mean() / (want ** 2).mean())
    assert rms < 2e-2 and np.abs(got - want).max() < 4e-2 * np.abs(want).max(), rms
    plan = compiler.compile_source(SOURCE, "a.py").metadata["plans"]["pre"]
    assert FALLBACK in plan["fallbacks"]
    assert [plan["values"][a]["dtype"] for a in plan["args"][:3]] == ["fp8_e4m3"] * 3


def test_quantized_in_the_graph_on_the_cpu(programs):
    mod, ref = programs
    q, k, v = (RNG.standard_normal((n, 128)).astype(np.float32) * m for n, m in ((33, 1.0), (20, 3.0), (20, 0.5)))
    sc = [np.float32(1 / 200), np.float32(3 / 200), np.float32(0.5 / 200)]
    want = np.asarray(ref.interpret("inside", q, k, v, *sc), np.float32)
    got = np.asarray(mod.function("inside")(q, k, v, *sc), np.float32)
    rms = np.sqrt(((got - want) ** 2).mean() / (want ** 2).mean())
    assert rms < 4e-2 and np.abs(got - want).max() < 8e-2 * np.abs(want).max(), rms


def test_sm90a_plans_two_kernels_on_the_callers_bytes():
    r = compiler.compile_source(SOURCE, "a.py", CompileOptions(target="ptx", arch="sm_90a"))
    plan = r.metadata["plans"]["pre"]
    steps = plan["steps"]
    assert [s["kernel"] for s in steps] == ["pre__attention_fp80_vt8", "pre__attention_fp80"]
    assert not plan.get("fallbacks")
    # the caller's one-byte tensors go to the kernels as they are: no container, no rounding kernel
    q, k, v = plan["args"][:3]
    assert [plan["values"][a]["dtype"] for a in (q, k, v)] == ["fp8_e4m3"] * 3
    assert [a["value"] for a in steps[1]["args"][:2]] == [q, k] and steps[0]["args"][0]["value"] == v
    assert steps[0]["grid"] == ["ceil(SKP/64)", "2", "BH"] and steps[1]["grid"] == ["ceil(SQ/128)", "BH", "1"]
    kernels = {k.name: k for k in image.read_image(r.image).kernels}
    assert [a.name for a in kernels["pre__attention_fp80"].args] == ["Q8", "K8", "VT", "O", "DS", "BH", "SQ", "SK",
                                                                    "SKP"]
    assert [a.name for a in kernels["pre__attention_fp80_vt8"].args] == ["V8", "SCQ", "SCK", "SCV", "VT", "DS", "BH",
                                                                        "SK", "SKP"]
    for kern in kernels.values():   # ptxas's report, where it ran
        assert "ptx.spill_bytes" not in kern.props, kern.name
    # op.quantize in the same graph: its elementwise kernels write the bytes the attention reads
    inside = r.metadata["plans"]["inside"]
    assert not inside.get("fallbacks")   # no f16 container ("stored as f16"), no attention fallback
    names = [s["kernel"] for s in inside["steps"]]
    assert names[-2:] == ["inside__attention_fp83_vt8", "inside__attention_fp83"] and \
        not any(n.endswith(("_amax", "_quant")) for n in names), names
    # three quantize kernels, each writing one-byte e4m3, which the two attention kernels read
    made = [s["tensors"][-1]["value"] for s in inside["steps"][:-2]]
    assert [inside["values"][m]["dtype"] for m in made] == ["fp8_e4m3"] * 3
    assert [a["value"] for a in inside["steps"][-1]["args"][:2]] == made[:2] and \
        inside["steps"][-2]["args"][0]["value"] == made[2]


def test_sm80_falls_back_and_says_so():
    plan = compiler.compile_source(SOURCE, "a.py", CompileOptions(target="ptx", arch="sm_80")).metadata["plans"]["pre"]
    assert FALLBACK in plan["fallbacks"]


@pytest.mark.parametrize("line, message", [
    ("op.flash_attention_fp8(q, k, v, scale=(sq, sk))",
     "op.flash_attention_fp8's scale=(sq, sk, sv) is three f32 0-d tensors (the descales of Q, K, V, as "
     "op.dequantize takes them), got (f32 tensor of shape [], f32 tensor of shape [])"),
    ("op.flash_attention_fp8(q, k, v, scale=(sq, sk, h))", "got (f32 tensor of shape [], f32 tensor of shape [], "
                                                          "f16 tensor of shape [])"),
    ("op.flash_attention_fp8(q, k, v, scale=(sq, sk, r))", "f32 tensor of shape [1])"),
    ("op.flash_attention_fp8(q, k, v, scale=(sq, sk, 0.5))", "f32 tensor of shape [], float)"),
    ("op.flash_attention_fp8(q, k, e, scale=(sq, sk, sq))",
     "op.flash_attention_fp8 with scale=(sq, sk, sv) takes fp8_e4m3 Q, K, V (op.quantize's), got fp8_e4m3, "
     "fp8_e4m3, fp8_e5m2"),
    ("op.flash_attention_fp8(b, b, b, scale=(sq, sk, sq))", "takes fp8_e4m3 Q, K, V (op.quantize's), got bf16, "
                                                          "bf16, bf16"),
    ("op.flash_attention_fp8(q, k, v)", "op.flash_attention_fp8 of fp8_e4m3 Q, K, V takes their descales: "
                                        "scale=(sq, sk, sv), f32 0-d tensors"),
    ("op.flash_attention_fp8(q, k, w, scale=(sq, sk, sq))", "K and V sequence lengths"),
    ("op.flash_attention_fp8(q, w, w, scale=(sq, sk, sq))", "Q and K head dimensions"),
    ("op.flash_attention_fp8(q, k, v, scale=(sq, sk, sq), softmax_scale=-1.0)",
     "softmax_scale must be a positive number, got -1.0"),
])
def test_mistakes_are_refused_at_the_users_line(line, message):
    src = f"""
@function
def f(q: tensor[fp8_e4m3, 8, 128], k: tensor[fp8_e4m3, 9, 128], v: tensor[fp8_e4m3, 9, 128], sq: tensor[f32],
      sk: tensor[f32], h: tensor[f16], r: tensor[f32, 1], e: tensor[fp8_e5m2, 9, 128], b: tensor[bf16, 8, 128],
      w: tensor[fp8_e4m3, 7, 64]):
    return {line}
"""
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "bad.py")
    assert "bad.py:6:12: error: " in str(e.value) and message in str(e.value), str(e.value)
