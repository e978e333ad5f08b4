// Laws: sym(A) = A and skew(A) = 0 for an A the IR proves self-adjoint; so sym(sym(A)) = sym(A).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @sym_twice
// CHECK-NEXT:    %[[S:.+]] = "tod.sym"(%arg0)
// CHECK-NEXT:    return %[[S]]
func.func @sym_twice(%a: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %0 = "tod.sym"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %1 = "tod.sym"(%0) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %1 : !tod.operator<4, 4, f32, f32>
}

// CHECK-LABEL: func.func @skew_of_projector
// CHECK-NEXT:    %[[Z:.+]] = "tod.zero"() : () -> !tod.operator<4 : i64, 4 : i64, f32, f32>
// CHECK-NEXT:    return %[[Z]]
func.func @skew_of_projector(%u: tensor<4x2xf32>) -> !tod.operator<4, 4, f32, f32> {
  %p = "tod.projector"(%u) : (tensor<4x2xf32>) -> !tod.operator<4, 4, f32, f32>
  %0 = "tod.skew"(%p) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0 : !tod.operator<4, 4, f32, f32>
}

// The symmetric part of an operator known nothing about stays, and so does that of a complex diagonal.
// CHECK-LABEL: func.func @general
// CHECK:         "tod.sym"(%arg0)
// CHECK:         "tod.sym"(%{{.+}})
func.func @general(%a: !tod.operator<4, 4, f32, f32>, %d: tensor<4xcomplex<f32>>) -> (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, complex<f32>, f32>) {
  %0 = "tod.sym"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %g = "tod.diag"(%d) : (tensor<4xcomplex<f32>>) -> !tod.operator<4, 4, complex<f32>, f32>
  %1 = "tod.sym"(%g) : (!tod.operator<4, 4, complex<f32>, f32>) -> !tod.operator<4, 4, complex<f32>, f32>
  return %0, %1 : !tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, complex<f32>, f32>
}
