"""Attention's gradient on the CPU: d/d(Q, K, V) of sum(flash_attention(Q, K, V) ∘ W), f32, causal and not —
the forward (with its lse) plus the backward, compiled by Tessera with the fused kernels
(backends/cpu/attention.py writing lse, attention_bwd.py) against the same function compiled with the fused
backward withheld (the GEMM fallback of passes/decompose.py: S×S probabilities and dS materialised), and
against jax.jit(jax.grad(...)) and torch CPU autograd (scaled_dot_product_attention) when they import.

    python bench/attention_bwd_cpu.py [--heads 8] [--seq 512] [--dim 64] [--rounds 3]

Every peer's gradients are checked against Tessera's first (rtol 1e-3). GFLOP/s count the forward's
4·H·S²·D plus the backward's 2.5 times that (FlashAttention's convention), halved for causal.
"""

import argparse
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_times, machine, parse_args, record_row  # noqa: E402

from tessera import compiler, executor  # noqa: E402
from tessera.backends.cpu.backend import CPUBackend  # noqa: E402

SRC = """
from tessera import f32, function, grad, op, tensor

@function
def loss(Q: tensor[f32, "H", "S", {D}], K: tensor[f32, "H", "S", {D}], V: tensor[f32, "H", "S", {D}],
         W: tensor[f32, "H", "S", {D}]):
    return op.sum(op.flash_attention(Q, K, V, causal={causal}, scale={scale}) * W)

dloss = grad(loss, argnums=(0, 1, 2))
"""


def tessera_program(src: str, fused: bool, W):
    if fused:
        fn = executor.load(compiler.compile_source(src, "attention_bwd.py").image).dloss
        return lambda *a: fn(*a, W)
    facts = CPUBackend.target_facts
    os.environ["TESSERA_CACHE"] = "0"   # the cache's key does not see the patched facts
    CPUBackend.target_facts = lambda self: dataclasses.replace(facts(self), fused_attention_backward=frozenset())
    try:
        fn = executor.load(compiler.compile_source(src, "attention_bwd.py").image).dloss
        return lambda *a: fn(*a, W)
    finally:
        CPUBackend.target_facts = facts
        del os.environ["TESSERA_CACHE"]


def jax_grad(causal: bool, scale: float, W):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def loss(q, k, v):
        s = jnp.einsum("hqd,hkd->hqk", q, k) * scale
        if causal:
            n = s.shape[-1]
            s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
        return jnp.sum(jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v) * W)
    g = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    return lambda *a: [np.asarray(x) for x in jax.block_until_ready(g(*a))]


def torch_grad(causal: bool, scale: float, W):
    try:
        import torch
    except ImportError:
        return None
    w = torch.from_numpy(W)

    def run(Q, K, V):
        q, k, v = (torch.from_numpy(x).requires_grad_() for x in (Q, K, V))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        return [x.numpy() for x in torch.autograd.grad((o * w).sum(), (q, k, v))]
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = parse_args(ap)
    H, S, D = a.heads, a.seq, a.dim
    scale = 1 / np.sqrt(D)
    print(f"machine: {machine()}, load average {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(0)
    Q, K, V, W = (rng.standard_normal((H, S, D)).astype(np.float32) for _ in range(4))
    for causal in (False, True):
        src = SRC.format(D=D, causal=causal, scale=scale)
        peers = {"tessera fused": tessera_program(src, True, W),
                 "tessera GEMM fallback": tessera_program(src, False, W),
                 "jax.jit(jax.grad)": jax_grad(causal, scale, W), "torch autograd": torch_grad(causal, scale, W)}
        peers = {name: fn for name, fn in peers.items() if fn is not None}
        want = peers["tessera fused"](Q, K, V)
        for name, fn in peers.items():
            for g, w in zip(fn(Q, K, V), want):
                np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * np.abs(w).max(), err_msg=name)
        times = best_times([lambda fn=fn: fn(Q, K, V) for fn in peers.values()], a.rounds)
        flops = 3.5 * 4 * H * S * S * D * (0.5 if causal else 1)
        what = f"{'causal' if causal else 'full'} {H}x{S}x{S}x{D}"
        r = record_row(f"attention backward {what}", dict(zip(peers, times)), "GFLOP/s", flops / 1e9,
                       shape=(H, S, S, D), dtype="f32", bytes=4 * 8 * H * S * D)   # Q K V O dO read, dQ dK dV written
        print(f"{what}:")
        for side in (r["ours"], *r["peers"]):
            print(f"  {side['name']:<24} {side['time_s'] * 1e3:9.2f} ms  {side['throughput']:7.1f} GFLOP/s  "
                  f"fused is {side.get('ratio', 1.0):5.2f}x faster")


if __name__ == "__main__":
    main()
