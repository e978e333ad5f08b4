"""One rank of the compiled-collectives tests (test_collectives_mpi.py starts it under mpiexec): loads the image
the test compiled, calls each of its functions with this rank's inputs and the job's communicator, and writes
the results to OUT/rank<r>.npz (a failure's message under "error:<function>").

    python collectives_worker.py IMAGE OUT
"""

from __future__ import annotations

import sys

import numpy as np

T, D, H = 12, 12, 12   # rows, features and hidden units: multiples of 2, 3 and 4


def source(world: int) -> str:
    """The program: every collective over a one-axis mesh of `world` devices, over each axis of a two-axis one
    (2×2 for 4 devices: its axes are sub-communicators), and a tensor-parallel MLP (W1 column-sharded, W2
    row-sharded, one all_reduce)."""
    return f'''
from tessera import bf16, dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range({world}))
grid = dist.Mesh(axes=["dp", "tp"], devices=range({world}), shape={(2, 2) if world == 4 else (world, 1)})


@function
def ar_sum(X: tensor[f32, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, deterministic=True)


@function
def ar_max(X: tensor[f32, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, op="max", deterministic=True)


@function
def ar_min(X: tensor[f32, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, op="min", deterministic=True)


@function
def ar_mean(X: tensor[f32, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, op="mean", deterministic=True)


@function
def ar_prod(X: tensor[f32, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, op="prod", deterministic=True)


@function
def ar_bf16(X: tensor[bf16, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, deterministic=True)


@function
def ar_tree(X: tensor[f32, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, algo="binary_tree")


@function
def ar_ring(X: tensor[f32, "T", {D}]):
    return op.all_reduce(X, mesh=mesh, algo="ring")


@function
def gather0(X: tensor[f32, "T", {D}]):
    return op.all_gather(X, mesh=mesh, dim=0)


@function
def gather1(X: tensor[f32, "T", {D}]):
    return op.all_gather(X * 2.0, mesh=mesh, dim=1)


@function
def scatter0(X: tensor[f32, {T}, {D}]):
    return op.reduce_scatter(X, mesh=mesh, dim=0, deterministic=True)


@function
def scatter1(X: tensor[f32, "T", {D}]):
    return op.reduce_scatter(X, mesh=mesh, dim=1, op="max", deterministic=True)


@function
def scatter_ring(X: tensor[f32, {T}, {D}]):
    return op.reduce_scatter(X, mesh=mesh, dim=0)


@function
def bcast(X: tensor[f32, "T", {D}]):
    return op.broadcast(X, mesh=mesh, root={world - 1})


@function
def grid_axes(X: tensor[f32, "T", {D}]):
    own = op.all_reduce(X, mesh=grid, axis="tp", deterministic=True)
    return op.all_reduce(own + 1.0, mesh=grid, axis="dp", deterministic=True)


@function
def mlp(X: tensor[f32, "T", {D}], W1: dist.shard(tensor[f32, {D}, {H}], mesh, axis="tp", dim=1),
        W2: dist.shard(tensor[f32, {H}, {D}], mesh, axis="tp", dim=0)):
    return op.all_reduce(op.gelu(X @ W1) @ W2, mesh=mesh, deterministic=True)


@function
def mlp_partial(X: tensor[f32, "T", {D}], W1: dist.shard(tensor[f32, {D}, {H}], mesh, axis="tp", dim=1),
                W2: dist.shard(tensor[f32, {H}, {D}], mesh, axis="tp", dim=0)):
    return op.gelu(X @ W1) @ W2
'''


FUNCTIONS = ("ar_sum", "ar_max", "ar_min", "ar_mean", "ar_prod", "ar_bf16", "ar_tree", "ar_ring", "gather0",
             "gather1", "scatter0", "scatter1", "scatter_ring", "bcast", "grid_axes")


def inputs(rank: int, name: str) -> list[np.ndarray]:
    """Rank `rank`'s arguments of function `name` (the MLP's weights whole: the test and the ranks slice them).
    Values spread over 5 decades, so that a sum's order shows in its last bits."""
    rng = np.random.default_rng(7 + rank)
    x = (rng.standard_normal((T, D)) * 10.0 ** rng.integers(-2, 3, (T, D))).astype(np.float32)
    if name == "ar_prod":
        x = (1 + 0.1 * rng.standard_normal((T, D))).astype(np.float32)
    if name == "ar_bf16":
        from tessera.numerics.rounding import round_to  # lazy: only this function needs it
        x = round_to(x, "bf16").astype(np.float32)
    if not name.startswith("mlp"):
        return [x]
    w = np.random.default_rng(99)   # tensor parallelism: every rank has the same X (and slices of W1, W2)
    return [w.standard_normal((T, D)).astype(np.float32), w.standard_normal((D, H)).astype(np.float32) / 4,
            w.standard_normal((H, D)).astype(np.float32) / 4]


def shard(whole: np.ndarray, world: int, rank: int, dim: int) -> np.ndarray:
    return np.split(whole, world, axis=dim)[rank]


def main(image: str, out: str) -> None:
    from tessera import comm, executor  # lazy: imported by the rank, after mpiexec started it

    c = comm.Communicator.from_env(backend="mpi", timeout=60)
    prog = executor.load(open(image, "rb").read())

    def args_of(name):
        args = inputs(c.rank, name)
        if name.startswith("mlp"):
            args = [args[0], shard(args[1], c.size, c.rank, 1), shard(args[2], c.size, c.rank, 0)]
        return args

    np.savez(f"{out}/rank{c.rank}.npz", **call_all(prog, c, FUNCTIONS + ("mlp", "mlp_partial"), args_of))


def call_all(prog, c, names, args_of) -> dict:
    """Each function of `names` called with args_of(name) and communicator `c` (a failure's message under
    "error:<name>"), and under "no_comm" what a call of ar_sum without one raises (also collectives_gpu's)."""
    results = {}
    for name in names:
        try:
            results[name] = getattr(prog, name)(*args_of(name), comm=c)
        except Exception as e:  # noqa: BLE001 — the test reports it
            results[f"error:{name}"] = np.array(f"{type(e).__name__}: {e}")
    try:
        prog.ar_sum(*args_of("ar_sum"))
    except ValueError as e:
        results["no_comm"] = np.array(str(e))
    return results


if __name__ == "__main__":
    main(*sys.argv[1:])
