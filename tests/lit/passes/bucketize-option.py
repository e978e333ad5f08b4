# The compile option bucket_bytes (tessera-cc --bucket-bytes) is tessera-bucketize's threshold in the canonical
# stage: with the default (25 MiB) the three gradients' all_reduces are one bucket; with 600 bytes the first
# closes after W2's gradient (32 + 512 + 64 bytes, the order the backward produces them) and W1's is the
# second, issued right after the GEMM that produces it (and the transpose of X it reads). A threshold of 0 is refused.
# RUN: tessera-cc %s --compile-to=canonical | FileCheck %s --check-prefix=DEFAULT
# RUN: tessera-cc %s --bucket-bytes 600 --compile-to=canonical | FileCheck %s --check-prefix=SMALL
# RUN: not tessera-cc %s --bucket-bytes 0 --compile-to=canonical 2>&1 | FileCheck %s --check-prefix=BAD

# DEFAULT-LABEL: func.func @step(
# DEFAULT-COUNT-4: tessera.bucket = 0 : i64
# DEFAULT-NOT: tessera.bucket = 1
# SMALL-LABEL: func.func @step(
# SMALL-COUNT-3: tessera.bucket = 0 : i64
# SMALL-NEXT: "ttensor.transpose"
# SMALL-NEXT: %[[G:.*]] = "ttensor.matmul"
# SMALL-NEXT: "tdist.all_reduce"(%[[G]]){{.*}}tessera.bucket = 1 : i64
# BAD: bucket_bytes must be positive, not 0

from tessera import dist, f32, function, op, tensor, value_and_grad

mesh = dist.Mesh(axes=["dp"], devices=range(2))


@function
def loss(X: tensor[f32, "T", 8], Y: tensor[f32, "T", 8], W1: tensor[f32, 8, 16], b1: tensor[f32, 16],
         W2: tensor[f32, 16, 8], b2: tensor[f32, 8]):
    E = op.bias_add(op.gelu(op.bias_add(X @ W1, b1)) @ W2, b2) - Y
    return op.mean(E * E)


loss_and_grads = value_and_grad(loss, argnums=(2, 3, 4, 5))


@function
def step(X: tensor[f32, "T", 8], Y: tensor[f32, "T", 8], W1: tensor[f32, 8, 16], b1: tensor[f32, 16],
         W2: tensor[f32, 16, 8], b2: tensor[f32, 8], lr: f32):
    value, gW1, gb1, gW2, gb2 = loss_and_grads(X, Y, W1, b1, W2, b2)
    gW1 = op.all_reduce(gW1, mesh=mesh, op="mean")
    gb1 = op.all_reduce(gb1, mesh=mesh, op="mean")
    gW2 = op.all_reduce(gW2, mesh=mesh, op="mean")
    gb2 = op.all_reduce(gb2, mesh=mesh, op="mean")
    return value, W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2
