"""Graph IR functions on the CPU against numpy, in the same process: a gelu/bias/scale chain over 2^24
elements, softmax and layernorm over rows, and an MLP (matmul + bias + gelu fused, then matmul).

    python bench/graph_cpu.py

numpy's peers are written the way a numpy user would (vectorized, temporaries allowed); the exact gelu
needs erf, which numpy lacks, so its peer uses the tanh form (cheaper than exact) — a conservative peer.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, machine, report  # noqa: E402

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


def main() -> None:
    print(f"machine: {machine()}")
    prog = executor.load(compiler.compile_source(SRC, "bench_graph.py").image)
    rng = np.random.default_rng(0)
    R, C = 4096, 4096   # 2^24 elements
    X, b = rng.standard_normal((R, C), dtype=np.float32), rng.standard_normal(C, dtype=np.float32)
    np.testing.assert_allclose(prog.chain(X, b), np_chain(X, b), rtol=1e-4, atol=1e-5)
    report("gelu(x+b)*0.5, 2^24", best_time(lambda: prog.chain(X, b), 5),
           best_time(lambda: np_chain(X, b), 5), "numpy", "GB/s", 8 * R * C / 1e9)
    for T, D, F in ((512, 512, 2048), (512, 1024, 4096)):
        Xm = rng.standard_normal((T, D), dtype=np.float32)
        W1 = rng.standard_normal((D, F), dtype=np.float32) * 0.03
        W2 = rng.standard_normal((F, D), dtype=np.float32) * 0.03
        b1 = rng.standard_normal(F, dtype=np.float32)
        np.testing.assert_allclose(prog.mlp(Xm, W1, b1, W2), np_mlp(Xm, W1, b1, W2), rtol=1e-3, atol=1e-3)
        report(f"mlp {T}x{D}x{F}", best_time(lambda: prog.mlp(Xm, W1, b1, W2), 5),
               best_time(lambda: np_mlp(Xm, W1, b1, W2), 5), "numpy", "GFLOP/s", 4 * T * D * F / 1e9)
    Xs = rng.standard_normal((8192, 1024), dtype=np.float32)
    np.testing.assert_allclose(prog.softmax(Xs), np_softmax(Xs), rtol=1e-5, atol=1e-7)
    report("softmax rows 8192x1024", best_time(lambda: prog.softmax(Xs), 5),
           best_time(lambda: np_softmax(Xs), 5), "numpy", "GB/s", 8 * Xs.size / 1e9)
    g, bb = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
    np.testing.assert_allclose(prog.layernorm(Xs, g, bb), np_layernorm(Xs, g, bb), rtol=1e-4, atol=1e-4)
    report("layernorm rows 8192x1024", best_time(lambda: prog.layernorm(Xs, g, bb), 5),
           best_time(lambda: np_layernorm(Xs, g, bb), 5), "numpy", "GB/s", 8 * Xs.size / 1e9)


if __name__ == "__main__":
    main()
