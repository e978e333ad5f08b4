// tessera-tod-lower of the Fourier transforms of sizes that are not powers of two (passes/fourier.py; powers
// of two are FFT stages: tod-lower-fft-stages.mlir): F = C − iS as GEMMs with the twiddle matrices (in f64,
// which not every target's GEMM takes, products and sums); complex values are pairs of real tensors, interleaved into a complex tensor only where one leaves the operator program.
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-tod-lower)' | FileCheck %s

// A real vector's transform: two GEMMs, Re = C x, Im = −S x, interleaved and viewed as complex<f32>.
// CHECK-LABEL: func.func @fft
// CHECK-SAME:    (%[[X:.+]]: tensor<6xf32>)
// CHECK:         %[[COL:.+]] = "ttensor.reshape"(%[[X]]) : (tensor<6xf32>) -> tensor<6x1xf32>
// CHECK:         %[[C:.+]] = "ttensor.twiddle"() {part = "cos"} : () -> tensor<6x6xf32>
// CHECK:         %[[S:.+]] = "ttensor.twiddle"() {part = "sin"} : () -> tensor<6x6xf32>
// CHECK:         %[[SX:.+]] = "ttensor.matmul"(%[[S]], %[[COL]]) {accum = f32}
// CHECK:         %[[CX:.+]] = "ttensor.matmul"(%[[C]], %[[COL]]) {accum = f32}
// CHECK:         %[[IM:.+]] = "ttensor.unary"(%[[SX]]) {fn = "neg"}
// CHECK:         %[[RE:.+]] = "ttensor.reshape"(%[[CX]]) : (tensor<6x1xf32>) -> tensor<6xf32>
// CHECK:         %[[IM1:.+]] = "ttensor.reshape"(%[[IM]]) : (tensor<6x1xf32>) -> tensor<6xf32>
// CHECK:         %[[P:.+]] = "ttensor.interleave"(%[[RE]], %[[IM1]]) : (tensor<6xf32>, tensor<6xf32>) -> tensor<6x2xf32>
// CHECK:         %[[Z:.+]] = "ttensor.reshape"(%[[P]]) : (tensor<6x2xf32>) -> tensor<6xcomplex<f32>>
// CHECK:         return %[[Z]]
// CHECK-NOT:     tod.
func.func @fft(%x: tensor<6xf32>) -> tensor<6xcomplex<f32>> {
  %f = "tod.fft"() : () -> !tod.operator<6, 6, complex<f32>, f32>
  %y = "tod.apply"(%f, %x) : (!tod.operator<6, 6, complex<f32>, f32>, tensor<6xf32>) -> tensor<6xcomplex<f32>>
  return %y : tensor<6xcomplex<f32>>
}

// -----

// A spectral filter F* diag(F h) F x: the spectrum F h is read as its parts (its interleaved copy is erased,
// nothing else reads it), the diagonal four products, the inverse four GEMMs of the pair (twiddles made once).
// CHECK-LABEL: func.func @filter
// CHECK-COUNT-2: "ttensor.twiddle"
// CHECK-NOT:     "ttensor.twiddle"
// CHECK-NOT:     "ttensor.interleave"
// CHECK-COUNT-4: "ttensor.binary"({{.*}}) {fn = "mul"}
// CHECK:         "ttensor.binary"({{.*}}) {fn = "sub"}
// CHECK:         "ttensor.binary"({{.*}}) {fn = "add"}
// CHECK-COUNT-4: "ttensor.matmul"
// CHECK:         "ttensor.interleave"
// CHECK-NOT:     "ttensor.interleave"
// CHECK:         return
func.func @filter(%x: tensor<6xf32>, %h: tensor<6xf32>) -> tensor<6xcomplex<f32>> {
  %f = "tod.fft"() : () -> !tod.operator<6, 6, complex<f32>, f32>
  %g = "tod.apply"(%f, %h) : (!tod.operator<6, 6, complex<f32>, f32>, tensor<6xf32>) -> tensor<6xcomplex<f32>>
  %d = "tod.diag"(%g) : (tensor<6xcomplex<f32>>) -> !tod.operator<6, 6, complex<f32>, f32>
  %i = "tod.ifft"() : () -> !tod.operator<6, 6, complex<f32>, f32>
  %c1 = "tod.compose"(%d, %f) : (!tod.operator<6, 6, complex<f32>, f32>, !tod.operator<6, 6, complex<f32>, f32>) -> !tod.operator<6, 6, complex<f32>, f32>
  %c2 = "tod.compose"(%i, %c1) : (!tod.operator<6, 6, complex<f32>, f32>, !tod.operator<6, 6, complex<f32>, f32>) -> !tod.operator<6, 6, complex<f32>, f32>
  %y = "tod.apply"(%c2, %x) : (!tod.operator<6, 6, complex<f32>, f32>, tensor<6xf32>) -> tensor<6xcomplex<f32>>
  return %y : tensor<6xcomplex<f32>>
}

