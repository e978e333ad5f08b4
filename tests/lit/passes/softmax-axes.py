# softmax and log_softmax along an axis other than the last, on every target: the schedule phase sees X as
# [P, N, Q] (a reshape: a view), swaps its last two axes, normalizes along the last (the row kernels') and
# swaps and reshapes back (passes/decompose.softmax_axes). Along the last axis nothing changes.
# RUN: tessera-cc %s --compile-to=schedule | FileCheck %s
# RUN: tessera-cc %s --target amdgpu --compile-to=schedule | FileCheck %s
# RUN: tessera-cc %s --target spirv --compile-to=schedule | FileCheck %s

from tessera import function, op, tensor

# CHECK-LABEL: func.func @middle(
# CHECK:         %[[V:.+]] = "ttensor.reshape"(%arg0) {tessera.result_dims = ["A", "B", "C*D"]} : (tensor<?x?x?x?xf32>) -> tensor<?x?x?xf32>
# CHECK:         %[[T:.+]] = "ttensor.transpose"(%[[V]]) {perm = [0, 2, 1]} : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
# CHECK:         %[[S:.+]] = "ttensor.log_softmax"(%[[T]]) {axis = 2 : i64}
# CHECK:         %[[U:.+]] = "ttensor.transpose"(%[[S]]) {perm = [0, 2, 1]}
# CHECK:         "ttensor.reshape"(%[[U]]) {tessera.result_dims = ["A", "B", "C", "D"]} : (tensor<?x?x?xf32>) -> tensor<?x?x?x?xf32>
@function
def middle(X: tensor[f32, "A", "B", "C", "D"]):
    return op.log_softmax(X, axis=1)


# CHECK-LABEL: func.func @first(
# CHECK:         "ttensor.reshape"(%arg0) {tessera.result_dims = ["1", "6", "35"]} : (tensor<6x5x7xf32>) -> tensor<1x6x35xf32>
# CHECK:         "ttensor.softmax"(%{{.+}}) {axis = 2 : i64} : (tensor<1x35x6xf32>) -> tensor<1x35x6xf32>
@function
def first(X: tensor[f32, 6, 5, 7]):
    return op.softmax(X, axis=0)


# CHECK-LABEL: func.func @last(
# CHECK-NOT:     "ttensor.transpose"
# CHECK:         "ttensor.softmax"(%arg0) {axis = 1 : i64}
@function
def last(X: tensor[f32, "N", "D"]):
    return op.softmax(X)
