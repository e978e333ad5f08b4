"""Derivatives of op.flash_attention (passes/autodiff_attention.py): reverse mode through attention_lse and
attention_grad, forward mode in primitives; the fallback of passes/decompose.py; the fusion groups.

f64 through the interpreter against central finite differences and by jvp/vjp duality; the interpreter's
attention_grad against numpy's formulas; the GEMM fallback (interpreted, and compiled for the CPU) against
the interpreter's fused ops.
"""

import zlib

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.mlir import ir
from tessera.passes import autodiff, decompose, fusion

from derivative_checks import check_vjp_jvp, derivative_source

# name -> (source of the function, shapes of Q, K, V): batch and head axes, S_q != S_k where not causal
CASES = {
    "plain": ("op.flash_attention(Q, K, V, scale=0.4)", [(2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)]),
    "causal": ("op.flash_attention(Q, K, V, causal=True, scale=0.6)", [(2, 6, 4), (2, 6, 4), (2, 6, 3)]),
    # top-left aligned: query i sees keys 0..i of the longer key sequence
    "causal_rect": ("op.flash_attention(Q, K, V, causal=True)", [(3, 4), (6, 4), (6, 5)]),
    # Q, K and V one value: every cotangent path sums into it
    "self": ("op.flash_attention(Q, Q, Q, causal=True) + op.flash_attention(Q, K, V)",
             [(2, 5, 4), (2, 5, 4), (2, 5, 4)]),
}


def _tensor(shape) -> str:
    return "tensor[f64, " + ", ".join(map(str, shape)) + "]"


def _source() -> str:
    functions = ((name, ", ".join(f"{n}: {_tensor(s)}" for n, s in zip("QKV", shapes)), body)
                 for name, (body, shapes) in CASES.items())
    return derivative_source("from tessera import f64, function, grad, jvp, op, tensor, vjp", functions) \
        + "\nvjp_plain_k = vjp(plain, argnums=(1,))\n"


@pytest.fixture(scope="module")
def module():
    return tessera_frontend_compile(_source(), {"filename": "attention.py"})


