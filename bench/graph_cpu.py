"""Graph IR functions on the CPU against XLA (jax.jit) and numpy, in the same process: a gelu/bias/scale chain
over 2^24 elements, softmax and layernorm over rows, an MLP (matmul + bias + gelu fused, then matmul), and
attention (`op.flash_attention`, plain and causal, and softmax + dropout + V written out: one fused kernel each).

    python bench/graph_cpu.py [--rounds 5] [--bounds-checks]

One formula per row, written the way a numpy user would (vectorized, temporaries allowed), serves both peers:
numpy runs it on arrays, XLA runs it jitted (jax.numpy) on arrays jax.device_put placed once, so that XLA fuses
it as it will. The exact gelu needs erf, which numpy lacks, so all three sides use the tanh form. The sides run
in alternation, best of --rounds (common.best_times), each checked against numpy's result first; Tessera and
XLA use every core (common.optional_jax matches XLA's pool to TESSERA_NUM_THREADS=1). XLA is the optional
`bench` extra: without jax its column is left out and every row says so.

--cpu-time also compares Tessera's and XLA's process CPU time per call after each row (gemm_cpu.py's).

--bounds-checks times every row compiled with bounds checks (the default) against the program compiled with
--no-bounds-checks instead of the peers, in alternation.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import machine, optional_jax, parse_args, report_checks, xla_call  # noqa: E402
from gemm_cpu import CPU_TIME, sides_row  # noqa: E402

from tessera import compiler, executor  # noqa: E402
from tessera.backends.cpu.target import worker_threads  # noqa: E402

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


def chain(xp, X, b):
    z = X + b
    return 0.5 * (0.5 * z * (1.0 + xp.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3))))


def mlp(xp, X, W1, b1, W2):
    z = X @ W1 + b1
    return (0.5 * z * (1.0 + xp.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))) @ W2


def softmax(xp, X):
    e = xp.exp(X - X.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(xp, X, g, b):
    m = X.mean(axis=-1, keepdims=True)
    v = X.var(axis=-1, keepdims=True)
    return (X - m) / xp.sqrt(v + 1e-5) * g + b


def attention(xp, Q, K, V, causal=False, keep=None):
    """softmax(Q Kᵀ / 8) V as a numpy user writes it; `keep` a dropout mask of probability 0.1."""
    s = Q @ K.transpose(0, 2, 1) * xp.float32(0.125)
    if causal:
        s = xp.where(xp.triu(xp.ones(s.shape[1:], bool), 1), -xp.inf, s)
    e = xp.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    if keep is not None:
        p = xp.where(keep, p / xp.float32(0.9), xp.float32(0.0))
    return p @ V


class Peers:
    """Each row's sides: Tessera's compiled program `prog`, XLA's jax.jit of the row's formula (where jax
    imports) and numpy's, in alternation, best of `rounds`."""

    def __init__(self, prog, jax, rounds: int):
        self.prog, self.jax, self.rounds = prog, jax, rounds

    def row(self, name, ours, xla, numpy, want, tol, unit, amount, unchecked=(), **row):
        """`ours`, `xla` (or None) and `numpy`, calls; `want` the result each must give (rtol, atol `tol`) but
        the sides named in `unchecked` (checked by the caller)."""
        sides = {"tessera": ours, "XLA": xla, "numpy": numpy}
        for n, f in sides.items():
            if f is not None and n not in unchecked:
                np.testing.assert_allclose(np.asarray(f()), want, *tol, err_msg=n)
        sides_row(name, sides, self.rounds, unit, amount, **row)

    def formula(self, name, fn, formula, args, tol, unit, amount, **row):
        """A row whose three sides compute `formula` (ours compiled as the program's `fn`) on `args`."""
        self.row(name, lambda: getattr(self.prog, fn)(*args), xla_call(self.jax, formula, *args),
                 lambda: formula(np, *args), formula(np, *args), tol, unit, amount, **row)


