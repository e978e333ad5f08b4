// Law: compose(fft, ifft) = I = compose(ifft, fft) (spec §23).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @fft_after_ifft
// CHECK-NEXT:    %[[I:.+]] = "tod.eye"() : () -> !tod.operator<16 : i64, 16 : i64, complex<f32>, f32>
// CHECK-NEXT:    return %[[I]]
func.func @fft_after_ifft() -> !tod.operator<16, 16, complex<f32>, f32> {
  %f = "tod.fft"() : () -> !tod.operator<16, 16, complex<f32>, f32>
  %g = "tod.ifft"() : () -> !tod.operator<16, 16, complex<f32>, f32>
  %0 = "tod.compose"(%f, %g) : (!tod.operator<16, 16, complex<f32>, f32>, !tod.operator<16, 16, complex<f32>, f32>) -> !tod.operator<16, 16, complex<f32>, f32>
  return %0 : !tod.operator<16, 16, complex<f32>, f32>
}

// CHECK-LABEL: func.func @ifft_after_fft
// CHECK-NEXT:    %[[I:.+]] = "tod.eye"() : () -> !tod.operator<16 : i64, 16 : i64, complex<f64>, f64>
// CHECK-NEXT:    return %[[I]]
func.func @ifft_after_fft() -> !tod.operator<16, 16, complex<f64>, f64> {
  %f = "tod.fft"() : () -> !tod.operator<16, 16, complex<f64>, f64>
  %g = "tod.ifft"() : () -> !tod.operator<16, 16, complex<f64>, f64>
  %0 = "tod.compose"(%g, %f) : (!tod.operator<16, 16, complex<f64>, f64>, !tod.operator<16, 16, complex<f64>, f64>) -> !tod.operator<16, 16, complex<f64>, f64>
  return %0 : !tod.operator<16, 16, complex<f64>, f64>
}

// With the identity gone, an FFT round trip around a diagonal stays (that is a convolution).
// CHECK-LABEL: func.func @convolution_stays
// CHECK:         "tod.compose"(%{{.+}}, %{{.+}})
// CHECK:         "tod.compose"(%{{.+}}, %{{.+}})
func.func @convolution_stays(%h: tensor<16xcomplex<f32>>) -> !tod.operator<16, 16, complex<f32>, f32> {
  %f = "tod.fft"() : () -> !tod.operator<16, 16, complex<f32>, f32>
  %g = "tod.ifft"() : () -> !tod.operator<16, 16, complex<f32>, f32>
  %d = "tod.diag"(%h) : (tensor<16xcomplex<f32>>) -> !tod.operator<16, 16, complex<f32>, f32>
  %0 = "tod.compose"(%d, %f) : (!tod.operator<16, 16, complex<f32>, f32>, !tod.operator<16, 16, complex<f32>, f32>) -> !tod.operator<16, 16, complex<f32>, f32>
  %1 = "tod.compose"(%g, %0) : (!tod.operator<16, 16, complex<f32>, f32>, !tod.operator<16, 16, complex<f32>, f32>) -> !tod.operator<16, 16, complex<f32>, f32>
  return %1 : !tod.operator<16, 16, complex<f32>, f32>
}

// Two forward transforms are not an identity (F∘F is the index reversal).
// CHECK-LABEL: func.func @fft_twice
// CHECK:         "tod.compose"
func.func @fft_twice() -> !tod.operator<16, 16, complex<f32>, f32> {
  %f = "tod.fft"() : () -> !tod.operator<16, 16, complex<f32>, f32>
  %0 = "tod.compose"(%f, %f) : (!tod.operator<16, 16, complex<f32>, f32>, !tod.operator<16, 16, complex<f32>, f32>) -> !tod.operator<16, 16, complex<f32>, f32>
  return %0 : !tod.operator<16, 16, complex<f32>, f32>
}
