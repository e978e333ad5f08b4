// Law: U* ∘ U = I = U ∘ U* for an operator the IR proves unitary (fft, ifft, eye, and their adjoints,
// compositions, Kronecker products, direct sums and powers).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @kronecker_of_transforms
// CHECK-NEXT:    %[[I:.+]] = "tod.eye"() : () -> !tod.operator<32 : i64, 32 : i64, complex<f32>, f32>
// CHECK-NEXT:    return %[[I]]
func.func @kronecker_of_transforms() -> !tod.operator<32, 32, complex<f32>, f32> {
  %f = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  %g = "tod.fft"() : () -> !tod.operator<4, 4, complex<f32>, f32>
  %u = "tod.kronecker"(%f, %g) : (!tod.operator<8, 8, complex<f32>, f32>, !tod.operator<4, 4, complex<f32>, f32>) -> !tod.operator<32, 32, complex<f32>, f32>
  %uh = "tod.adjoint"(%u) : (!tod.operator<32, 32, complex<f32>, f32>) -> !tod.operator<32, 32, complex<f32>, f32>
  %0 = "tod.compose"(%uh, %u) : (!tod.operator<32, 32, complex<f32>, f32>, !tod.operator<32, 32, complex<f32>, f32>) -> !tod.operator<32, 32, complex<f32>, f32>
  return %0 : !tod.operator<32, 32, complex<f32>, f32>
}

// CHECK-LABEL: func.func @exponential_of_skew
// CHECK-NEXT:    %[[I:.+]] = "tod.eye"() : () -> !tod.operator<4 : i64, 4 : i64, f32, f32>
// CHECK-NEXT:    return %[[I]]
func.func @exponential_of_skew(%a: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %k = "tod.skew"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %u = "tod.expm"(%k) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %uh = "tod.adjoint"(%u) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %0 = "tod.compose"(%u, %uh) : (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0 : !tod.operator<4, 4, f32, f32>
}

// A dense operator is not known to be unitary.
// CHECK-LABEL: func.func @dense
// CHECK:         "tod.compose"
func.func @dense(%m: tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32> {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %ah = "tod.adjoint"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %0 = "tod.compose"(%ah, %a) : (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0 : !tod.operator<4, 4, f32, f32>
}
