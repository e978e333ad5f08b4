# log_softmax through the pipeline and its derivative as Graph IR: the cross-entropy's grad keeps the forward's
# one ttensor.log_softmax (a row group of its own after fusion) and writes its cotangent rule,
# dx = dy - exp(y) * sum(dy) along the axis; a vjp's cotangent parameter of a reshaped result, whose extent the
# frontend leaves fresh, is declared by the pass with the result's extent over the parameters' symbols.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=TTIR < %t/00-ttir.mlir
# RUN: FileCheck %s --check-prefix=CANON < %t/01-canonical.mlir
# RUN: FileCheck %s --check-prefix=FUSED < %t/05-fusion.mlir

from tessera import f32, function, grad, op, tensor, vjp


@function
def xent(Z: tensor[f32, 4, 10], onehot: tensor[f32, 4, 10]):
    return -op.mean(op.sum(onehot * op.log_softmax(Z), axis=-1))


dxent = grad(xent)


@function
def flat(X: tensor[f32, "M", "N", 3]):
    return op.reshape(op.tanh(X), (-1,))


vjp_flat = vjp(flat)

# TTIR-LABEL: func.func @xent(
# TTIR:         "ttensor.log_softmax"(%arg0) {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
# the frontend's name of flat's extent is a fresh unknown
# TTIR-LABEL: func.func private @vjp_flat(
# TTIR-SAME:    tensor<?xf32> {tessera.dims = ["?{{[0-9]+}}"], tessera.name = "d_out0"}

# CANON-LABEL: func.func @dxent(
# CANON:         %[[Y:.+]] = "ttensor.log_softmax"(%arg0) {axis = 1 : i64}
# CANON-NOT:     "ttensor.log_softmax"
# CANON:         %[[DY:.+]] = "ttensor.binary"(%{{.+}}, %arg1) {fn = "mul"} : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
# CANON:         %[[P:.+]] = "ttensor.unary"(%[[Y]]) {fn = "exp"}
# CANON:         %[[S:.+]] = "ttensor.reduce"(%[[DY]]) {axes = [1], keepdims = true, kind = "sum"} : (tensor<4x10xf32>) -> tensor<4x1xf32>
# CANON:         %[[PS:.+]] = "ttensor.binary"(%[[P]], %[[S]]) {fn = "mul"}
# CANON:         %[[DX:.+]] = "ttensor.binary"(%[[DY]], %[[PS]]) {fn = "sub"}
# CANON:         return %[[DX]] : tensor<4x10xf32>
# CANON-LABEL: func.func @vjp_flat(
# CANON-SAME:    %arg1: tensor<?xf32> {tessera.dims = ["M*N*3"], tessera.name = "d_out0"}

# FUSED-LABEL: func.func @dxent(
# FUSED:         "ttensor.log_softmax"(%arg0) {axis = 1 : i64, tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "row"}
# FUSED-NOT:     tessera.group = [[G]] : i32
# FUSED-LABEL: func.func @vjp_flat(
