"""Collectives on a device mesh (spec/execution-model.md §4): run SPMD by the interpreter over 8 devices."""

from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["dp"], devices=range(8))
grid = dist.Mesh(axes=["dp", "tp"], devices=range(8), shape=(4, 2))


@function
def deterministic_sum(X: tensor[f32, 128]):
    return op.all_reduce(X, mesh=mesh, algo="binary_tree", deterministic=True)


@function
def shard_and_gather(X: tensor[f32, 16, 4]):
    part = op.reduce_scatter(X, mesh=grid, axis="dp", dim=0)
    whole = op.all_gather(part, mesh=grid, axis="dp", dim=0)
    first = op.broadcast(whole, mesh=grid, axis="tp", root=0)
    return part, whole, first
