"""Operator programs: every example compiles to verified Graph IR, and the reference interpreter matches an
independent numpy computation. Tolerances: f32 results within 1e-5 relative (the interpreter rounds each
op to f32; numpy's float64 reference does not); bf16 within 2^-7 relative per op chain step (1e-2 here)."""

import math
import pathlib

import numpy as np
import pytest

from tessera import tessera_frontend_compile, tessera_validate_shapes
from tessera.diagnostics import CompileError

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph"
RNG = np.random.default_rng(7)


def load(name: str):
    path = EXAMPLES / f"{name}.py"
    return tessera_frontend_compile(path.read_text(), {"filename": str(path)})


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def layernorm(x, gamma, eps):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * gamma


@pytest.mark.parametrize("name", ["mlp", "attention", "reductions", "precision", "collectives", "transformer_block"])
def test_examples_verify(name):
    m = load(name)
    assert m.functions and tessera_validate_shapes(m).ok
    assert "tessera.function" in m.text()


def test_mlp_block_bf16():
    m = load("mlp")
    X, W1, b1 = randn(8, 256), randn(256, 1024, scale=0.05), randn(1024, scale=0.1)
    W2, b2, gamma = randn(1024, 256, scale=0.03), randn(256, scale=0.1), 1 + randn(256, scale=0.1)
    Y = m.interpret("mlp_block", X, W1, b1, W2, b2, gamma)
    ref = layernorm((gelu(X @ W1 + b1) @ W2 + b2) + X, gamma, 1e-5)
    assert Y.shape == (8, 256) and Y.dtype == np.float32
    np.testing.assert_allclose(Y, ref, rtol=5e-2, atol=5e-2)


def test_swiglu_f32():
    m = load("mlp")
    X, Wg, Wu, Wd = randn(5, 32), randn(32, 48), randn(32, 48), randn(48, 32)
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    np.testing.assert_allclose(m.interpret("swiglu", X, Wg, Wu, Wd), (silu(X @ Wg) * (X @ Wu)) @ Wd,
                               rtol=1e-5, atol=1e-4)


