# Fusion of derivatives and the memory policy (issue 15 item 3).
# g: the backward of gelu(X·W + b) fuses as a forward does. The forward GEMM keeps its bias epilogue; gelu's
# derivative (erf and exp terms of the saved X·W + b, a value with several users), the cotangent and their
# product are one elementwise group (a DAG: its terms read the same saved value); the bias gradient is one
# reduction over the rows, in place (no transpose); dW one GEMM reading X transposed in place (tessera.transpose_a).
# dd: block is @function(checkpoint=True): the derivative keeps each call's operands and results and
# recomputes X·W + b (copies marked tessera.recompute, which cse leaves apart) right before the backward of
# each block, the last block's first; the forward's own X·W + b then has one user, the forward's gelu.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=CANON < %t/01-canonical.mlir

from tessera import f32, function, grad, op, tensor


@function
def loss(X: tensor[f32, "M", 32], W: tensor[f32, 32, 64], b: tensor[f32, 64], V: tensor[f32, "M", 64]):
    return op.sum(op.gelu(op.bias_add(X @ W, b)) * V)


g = grad(loss, argnums=(1, 2))


@function(checkpoint=True)
def block(H: tensor[f32, "M", 64], W: tensor[f32, 64, 64], b: tensor[f32, 64]):
    return op.gelu(op.bias_add(H @ W, b))


@function
def deep(X: tensor[f32, "M", 64], W1: tensor[f32, 64, 64], b1: tensor[f32, 64], W2: tensor[f32, 64, 64],
         b2: tensor[f32, 64]):
    return op.sum(block(block(X, W1, b1), W2, b2))


dd = grad(deep, argnums=(1, 2, 3, 4))

# FUSE-LABEL: func.func @g(
# FUSE:         %[[XW:.+]] = "ttensor.matmul"(%arg0, %arg1) {accum = f32, tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "gemm"}
# FUSE:         %[[Z:.+]] = "ttensor.bias_add"(%[[XW]], %arg2) {axis = 1 : i64, tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.unary"(%{{.+}}) {fn = "erf", tessera.group = [[E:[0-9]+]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         "ttensor.unary"(%[[Z]]) {fn = "square", tessera.group = [[E]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         "ttensor.unary"(%{{.+}}) {fn = "exp", tessera.group = [[E]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         "ttensor.binary"(%[[Z]], %{{.+}}) {fn = "mul", tessera.group = [[E]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "add", tessera.group = [[E]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         %[[DZ:.+]] = "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "mul", tessera.group = [[E]] : i32, tessera.group_kind = "elementwise"}
# FUSE-NOT:     "elementwise"
# FUSE-NOT:     "layout"
# FUSE:         "ttensor.reduce"(%[[DZ]]) {axes = [0], keepdims = false, kind = "sum", tessera.group = {{[0-9]+}} : i32, tessera.group_kind = "row"}
# FUSE:         "ttensor.matmul"(%arg0, %[[DZ]]) {accum = f32, tessera.group = {{[0-9]+}} : i32, tessera.group_kind = "gemm", tessera.transpose_a}
# FUSE-NOT:     "elementwise"
# FUSE:         return

# CANON-LABEL: func.func @dd(
# forward: the first block's X·W + b used once, by its gelu; the second block's forward is not computed at
# all (the sum's cotangent is a broadcast that reads none of its values; its backward recomputes X·W + b)
# CANON:         %[[Z1:.+]] = "ttensor.bias_add"(%{{.+}}, %arg2) {axis = 1 : i64}
# CANON-NEXT:    %[[H1:.+]] = "ttensor.unary"(%[[Z1]]) {fn = "gelu"}
# CANON-NOT:     %[[Z1]]{{[,)]}}
# CANON-NOT:     "ttensor.matmul"(%{{[0-9a-z]+}}, %arg3) {accum = f32} :
# backward of the second block: its X·W + b recomputed from the saved H1
# CANON:         %[[R2:.+]] = "ttensor.matmul"(%[[H1]], %arg3) {accum = f32, tessera.recompute = 1 : i64}
# CANON-NEXT:    "ttensor.bias_add"(%[[R2]], %arg4) {axis = 1 : i64, tessera.recompute = 1 : i64}
# CANON:         "ttensor.unary"(%{{.+}}) {fn = "erf"}
# CANON-NOT:     %[[Z1]]{{[,)]}}
# CANON-NOT:     "ttensor.bias_add"(%{{.+}}, %arg4) {axis = 1 : i64} :
# backward of the first block: its X·W + b recomputed from X
# CANON:         %[[R1:.+]] = "ttensor.matmul"(%arg0, %arg1) {accum = f32, tessera.recompute = 0 : i64}
# CANON-NEXT:    "ttensor.bias_add"(%[[R1]], %arg2) {axis = 1 : i64, tessera.recompute = 0 : i64}
# CANON:         "ttensor.unary"(%{{.+}}) {fn = "erf"}
# the recomputed gelu (its result unread: gelu's rule reads its operand) is not left behind
# CANON-NOT:     tessera.recompute
# CANON:         return
