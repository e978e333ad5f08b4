"""One rank of the data-parallel training tests (test_data_parallel_mpi.py starts it under mpiexec): loads the
image the test compiled, runs one SGD step on this rank's shard of the batch with the job's communicator
(the step all_reduces its gradients in buckets), and writes what it got to OUT/rank<r>.npz (a failure's
message under "error:<function>").

    python data_parallel_worker.py IMAGE OUT
"""

from __future__ import annotations

import sys

import numpy as np

T, D, F = 12, 8, 16   # the whole batch's rows (a multiple of 2 and 3), model width, hidden width
LR = 0.5


def program(world: int, d: int, f: int) -> str:
    """The program's common part at model width `d`, hidden width `f`, over a mesh of `world` devices: the
    loss, its value_and_grad, `step_whole` (no collective: one process on the whole batch) and `grads` (the
    backward alone). tests/gpu/data_parallel_gpu.py runs it on GPUs."""
    return f'''
from tessera import f32, dist, function, op, tensor, value_and_grad

mesh = dist.Mesh(axes=["dp"], devices=range({world}))


@function
def loss(X: tensor[f32, "T", {d}], Y: tensor[f32, "T", {d}], W1: tensor[f32, {d}, {f}], b1: tensor[f32, {f}],
         W2: tensor[f32, {f}, {d}], b2: tensor[f32, {d}]):
    H = op.gelu(op.bias_add(X @ W1, b1))
    E = op.bias_add(H @ W2, b2) - Y
    return op.mean(E * E)


loss_and_grads = value_and_grad(loss, argnums=(2, 3, 4, 5))


@function
def step_whole(X: tensor[f32, "T", {d}], Y: tensor[f32, "T", {d}], W1: tensor[f32, {d}, {f}],
               b1: tensor[f32, {f}], W2: tensor[f32, {f}, {d}], b2: tensor[f32, {d}], lr: f32):
    value, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, W1, b1, W2, b2)
    return value, W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2


@function
def grads(X: tensor[f32, "T", {d}], Y: tensor[f32, "T", {d}], W1: tensor[f32, {d}, {f}], b1: tensor[f32, {f}],
          W2: tensor[f32, {f}, {d}], b2: tensor[f32, {d}]):
    value, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, W1, b1, W2, b2)
    return gW1, gb1, gW2, gb2
'''


def step(name: str, d: int, f: int, how: str, returns: str = "update", grads: str = "loss_and_grads") -> str:
    """A data-parallel step `name`: the gradients (of `grads`), a mean all_reduce of each over the mesh (`how`:
    the all_reduce's further arguments), and the SGD update (or, `returns="gradients"`, the reduced gradients)."""
    ret = "value, W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2" if returns == "update" else \
        "gW1, gb1, gW2, gb2"
    return f'''

@function
def {name}(X: tensor[f32, "T", {d}], Y: tensor[f32, "T", {d}], W1: tensor[f32, {d}, {f}], b1: tensor[f32, {f}],
        W2: tensor[f32, {f}, {d}], b2: tensor[f32, {d}], lr: f32):
    value, gW1, gb1, gW2, gb2 = {grads}(X, Y, W1, b1, W2, b2)
    gW1 = op.all_reduce(gW1, mesh=mesh, op="mean"{how})
    gb1 = op.all_reduce(gb1, mesh=mesh, op="mean"{how})
    gW2 = op.all_reduce(gW2, mesh=mesh, op="mean"{how})
    gb2 = op.all_reduce(gb2, mesh=mesh, op="mean"{how})
    return {ret}
'''


