# Variables assigned under `if` and in `range` loops become scf.if results and scf.for iteration arguments.
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s

from tessera import kernel, launch


# CHECK-LABEL: func.func @clamp_or_scale(
# CHECK:         %[[R:.+]] = scf.if %{{.+}} -> (f32) {
# CHECK:           scf.yield %{{.+}} : f32
# CHECK:         } else {
# CHECK:           scf.yield %{{.+}} : f32
# CHECK:         memref.store %[[R]]
@kernel
def clamp_or_scale(X: tensor[float, "N"], Out: tensor[float, "N"], s: float):
    i = launch.thread_id()
    v = X[i]
    if v > 1.0:
        v = 1.0
    else:
        v = v * s
    Out[i] = v


# CHECK-LABEL: func.func @row_sum(
# CHECK-SAME:    memref<?x?xf32> {tessera.dims = ["M", "K"]
# CHECK:         %[[SUM:.+]] = scf.for %[[K:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (f32) {
# CHECK:           %[[E:.+]] = memref.load %{{.+}}[%{{.+}}, %[[K]]] : memref<?x?xf32>
# CHECK:           %[[NEXT:.+]] = arith.addf %[[ACC]], %[[E]] : f32
# CHECK:           scf.yield %[[NEXT]] : f32
# CHECK:         memref.store %[[SUM]]
@kernel
def row_sum(A: tensor[float, "M", "K"], Out: tensor[float, "M"]):
    r = launch.thread_id()
    if r < A.shape[0]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[r, k]
        Out[r] = acc
