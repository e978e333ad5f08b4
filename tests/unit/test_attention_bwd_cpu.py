"""The CPU's fused attention backward (backends/cpu/attention_bwd.py) and the forward's log-sum-exp output
(backends/cpu/attention.py, AttentionSpec.lse), against float64 numpy references.

Tolerances: the gradients within 1e-5 of the largest reference magnitude (f32 products over D, E and the
sequence, the kernel's exp within 1e-7 relative; measured about 1e-6); lse within 4e-6 absolute (values of
magnitude ~1-5)."""

import dataclasses

import numpy as np
import pytest

from tessera import compiler, executor, runtime, tessera_frontend_compile
from tessera.backends.cpu import attention, attention_bwd
from tessera.tools import kernels

RNG = np.random.default_rng(151)

# Partial key blocks and row tiles, D and E not multiples of the vector width, one key, more queries than
# keys and fewer.
SHAPES = [(2, 37, 53, 24, 20), (1, 1, 1, 3, 1), (3, 5, 90, 7, 33), (1, 77, 13, 64, 16)]


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def reference(Q, K, V, dO, scale, causal):
    """(O, lse, delta, dQ, dK, dV) in float64."""
    Q, K, V, dO = (x.astype(np.float64) for x in (Q, K, V, dO))
    s = Q @ np.swapaxes(K, -1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
    p = np.exp(s - lse)
    O = p @ V
    delta = (dO * O).sum(-1, keepdims=True)
    dS = p * (dO @ np.swapaxes(V, -1, -2) - delta)
    return O, lse[..., 0], delta[..., 0], scale * dS @ K, scale * np.swapaxes(dS, -1, -2) @ Q, \
        np.swapaxes(p, -1, -2) @ dO


def close(got, want, rel=1e-5):
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * max(np.abs(want).max(), 1e-30))


@pytest.mark.parametrize("causal", [False, True])
def test_forward_writes_the_rows_log_sum_exp(causal):
    spec = attention.AttentionSpec("fwd", scale=0.3, causal=causal, lse=True)
    kernel = runtime.load(kernels.compile_attention(spec)).fwd
    for B, SQ, SK, D, E in SHAPES:
        Q, K, V = randn(B, SQ, D), randn(B, SK, D), randn(B, SK, E)
        O, lse = np.full((B, SQ, E), np.nan, np.float32), np.full((B, SQ), np.nan, np.float32)
        kernel(Q, np.ascontiguousarray(np.swapaxes(K, 1, 2)), V, O, lse,
               grid=attention.attention_grid(spec, B, SQ), block=1)
        want = reference(Q, K, V, np.zeros((B, SQ, E), np.float32), 0.3, causal)
        np.testing.assert_allclose(O, want[0], rtol=0, atol=4e-6)
        np.testing.assert_allclose(lse, want[1], rtol=0, atol=4e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("wrt", [("q", "k", "v"), ("v",), ("k",), ("q", "v")])
def test_backward_over_edge_shapes(causal, wrt):
    spec = attention_bwd.AttentionBwdSpec("bwd", scale=0.3, causal=causal, wrt=wrt)
    kernel = runtime.load(kernels.compile_attention_bwd(spec)).bwd
    for B, SQ, SK, D, E in SHAPES:
        Q, K, V, dO = randn(B, SQ, D), randn(B, SK, D), randn(B, SK, E), randn(B, SQ, E)
        _, lse, delta, *grads = reference(Q, K, V, dO, 0.3, causal)
        want = dict(zip("qkv", grads))
        got = {w: np.full(want[w].shape, np.nan, np.float32) for w in wrt}
        kernel(Q, K, V, dO, lse.astype(np.float32), delta.astype(np.float32), *(got[w] for w in "qkv" if w in got),
               grid=attention_bwd.attention_bwd_grid(spec, B), block=1)
        for w in wrt:
            close(got[w], want[w])


def test_backward_is_deterministic_and_ignores_blocks_outside_its_grid():
    """dQ is summed over the key blocks by the one block that owns it: the same bits every run, and a larger
    grid (blocks past x = 0 or past B) changes nothing (they would add to dQ a second time)."""
    spec = attention_bwd.AttentionBwdSpec("bwd", scale=0.125, causal=True)
    kernel = runtime.load(kernels.compile_attention_bwd(spec)).bwd
    B, SQ, SK, D, E = 4, 100, 100, 32, 32
    Q, K, V, dO = randn(B, SQ, D), randn(B, SK, D), randn(B, SK, E), randn(B, SQ, E)
    _, lse, delta, *want = reference(Q, K, V, dO, 0.125, True)
    runs = []
    for grid in (attention_bwd.attention_bwd_grid(spec, B), (3, B + 2, 1), attention_bwd.attention_bwd_grid(spec, B)):
        out = [np.full(w.shape, np.nan, np.float32) for w in want]
        kernel(Q, K, V, dO, lse.astype(np.float32), delta.astype(np.float32), *out, grid=grid, block=1)
        runs.append(out)
    for got, w in zip(runs[0], want):
        close(got, w)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)


