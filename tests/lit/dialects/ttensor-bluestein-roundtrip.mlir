// Bluestein's ops (passes/fft.py) print and parse back: the chirp filter, the chirp multiply padding a signal and
// cropping a convolution, the spectrum product.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @bluestein
// CHECK:         "ttensor.chirp"() {inverse = true, n = 5 : i64} : () -> tensor<2x16x1xf64>
// CHECK:         "ttensor.chirp_mul"(%{{.+}}, %{{.+}}) {input_layout = "parts", inverse = false, n = 5 : i64, operandSegmentSizes = array<i32: 1, 1>, output_layout = "planes", scale = 1.000000e+00 : f64} : (tensor<3x5x1xf32>, tensor<3x5x1xf32>) -> tensor<2x3x16x1xf32>
// CHECK:         "ttensor.spectrum_mul"(%{{.+}}, %{{.+}}) : (tensor<3x16x1x2xf32>, tensor<16x1x2xf32>) -> tensor<2x3x16x1xf32>
// CHECK:         "ttensor.chirp_mul"(%{{.+}}) {input_layout = "pairs", {{.*}}output_layout = "pairs", scale = 5.000000e-01 : f64} : (tensor<3x16x1x2xf32>) -> tensor<3x5x1x2xf32>
func.func @bluestein(%re: tensor<3x5x1xf32>, %im: tensor<3x5x1xf32>, %a: tensor<3x16x1x2xf32>, %h: tensor<16x1x2xf32>) {
  %b = "ttensor.chirp"() {inverse = true, n = 5 : i64} : () -> tensor<2x16x1xf64>
  %p = "ttensor.chirp_mul"(%re, %im) {input_layout = "parts", inverse = false, n = 5 : i64, operandSegmentSizes = array<i32: 1, 1>, output_layout = "planes", scale = 1.0 : f64} : (tensor<3x5x1xf32>, tensor<3x5x1xf32>) -> tensor<2x3x16x1xf32>
  %s = "ttensor.spectrum_mul"(%a, %h) : (tensor<3x16x1x2xf32>, tensor<16x1x2xf32>) -> tensor<2x3x16x1xf32>
  %c = "ttensor.chirp_mul"(%a) {input_layout = "pairs", inverse = false, n = 5 : i64, operandSegmentSizes = array<i32: 1, 0>, output_layout = "pairs", scale = 0.5 : f64} : (tensor<3x16x1x2xf32>) -> tensor<3x5x1x2xf32>
  return
}
