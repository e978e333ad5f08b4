# The derivative of a small function as Graph IR: the frontend declares `g = grad(loss, argnums=(1, 2))` as a
# body-less private func.func with a tessera.derivative attribute; tessera-autodiff (the canonical stage's
# first pass) writes its body: the primal's ops, then each op's cotangent rule in reverse order.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=TTIR < %t/00-ttir.mlir
# RUN: FileCheck %s --check-prefix=CANON < %t/01-canonical.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, function, grad, op, tensor


@function
def loss(X: tensor[f32, 4, 3], W: tensor[f32, 3, 2], b: tensor[f32, 2]):
    return op.sum(op.tanh(op.bias_add(X @ W, b)))


g = grad(loss, argnums=(1, 2))

# TTIR-LABEL: func.func @loss(
# TTIR-LABEL: func.func private @g(
# TTIR-SAME:    -> (tensor<3x2xf32>, tensor<2xf32>)
# TTIR-SAME:    tessera.derivative = "{\22kind\22: \22grad\22, \22of\22: \22loss\22, \22argnums\22: [1, 2]}"
# TTIR-NOT:     ttensor

# CANON-LABEL: func.func @g(
# CANON-SAME:    %[[X:[a-z0-9]+]]: tensor<4x3xf32>
# forward: the primal's ops, copied
# CANON:         %[[XW:.+]] = "ttensor.matmul"(%[[X]], %{{.+}}) {accum = f32} : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
# CANON:         %[[Z:.+]] = "ttensor.bias_add"(%[[XW]], %{{.+}}) {axis = 1 : i64}
# CANON:         %[[Y:.+]] = "ttensor.unary"(%[[Z]]) {fn = "tanh"}
# backward: sum's cotangent broadcast (reading none of Y's values), tanh' = 1 - y², bias_add's cotangent summed
# over the rows where they lie (no transpose)
# CANON:         "ttensor.broadcast"(%{{.+}}) : (tensor<f32>) -> tensor<4x2xf32>
# CANON:         "ttensor.unary"(%[[Y]]) {fn = "square"}
# CANON:         %[[DZ:.+]] = "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "mul"} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
# CANON:         %[[DB:.+]] = "ttensor.reduce"(%[[DZ]]) {axes = [0], keepdims = false, kind = "sum"} : (tensor<4x2xf32>) -> tensor<2xf32>
# matmul's cotangent for W: Xᵀ · dZ
# CANON:         %[[XT:.+]] = "ttensor.transpose"(%[[X]]) {perm = [1, 0]} : (tensor<4x3xf32>) -> tensor<3x4xf32>
# CANON:         %[[DW:.+]] = "ttensor.matmul"(%[[XT]], %[[DZ]]) {accum = f32} : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
# CANON:         return %[[DW]], %[[DB]] : tensor<3x2xf32>, tensor<2xf32>

# The bias's gradient, a sum over the rows, is one kernel that reduces them in place (a thread per column,
# looping over the rows: kernelgen._strided_reduce), with no transpose kernel before it.
# KERN-NOT:      func.func @g__layout
# KERN:          func.func @g__row{{[0-9]+}}(%arg0: memref<?xf32> {tessera.dims = ["S0"], tessera.name = "X"}
# KERN-SAME:       %arg2: i64 {tessera.name = "e0"}
# KERN-NOT:      func.func @g__layout