def test_attention_fused_matches_unfused():
    m = load("attention")
    Q, K, V = randn(1, 2, 32, 64), randn(1, 2, 32, 64), randn(1, 2, 32, 64)
    O = m.interpret("fused", Q.astype(np.float16), K.astype(np.float16), V.astype(np.float16))
    q, k, v = (t.astype(np.float16).astype(np.float64) for t in (Q, K, V))
    s = q @ np.swapaxes(k, -1, -2) / 8
    s = np.where(np.triu(np.ones((32, 32), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    assert O.dtype == np.float16
    np.testing.assert_allclose(O, ref, rtol=2e-3, atol=2e-3)
    U = m.interpret("unfused", Q[0, 0], K[0, 0], V[0, 0])
    s = Q[0, 0] @ K[0, 0].T * 0.125
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(U, (p / p.sum(-1, keepdims=True)) @ V[0, 0], rtol=1e-5, atol=1e-5)


def bf16(x):
    """float values rounded to bf16 (nearest even), as float64."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32).astype(np.float64)


def test_transformer_block():
    """The pre-norm block against numpy in float64, rounding where the program casts to bf16 (the GEMMs'
    operands, the attention's output): 1e-2, a few bf16 ulps of the layers' inputs."""
    m = load("transformer_block")
    S = 19
    X, ln1, ln2 = randn(S, 64), 1 + randn(64, scale=0.1), 1 + randn(64, scale=0.1)
    Wq, Wk, Wv, Wo = (randn(64, 64, scale=0.125) for _ in range(4))
    W1, b1, W2, b2 = randn(64, 256, scale=0.125), randn(256, scale=0.1), randn(256, 64, scale=0.0625), randn(64)
    Y = m.interpret("transformer_block", X, ln1, Wq, Wk, Wv, Wo, ln2, W1, b1, W2, b2)
    Wq, Wk, Wv, Wo, W1, W2 = map(bf16, (Wq, Wk, Wv, Wo, W1, W2))
    H = bf16(layernorm(X.astype(np.float64), ln1, 1e-5))
    q, k, v = bf16(H @ Wq), bf16(H @ Wk), bf16(H @ Wv)
    s = np.where(np.triu(np.ones((S, S), bool), 1), -np.inf, q @ k.T / 8)
    p = np.exp(s - s.max(-1, keepdims=True))
    X1 = X + bf16((p / p.sum(-1, keepdims=True)) @ v) @ Wo
    M = gelu(bf16(layernorm(X1, ln2, 1e-5)) @ W1 + b1)
    assert Y.shape == (S, 64) and Y.dtype == np.float32
    np.testing.assert_allclose(Y, X1 + bf16(M) @ W2 + b2, rtol=1e-2, atol=1e-2)


def test_reductions_and_layout():
    m = load("reductions")
    X = randn(3, 8, 16)
    total, row_max, centered, normed = m.interpret("stats", X)
    np.testing.assert_allclose(total, X.sum(), rtol=1e-5)
    np.testing.assert_array_equal(row_max, X.max(-1))
    np.testing.assert_allclose(centered, X - X.mean((1, 2), keepdims=True), rtol=1e-5, atol=1e-6)
    flat = X.transpose(0, 2, 1).reshape(-1, 8)
    np.testing.assert_allclose(normed, flat / np.sqrt((flat ** 2).mean(-1, keepdims=True) + 1e-6), rtol=1e-5)
    x = randn(16)
    np.testing.assert_allclose(m.interpret("broadcast_scale", x, np.float32(3)), np.broadcast_to(x, (4, 16)) * 3 + 1,
                               rtol=1e-6)


def test_fp8_gemm_rounds_inputs_and_accumulates_in_f32():
    m = load("precision")
    A, B = randn(16, 32), randn(32, 8)
    C = m.interpret("fp8_gemm", A, B)
    from tessera.numerics.rounding import round_to
    ref = round_to(round_to(A, "fp8_e4m3") @ round_to(B, "fp8_e4m3"), "f32")
    np.testing.assert_allclose(C, ref, rtol=1e-6)
    assert np.abs(C - A @ B).max() > 1e-3  # fp8 inputs really were rounded


def test_f64_matmul_accumulates_in_f64():
    """`X @ W` of f64 tensors with no policy sums in f64 (language.md); the CPU and ptx GEMMs have no f64
    kind and refuse it at the user's line rather than lose precision. K = 4096 products of size ~1: f64 sums
    stay within ~1e-12 of numpy, an f32 accumulator is off by ~1e-5."""
    src = """
@function
def mm(X: tensor[f64, 8, 4096], W: tensor[f64, 4096, 8]):
    return X @ W
"""
    m = tessera_frontend_compile(src, {"filename": "mm.py"})
    assert "accum = f64" in str(m.module)
    rng = np.random.default_rng(5)
    X, W = rng.standard_normal((8, 4096)), rng.standard_normal((4096, 8))
    out = m.interpret("mm", X, W)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, X @ W, rtol=0, atol=1e-10)
    from tessera import compiler
    from tessera.options import CompileOptions
    for target in ("cpu", "ptx"):
        with pytest.raises(CompileError, match=r"mm\.py:4:12: .*f64"):
            compiler.compile_source(src, "mm.py", CompileOptions(target=target), stop_after="kernels")


def test_bf16_rounding_is_nearest_even():
    m = load("precision")
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -3.14159, 65504.0], np.float32)
    y = m.interpret("bf16_round_trip", x)
    np.testing.assert_array_equal(y, [1.0, 1.0, 1 + 2 ** -6, -3.140625, 65536.0])


def test_dropout_is_reproducible_and_unbiased():
    m = load("precision")
    X = np.abs(randn(64, 256)) + 0.5
    a, b = m.interpret("regularize", X), m.interpret("regularize", X)
    np.testing.assert_array_equal(a, b)  # fixed seed: the same mask every run
    kept = a != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(a[kept], (X / 0.75)[kept], rtol=1e-6)


def test_collectives_spmd():
    m = load("collectives")
    xs = [randn(128) for _ in range(8)]
    out = m.interpret("deterministic_sum", xs, world=8)
    pairs = [xs[i] + xs[i + 1] for i in range(0, 8, 2)]
    tree = (pairs[0] + pairs[1]) + (pairs[2] + pairs[3])
    for o in out:
        np.testing.assert_array_equal(o, tree)  # the binary tree's order, bit for bit
    xs = [randn(16, 4) for _ in range(8)]
    part, whole, first = m.interpret("shard_and_gather", xs, world=8)
    # grid (4 dp x 2 tp): device d has coordinates (d // 2, d % 2); dp groups are {t, t+2, t+4, t+6}
    for d in range(8):
        group = [xs[t] for t in range(d % 2, 8, 2)]
        np.testing.assert_allclose(part[d], sum(group)[4 * (d // 2): 4 * (d // 2) + 4], rtol=1e-6)
        np.testing.assert_allclose(whole[d], sum(group), rtol=1e-6)
        np.testing.assert_array_equal(first[d], whole[d - d % 2])


SHAPE_ERRORS = [
    ("A: tensor[f32, 'M', 'K'], B: tensor[f32, 'J', 'N']", "return A @ B",
     "matmul contracting dimensions: 'K' and 'J' differ", 3, 12),
    ("A: tensor[f32, 'M', 4], B: tensor[f32, 5, 'N']", "return A @ B",
     "matmul contracting dimensions: 4 and 5 differ", 3, 12),
    ("x: tensor[f32, 'M', 'N'], y: tensor[f32, 'N', 'M']", "return x + y",
     "add operand shapes (axis -1): 'N' and 'M' differ", 3, 12),
    ("x: tensor[f32, 'M', 'N'], b: tensor[f32, 'M']", "return op.bias_add(x, b)",
     "bias length and the biased axis: 'N' and 'M' differ", 3, 12),
    ("x: tensor[f32, 6, 8]", "return op.reshape(x, (5, -1))", "cannot reshape [6, 8] into [5, -1]", 3, 12),
    ("x: tensor[f32, 'M']", "return op.softmax(x, axis=1)", "op.softmax: axis 1 is out of range", 3, 12),
    ("x: tensor[f32, 'M'], y: tensor[bf16, 'M']", "return x * y", "different dtypes (f32, bf16); use op.cast", 3, 12),
    ("x: tensor[f32, 'M']", "return op.dropout(x, p=0.1)", "dropout needs a fixed integer seed", 3, 12),
    ("x: tensor[f32, 'M']", "return op.gelu(x, approximate='fast')", "gelu approximate must be", 3, 12),
    ("x: tensor[f32, 'M']", "return op.nonexistent(x)", "unknown operation 'op.nonexistent'", 3, 12),
    ("x: tensor[f32, 'M']", "y = x", "must return its result", 0, 0),
    ("q: tensor[f32, 'S', 'D'], k: tensor[f32, 'S', 'D']", "return op.flash_attention(q, k, k)",
     "the head dimension 'D' is symbolic: give scale=", 3, 12),
]


@pytest.mark.parametrize("params, body, message, line, col", SHAPE_ERRORS)
def test_shape_and_op_errors_are_located(params, body, message, line, col):
    src = f"@function\ndef f({params}):\n    {body}\n"
    with pytest.raises(CompileError) as info:
        tessera_frontend_compile(src, {"filename": "prog.py"})
    e = info.value
    assert message in e.message and e.filename == "prog.py", str(e)
    if line:
        assert (e.line, e.col) == (line, col), str(e)


def test_symbols_bind_to_static_extents():
    """A named extent takes the first static value it meets; a later, different one is an error."""
    src = ("@function\ndef f(A: tensor[f32, 'M', 'K'], B: tensor[f32, 64, 'N'], C: tensor[f32, 32, 'N']):\n"
           "    D = A @ B\n"
           "    return A @ C\n")
    with pytest.raises(CompileError) as info:
        tessera_frontend_compile(src, {"filename": "bind.py"})
    assert str(info.value) == "bind.py:4:12: error: matmul contracting dimensions: 64 and 32 differ"


def test_validate_shapes_policies():
    m = load("reductions")
    assert tessera_validate_shapes(m, "symbolic").ok
    static = tessera_validate_shapes(m, "static")
    assert not static.ok and all(i.filename.endswith("reductions.py") and i.line > 0 for i in static.issues)
    assert "whose shape is not static" in str(static)
    with pytest.raises(ValueError):
        tessera_validate_shapes(m, "bogus")


def test_frontend_compile_options():
    with pytest.raises(TypeError, match="unknown frontend option"):
        tessera_frontend_compile("@function\ndef f(x: tensor[f32, 4]):\n    return x\n", {"optimize": True})
    m = tessera_frontend_compile((EXAMPLES / "mlp.py").read_text(), {"functions": ["swiglu"]})
    assert m.functions == ["swiglu"]
    assert m.bytecode()[:4] == b"ML\xefR"
