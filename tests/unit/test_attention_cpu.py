"""Fused attention on the CPU (passes/fusion.py's attention groups, backends/cpu/attention.py), against the
reference interpreter and numpy. Tolerances: 2e-6 absolute on outputs of magnitude ~1 (f32 scores and
probabilities, the kernel's exp within 1e-7 relative, sums in another order than float64's); dropout masks
exactly (the same Philox stream)."""

import numpy as np
import pytest

from tessera import compiler, executor, runtime, tessera_frontend_compile
from tessera.backends.cpu import attention
from tessera.numerics.philox import uniforms
from tessera.tools import kernels

RNG = np.random.default_rng(23)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def reference(Q, K, V, scale, causal=False, dropout=None):
    s = np.matmul(Q.astype(np.float64), np.swapaxes(K, -1, -2)) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    if dropout is not None:
        rate, seed, offset = dropout
        u = uniforms(p.size, seed, offset).reshape(p.shape)
        p = np.where(u >= rate, p / (1 - rate), 0.0)
    return p @ V


def compiled(src):
    result = compiler.compile_source(src, "attn.py")
    return executor.load(result.image), result.metadata["plans"], tessera_frontend_compile(src, {"filename": "attn.py"})


FLASH = """
@function
def attn(Q: tensor[f32, "B", "H", "S", 40], K: tensor[f32, "B", "H", "T", 40], V: tensor[f32, "B", "H", "T", 24]):
    return op.flash_attention(Q, K, V, causal={causal}, scale=0.2)
"""


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S, T", [(37, 45), (45, 37), (1, 1), (64, 64)])
def test_flash_attention_runs_as_one_fused_kernel(causal, S, T):
    prog, plans, module = compiled(FLASH.format(causal=causal))
    # one kernel: no score or probability tensor, and no Kᵀ (its key strips are packed from K's rows)
    assert [s["kernel"] for s in plans["attn"]["steps"]] == ["attn__attention0"]
    Q, K, V = randn(2, 3, S, 40), randn(2, 3, T, 40), randn(2, 3, T, 24)
    got = prog.attn(Q, K, V)
    np.testing.assert_allclose(got, module.interpret("attn", Q, K, V), rtol=0, atol=2e-6)
    np.testing.assert_allclose(got, reference(Q, K, V, 0.2, causal), rtol=0, atol=2e-6)


DROPPED = """
@function
def attn(Q: tensor[f32, "S", 16], K: tensor[f32, "T", 16], V: tensor[f32, "T", "E"]):
    P = op.dropout(op.softmax(Q @ K.T * 0.25), p=0.5, seed=2024, offset=11)
    return P @ V
"""


def test_softmax_dropout_and_v_fuse_with_the_interpreters_mask():
    """With V the identity, the output is P itself: every dropped element must be the interpreter's."""
    prog, plans, module = compiled(DROPPED)
    assert [s["kernel"] for s in plans["attn"]["steps"]] == ["attn__attention0"]
    Q, K = randn(29, 16), randn(53, 16)
    V = np.eye(53, dtype=np.float32)
    got, want = prog.attn(Q, K, V), module.interpret("attn", Q, K, V)
    assert np.array_equal(got == 0, want == 0) and 0.4 < np.mean(want == 0) < 0.6
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
    V = randn(53, 9)
    np.testing.assert_allclose(prog.attn(Q, K, V), reference(Q, K, V, 0.25, dropout=(0.5, 2024, 11)), rtol=0,
                               atol=4e-6)


