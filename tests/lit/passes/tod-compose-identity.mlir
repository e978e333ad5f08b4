// Law: compose(A, I) = A and compose(I, A) = A (spec §23).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @right_identity
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>)
// CHECK-NOT:     tod.eye
// CHECK-NOT:     tod.compose
// CHECK:         return %[[A]]
func.func @right_identity(%a: !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, f32, f32> {
  %i = "tod.eye"() : () -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.compose"(%a, %i) : (!tod.operator<8, 4, f32, f32>, !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  return %0 : !tod.operator<8, 4, f32, f32>
}

// CHECK-LABEL: func.func @left_identity
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>)
// CHECK-NOT:     tod.compose
// CHECK:         return %[[A]]
func.func @left_identity(%a: !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, f32, f32> {
  %i = "tod.eye"() : () -> !tod.operator<4, 4, f32, f32>
  %0 = "tod.compose"(%i, %a) : (!tod.operator<4, 4, f32, f32>, !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  return %0 : !tod.operator<8, 4, f32, f32>
}

// A complex identity makes the composition complex: the real A cannot stand for it.
// CHECK-LABEL: func.func @complex_identity
// CHECK:         %[[I:.+]] = "tod.eye"()
// CHECK:         "tod.compose"(%arg0, %[[I]])
func.func @complex_identity(%a: !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, complex<f32>, f32> {
  %i = "tod.eye"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  %0 = "tod.compose"(%a, %i) : (!tod.operator<8, 4, f32, f32>, !tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 4, complex<f32>, f32>
  return %0 : !tod.operator<8, 4, complex<f32>, f32>
}

// A diagonal operator is not the identity.
// CHECK-LABEL: func.func @diagonal_is_not_identity
// CHECK:         "tod.compose"
func.func @diagonal_is_not_identity(%a: !tod.operator<8, 4, f32, f32>, %d: tensor<8xf32>) -> !tod.operator<8, 4, f32, f32> {
  %i = "tod.diag"(%d) : (tensor<8xf32>) -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.compose"(%a, %i) : (!tod.operator<8, 4, f32, f32>, !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  return %0 : !tod.operator<8, 4, f32, f32>
}
