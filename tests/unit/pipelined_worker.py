"""One rank of the pipelined-collectives tests (test_pipelined_collectives.py starts it under mpiexec): calls the
tensor-parallel MLP of each image the test compiled (chunked, whole) with this rank's shards at each row count
of ROWS and the job's communicator, and writes the results to OUT/rank<r>.npz, as "<image index>_<rows>"
(a failure's message under "error:<image index>_<rows>").

    python pipelined_worker.py OUT IMAGE...
"""

from __future__ import annotations

import sys

import numpy as np

D, H = 24, 48          # features and hidden units; H a multiple of 2 and 3
ROWS = (300, 1024, 5)  # M: not a multiple of the chunks' 128 rows, four whole chunks, less than one chunk


def source(world: int) -> str:
    """The MLP (W1 column-sharded, W2 row-sharded) whose all_reduce MPI orders: the one a matmul's chunks
    pipeline."""
    return f'''
from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range({world}))


@function
def mlp(X: tensor[f32, "T", {D}], W1: dist.shard(tensor[f32, {D}, {H}], mesh, axis="tp", dim=1),
        W2: dist.shard(tensor[f32, {H}, {D}], mesh, axis="tp", dim=0)):
    return op.all_reduce(op.gelu(X @ W1) @ W2, mesh=mesh)
'''


def inputs(rows: int) -> list[np.ndarray]:
    """The whole X, W1, W2 (every rank the same; the test and the ranks slice the weights)."""
    w = np.random.default_rng(rows)
    return [w.standard_normal((rows, D)).astype(np.float32), w.standard_normal((D, H)).astype(np.float32) / 4,
            w.standard_normal((H, D)).astype(np.float32) / 4]


def shards(rows: int, world: int, rank: int) -> list[np.ndarray]:
    X, W1, W2 = inputs(rows)
    return [X, np.split(W1, world, axis=1)[rank], np.split(W2, world, axis=0)[rank]]


def main(out: str, *images: str) -> None:
    from tessera import comm, executor  # lazy: imported by the rank, after mpiexec started it

    c = comm.Communicator.from_env(backend="mpi", timeout=60)
    results = {}
    for i, image in enumerate(images):
        prog = executor.load(open(image, "rb").read())
        for rows in ROWS:
            try:
                results[f"{i}_{rows}"] = prog.mlp(*shards(rows, c.size, c.rank), comm=c)
            except Exception as e:  # noqa: BLE001 — the test reports it
                results[f"error:{i}_{rows}"] = np.array(f"{type(e).__name__}: {e}")
    np.savez(f"{out}/rank{c.rank}.npz", **results)


if __name__ == "__main__":
    main(*sys.argv[1:])
