"""Graph IR functions on the CPU against numpy, in the same process: a gelu/bias/scale chain over 2^24
elements, softmax and layernorm over rows, an MLP (matmul + bias + gelu fused, then matmul), and attention
(`op.flash_attention`, plain and causal, and softmax + dropout + V written out: one fused kernel each).

    python bench/graph_cpu.py [--bounds-checks]

--bounds-checks times every row compiled with bounds checks (the default) against the program compiled with
--no-bounds-checks instead of numpy, in alternation.

numpy's peers are written the way a numpy user would (vectorized, temporaries allowed); the exact gelu
needs erf, which numpy lacks, so its peer uses the tanh form (cheaper than exact) — a conservative peer.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, machine, parse_args, report, report_checks  # noqa: E402

from tessera import compiler, executor  # noqa: E402

SRC = """
@function
def chain(X: tensor[f32, "R", "C"], b: tensor[f32, "C"]):
    return op.gelu(op.bias_add(X, b), approximate="tanh") * 0.5

@function
def mlp(X: tensor[f32, "T", "D"], W1: tensor[f32, "D", "F"], b1: tensor[f32, "F"], W2: tensor[f32, "F", "D"]):
    return op.gelu(op.bias_add(X @ W1, b1), approximate="tanh") @ W2

@function
def softmax(X: tensor[f32, "R", "C"]):
    return op.softmax(X)

@function
def layernorm(X: tensor[f32, "R", "C"], g: tensor[f32, "C"], b: tensor[f32, "C"]):
    return op.layernorm(X, gamma=g, beta=b)

@function
def attention(Q: tensor[f32, "B", "S", 64], K: tensor[f32, "B", "S", 64], V: tensor[f32, "B", "S", 64]):
    return op.flash_attention(Q, K, V)

@function
def causal(Q: tensor[f32, "B", "S", 64], K: tensor[f32, "B", "S", 64], V: tensor[f32, "B", "S", 64]):
    return op.flash_attention(Q, K, V, causal=True)

@function
def dropped(Q: tensor[f32, "B", "S", 64], K: tensor[f32, "B", "S", 64], V: tensor[f32, "B", "S", 64]):
    P = op.dropout(op.softmax(Q @ op.transpose(K, perm=(0, 2, 1)) * 0.125), p=0.1, seed=5)
    return P @ V
"""


def np_chain(X, b):
    z = X + b
    return 0.5 * (0.5 * z * (1.0 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3))))


def np_mlp(X, W1, b1, W2):
    z = X @ W1 + b1
    return (0.5 * z * (1.0 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))) @ W2


def np_softmax(X):
    e = np.exp(X - X.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_layernorm(X, g, b):
    m = X.mean(axis=-1, keepdims=True)
    v = X.var(axis=-1, keepdims=True)
    return (X - m) / np.sqrt(v + 1e-5) * g + b


def np_attention(Q, K, V, causal=False, keep=None):
    """softmax(Q Kᵀ / 8) V as a numpy user writes it; `keep` a dropout mask of probability 0.1."""
    s = Q @ K.transpose(0, 2, 1) * np.float32(0.125)
    if causal:
        s[:, np.triu(np.ones(s.shape[1:], bool), 1)] = -np.inf
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    if keep is not None:
        p = np.where(keep, p / np.float32(0.9), np.float32(0.0))
    return p @ V


def bench_attention(prog, rng) -> None:
    """8 heads of 512 queries and keys, head dimension 64. numpy's dropout peer draws its mask with numpy's
    generator each call, as a numpy user would; the check uses Tessera's Philox mask."""
    from tessera.numerics.philox import uniforms
    B, S, D = 8, 512, 64
    Q, K, V = (rng.standard_normal((B, S, D), dtype=np.float32) for _ in range(3))
    flops = 4 * B * S * S * D / 1e9
    row = {"shape": (B, S, S, D), "dtype": "f32", "bytes": 4 * 4 * B * S * D}   # Q, K, V read, O written
    for name, causal in (("attention", False), ("causal", True)):
        fn = getattr(prog, name)
        np.testing.assert_allclose(fn(Q, K, V), np_attention(Q, K, V, causal), rtol=1e-4, atol=1e-5)
        report(f"{name} {B}x{S}x{S}x{D}", best_time(lambda: fn(Q, K, V), 5),
               best_time(lambda: np_attention(Q, K, V, causal), 5), "numpy", "GFLOP/s", flops, **row)
    keep = uniforms(B * S * S, 5, 0).reshape(B, S, S) >= 0.1
    np.testing.assert_allclose(prog.dropped(Q, K, V), np_attention(Q, K, V, keep=keep), rtol=1e-4, atol=1e-5)
    report(f"softmax+dropout+V {B}x{S}x{S}x{D}", best_time(lambda: prog.dropped(Q, K, V), 5),
           best_time(lambda: np_attention(Q, K, V, keep=rng.random((B, S, S), dtype=np.float32) >= 0.1), 5),
           "numpy", "GFLOP/s", flops, **row)


