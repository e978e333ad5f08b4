# The compile option collective_chunks (tessera-cc --collective-chunks) is tessera-pipeline-collectives' chunk
# count in the canonical stage: by default the target's (1 for the cpu target, where nothing is marked; 4 for ptx), else the
# option's; an all_reduce's own chunks= is kept over either (the ops whose rows lead to a chunked all_reduce's
# matmul run in its chunks: tessera.chunk_rows). A negative count is refused.
# RUN: tessera-cc %s --compile-to=canonical | FileCheck %s --check-prefix=CPU
# RUN: tessera-cc %s --target ptx --compile-to=canonical | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --collective-chunks 3 --compile-to=canonical | FileCheck %s --check-prefix=THREE
# RUN: not tessera-cc %s --collective-chunks -1 --compile-to=canonical 2>&1 | FileCheck %s --check-prefix=BAD

# CPU-LABEL: func.func @mlp(
# CPU-NOT:     tessera.chunk_rows
# CPU:         "tdist.all_reduce"({{.*}}tessera.bucket = 0 : i64} :
# CPU:         "tdist.all_reduce"({{.*}}tessera.chunks = 2 : i64}
# PTX-LABEL: func.func @mlp(
# PTX:         "ttensor.unary"({{.*}}) {fn = "gelu", tessera.chunk_rows = 4 : i64}
# PTX:         "tdist.all_reduce"({{.*}}tessera.chunks = 4 : i64}
# PTX:         "tdist.all_reduce"({{.*}}tessera.chunks = 2 : i64}
# THREE-LABEL: func.func @mlp(
# THREE:         "tdist.all_reduce"({{.*}}tessera.chunks = 3 : i64}
# THREE:         "tdist.all_reduce"({{.*}}tessera.chunks = 2 : i64}
# BAD: collective_chunks must be 0 (the target's default) or positive, not -1

from tessera import bf16, dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function
def mlp(X: tensor[bf16, "T", 64], W1: dist.shard(tensor[bf16, 64, 256], mesh, axis="tp", dim=1),
        W2: dist.shard(tensor[bf16, 256, 64], mesh, axis="tp", dim=0), W3: tensor[bf16, 64, 64]):
    Y = op.all_reduce(op.cast(op.gelu(op.matmul(X, W1, out_dtype=f32)), bf16) @ W2, mesh=mesh)
    return op.all_reduce(Y @ W3, mesh=mesh, chunks=2)