def _inputs(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    shapes = CASES[name][1]
    return rng, [rng.standard_normal(s) for s in shapes]


@pytest.mark.parametrize("name", CASES)
def test_vjp_matches_finite_differences_and_jvp(module, name):
    """The vjp reads lse and delta in f32 (the contract: dialects/ttensor.py), so its products carry f32's
    relative rounding, ~1e-7: rtol 1e-5 against the finite difference (whose own error is O(h²) ≈ 1e-10)
    and against the jvp, which is f64 throughout and agrees with the finite difference to rtol 1e-8."""
    rng, xs = _inputs(name)
    fd, jvp_v = check_vjp_jvp(module, name, xs, rng, 1e-5, 1e-5, 1e-5)
    assert jvp_v == pytest.approx(fd, rel=1e-8)


def _reference(q, k, v, do, scale, causal):
    """dQ, dK, dV of softmax(scale Q Kᵀ) V written out in numpy (the backward of a materialised softmax)."""
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.arange(s.shape[-1]) > np.arange(s.shape[-2])[:, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, dv


@pytest.mark.parametrize("name, scale, causal", [("plain", 0.4, False), ("causal", 0.6, True),
                                                  ("causal_rect", 0.5, True)])
def test_attention_grad_matches_numpy(module, name, scale, causal):
    """The interpreter's attention_grad (fed its attention_lse and the f32 delta) against numpy's backward
    of the materialised softmax, which computes delta as rowsum(dP ∘ P) instead: rtol 1e-6 and atol 1e-6,
    f32's rounding of lse and delta (~6e-8 × |delta| ≈ 3) times scale · |K| (≈ 2), which is all a causal
    first row's dQ (exactly 0: one key, dP − delta = 0) gets."""
    rng, xs = _inputs(name)
    do = rng.standard_normal(xs[0].shape[:-1] + xs[2].shape[-1:])
    got = module.interpret(f"vjp_{name}", *xs, do)[1:]
    for g, want in zip(got, _reference(*xs, do, scale, causal)):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6)
    if name == "plain":   # K's alone: its one attention_grad gives the same dK
        np.testing.assert_array_equal(module.interpret("vjp_plain_k", *xs, do)[1], got[1])


def _derived(source: str, filename: str):
    """The frontend's module with the derivatives' bodies written (tessera-autodiff, as the interpreter and
    the canonical stage run it), for the passes to rewrite before it is interpreted."""
    m = tessera_frontend_compile(source, {"filename": filename})
    with m.module.context:
        autodiff.run(m.module.operation)
    return m


def _function(m, name):
    return next(op for op in m.module.body.operations if op.operation.name == "func.func"
                and ir.StringAttr(op.attributes["sym_name"]).value == name)


def _ops(fn, name):
    return [op for op in fn.regions[0].blocks[0].operations if op.operation.name == name]


def test_derivative_has_one_lse_and_one_grad_per_operand():
    m = _derived(_source(), "attention.py")
    with m.module.context:
        fn = _function(m, "vjp_causal")
        (fa,) = _ops(fn, "ttensor.flash_attention")
        (lse,) = _ops(fn, "ttensor.attention_lse")
        grads = _ops(fn, "ttensor.attention_grad")
        assert [ir.StringAttr(g.attributes["wrt"]).value for g in grads] == ["q", "k", "v"]
        assert list(lse.operands) == list(fa.operands)[:2] and lse.attributes["causal"] == fa.attributes["causal"]
        assert all(list(g.operands)[:3] == list(fa.operands) and g.operands[4] == lse.results[0] for g in grads)
        ops = list(fn.regions[0].blocks[0].operations)
        assert ops.index(lse.operation) < ops.index(fa.operation)   # beside the forward, before it
        (only_k,) = _ops(_function(m, "vjp_plain_k"), "ttensor.attention_grad")
        assert ir.StringAttr(only_k.attributes["wrt"]).value == "k"


@pytest.mark.parametrize("name", ["plain", "causal", "causal_rect", "self"])
def test_fallback_matches_the_fused_ops(module, name):
    """passes/decompose.py's GEMM fallback, interpreted (f32 probabilities, the causal softmax the
    interpreter honours as the kernels do) against the interpreter's attention_grad: rtol 1e-5 (f32 P)."""
    m = _derived(_source(), "attention.py")
    with m.module.context:
        fn = _function(m, f"vjp_{name}")
        n = len(_ops(fn, "ttensor.attention_grad"))
        assert decompose.attention_backward(fn, frozenset({"f64"})) == 0   # a target with f64 kernels keeps them
        assert decompose.attention_backward(fn, frozenset()) == n + n // 3
        assert not _ops(fn, "ttensor.attention_grad") and not _ops(fn, "ttensor.attention_lse")
    rng, xs = _inputs(name)
    do = rng.standard_normal(np.asarray(module.interpret(name, *xs)).shape)
    got = m.interpret(f"vjp_{name}", *xs, do)
    want = module.interpret(f"vjp_{name}", *xs, do)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * np.abs(w).max())


def test_fallback_lse_when_read(module):
    """An attention_lse something other than the gradients reads is rewritten too (m − log max P): with the
    gradients left fused, they read the decomposed lse. rtol 1e-6: f32 both ways."""
    m = _derived(_source(), "attention.py")
    with m.module.context:
        fn = _function(m, "vjp_causal_rect")
        (lse,) = _ops(fn, "ttensor.attention_lse")
        decompose._rewrite_lse(lse, decompose.graph_shapes.infer(fn))
        assert not _ops(fn, "ttensor.attention_lse") and _ops(fn, "ttensor.attention_grad")
    rng, xs = _inputs("causal_rect")
    do = rng.standard_normal((3, 5))
    got = m.interpret("vjp_causal_rect", *xs, do)
    for g, w in zip(got, module.interpret("vjp_causal_rect", *xs, do)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7 * np.abs(w).max())


