"""Extent names are the user's: whatever a function calls its extents, its compiled plan launches with the
right sizes (issue 13, item 15: `X[K, N] @ Y[N, P]` launched its GEMM with the function's N as the kernel's K).
A property test over random distinct names — permutations of the names the kernels use themselves (M, N, K,
P, B, R, C, D, SQ, SK, BH, ROWS, KP, BATCH …) and random others — for each kind of plan step, against numpy."""

import itertools
import random
import string

import numpy as np
import pytest

from tessera import compiler, executor

# the names the lowerings and kernel generators give their own extents, and a few more
KERNEL_NAMES = ["M", "N", "K", "P", "B", "R", "C", "D", "SQ", "SK", "DV", "BH", "ROWS", "KP", "BATCH", "XR", "YR"]
HEADER = "from tessera import function, op, tensor, f32\n\n"
SIZES = (2, 3, 5, 7, 9, 11)


def names(rng: random.Random, count: int) -> list[str]:
    """`count` distinct extent names, mostly the kernels' own."""
    out: list[str] = []
    while len(out) < count:
        if rng.random() < 0.75:
            n = rng.choice(KERNEL_NAMES)
        else:
            n = rng.choice(string.ascii_letters) + "".join(rng.choices(string.ascii_letters + string.digits + "_",
                                                                       k=rng.randrange(4)))
        if n not in out:
            out.append(n)
    return out


def run(src: str, *arrays):
    prog = executor.load(compiler.compile_source(HEADER + src, "names.py").image)
    return prog.f(*arrays)


def randn(rng: random.Random, *shape):
    return np.random.default_rng(rng.randrange(2**32)).standard_normal(shape).astype(np.float32)


def check(got, want, atol=1e-4):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)


@pytest.mark.parametrize("a, b, c", list(itertools.permutations("MNKP", 3)))
def test_matmul_of_any_kernel_names(a, b, c):
    rng = random.Random(f"{a}{b}{c}")
    X, Y = randn(rng, 3, 5), randn(rng, 5, 7)
    src = f"""@function
def f(X: tensor[f32, "{a}", "{b}"], Y: tensor[f32, "{b}", "{c}"]):
    return X @ Y
"""
    check(run(src, X, Y), X @ Y)


@pytest.mark.parametrize("seed", range(6))
def test_matmul_with_epilogue_and_folded_batch(seed):
    rng = random.Random(seed)
    d, a, b, c = names(rng, 4)
    m, k, n, lead = (rng.choice(SIZES) for _ in range(4))
    X, Y, bias = randn(rng, lead, m, k), randn(rng, k, n), randn(rng, n)
    src = f"""@function
def f(X: tensor[f32, "{d}", "{a}", "{b}"], Y: tensor[f32, "{b}", "{c}"], bias: tensor[f32, "{c}"]):
    return op.relu(X @ Y + bias)
"""
    check(run(src, X, Y, bias), np.maximum(X @ Y + bias, 0))


@pytest.mark.parametrize("seed", range(6))
def test_batched_matmul(seed):
    rng = random.Random(100 + seed)
    d, a, b, c = names(rng, 4)
    m, k, n, lead = (rng.choice(SIZES) for _ in range(4))
    X, Y = randn(rng, lead, m, k), randn(rng, lead, k, n)
    src = f"""@function
def f(X: tensor[f32, "{d}", "{a}", "{b}"], Y: tensor[f32, "{d}", "{b}", "{c}"]):
    return X @ Y
"""
    check(run(src, X, Y), X @ Y)


def attention_reference(Q, K, V, scale, causal):
    s = np.matmul(Q.astype(np.float64), np.swapaxes(K, -1, -2)) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ V


@pytest.mark.parametrize("seed", range(6))
def test_attention(seed):
    rng = random.Random(200 + seed)
    bh, sq, sk, d, dv = names(rng, 5)
    causal = seed % 2 == 1
    shape = {n: rng.choice(SIZES) for n in (bh, sq, sk, d, dv)}
    Q, K, V = (randn(rng, *(shape[n] for n in dims)) for dims in ((bh, sq, d), (bh, sk, d), (bh, sk, dv)))
    src = f"""@function
def f(Q: tensor[f32, "{bh}", "{sq}", "{d}"], K: tensor[f32, "{bh}", "{sk}", "{d}"],
      V: tensor[f32, "{bh}", "{sk}", "{dv}"]):
    return op.flash_attention(Q, K, V, causal={causal}, scale=0.3)
"""
    check(run(src, Q, K, V), attention_reference(Q, K, V, 0.3, causal), atol=2e-5)


@pytest.mark.parametrize("seed", range(6))
def test_elementwise_broadcast_and_reduction(seed):
    # broadcasting over leading axes passes strides as scalars (view steps), reductions run on rows
    rng = random.Random(300 + seed)
    a, b, c = names(rng, 3)
    shape = [rng.choice(SIZES) for _ in range(3)]
    X, Y, Z = randn(rng, *shape), randn(rng, *shape[1:]), randn(rng, shape[0], 1, shape[2])
    src = f"""@function
def f(X: tensor[f32, "{a}", "{b}", "{c}"], Y: tensor[f32, "{b}", "{c}"], Z: tensor[f32, "{a}", 1, "{c}"]):
    return op.softmax(X * Y + Z)
"""
    s = X * Y + Z
    e = np.exp(s - s.max(-1, keepdims=True))
    check(run(src, X, Y, Z), e / e.sum(-1, keepdims=True))
