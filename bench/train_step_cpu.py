"""An MLP training step on the CPU: Tessera's `sgd_step` (examples/graph/train_mlp.py: forward, MSE loss,
value_and_grad, SGD update, one image; compiled with the sizes written in, and as written, with symbolic
extents) against `jax.jit` of jax.value_and_grad of the same loss plus the same
update, and against PyTorch eager (autograd, then the update in place), in the same process, on the same data.

    python bench/train_step_cpu.py [--tokens 512] [--d 512] [--ff 2048] [--rounds 5]

f32 throughout; the gelu is the exact (erf) one on every side. Each side runs whole steps, parameters in and
updated parameters out; the first step's loss and weights are checked to agree (rtol 1e-4) before timing. The
sides are timed in alternation (best of `rounds`, see common.best_times), each with every core (Tessera's pool:
TESSERA_NUM_THREADS; XLA's and PyTorch's own pools). GFLOP/s count the step's GEMMs: 2·T·D·F each, two in the
forward and three in the backward (dW2, dH, dW1; X takes no gradient), 10·T·D·F in all.
Peers that are not installed are left out (pip install '.[bench]' installs JAX and the rest).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_times, machine, parse_args, record_row, torch_sgd  # noqa: E402

from tessera import compiler, executor  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "graph", "train_mlp.py")
LR = 0.1


def tessera_step(extents=None):
    """The example's sgd_step compiled as written (symbolic extents: the GEMM schedules are chosen for a
    nominal 1024-sized problem) or with `extents` ({"T": 512, …}) written into its types, as one compiles a
    model whose sizes are known (the schedules fit them)."""
    with open(EXAMPLE, encoding="utf-8") as f:
        source = f.read()
    for name, n in (extents or {}).items():
        source = source.replace(f'"{name}"', str(n))
    image = compiler.compile_source(source, EXAMPLE).image
    step = executor.load(image).function("sgd_step")
    lr = np.float32(LR)
    return lambda X, Y, params: step(X, Y, *params, lr)


def jax_step():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def loss(params, X, Y):
        W1, b1, W2, b2 = params
        H = jax.nn.gelu(X @ W1 + b1, approximate=False)
        E = H @ W2 + b2 - Y
        return jnp.mean(E * E)

    @jax.jit
    def step(X, Y, params):
        value, grads = jax.value_and_grad(loss)(params, X, Y)
        return (value, *(p - LR * g for p, g in zip(params, grads)))

    def run(X, Y, params):
        out = step(X, Y, tuple(params))
        jax.block_until_ready(out)
        return out
    return run


def torch_step():
    try:
        import torch
    except ImportError:
        return None

    def run(X, Y, params):
        X, Y = torch.from_numpy(X), torch.from_numpy(Y)
        W1, b1, W2, b2 = (torch.from_numpy(p).requires_grad_() for p in params)
        E = torch.nn.functional.gelu(X @ W1 + b1) @ W2 + b2 - Y
        return torch_sgd((E * E).mean(), (W1, b1, W2, b2), LR)
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--ff", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=5)
    args = parse_args(p)
    T, D, F = args.tokens, args.d, args.ff
    print(f"machine: {machine()}")
    print(f"MLP training step: T={T} D={D} F={F}, f32")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T, D), dtype=np.float32)
    Y = np.tanh(X * np.roll(X, 1, axis=1)).astype(np.float32)
    params = [(rng.standard_normal((D, F)) / np.sqrt(D)).astype(np.float32), np.zeros(F, np.float32),
              (rng.standard_normal((F, D)) / np.sqrt(F)).astype(np.float32), np.zeros(D, np.float32)]

    sides = {"tessera": tessera_step({"T": T, "D": D, "F": F}), "tessera symbolic": tessera_step()}
    for name, make in (("jax.jit", jax_step), ("torch eager", torch_step)):
        fn = make()
        if fn is None:
            print(f"{name}: not installed, left out")
        else:
            sides[name] = fn
    want = [np.asarray(v) for v in sides["tessera"](X, Y, params)]
    for name, fn in sides.items():
        got = [np.asarray(v) for v in fn(X, Y, params)]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f"{name} disagrees with tessera")
    names = list(sides)
    times = best_times([lambda fn=sides[n]: fn(X, Y, params) for n in names], args.rounds)
    gflop = 10.0 * T * D * F / 1e9
    r = record_row(f"mlp train step {T}x{D}x{F}", dict(zip(names, times)), "GFLOP/s", gflop, shape=(T, D, F),
                   dtype="f32")
    for side in (r["ours"], *r["peers"]):
        ratio = f"   {side['name']} time / tessera time {side['ratio']:5.2f}x" if "ratio" in side else ""
        print(f"{side['name']:<16} {side['time_s'] * 1e3:9.2f} ms/step  {side['throughput']:8.2f} GFLOP/s{ratio}")


if __name__ == "__main__":
    main()