def source(world: int) -> str:
    """The common part and the step four ways: `step` (the default 25 MiB buckets: one bucket), `step_small`
    (buckets of 600 bytes: the bias gradient, W2's and b1's close the first, W1's is the second), `step_ring`
    (600-byte buckets that MPI reduces in its own order: on a stream they run on the call's communication
    stream), and `reduced` (the gradients after the bucketed all_reduce, to compare with the interpreter's tree,
    mean1 and mean2, of the ranks' gradients). Then the model with bf16 products as bench/data_parallel_gpu.py's
    (the compiled backward keeps autodiff's order there: each layer's input-gradient GEMM before its weight
    gradient's): `grads_bf16` (no all_reduce, so that order) and `early` (its gradients reduced in buckets of 544
    bytes, b2's and W2's the first: tessera-bucketize produces W2's gradient ahead of the input gradient's GEMM
    and runs the bucket between the two)."""
    return program(world, D, F) + '''

@function
def mean2(G: tensor[f32, "R", "C"]):
    return op.all_reduce(G, mesh=mesh, op="mean", deterministic=True)


@function
def mean1(G: tensor[f32, "C"]):
    return op.all_reduce(G, mesh=mesh, op="mean", deterministic=True)
''' + step("step", D, F, ", deterministic=True") + step("step_small", D, F, ", deterministic=True, bucket=600") + \
        step("step_ring", D, F, ', algo="ring", bucket=600') + \
        step("reduced", D, F, ", deterministic=True", returns="gradients") + f'''
from tessera import bf16


@function
def loss_bf16(X: tensor[f32, "T", {D}], Y: tensor[f32, "T", {D}], W1: tensor[f32, {D}, {F}], b1: tensor[f32, {F}],
              W2: tensor[f32, {F}, {D}], b2: tensor[f32, {D}]):
    H = op.gelu(op.bias_add(op.matmul(op.cast(X, bf16), op.cast(W1, bf16), out_dtype=f32), b1))
    E = op.bias_add(op.matmul(op.cast(H, bf16), op.cast(W2, bf16), out_dtype=f32), b2) - Y
    return op.mean(E * E)


loss_and_grads_bf16 = value_and_grad(loss_bf16, argnums=(2, 3, 4, 5))


@function
def grads_bf16(X: tensor[f32, "T", {D}], Y: tensor[f32, "T", {D}], W1: tensor[f32, {D}, {F}], b1: tensor[f32, {F}],
               W2: tensor[f32, {F}, {D}], b2: tensor[f32, {D}]):
    value, gW1, gb1, gW2, gb2 = loss_and_grads_bf16(X, Y, W1, b1, W2, b2)
    return gW1, gb1, gW2, gb2
''' + step("early", D, F, ", deterministic=True, bucket=544", returns="gradients", grads="loss_and_grads_bf16")


def whole() -> list[np.ndarray]:
    """The whole batch (X, Y) and the weights (W1, b1, W2, b2), the same on every rank."""
    rng = np.random.default_rng(5)
    return [rng.standard_normal((T, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32),
            (rng.standard_normal((D, F)) / 3).astype(np.float32), (rng.standard_normal(F) / 3).astype(np.float32),
            (rng.standard_normal((F, D)) / 4).astype(np.float32), (rng.standard_normal(D) / 4).astype(np.float32)]


def batch(world: int, rank: int) -> list[np.ndarray]:
    """Rank `rank`'s arguments: its rows of X and Y, the whole weights."""
    X, Y, *weights = whole()
    return [np.split(X, world)[rank], np.split(Y, world)[rank], *weights]


def main(image: str, out: str) -> None:
    from tessera import comm, executor, stream  # lazy: imported by the rank, after mpiexec started it

    c = comm.Communicator.from_env(backend="mpi", timeout=60)
    prog = executor.load(open(image, "rb").read())
    args = batch(c.size, c.rank)
    lr = np.float32(LR)
    s = stream.new()
    results = {}
    for name, call in (("step", lambda: prog.step(*args, lr, comm=c)),
                       ("step_small", lambda: prog.step_small(*args, lr, comm=c)),
                       ("step_stream", lambda: prog.step(*args, lr, comm=c, stream=s)),
                       ("step_ring", lambda: prog.step_ring(*args, lr, comm=c)),
                       ("step_ring_stream", lambda: prog.step_ring(*args, lr, comm=c, stream=s)),
                       ("grads", lambda: prog.grads(*args)),
                       ("reduced", lambda: prog.reduced(*args, lr, comm=c)),
                       ("grads_bf16", lambda: prog.grads_bf16(*args)),
                       ("early", lambda: prog.early(*args, lr, comm=c))):
        try:
            for i, a in enumerate(call()):
                results[f"{name}{i}"] = np.asarray(a)
        except Exception as e:  # noqa: BLE001 — the test reports it
            results[f"error:{name}"] = np.array(f"{type(e).__name__}: {e}")
    np.savez(f"{out}/rank{c.rank}.npz", **results)


if __name__ == "__main__":
    main(*sys.argv[1:])