def checks_cost(rng) -> None:
    """Each row's program with bounds checks against the same program compiled without."""
    checked = executor.load(compiler.compile_source(SRC, "bench_graph.py").image)
    unchecked = executor.load(compiler.compile_source(SRC, "bench_graph.py",
                                                      compiler.CompileOptions(bounds_checks=False)).image)
    X, b = rng.standard_normal((4096, 4096), dtype=np.float32), rng.standard_normal(4096, dtype=np.float32)
    Xm, W1 = rng.standard_normal((512, 512), dtype=np.float32), rng.standard_normal((512, 2048), dtype=np.float32)
    b1, W2 = rng.standard_normal(2048, dtype=np.float32), rng.standard_normal((2048, 512), dtype=np.float32)
    Xs = rng.standard_normal((8192, 1024), dtype=np.float32)
    g, bb = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
    Q, K, V = (rng.standard_normal((8, 512, 64), dtype=np.float32) for _ in range(3))
    rows = (("gelu(x+b)*0.5, 2^24", "chain", (X, b)), ("mlp 512x512x2048", "mlp", (Xm, W1, b1, W2)),
            ("softmax rows 8192x1024", "softmax", (Xs,)), ("layernorm rows 8192x1024", "layernorm", (Xs, g, bb)),
            ("attention 8x512x512x64", "attention", (Q, K, V)), ("causal 8x512x512x64", "causal", (Q, K, V)),
            ("softmax+dropout+V 8x512", "dropped", (Q, K, V)))
    for name, fn, args in rows:
        report_checks(name, lambda: getattr(checked, fn)(*args), lambda: getattr(unchecked, fn)(*args))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bounds-checks", action="store_true", help="checked against --no-bounds-checks")
    args = parse_args(p)
    print(f"machine: {machine()}")
    if args.bounds_checks:
        checks_cost(np.random.default_rng(0))
        return
    prog = executor.load(compiler.compile_source(SRC, "bench_graph.py").image)
    rng = np.random.default_rng(0)
    R, C = 4096, 4096   # 2^24 elements
    X, b = rng.standard_normal((R, C), dtype=np.float32), rng.standard_normal(C, dtype=np.float32)
    np.testing.assert_allclose(prog.chain(X, b), np_chain(X, b), rtol=1e-4, atol=1e-5)
    report("gelu(x+b)*0.5, 2^24", best_time(lambda: prog.chain(X, b), 5),
           best_time(lambda: np_chain(X, b), 5), "numpy", "GB/s", 8 * R * C / 1e9, shape=(R, C), dtype="f32",
           flops=12 * R * C)   # the tanh form: about 12 operations an element
    for T, D, F in ((512, 512, 2048), (512, 1024, 4096)):
        Xm = rng.standard_normal((T, D), dtype=np.float32)
        W1 = rng.standard_normal((D, F), dtype=np.float32) * 0.03
        W2 = rng.standard_normal((F, D), dtype=np.float32) * 0.03
        b1 = rng.standard_normal(F, dtype=np.float32)
        np.testing.assert_allclose(prog.mlp(Xm, W1, b1, W2), np_mlp(Xm, W1, b1, W2), rtol=1e-3, atol=1e-3)
        report(f"mlp {T}x{D}x{F}", best_time(lambda: prog.mlp(Xm, W1, b1, W2), 5),
               best_time(lambda: np_mlp(Xm, W1, b1, W2), 5), "numpy", "GFLOP/s", 4 * T * D * F / 1e9,
               shape=(T, D, F), dtype="f32", bytes=4 * (2 * T * D + 2 * D * F + F))
    Xs = rng.standard_normal((8192, 1024), dtype=np.float32)
    np.testing.assert_allclose(prog.softmax(Xs), np_softmax(Xs), rtol=1e-5, atol=1e-7)
    report("softmax rows 8192x1024", best_time(lambda: prog.softmax(Xs), 5),
           best_time(lambda: np_softmax(Xs), 5), "numpy", "GB/s", 8 * Xs.size / 1e9, shape=Xs.shape, dtype="f32")
    g, bb = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
    np.testing.assert_allclose(prog.layernorm(Xs, g, bb), np_layernorm(Xs, g, bb), rtol=1e-4, atol=1e-4)
    report("layernorm rows 8192x1024", best_time(lambda: prog.layernorm(Xs, g, bb), 5),
           best_time(lambda: np_layernorm(Xs, g, bb), 5), "numpy", "GB/s", 8 * Xs.size / 1e9, shape=Xs.shape,
           dtype="f32")
    bench_attention(prog, rng)


if __name__ == "__main__":
    main()
