"""Plan format 6 and Graph IR 1.1 fixture (tests/data/README.md): an all_reduce pipelined in row chunks, its
GEMM run per chunk through alias steps with element offsets (windows of the operand and of the result), over a
mesh of one device so that a communicator of one rank runs it."""

from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(1))


@function
def tp(X: tensor[f32, "T", 8], W: tensor[f32, 8, 4]):
    return op.all_reduce(op.matmul(X, W), mesh=mesh, chunks=3)
