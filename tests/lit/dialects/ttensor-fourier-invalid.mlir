// One case per verifier rule of ttensor.twiddle, ttensor.interleave, ttensor.part and reshape's complex views
// (dialects/ttensor.py; passes/fourier.py lowers tod.fft with them).
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @twiddle_part() {
  // expected-error @+1 {{'ttensor.twiddle' part must be 'cos' or 'sin', got 'tan'}}
  %w = "ttensor.twiddle"() {part = "tan"} : () -> tensor<8x8xf32>
  return
}

// -----

func.func @twiddle_square() {
  // expected-error @+1 {{'ttensor.twiddle' the result must be a square matrix of static extents, got [8, 4]}}
  %w = "ttensor.twiddle"() {part = "cos"} : () -> tensor<8x4xf32>
  return
}

// -----

func.func @twiddle_element() {
  // expected-error @+1 {{'ttensor.twiddle' the result's element type must be f32 or f64, got bf16}}
  %w = "ttensor.twiddle"() {part = "sin"} : () -> tensor<8x8xbf16>
  return
}

// -----

func.func @interleave_types(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{'ttensor.interleave' re and im must have one type, got tensor<4xf32> and tensor<4xf64>}}
  %r = "ttensor.interleave"(%a, %b) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4x2xf32>
  return
}

// -----

func.func @interleave_static(%a: tensor<?xf32>) {
  // expected-error @+1 {{'ttensor.interleave' re and im must have static extents}}
  %r = "ttensor.interleave"(%a, %a) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?x2xf32>
  return
}

// -----

func.func @interleave_element(%a: tensor<4xf16>) {
  // expected-error @+1 {{'ttensor.interleave' the parts must be f32 or f64, got f16}}
  %r = "ttensor.interleave"(%a, %a) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4x2xf16>
  return
}

// -----

func.func @interleave_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.interleave' the result must be [4, 2] of f32, got [2, 4] of f32}}
  %r = "ttensor.interleave"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @view_element(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'ttensor.reshape' reshape keeps the element type, or views complex<T> as pairs of T (and back)}}
  %r = "ttensor.reshape"(%a) : (tensor<4x2xf32>) -> tensor<4xcomplex<f64>>
  return
}

// -----

func.func @view_static(%a: tensor<?x2xf32>) {
  // expected-error @+1 {{'ttensor.reshape' a complex view has static extents}}
  %r = "ttensor.reshape"(%a) : (tensor<?x2xf32>) -> tensor<?xcomplex<f32>>
  return
}

// -----

func.func @view_count(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'ttensor.reshape' element counts differ: 8 vs 16 (a complex element counts as two)}}
  %r = "ttensor.reshape"(%a) : (tensor<4x2xf32>) -> tensor<8xcomplex<f32>>
  return
}

// -----

func.func @twiddle_size() {
  // expected-error @+1 {{'ttensor.twiddle' n = 8192 is larger than 4096}}
  %w = "ttensor.twiddle"() {part = "cos"} : () -> tensor<8192x8192xf32>
  return
}

// -----

func.func @part_name(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'ttensor.part' part must be 're' or 'im', got 'abs'}}
  %r = "ttensor.part"(%a) {part = "abs"} : (tensor<4x2xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @part_pairs(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.part' the input must be pairs [..., 2] of static extents, got [4, 3]}}
  %r = "ttensor.part"(%a) {part = "re"} : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @part_element(%a: tensor<4x2xbf16>) {
  // expected-error @+1 {{'ttensor.part' the parts must be f32 or f64, got bf16}}
  %r = "ttensor.part"(%a) {part = "im"} : (tensor<4x2xbf16>) -> tensor<4xbf16>
  return
}

// -----

func.func @part_result(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'ttensor.part' the result must be [4] of f32, got [4] of f64}}
  %r = "ttensor.part"(%a) {part = "re"} : (tensor<4x2xf32>) -> tensor<4xf64>
  return
}
