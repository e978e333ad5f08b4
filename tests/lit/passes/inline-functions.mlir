// tessera-inline-functions: a func.call of a tessera.function becomes a copy of the callee's body, callees
// first (so nested calls inline whole); the boundary's tensor.casts go, the copy takes the caller's static
// extents, a reshape's named extents are renamed to the caller's, and the callees stay.
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-inline-functions)' | FileCheck %s

module {
  // CHECK-LABEL: func.func @inner(
  // CHECK:         "ttensor.unary"(%arg0) {fn = "neg"} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  func.func @inner(%a: tensor<?x?xf32> {tessera.dims = ["M", "K"], tessera.name = "A"}) -> tensor<?x?xf32> attributes {tessera.function} {
    %0 = "ttensor.unary"(%a) {fn = "neg"} : (tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
  // CHECK-LABEL: func.func @mid(
  // CHECK-NOT:     call @
  // CHECK:         %[[N:.+]] = "ttensor.unary"(%arg0) {fn = "neg"} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  // CHECK-NEXT:    "ttensor.reshape"(%[[N]]) {{.*}}tessera.result_dims = ["?", "P", "Q"]
  func.func @mid(%a: tensor<?x?xf32> {tessera.dims = ["P", "Q"], tessera.name = "A"}) -> tensor<?x?x?xf32> attributes {tessera.function} {
    %0 = call @inner(%a) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %1 = call @flat(%0) : (tensor<?x?xf32>) -> tensor<?x?x?xf32>
    return %1 : tensor<?x?x?xf32>
  }
  func.func @flat(%a: tensor<?x?xf32> {tessera.dims = ["R", "C"], tessera.name = "A"}) -> tensor<?x?x?xf32> attributes {tessera.function} {
    %0 = "ttensor.reshape"(%a) {tessera.result_dims = ["?", "R", "C"]} : (tensor<?x?xf32>) -> tensor<?x?x?xf32>
    return %0 : tensor<?x?x?xf32>
  }
  // CHECK-LABEL: func.func @outer(
  // CHECK-NOT:     tensor.cast
  // CHECK:         %[[A:.+]] = "ttensor.unary"(%arg0) {fn = "neg"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT:    "ttensor.unary"(%[[A]]) {fn = "neg"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NOT:     call @
  func.func @outer(%x: tensor<4x8xf32> {tessera.dims = [4, 8], tessera.name = "X"}) -> tensor<4x8xf32> attributes {tessera.function} {
    %c = tensor.cast %x : tensor<4x8xf32> to tensor<?x?xf32>
    %0 = call @inner(%c) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %1 = call @inner(%0) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %2 = tensor.cast %1 : tensor<?x?xf32> to tensor<4x8xf32>
    return %2 : tensor<4x8xf32>
  }
}
