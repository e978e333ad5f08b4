// tessera-tod-lower of Fourier transforms of power-of-two sizes (passes/fft.py): Stockham stages, radix 4 (a
// radix-2 stage last where log2 n is odd), each a ttensor.fft_stage: the first reads the parts (or the pairs
// of a complex value), the ones between write planes [2, ..., n, k], the last one pairs [..., n, k, 2], scaled
// by 1/sqrt(n). No twiddle matrix and no GEMM; a returned result is the last stage's pairs viewed as
// complex<T> (no interleave), a complex parameter is read as its pairs (no parts), and ttensor.part is taken
// only where a real op reads a part (a diagonal's products).
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-tod-lower)' | FileCheck %s

// n = 8 = 4·2: a radix-4 stage reading the real vector as a column, a radix-2 stage of stride 4 scaled by 1/√8.
// CHECK-LABEL: func.func @fft
// CHECK-SAME:    (%[[X:.+]]: tensor<8xf32>)
// CHECK:         %[[COL:.+]] = "ttensor.reshape"(%[[X]]) : (tensor<8xf32>) -> tensor<8x1xf32>
// CHECK:         %[[S1:.+]] = "ttensor.fft_stage"(%[[COL]]) {input_layout = "parts", inverse = false, operandSegmentSizes = array<i32: 1, 0>, output_layout = "planes", radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64} : (tensor<8x1xf32>) -> tensor<2x8x1xf32>
// CHECK:         %[[S2:.+]] = "ttensor.fft_stage"(%[[S1]]) {input_layout = "planes", inverse = false, operandSegmentSizes = array<i32: 1, 0>, output_layout = "pairs", radix = 2 : i64, scale = 0.35355339059327373 : f64, stride = 4 : i64} : (tensor<2x8x1xf32>) -> tensor<8x1x2xf32>
// CHECK:         %[[Z:.+]] = "ttensor.reshape"(%[[S2]]) : (tensor<8x1x2xf32>) -> tensor<8xcomplex<f32>>
// CHECK:         return %[[Z]]
// CHECK-NOT:     "ttensor.twiddle"
// CHECK-NOT:     "ttensor.matmul"
// CHECK-NOT:     "ttensor.interleave"
// CHECK-NOT:     tod.
func.func @fft(%x: tensor<8xf32>) -> tensor<8xcomplex<f32>> {
  %f = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  %y = "tod.apply"(%f, %x) : (!tod.operator<8, 8, complex<f32>, f32>, tensor<8xf32>) -> tensor<8xcomplex<f32>>
  return %y : tensor<8xcomplex<f32>>
}

// -----

// F* diag(F h) F x in f64 (n = 16: two radix-4 stages each): F h's parts for the diagonal's four products, the
// inverse's first stage reading the product's real and imaginary parts, its last stage returned as complex.
// CHECK-LABEL: func.func @filter
// CHECK-SAME:    (%[[X:.+]]: tensor<16xf64>, %[[H:.+]]: tensor<16xf64>)
// CHECK:         %[[HC:.+]] = "ttensor.reshape"(%[[H]])
// CHECK:         "ttensor.fft_stage"(%[[HC]]) {input_layout = "parts", inverse = false, {{.*}}output_layout = "planes", radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64}
// CHECK:         %[[FH:.+]] = "ttensor.fft_stage"({{.*}}) {input_layout = "planes", inverse = false, {{.*}}output_layout = "pairs", radix = 4 : i64, scale = 2.500000e-01 : f64, stride = 4 : i64} : (tensor<2x16x1xf64>) -> tensor<16x1x2xf64>
// CHECK:         "ttensor.part"(%[[FH]]) {part = "re"} : (tensor<16x1x2xf64>) -> tensor<16x1xf64>
// CHECK:         "ttensor.part"(%[[FH]]) {part = "im"}
// CHECK-COUNT-2: "ttensor.fft_stage"
// CHECK-COUNT-4: "ttensor.binary"({{.*}}) {fn = "mul"}
// CHECK:         %[[RE:.+]] = "ttensor.binary"({{.*}}) {fn = "sub"}
// CHECK:         %[[IM:.+]] = "ttensor.binary"({{.*}}) {fn = "add"}
// CHECK:         %[[I1:.+]] = "ttensor.fft_stage"(%[[RE]], %[[IM]]) {input_layout = "parts", inverse = true, operandSegmentSizes = array<i32: 1, 1>, output_layout = "planes", radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64} : (tensor<16x1xf64>, tensor<16x1xf64>) -> tensor<2x16x1xf64>
// CHECK:         %[[I2:.+]] = "ttensor.fft_stage"(%[[I1]]) {input_layout = "planes", inverse = true, {{.*}}scale = 2.500000e-01 : f64, stride = 4 : i64}
// CHECK:         %[[Z:.+]] = "ttensor.reshape"(%[[I2]]) : (tensor<16x1x2xf64>) -> tensor<16xcomplex<f64>>
// CHECK:         return %[[Z]]
// CHECK-NOT:     "ttensor.interleave"
func.func @filter(%x: tensor<16xf64>, %h: tensor<16xf64>) -> tensor<16xcomplex<f64>> {
  %f = "tod.fft"() : () -> !tod.operator<16, 16, complex<f64>, f64>
  %g = "tod.apply"(%f, %h) : (!tod.operator<16, 16, complex<f64>, f64>, tensor<16xf64>) -> tensor<16xcomplex<f64>>
  %d = "tod.diag"(%g) : (tensor<16xcomplex<f64>>) -> !tod.operator<16, 16, complex<f64>, f64>
  %i = "tod.ifft"() : () -> !tod.operator<16, 16, complex<f64>, f64>
  %c1 = "tod.compose"(%d, %f) : (!tod.operator<16, 16, complex<f64>, f64>, !tod.operator<16, 16, complex<f64>, f64>) -> !tod.operator<16, 16, complex<f64>, f64>
  %c2 = "tod.compose"(%i, %c1) : (!tod.operator<16, 16, complex<f64>, f64>, !tod.operator<16, 16, complex<f64>, f64>) -> !tod.operator<16, 16, complex<f64>, f64>
  %y = "tod.apply"(%c2, %x) : (!tod.operator<16, 16, complex<f64>, f64>, tensor<16xf64>) -> tensor<16xcomplex<f64>>
  return %y : tensor<16xcomplex<f64>>
}