def bench_attention(peers: Peers, rng) -> None:
    """8 heads of 512 queries and keys, head dimension 64. numpy's and XLA's dropout peers draw their masks each
    call with their own generators (numpy's, jax.random's), as their users would; the checks use Tessera's
    Philox mask."""
    from tessera.numerics.philox import uniforms
    B, S, D = 8, 512, 64
    Q, K, V = (rng.standard_normal((B, S, D), dtype=np.float32) for _ in range(3))
    flops = 4 * B * S * S * D / 1e9
    row = {"shape": (B, S, S, D), "dtype": "f32", "bytes": 4 * 4 * B * S * D}   # Q, K, V read, O written
    for name, causal in (("attention", False), ("causal", True)):
        peers.row(f"{name} {B}x{S}x{S}x{D}", lambda fn=name: getattr(peers.prog, fn)(Q, K, V),
                  xla_call(peers.jax, attention, Q, K, V, causal=causal), lambda c=causal: attention(np, Q, K, V, c),
                  attention(np, Q, K, V, causal), (1e-4, 1e-5), "GFLOP/s", flops, **row)
    keep = uniforms(B * S * S, 5, 0).reshape(B, S, S) >= 0.1
    want = attention(np, Q, K, V, keep=keep)
    xla = None
    if peers.jax is not None:
        jax = peers.jax
        np.testing.assert_allclose(xla_call(jax, attention, Q, K, V, keep=keep)(), want, 1e-4, 1e-5, err_msg="XLA")
        dropped = jax.jit(lambda q, k, v, key: attention(
            jax.numpy, q, k, v, keep=jax.random.uniform(key, (B, S, S)) >= 0.1))
        placed, key = [jax.device_put(a) for a in (Q, K, V)], jax.random.key(5)
        xla = lambda: dropped(*placed, key).block_until_ready()   # noqa: E731
    peers.row(f"softmax+dropout+V {B}x{S}x{S}x{D}", lambda: peers.prog.dropped(Q, K, V), xla,
              lambda: attention(np, Q, K, V, keep=rng.random((B, S, S), dtype=np.float32) >= 0.1), want,
              (1e-4, 1e-5), "GFLOP/s", flops, unchecked=("XLA", "numpy"), **row)


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
    p.add_argument("--rounds", type=int, default=5, help="rounds of the sides in alternation (best of)")
    p.add_argument("--cpu-time", action="store_true", help="also compare Tessera's and XLA's process CPU time")
    args = parse_args(p)
    CPU_TIME["on"] = args.cpu_time
    # Other work on the machine slows the sides unequally: the load average says how busy it was.
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}; Tessera threads: {worker_threads()}")
    if args.bounds_checks:
        checks_cost(np.random.default_rng(0))
        return
    peers = Peers(executor.load(compiler.compile_source(SRC, "bench_graph.py").image),
                  optional_jax(worker_threads()), args.rounds)
    rng = np.random.default_rng(0)
    R, C = 4096, 4096   # 2^24 elements
    X, b = rng.standard_normal((R, C), dtype=np.float32), rng.standard_normal(C, dtype=np.float32)
    peers.formula("gelu(x+b)*0.5, 2^24", "chain", chain, (X, b), (1e-4, 1e-5), "GB/s", 8 * R * C / 1e9,
                  shape=(R, C), dtype="f32", flops=12 * R * C)   # the tanh form: about 12 operations an element
    for T, D, F in ((512, 512, 2048), (512, 1024, 4096)):
        Xm = rng.standard_normal((T, D), dtype=np.float32)
        W1 = rng.standard_normal((D, F), dtype=np.float32) * np.float32(0.03)
        W2 = rng.standard_normal((F, D), dtype=np.float32) * np.float32(0.03)
        b1 = rng.standard_normal(F, dtype=np.float32)
        peers.formula(f"mlp {T}x{D}x{F}", "mlp", mlp, (Xm, W1, b1, W2), (1e-3, 1e-3), "GFLOP/s",
                      4 * T * D * F / 1e9, shape=(T, D, F), dtype="f32", bytes=4 * (2 * T * D + 2 * D * F + F))
    Xs = rng.standard_normal((8192, 1024), dtype=np.float32)
    peers.formula("softmax rows 8192x1024", "softmax", softmax, (Xs,), (1e-5, 1e-7), "GB/s", 8 * Xs.size / 1e9,
                  shape=Xs.shape, dtype="f32")
    g, bb = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
    peers.formula("layernorm rows 8192x1024", "layernorm", layernorm, (Xs, g, bb), (1e-4, 1e-4), "GB/s",
                  8 * Xs.size / 1e9, shape=Xs.shape, dtype="f32")
    bench_attention(peers, rng)


if __name__ == "__main__":
    main()