// -----

// f64: no GEMM; each twiddle matrix [n, n, 1] times the columns [1, n, k] (views), summed over n.
// CHECK-LABEL: func.func @ifft_f64
// CHECK:         %[[C:.+]] = "ttensor.twiddle"() {part = "cos"} : () -> tensor<3x3xf64>
// CHECK:         %[[S:.+]] = "ttensor.twiddle"() {part = "sin"} : () -> tensor<3x3xf64>
// CHECK:         %[[S3:.+]] = "ttensor.reshape"(%[[S]]) : (tensor<3x3xf64>) -> tensor<3x3x1xf64>
// CHECK:         "ttensor.binary"(%[[S3]], {{.+}}) {fn = "mul"} : (tensor<3x3x1xf64>, tensor<1x3x1xf64>) -> tensor<3x3x1xf64>
// CHECK:         "ttensor.reduce"({{.+}}) {axes = [1], keepdims = false, kind = "sum"} : (tensor<3x3x1xf64>) -> tensor<3x1xf64>
// CHECK:         %[[C3:.+]] = "ttensor.reshape"(%[[C]]) : (tensor<3x3xf64>) -> tensor<3x3x1xf64>
// CHECK:         "ttensor.binary"(%[[C3]], {{.+}}) {fn = "mul"}
// CHECK:         "ttensor.reduce"({{.+}}) {axes = [1], keepdims = false, kind = "sum"}
// CHECK-NOT:     "ttensor.matmul"
// CHECK:         "ttensor.interleave"({{.+}}) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3x2xf64>
// CHECK:         "ttensor.reshape"({{.+}}) : (tensor<3x2xf64>) -> tensor<3xcomplex<f64>>
func.func @ifft_f64(%x: tensor<3xf64>) -> tensor<3xcomplex<f64>> {
  %f = "tod.ifft"() : () -> !tod.operator<3, 3, complex<f64>, f64>
  %y = "tod.apply"(%f, %x) : (!tod.operator<3, 3, complex<f64>, f64>, tensor<3xf64>) -> tensor<3xcomplex<f64>>
  return %y : tensor<3xcomplex<f64>>
}

// -----

// A complex parameter: its storage viewed as pairs, each half taken by ttensor.part; four GEMMs.
// CHECK-LABEL: func.func @complex_parameter
// CHECK-SAME:    (%[[Z:.+]]: tensor<6xcomplex<f32>>)
// CHECK:         %[[P:.+]] = "ttensor.reshape"(%[[Z]]) : (tensor<6xcomplex<f32>>) -> tensor<6x2xf32>
// CHECK:         "ttensor.part"(%[[P]]) {part = "re"} : (tensor<6x2xf32>) -> tensor<6xf32>
// CHECK:         "ttensor.part"(%[[P]]) {part = "im"} : (tensor<6x2xf32>) -> tensor<6xf32>
// CHECK-COUNT-4: "ttensor.matmul"
// CHECK:         "ttensor.interleave"
func.func @complex_parameter(%z: tensor<6xcomplex<f32>>) -> tensor<6xcomplex<f32>> {
  %f = "tod.ifft"() : () -> !tod.operator<6, 6, complex<f32>, f32>
  %y = "tod.apply"(%f, %z) : (!tod.operator<6, 6, complex<f32>, f32>, tensor<6xcomplex<f32>>) -> tensor<6xcomplex<f32>>
  return %y : tensor<6xcomplex<f32>>
}