// -----

// A batch of complex spectra [4, 32, 3] (the transform along axis 1, three columns): the parameter viewed as
// pairs and transformed in place of its parts, 32 = 4·4·2.
// CHECK-LABEL: func.func @complex_parameter
// CHECK-SAME:    (%[[Z:.+]]: tensor<4x32x3xcomplex<f32>>)
// CHECK:         %[[P:.+]] = "ttensor.reshape"(%[[Z]]) : (tensor<4x32x3xcomplex<f32>>) -> tensor<4x32x3x2xf32>
// CHECK:         %[[S1:.+]] = "ttensor.fft_stage"(%[[P]]) {input_layout = "pairs", inverse = true, {{.*}}output_layout = "planes", radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64} : (tensor<4x32x3x2xf32>) -> tensor<2x4x32x3xf32>
// CHECK:         %[[S2:.+]] = "ttensor.fft_stage"(%[[S1]]) {input_layout = "planes", inverse = true, {{.*}}output_layout = "planes", radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 4 : i64} : (tensor<2x4x32x3xf32>) -> tensor<2x4x32x3xf32>
// CHECK:         %[[S3:.+]] = "ttensor.fft_stage"(%[[S2]]) {input_layout = "planes", inverse = true, {{.*}}output_layout = "pairs", radix = 2 : i64, scale = 0.17677669529663687 : f64, stride = 16 : i64} : (tensor<2x4x32x3xf32>) -> tensor<4x32x3x2xf32>
// CHECK:         %[[R:.+]] = "ttensor.reshape"(%[[S3]]) : (tensor<4x32x3x2xf32>) -> tensor<4x32x3xcomplex<f32>>
// CHECK:         return %[[R]]
// CHECK-NOT:     "ttensor.part"
func.func @complex_parameter(%z: tensor<4x32x3xcomplex<f32>>) -> tensor<4x32x3xcomplex<f32>> {
  %f = "tod.ifft"() : () -> !tod.operator<32, 32, complex<f32>, f32>
  %y = "tod.apply"(%f, %z) : (!tod.operator<32, 32, complex<f32>, f32>, tensor<4x32x3xcomplex<f32>>) -> tensor<4x32x3xcomplex<f32>>
  return %y : tensor<4x32x3xcomplex<f32>>
}

// -----

// n = 2: one radix-2 stage, scaled by 1/√2; n = 1 (no stage) keeps the DFT.
// CHECK-LABEL: func.func @sizes
// CHECK:         "ttensor.fft_stage"({{.*}}) {input_layout = "parts", inverse = false, {{.*}}output_layout = "pairs", radix = 2 : i64, scale = 0.70710678118654746 : f64, stride = 1 : i64}
// CHECK-NOT:     "ttensor.fft_stage"
// CHECK:         "ttensor.twiddle"() {part = "cos"} : () -> tensor<1x1xf32>
func.func @sizes(%x: tensor<2xf32>, %o: tensor<1xf32>) -> (tensor<2xcomplex<f32>>, tensor<1xcomplex<f32>>) {
  %f = "tod.fft"() : () -> !tod.operator<2, 2, complex<f32>, f32>
  %y = "tod.apply"(%f, %x) : (!tod.operator<2, 2, complex<f32>, f32>, tensor<2xf32>) -> tensor<2xcomplex<f32>>
  %g = "tod.fft"() : () -> !tod.operator<1, 1, complex<f32>, f32>
  %z = "tod.apply"(%g, %o) : (!tod.operator<1, 1, complex<f32>, f32>, tensor<1xf32>) -> tensor<1xcomplex<f32>>
  return %y, %z : tensor<2xcomplex<f32>>, tensor<1xcomplex<f32>>
}
