// The verifier rules of Bluestein's ops (passes/fft.py): ttensor.chirp_mul, ttensor.chirp, ttensor.spectrum_mul,
// one case a rule.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics
func.func @chirp_mul_layout(%a: tensor<8x1xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' layouts: input 'parts', 'pairs' or 'planes', output 'pairs' or 'planes'; got 'rows', 'planes'}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "rows", inverse = false, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1xf32>) -> tensor<2x16x1xf32>
  return
}

// -----

func.func @chirp_mul_imag(%a: tensor<8x1x2xf32>, %b: tensor<8x1x2xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' an imaginary part is an input of layout 'parts' only}}
  %r = "ttensor.chirp_mul"(%a, %b) {input_layout = "pairs", inverse = false, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1>} : (tensor<8x1x2xf32>, tensor<8x1x2xf32>) -> tensor<2x16x1xf32>
  return
}

// -----

func.func @chirp_mul_input(%a: tensor<8x1x3xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' the input must be pairs [..., n, k, 2] of static extents, got [8, 1, 3]}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "pairs", inverse = false, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1x3xf32>) -> tensor<2x16x1xf32>
  return
}

// -----

func.func @chirp_mul_element(%a: tensor<8x1xf16>) {
  // expected-error @+1 {{'ttensor.chirp_mul' the element type must be f32 or f64, got f16}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "parts", inverse = false, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1xf16>) -> tensor<2x16x1xf16>
  return
}

// -----

func.func @chirp_mul_result(%a: tensor<8x1xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' the result must be planes [2, ..., n, k] of static extents, got [3, 16, 1]}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "parts", inverse = false, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1xf32>) -> tensor<3x16x1xf32>
  return
}

// -----

func.func @chirp_mul_types(%a: tensor<8x1xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' the input, its imaginary part and the result must have one element type}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "parts", inverse = false, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1xf32>) -> tensor<2x16x1xf64>
  return
}

// -----

func.func @chirp_mul_columns(%a: tensor<8x1xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' the input's columns [8, 1] and the result's [16, 2] may differ in axis −2 only}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "parts", inverse = false, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1xf32>) -> tensor<2x16x2xf32>
  return
}

// -----

func.func @chirp_mul_n(%a: tensor<8x1xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' n = 9 must be at least 1 and at most the columns' lengths 8, 16 and 268435456}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "parts", inverse = false, n = 9 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1xf32>) -> tensor<2x16x1xf32>
  return
}

// -----

func.func @chirp_mul_inverse(%a: tensor<8x1xf32>) {
  // expected-error @+1 {{'ttensor.chirp_mul' inverse must be a bool}}
  %r = "ttensor.chirp_mul"(%a) {input_layout = "parts", inverse = 1 : i64, n = 5 : i64, output_layout = "planes", scale = 1.0 : f64} : (tensor<8x1xf32>) -> tensor<2x16x1xf32>
  return
}

// -----

func.func @chirp_result() {
  // expected-error @+1 {{'ttensor.chirp' the result must be planes [2, m, 1], got [2, 16]}}
  %r = "ttensor.chirp"() {inverse = false, n = 5 : i64} : () -> tensor<2x16xf32>
  return
}

// -----

func.func @chirp_element() {
  // expected-error @+1 {{'ttensor.chirp' the element type must be f32 or f64, got bf16}}
  %r = "ttensor.chirp"() {inverse = false, n = 5 : i64} : () -> tensor<2x16x1xbf16>
  return
}

// -----

func.func @chirp_size() {
  // expected-error @+1 {{'ttensor.chirp' m = 16 must be a power of two at least 2n − 1 for n = 9 (1 ≤ n ≤ 268435456)}}
  %r = "ttensor.chirp"() {inverse = false, n = 9 : i64} : () -> tensor<2x16x1xf32>
  return
}

// -----

func.func @chirp_inverse() {
  // expected-error @+1 {{'ttensor.chirp' inverse must be a bool}}
  %r = "ttensor.chirp"() {inverse = "no", n = 5 : i64} : () -> tensor<2x16x1xf32>
  return
}

// -----

func.func @spectrum_input(%a: tensor<16x1xf32>, %h: tensor<16x1x2xf32>) {
  // expected-error @+1 {{'ttensor.spectrum_mul' the input must be pairs [..., n, k, 2] of static extents, got [16, 1]}}
  %r = "ttensor.spectrum_mul"(%a, %h) : (tensor<16x1xf32>, tensor<16x1x2xf32>) -> tensor<2x16x1xf32>
  return
}

// -----

func.func @spectrum_spectrum(%a: tensor<16x1x2xf32>, %h: tensor<16x1x2xi32>) {
  // expected-error @+1 {{'ttensor.spectrum_mul' the element type must be f32 or f64, got i32}}
  %r = "ttensor.spectrum_mul"(%a, %h) : (tensor<16x1x2xf32>, tensor<16x1x2xi32>) -> tensor<2x16x1xf32>
  return
}

// -----

func.func @spectrum_result(%a: tensor<16x1x2xf32>, %h: tensor<16x1x2xf32>) {
  // expected-error @+1 {{'ttensor.spectrum_mul' the result must be planes [2, ..., n, k] of static extents, got [16, 1, 2]}}
  %r = "ttensor.spectrum_mul"(%a, %h) : (tensor<16x1x2xf32>, tensor<16x1x2xf32>) -> tensor<16x1x2xf32>
  return
}

// -----

func.func @spectrum_shape(%a: tensor<16x3x2xf32>, %h: tensor<8x1x2xf32>) {
  // expected-error @+1 {{'ttensor.spectrum_mul' the spectrum must be pairs [16, 1, 2], got [8, 1, 2]}}
  %r = "ttensor.spectrum_mul"(%a, %h) : (tensor<16x3x2xf32>, tensor<8x1x2xf32>) -> tensor<2x16x3xf32>
  return
}

// -----

func.func @spectrum_types(%a: tensor<16x3x2xf32>, %h: tensor<16x1x2xf64>) {
  // expected-error @+1 {{'ttensor.spectrum_mul' the result must be [2] + [16, 3] and every element type one, got [2, 16, 3]}}
  %r = "ttensor.spectrum_mul"(%a, %h) : (tensor<16x3x2xf32>, tensor<16x1x2xf64>) -> tensor<2x16x3xf32>
  return
}