def _groups(fn):
    out = {}
    for op in fn.regions[0].blocks[0].operations:
        if "tessera.group" in op.attributes:
            out.setdefault(op.operation.name, []).append((ir.IntegerAttr(op.attributes["tessera.group"]).value,
                                                          ir.StringAttr(op.attributes["tessera.group_kind"]).value))
    return out


F32 = """
from tessera import f32, function, op, tensor, vjp

@function
def att(Q: tensor[f32, 2, "S", 16], K: tensor[f32, 2, "T", 16], V: tensor[f32, 2, "T", 8]):
    return op.flash_attention(Q, K, V, causal=True, scale=0.25)

vjp_att = vjp(att)
"""


@pytest.mark.parametrize("decomposed", [False, True])
def test_fusion_groups_lse_with_the_forward_and_the_gradients_together(decomposed):
    """On a target with the fused kernels: the lse joins the forward's attention group (the undecomposed
    flash_attention, as the ptx backend keeps it, or the CPU's decomposed f32 chain), the three
    attention_grad ops one attention_bwd group."""
    m = _derived(F32, "att.py")
    with m.module.context:
        fn = _function(m, "vjp_att")
        if decomposed:
            decompose.attention(fn)
        fusion.run(fn, fused_attention=decomposed)
        groups = _groups(fn)
        (lse,) = groups["ttensor.attention_lse"]
        forward = groups["ttensor.matmul"][:2] if decomposed else groups["ttensor.flash_attention"]
        assert lse[1] == "attention" and all(g == lse for g in forward)
        assert len(groups["ttensor.attention_grad"]) == 3 and len(set(groups["ttensor.attention_grad"])) == 1
        assert groups["ttensor.attention_grad"][0][1] == "attention_bwd"
        if decomposed:   # both matmuls, the scale and the softmax of the chain
            assert groups["ttensor.softmax"] == [lse]


# dtype -> (rtol, atol as a fraction of the gradient's largest element). f32: the CPU's exp and blocked sums.
# bf16: the interpreter and the CPU round P, dS and the results to bf16 (2^-8) at different points.
CPU_TOLERANCES = {"f32": (1e-4, 1e-5), "bf16": (5e-2, 2e-2)}

PLAIN = """
@function
def plain(Q: tensor[f32, 2, "S", 16], K: tensor[f32, 2, "T", 16], V: tensor[f32, 2, "T", 8]):
    return op.flash_attention(Q, K, V, scale=0.3)

vjp_plain = vjp(plain)
"""


@pytest.mark.parametrize("dtype", CPU_TOLERANCES)
def test_compiled_cpu_matches_the_interpreter(dtype):
    """The CPU image against the interpreter, at two sizes of the symbolic extents, causal and not. bf16 has
    no fused CPU attention kernels (TargetFacts.fused_attention_backward): the GEMM fallback of
    passes/decompose.py; f32 takes the fused kernels where the CPU declares them, the fallback before."""
    src = (F32 + PLAIN).replace("f32", dtype)
    m = tessera_frontend_compile(src, {"filename": "att.py"})
    prog = executor.load(compiler.compile_source(src, "att.py").image)
    rtol, atol = CPU_TOLERANCES[dtype]
    rng = np.random.default_rng(5)
    for name, s, t in [("vjp_att", 7, 7), ("vjp_att", 5, 9), ("vjp_plain", 6, 11), ("vjp_plain", 33, 20)]:
        xs = [rng.standard_normal(sh).astype(np.float32) for sh in [(2, s, 16), (2, t, 16), (2, t, 8), (2, s, 8)]]
        want = m.interpret(name, *xs)
        got = prog.function(name)(*xs)
        for w, c in zip(want, got):
            assert w.shape == c.shape
            np.testing.assert_allclose(c, w, rtol=rtol, atol=atol * np.abs(w).max())