def test_spec_refusals():
    with pytest.raises(ValueError, match="not an identifier"):
        attention_bwd.AttentionBwdSpec("a-b")
    with pytest.raises(ValueError, match="wrt must name distinct ones of q, k, v"):
        attention_bwd.AttentionBwdSpec("a", wrt=("q", "o"))
    with pytest.raises(ValueError, match="wrt must name distinct ones of q, k, v"):
        attention_bwd.AttentionBwdSpec("a", wrt=())
    with pytest.raises(ValueError, match="multiple of vector_width"):
        attention_bwd.AttentionBwdSpec("a", cols=12, vector_width=8)


GRAD = '''
from tessera import f32, function, grad, op, tensor

@function
def loss(Q: tensor[f32, "B", "H", "S", 40], K: tensor[f32, "B", "H", "T", 40], V: tensor[f32, "B", "H", "T", 24],
         W: tensor[f32, "B", "H", "S", 24]):
    return op.sum(op.flash_attention(Q, K, V, causal={causal}, scale=0.2) * W)

dloss = grad(loss, argnums=(0, 1, 2))
dq = grad(loss, argnums=0)
'''


def compiled(src, monkeypatch=None, fused=True):
    """(program, plans, interpreter module); `fused=False` compiles with the CPU's fused backward kernels
    withheld from the fusion phase (the GEMM fallback)."""
    if not fused:
        from tessera.backends.cpu.backend import CPUBackend
        facts = CPUBackend.target_facts
        monkeypatch.setattr(CPUBackend, "target_facts",
                            lambda self: dataclasses.replace(facts(self), fused_attention_backward=frozenset()))
        monkeypatch.setenv("TESSERA_CACHE", "0")   # the cache's key does not see the patched facts
    result = compiler.compile_source(src, "attn.py")
    return executor.load(result.image), result.metadata["plans"], tessera_frontend_compile(src, {"filename": "attn.py"})


def squares(plan) -> list:
    """The plan's values with both a query extent S and a key extent T: S×T matrices."""
    return [v["dims"] for v in plan["values"].values() if "S" in v["dims"] and "T" in v["dims"]]


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_of_flash_attention_run_fused_without_the_score_matrix(causal):
    """grad through op.flash_attention compiled for the CPU: the forward's kernel writes lse, one backward
    kernel computes dQ, dK and dV, and no plan value is S×T. Against the interpreter at rtol 1e-4 (atol 1e-5 of
    the largest gradient): f32 both, summed in other orders (measured about 7e-7 of the largest)."""
    prog, plans, module = compiled(GRAD.format(causal=causal))
    kinds = [s["kernel"].split("__")[1].rstrip("0123456789") for s in plans["dloss"]["steps"]]
    assert kinds.count("attention") == 1 and kinds.count("attention_bwd") == 1 and "gemm" not in kinds
    assert squares(plans["dloss"]) == [] and squares(plans["dq"]) == []
    rng = np.random.default_rng(5)
    # key counts above and below the query count (non-causal), sizes off the register tile
    for S, T in ([(37, 37), (45, 45)] if causal else [(37, 45), (45, 37), (1, 1)]):
        args = [rng.standard_normal(shape).astype(np.float32)
                for shape in [(2, 3, S, 40), (2, 3, T, 40), (2, 3, T, 24), (2, 3, S, 24)]]
        want = module.interpret("dloss", *args)
        # one key: dQ and dK are 0 up to rounding, so the scale is the largest of the three gradients
        atol = 1e-5 * max(np.abs(w).max() for w in want)
        for g, w in zip(prog.dloss(*args), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol)
        np.testing.assert_allclose(prog.dq(*args), want[0], rtol=1e-4, atol=atol)


def test_the_gemm_fallback_materialises_the_score_matrix(monkeypatch):
    """Without the fused kernels (what targets lacking them run) the same gradients take GEMMs over S×T
    probabilities: what the test above checks is absent."""
    prog, plans, module = compiled(GRAD.format(causal=True), monkeypatch, fused=False)
    assert squares(plans["dloss"])
    assert not any("attention_bwd" in s.get("kernel", "") for s in plans["dloss"]["steps"])
    rng = np.random.default_rng(6)
    args = [rng.standard_normal(shape).astype(np.float32)
            for shape in [(1, 2, 19, 40), (1, 2, 19, 40), (1, 2, 19, 24), (1, 2, 19, 24)]]
    for g, w in zip(prog.dloss(*args), module.interpret("dloss", *args)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * np.abs(w).max())
