// Laws: scale(a, scale(b, A)) = scale(ab, A) and scale(1, A) = A.
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// Constant factors multiply into one constant of their type.
// CHECK-LABEL: func.func @constants
// CHECK-NEXT:    %[[C:.+]] = "ttensor.constant"() {value = 6.000000e+00 : f32} : () -> tensor<f32>
// CHECK-NEXT:    %[[S:.+]] = "tod.scale"(%[[C]], %arg0)
// CHECK-NEXT:    return %[[S]]
func.func @constants(%a: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %two = "ttensor.constant"() {value = 2.0 : f32} : () -> tensor<f32>
  %three = "ttensor.constant"() {value = 3.0 : f32} : () -> tensor<f32>
  %0 = "tod.scale"(%three, %a) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %1 = "tod.scale"(%two, %0) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %1 : !tod.operator<4, 4, f32, f32>
}

// Factors known only at run time multiply with a ttensor.binary.
// CHECK-LABEL: func.func @runtime_factors
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<4 : i64, 4 : i64, f32, f32>, %[[X:.+]]: tensor<f32>, %[[Y:.+]]: tensor<f32>)
// CHECK-NEXT:    %[[P:.+]] = "ttensor.binary"(%[[X]], %[[Y]]) {fn = "mul"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[S:.+]] = "tod.scale"(%[[P]], %[[A]])
// CHECK-NEXT:    return %[[S]]
func.func @runtime_factors(%a: !tod.operator<4, 4, f32, f32>, %x: tensor<f32>, %y: tensor<f32>) -> !tod.operator<4, 4, f32, f32> {
  %0 = "tod.scale"(%y, %a) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %1 = "tod.scale"(%x, %0) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %1 : !tod.operator<4, 4, f32, f32>
}

// 2 · (1/2 · A) is 1 · A, which is A.
// CHECK-LABEL: func.func @to_one
// CHECK-NEXT:    return %arg0
func.func @to_one(%a: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %two = "ttensor.constant"() {value = 2.0 : f32} : () -> tensor<f32>
  %half = "ttensor.constant"() {value = 0.5 : f32} : () -> tensor<f32>
  %0 = "tod.scale"(%half, %a) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %1 = "tod.scale"(%two, %0) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %1 : !tod.operator<4, 4, f32, f32>
}

// Factors of different types (real and complex) are left alone, and so is a factor other than 1.
// CHECK-LABEL: func.func @mixed_types
// CHECK:         %[[IN:.+]] = "tod.scale"(%arg2, %arg0)
// CHECK:         "tod.scale"(%arg1, %[[IN]])
func.func @mixed_types(%a: !tod.operator<4, 4, f32, f32>, %x: tensor<f32>, %z: tensor<complex<f32>>) -> !tod.operator<4, 4, complex<f32>, f32> {
  %0 = "tod.scale"(%z, %a) : (tensor<complex<f32>>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, complex<f32>, f32>
  %1 = "tod.scale"(%x, %0) : (tensor<f32>, !tod.operator<4, 4, complex<f32>, f32>) -> !tod.operator<4, 4, complex<f32>, f32>
  return %1 : !tod.operator<4, 4, complex<f32>, f32>
}

// CHECK-LABEL: func.func @not_one
// CHECK:         "tod.scale"
func.func @not_one(%a: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %c = "ttensor.constant"() {value = 1.5 : f32} : () -> tensor<f32>
  %0 = "tod.scale"(%c, %a) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0 : !tod.operator<4, 4, f32, f32>
}