def test_a_transpose_of_k_used_elsewhere_stays_a_layout_kernel():
    """Kᵀ returned too: the transpose is written once by its layout kernel, and the fused kernel reads it."""
    src = """
@function
def attn(Q: tensor[f32, "S", 16], K: tensor[f32, "T", 16], V: tensor[f32, "T", 8]):
    KT = K.T
    return op.softmax(Q @ KT * 0.25) @ V, KT
"""
    prog, plans, module = compiled(src)
    assert [s["kernel"] for s in plans["attn"]["steps"]] == ["attn__layout1", "attn__attention0"]
    Q, K, V = randn(10, 16), randn(12, 16), randn(12, 8)
    for got, want in zip(prog.attn(Q, K, V), module.interpret("attn", Q, K, V)):
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_a_chain_whose_probabilities_are_used_elsewhere_is_not_fused():
    src = """
@function
def attn(Q: tensor[f32, "S", 16], K: tensor[f32, "T", 16], V: tensor[f32, "T", 8]):
    P = op.softmax(Q @ K.T)
    return P @ V, P
"""
    prog, plans, module = compiled(src)
    assert not any("attention" in s["kernel"] for s in plans["attn"]["steps"])
    Q, K, V = randn(10, 16), randn(12, 16), randn(12, 8)
    for got, want in zip(prog.attn(Q, K, V), module.interpret("attn", Q, K, V)):
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dropout", [None, (0.3, 7, 5)])
@pytest.mark.parametrize("tiles", [4, 1])
def test_generator_over_edge_shapes(causal, dropout, tiles):
    """Block rows, key tiles and Dv tiles that are partial, D and Dv not multiples of the vector width, one
    key, more queries than keys and fewer; blocks of one register tile of rows and of several (the last
    block's tiles partial or missing), keys a power of two (the padded scratch rows)."""
    spec = attention.AttentionSpec("att", scale=0.3, causal=causal, dropout=dropout, tiles=tiles)
    kernel = runtime.load(kernels.compile_attention(spec)).att
    rows = attention.AttentionSpec("att", scale=0.3, causal=causal, dropout=dropout, tiles=tiles, keys_rows=True)
    from_rows = runtime.load(kernels.compile_attention(rows)).att
    for B, SQ, SK, D, DV in [(2, 37, 53, 24, 20), (1, 1, 1, 3, 1), (3, 5, 90, 7, 33), (1, 77, 13, 64, 16),
                             (2, 130, 128, 16, 40), (1, 20, 35, 40, 8)]:
        Q, K, V = randn(B, SQ, D), randn(B, SK, D), randn(B, SK, DV)
        O = np.full((B, SQ, DV), np.nan, np.float32)
        kernel(Q, np.ascontiguousarray(np.swapaxes(K, 1, 2)), V, O, grid=attention.attention_grid(spec, B, SQ),
               block=1)
        np.testing.assert_allclose(O, reference(Q, K, V, 0.3, causal, dropout), rtol=0, atol=4e-6)
        # K's rows (keys_rows): the strips packed by register transposes are the same, so is every sum
        O_rows = np.full((B, SQ, DV), np.nan, np.float32)
        from_rows(Q, K, V, O_rows, grid=attention.attention_grid(rows, B, SQ), block=1)
        assert np.array_equal(O_rows, O), (B, SQ, SK, D, DV, np.nanmax(np.abs(O_rows - O)))


def test_spec_refusals():
    with pytest.raises(ValueError, match="not an identifier"):
        attention.AttentionSpec("a-b")
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        attention.AttentionSpec("a", dropout=(1.0, 1, 0))
    with pytest.raises(ValueError, match="multiple of vector_width"):
        attention.AttentionSpec("a", cols=12, vector_width=8)
    with pytest.raises(ValueError, match="tiles must be positive"):
        attention.AttentionSpec("a", tiles=0)


def _exp_kernel(module):
    """y = attention.exp_nonpositive(x) over 16-lane vectors of x (N a multiple of 16), one block."""
    from tessera.backends.cpu.irbuild import LAUNCH_ARGS, idx, mul, scf_for
    from tessera.mlir import arith, func, ir, memref, scf, vector
    f32 = ir.F32Type.get()
    vec = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], f32)
    index = ir.IndexType.get()
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp("expk", ir.FunctionType.get([vec, vec] + [index] * len(LAUNCH_ARGS), []))
    fn.attributes["tessera.kernel"] = ir.UnitAttr.get()
    fn.attributes["tessera.tile_kernel"] = ir.UnitAttr.get()
    named = [ir.DictAttr.get({"tessera.name": ir.StringAttr.get(n), "tessera.dims": ir.ArrayAttr.get(
        [ir.StringAttr.get("N")])}) for n in ("X", "Y")]
    fn.arg_attrs = ir.ArrayAttr.get(named + [ir.DictAttr.get({})] * len(LAUNCH_ARGS))
    entry = fn.add_entry_block()
    x, y = entry.arguments[0], entry.arguments[1]
    vt = ir.VectorType.get([16], f32)
    with ir.InsertionPoint(entry):
        n = memref.DimOp(x, idx(0)).result
        loop = scf_for(0, arith.DivSIOp(n, idx(16)).result)
        with ir.InsertionPoint(loop.body):
            at = [mul(loop.induction_variable, 16)]
            vector.StoreOp(attention.exp_nonpositive(vector.LoadOp(vt, x, at).result), y, at)
            scf.YieldOp([])
        func.ReturnOp([])


def test_exp_nonpositive_against_float64():
    """The softmax pass's exp (x ≤ 0 only): within 2e-7 relative of float64's e^x down to -87 (normal results),
    exactly 1 at 0, exactly 0 at -inf and far below, NaN kept; results in (-88, -87) tiny or 0."""
    k = getattr(runtime.load(kernels.compile_built(_exp_kernel).image), "expk")
    x = np.concatenate([-np.geomspace(1e-8, 87.0, 4000), np.linspace(-87.0, 0.0, 4000), [0.0, -0.0, -np.inf, -100.0,
                        -1e30, -88.5, -87.5, np.nan]]).astype(np.float32)
    x = np.concatenate([x, np.zeros((-len(x)) % 16, np.float32)])
    y = np.empty_like(x)
    k(x, y, grid=(1, 1, 1), block=1)
    normal = x >= -87.0
    want = np.exp(x[normal].astype(np.float64))
    assert np.max(np.abs(y[normal] - want) / want) < 2e-7
    assert y[x == 0].tolist() == [1.0] * int(np.sum(x == 0))
    assert np.all(y[np.isin(x, [-np.inf, -100.0, -1e30, -88.5])] == 0.0)
    assert 0.0 <= y[x == np.float32(-87.5)][0] < 2e-38
    assert np.isnan(y[np.isnan(x)]).all()
