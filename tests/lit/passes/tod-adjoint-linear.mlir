// Laws: adjoint(A + B) = adjoint(A) + adjoint(B); adjoint(s·A) = conj(s)·adjoint(A), applied for real s.
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @over_plus
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>, %[[B:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>)
// CHECK:         %[[AH:.+]] = "tod.adjoint"(%[[A]])
// CHECK:         %[[BH:.+]] = "tod.adjoint"(%[[B]])
// CHECK:         %[[P:.+]] = "tod.plus"(%[[AH]], %[[BH]]) : {{.+}} -> !tod.operator<4 : i64, 8 : i64, f32, f32>
// CHECK-NEXT:    return %[[P]]
func.func @over_plus(%a: !tod.operator<8, 4, f32, f32>, %b: !tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32> {
  %0 = "tod.plus"(%a, %b) : (!tod.operator<8, 4, f32, f32>, !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  return %1 : !tod.operator<4, 8, f32, f32>
}

// CHECK-LABEL: func.func @over_real_scale
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<8 : i64, 4 : i64, complex<f32>, f32>, %[[S:.+]]: tensor<f32>)
// CHECK:         %[[AH:.+]] = "tod.adjoint"(%[[A]])
// CHECK-NEXT:    %[[R:.+]] = "tod.scale"(%[[S]], %[[AH]]) : {{.+}} -> !tod.operator<4 : i64, 8 : i64, complex<f32>, f32>
// CHECK-NEXT:    return %[[R]]
func.func @over_real_scale(%a: !tod.operator<8, 4, complex<f32>, f32>, %s: tensor<f32>) -> !tod.operator<4, 8, complex<f32>, f32> {
  %0 = "tod.scale"(%s, %a) : (tensor<f32>, !tod.operator<8, 4, complex<f32>, f32>) -> !tod.operator<8, 4, complex<f32>, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<8, 4, complex<f32>, f32>) -> !tod.operator<4, 8, complex<f32>, f32>
  return %1 : !tod.operator<4, 8, complex<f32>, f32>
}

// A complex factor would have to be conjugated, which the Graph IR has no op for: the adjoint stays.
// CHECK-LABEL: func.func @complex_scale_stays
// CHECK:         %[[S:.+]] = "tod.scale"(%arg1, %arg0)
// CHECK-NEXT:    "tod.adjoint"(%[[S]])
func.func @complex_scale_stays(%a: !tod.operator<8, 4, complex<f32>, f32>, %z: tensor<complex<f32>>) -> !tod.operator<4, 8, complex<f32>, f32> {
  %0 = "tod.scale"(%z, %a) : (tensor<complex<f32>>, !tod.operator<8, 4, complex<f32>, f32>) -> !tod.operator<8, 4, complex<f32>, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<8, 4, complex<f32>, f32>) -> !tod.operator<4, 8, complex<f32>, f32>
  return %1 : !tod.operator<4, 8, complex<f32>, f32>
}
