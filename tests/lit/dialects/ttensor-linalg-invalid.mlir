// One case per verifier rule of ttensor.linalg and ttensor.slice (dialects/ttensor.py; passes/linalg_kernels.py
// writes their kernels, passes/tod_lower.py the spectral ops with them).
// RUN: tessera-opt %s --split-input-file --verify-diagnostics
func.func @linalg_fn(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.linalg' fn must be one of svd, eigh, spectral_radius, got 'qr'}}
  %p = "ttensor.linalg"(%a) {fn = "qr", transposed = false} : (tensor<4x4xf32>) -> tensor<9x4xf32>
  return
}

// -----

func.func @linalg_dynamic(%a: tensor<?x4xf32>) {
  // expected-error @+1 {{'ttensor.linalg' the input must be a matrix of static extents, got [None, 4]}}
  %p = "ttensor.linalg"(%a) {fn = "svd", transposed = false} : (tensor<?x4xf32>) -> tensor<9x4xf32>
  return
}

// -----

func.func @linalg_dtype(%a: tensor<4x4xf16>) {
  // expected-error @+1 {{'ttensor.linalg' the input must be f32 or f64, got f16}}
  %p = "ttensor.linalg"(%a) {fn = "svd", transposed = false} : (tensor<4x4xf16>) -> tensor<9x4xf16>
  return
}

// -----

func.func @linalg_wide_svd(%a: tensor<3x5xf32>) {
  // expected-error @+1 {{'ttensor.linalg' an svd's input has at least as many rows as columns, got 3×5}}
  %p = "ttensor.linalg"(%a) {fn = "svd", transposed = false} : (tensor<3x5xf32>) -> tensor<9x5xf32>
  return
}

// -----

func.func @linalg_square(%a: tensor<5x4xf32>) {
  // expected-error @+1 {{'ttensor.linalg' eigh's input must be square, got 5×4}}
  %p = "ttensor.linalg"(%a) {fn = "eigh", transposed = false} : (tensor<5x4xf32>) -> tensor<9x4xf32>
  return
}

// -----

func.func @linalg_result(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.linalg' the result must be [9, 4] of f32, got [1, 1] of f32}}
  %p = "ttensor.linalg"(%a) {fn = "spectral_radius", transposed = false} : (tensor<4x4xf32>) -> tensor<1x1xf32>
  return
}

// -----

func.func @slice_bounds(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.slice' offsets [2, 0] and extents [3, 4] must lie within [4, 4]}}
  %p = "ttensor.slice"(%a) {offsets = [2, 0]} : (tensor<4x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @slice_rank(%a: tensor<16xf32>) {
  // expected-error @+1 {{'ttensor.slice' input and result must be matrices of static extents, got [16] and [4, 4]}}
  %p = "ttensor.slice"(%a) {offsets = [0, 0]} : (tensor<16xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @slice_type(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.slice' the result's element type must be f32, got f64}}
  %p = "ttensor.slice"(%a) {offsets = [0, 0]} : (tensor<4x4xf32>) -> tensor<2x2xf64>
  return
}
