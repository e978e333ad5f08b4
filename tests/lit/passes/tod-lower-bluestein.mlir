// tessera-tod-lower of Fourier transforms of sizes that are not powers of two, from 16 up (passes/fft.py,
// Bluestein's chirp-z): the signal chirped and zero-padded to m = the smallest power of two >= 2n - 1
// (ttensor.chirp_mul), its Stockham FFT, times the FFT of the chirp filter (ttensor.chirp, its FFT scaled by 1/m,
// made once per function), the inverse FFT, its first n entries chirped and scaled by 1/sqrt(n). Sizes below 16
// keep the DFT as GEMMs (twiddle matrices).
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-tod-lower)' | FileCheck %s

// n = 24, m = 64 (three radix-4 stages each FFT); the filter made once for the two transforms of one direction.
// CHECK-LABEL: func.func @bluestein
// CHECK-SAME:    (%[[X:.+]]: tensor<24xf32>, %[[Y:.+]]: tensor<24xf32>)
// CHECK:         %[[COL:.+]] = "ttensor.reshape"(%[[X]]) : (tensor<24xf32>) -> tensor<24x1xf32>
// CHECK:         %[[B:.+]] = "ttensor.chirp"() {inverse = false, n = 24 : i64} : () -> tensor<2x64x1xf32>
// CHECK:         "ttensor.fft_stage"(%[[B]]) {input_layout = "planes", inverse = false, {{.*}}stride = 1 : i64}
// CHECK:         "ttensor.fft_stage"({{.*}}stride = 4 : i64}
// CHECK:         %[[BF:.+]] = "ttensor.fft_stage"({{.*}}output_layout = "pairs", radix = 4 : i64, scale = 1.562500e-02 : f64, stride = 16 : i64} : (tensor<2x64x1xf32>) -> tensor<64x1x2xf32>
// CHECK:         %[[A:.+]] = "ttensor.chirp_mul"(%[[COL]]) {input_layout = "parts", inverse = false, n = 24 : i64, {{.*}}output_layout = "planes", scale = 1.000000e+00 : f64} : (tensor<24x1xf32>) -> tensor<2x64x1xf32>
// CHECK:         "ttensor.fft_stage"(%[[A]])
// CHECK:         "ttensor.fft_stage"
// CHECK:         %[[AF:.+]] = "ttensor.fft_stage"({{.*}}output_layout = "pairs"{{.*}}scale = 1.000000e+00 : f64, stride = 16 : i64}
// CHECK:         %[[P:.+]] = "ttensor.spectrum_mul"(%[[AF]], %[[BF]]) : (tensor<64x1x2xf32>, tensor<64x1x2xf32>) -> tensor<2x64x1xf32>
// CHECK:         "ttensor.fft_stage"(%[[P]]) {input_layout = "planes", inverse = true
// CHECK:         "ttensor.fft_stage"
// CHECK:         %[[C:.+]] = "ttensor.fft_stage"({{.*}}inverse = true{{.*}}output_layout = "pairs"
// CHECK:         %[[R:.+]] = "ttensor.chirp_mul"(%[[C]]) {input_layout = "pairs", inverse = false, n = 24 : i64, {{.*}}output_layout = "pairs", scale = 0.20412414523193154 : f64} : (tensor<64x1x2xf32>) -> tensor<24x1x2xf32>
// CHECK:         "ttensor.chirp_mul"
// CHECK-NOT:     "ttensor.chirp"()
// CHECK-NOT:     "ttensor.twiddle"
// CHECK-NOT:     "ttensor.matmul"
// CHECK:         return
func.func @bluestein(%x: tensor<24xf32>, %y: tensor<24xf32>) -> (tensor<24xcomplex<f32>>, tensor<24xcomplex<f32>>) {
  %f = "tod.fft"() : () -> !tod.operator<24, 24, complex<f32>, f32>
  %a = "tod.apply"(%f, %x) : (!tod.operator<24, 24, complex<f32>, f32>, tensor<24xf32>) -> tensor<24xcomplex<f32>>
  %b = "tod.apply"(%f, %y) : (!tod.operator<24, 24, complex<f32>, f32>, tensor<24xf32>) -> tensor<24xcomplex<f32>>
  return %a, %b : tensor<24xcomplex<f32>>, tensor<24xcomplex<f32>>
}

// -----

// The inverse of a complex parameter in f64, n = 5000 (above the DFT's 4096), m = 16384: read as its pairs,
// the chirp's sign flipped (inverse = true) in the filter and both chirp multiplies.
// CHECK-LABEL: func.func @inverse_large
// CHECK:         "ttensor.chirp"() {inverse = true, n = 5000 : i64} : () -> tensor<2x16384x1xf64>
// CHECK:         "ttensor.chirp_mul"({{.*}}) {input_layout = "pairs", inverse = true, n = 5000 : i64, {{.*}}output_layout = "planes"{{.*}} : (tensor<3x5000x1x2xf64>) -> tensor<2x3x16384x1xf64>
// CHECK:         "ttensor.spectrum_mul"({{.*}}) : (tensor<3x16384x1x2xf64>, tensor<16384x1x2xf64>) -> tensor<2x3x16384x1xf64>
// CHECK:         "ttensor.chirp_mul"({{.*}}) {input_layout = "pairs", inverse = true, n = 5000 : i64, {{.*}}output_layout = "pairs"{{.*}} : (tensor<3x16384x1x2xf64>) -> tensor<3x5000x1x2xf64>
// CHECK-NOT:     "ttensor.twiddle"
func.func @inverse_large(%z: tensor<3x5000x1xcomplex<f64>>) -> tensor<3x5000x1xcomplex<f64>> {
  %f = "tod.ifft"() : () -> !tod.operator<5000, 5000, complex<f64>, f64>
  %y = "tod.apply"(%f, %z) : (!tod.operator<5000, 5000, complex<f64>, f64>, tensor<3x5000x1xcomplex<f64>>) -> tensor<3x5000x1xcomplex<f64>>
  return %y : tensor<3x5000x1xcomplex<f64>>
}

// -----

// Below 16 (n = 12): the DFT as GEMMs, no chirp.
// CHECK-LABEL: func.func @small
// CHECK:         "ttensor.twiddle"() {part = "cos"} : () -> tensor<12x12xf32>
// CHECK-NOT:     "ttensor.chirp
func.func @small(%x: tensor<12xf32>) -> tensor<12xcomplex<f32>> {
  %f = "tod.fft"() : () -> !tod.operator<12, 12, complex<f32>, f32>
  %y = "tod.apply"(%f, %x) : (!tod.operator<12, 12, complex<f32>, f32>, tensor<12xf32>) -> tensor<12xcomplex<f32>>
  return %y : tensor<12xcomplex<f32>>
}
