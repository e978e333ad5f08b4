// Laws: adjoint(fft) = ifft and adjoint(ifft) = fft (the DFT is unitary).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @of_fft
// CHECK-NEXT:    %[[G:.+]] = "tod.ifft"() : () -> !tod.operator<8 : i64, 8 : i64, complex<f32>, f32>
// CHECK-NEXT:    return %[[G]]
func.func @of_fft() -> !tod.operator<8, 8, complex<f32>, f32> {
  %f = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  %0 = "tod.adjoint"(%f) : (!tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 8, complex<f32>, f32>
  return %0 : !tod.operator<8, 8, complex<f32>, f32>
}

// CHECK-LABEL: func.func @of_ifft
// CHECK-NEXT:    %[[F:.+]] = "tod.fft"() : () -> !tod.operator<8 : i64, 8 : i64, complex<f32>, f32>
// CHECK-NEXT:    return %[[F]]
func.func @of_ifft() -> !tod.operator<8, 8, complex<f32>, f32> {
  %g = "tod.ifft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  %0 = "tod.adjoint"(%g) : (!tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 8, complex<f32>, f32>
  return %0 : !tod.operator<8, 8, complex<f32>, f32>
}

// adjoint(F) ∘ F meets the inverse law after the rewrite.
// CHECK-LABEL: func.func @round_trip
// CHECK-NEXT:    %[[I:.+]] = "tod.eye"()
// CHECK-NEXT:    return %[[I]]
func.func @round_trip() -> !tod.operator<8, 8, complex<f32>, f32> {
  %f = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  %g = "tod.adjoint"(%f) : (!tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 8, complex<f32>, f32>
  %0 = "tod.compose"(%g, %f) : (!tod.operator<8, 8, complex<f32>, f32>, !tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 8, complex<f32>, f32>
  return %0 : !tod.operator<8, 8, complex<f32>, f32>
}

// A circular convolution is not unitary in general: its adjoint stays.
// CHECK-LABEL: func.func @convolution
// CHECK:         "tod.adjoint"
func.func @convolution(%h: tensor<3xf32>) -> !tod.operator<8, 8, f32, f32> {
  %c = "tod.conv1d"(%h) : (tensor<3xf32>) -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.adjoint"(%c) : (!tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  return %0 : !tod.operator<8, 8, f32, f32>
}
