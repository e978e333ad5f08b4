// Laws: adjoint(A) = A for an A the IR proves self-adjoint — I, projectors U U*, real diagonals, sym(B),
// sums and real multiples of those — and adjoint(0) = 0.
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @identity
// CHECK-NEXT:    %[[I:.+]] = "tod.eye"()
// CHECK-NEXT:    return %[[I]]
func.func @identity() -> !tod.operator<8, 8, f32, f32> {
  %i = "tod.eye"() : () -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.adjoint"(%i) : (!tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  return %0 : !tod.operator<8, 8, f32, f32>
}

// CHECK-LABEL: func.func @projector
// CHECK-NEXT:    %[[P:.+]] = "tod.projector"(%arg0)
// CHECK-NEXT:    return %[[P]]
func.func @projector(%u: tensor<8x2xcomplex<f32>>) -> !tod.operator<8, 8, complex<f32>, f32> {
  %p = "tod.projector"(%u) : (tensor<8x2xcomplex<f32>>) -> !tod.operator<8, 8, complex<f32>, f32>
  %0 = "tod.adjoint"(%p) : (!tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 8, complex<f32>, f32>
  return %0 : !tod.operator<8, 8, complex<f32>, f32>
}

// CHECK-LABEL: func.func @sum_of_sym_and_real_diagonal
// CHECK:         %[[P:.+]] = "tod.plus"
// CHECK-NEXT:    return %[[P]]
func.func @sum_of_sym_and_real_diagonal(%a: !tod.operator<8, 8, f32, f32>, %d: tensor<8xf32>) -> !tod.operator<8, 8, f32, f32> {
  %s = "tod.sym"(%a) : (!tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  %g = "tod.diag"(%d) : (tensor<8xf32>) -> !tod.operator<8, 8, f32, f32>
  %p = "tod.plus"(%s, %g) : (!tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.adjoint"(%p) : (!tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  return %0 : !tod.operator<8, 8, f32, f32>
}

// A rectangular zero becomes the zero of the transposed extents.
// CHECK-LABEL: func.func @rectangular_zero
// CHECK-NEXT:    %[[Z:.+]] = "tod.zero"() : () -> !tod.operator<8 : i64, 4 : i64, f32, f32>
// CHECK-NEXT:    return %[[Z]]
func.func @rectangular_zero() -> !tod.operator<8, 4, f32, f32> {
  %z = "tod.zero"() : () -> !tod.operator<4, 8, f32, f32>
  %0 = "tod.adjoint"(%z) : (!tod.operator<4, 8, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  return %0 : !tod.operator<8, 4, f32, f32>
}

// A complex diagonal is not self-adjoint (its adjoint conjugates the entries).
// CHECK-LABEL: func.func @complex_diagonal
// CHECK:         %[[D:.+]] = "tod.diag"(%arg0)
// CHECK-NEXT:    "tod.adjoint"(%[[D]])
func.func @complex_diagonal(%d: tensor<8xcomplex<f32>>) -> !tod.operator<8, 8, complex<f32>, f32> {
  %g = "tod.diag"(%d) : (tensor<8xcomplex<f32>>) -> !tod.operator<8, 8, complex<f32>, f32>
  %0 = "tod.adjoint"(%g) : (!tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 8, complex<f32>, f32>
  return %0 : !tod.operator<8, 8, complex<f32>, f32>
}

// Nor is a skew part.
// CHECK-LABEL: func.func @skew_part
// CHECK:         %[[K:.+]] = "tod.skew"(%arg0)
// CHECK-NEXT:    "tod.adjoint"(%[[K]])
func.func @skew_part(%a: !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32> {
  %k = "tod.skew"(%a) : (!tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.adjoint"(%k) : (!tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  return %0 : !tod.operator<8, 8, f32, f32>
}
