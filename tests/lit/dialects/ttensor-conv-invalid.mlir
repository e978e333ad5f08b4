// One case per verifier rule of ttensor.conv and ttensor.im2col (dialects/ttensor.py).
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @conv_rank(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' input must be [N, C, L] or [N, C, H, W] (rank 3 or 4), got rank 2}}
  %r = "ttensor.conv"(%x, %w) {stride = [], padding = [], dilation = []} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @conv_geometry_lengths(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' stride and dilation take 2 value(s), padding 4 (low and high per axis), got 1, 2 and 4}}
  %r = "ttensor.conv"(%x, %w) {stride = [1], padding = [0, 0, 0, 0], dilation = [1, 1]} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<2x3x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' stride [0] and dilation [1] must be positive}}
  %r = "ttensor.conv"(%x, %w) {stride = [0], padding = [0, 0], dilation = [1]} : (tensor<2x3x8xf32>, tensor<4x3x3xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @conv_padding(%x: tensor<2x3x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' padding [-1, 0] must be >= 0}}
  %r = "ttensor.conv"(%x, %w) {stride = [1], padding = [-1, 0], dilation = [1]} : (tensor<2x3x8xf32>, tensor<4x3x3xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @conv_weight_rank(%x: tensor<2x3x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' weight must be [O, C, kernel...] of the input's rank 3, got rank 4}}
  %r = "ttensor.conv"(%x, %w) {stride = [1], padding = [0, 0], dilation = [1]} : (tensor<2x3x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @conv_types(%x: tensor<2x3x8xf32>, %w: tensor<4x3x3xbf16>) {
  // expected-error @+1 {{'ttensor.conv' input, weight and result must have one floating-point element type, got f32, bf16 and f32}}
  %r = "ttensor.conv"(%x, %w) {stride = [1], padding = [0, 0], dilation = [1]} : (tensor<2x3x8xf32>, tensor<4x3x3xbf16>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<2x3x8xf32>, %w: tensor<4x5x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' the input has 3 channels, the weight 5}}
  %r = "ttensor.conv"(%x, %w) {stride = [1], padding = [0, 0], dilation = [1]} : (tensor<2x3x8xf32>, tensor<4x5x3xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @conv_dynamic_kernel(%x: tensor<2x3x8xf32>, %w: tensor<4x3x?xf32>) {
  // expected-error @+1 {{'ttensor.conv' the kernel extents must be static, got [None]}}
  %r = "ttensor.conv"(%x, %w) {stride = [1], padding = [0, 0], dilation = [1]} : (tensor<2x3x8xf32>, tensor<4x3x?xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @conv_empty(%x: tensor<2x3x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' the window (3 taps, dilation 4) does not fit the padded extent 8: the output would be empty}}
  %r = "ttensor.conv"(%x, %w) {stride = [1], padding = [0, 0], dilation = [4]} : (tensor<2x3x8xf32>, tensor<4x3x3xf32>) -> tensor<2x4x1xf32>
  return
}

// -----

func.func @conv_result(%x: tensor<2x3x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{'ttensor.conv' result shape [2, 4, 8] must be [2, 4, 3]}}
  %r = "ttensor.conv"(%x, %w) {stride = [2], padding = [0, 0], dilation = [1]} : (tensor<2x3x8xf32>, tensor<4x3x3xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @im2col_kernel(%x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'ttensor.im2col' kernel [0] must hold 1 positive extent(s)}}
  %r = "ttensor.im2col"(%x) {circular = false, flip = false, kernel = [0], stride = [1], padding = [0, 0], dilation = [1]} : (tensor<2x3x8xf32>) -> tensor<16x0xf32>
  return
}

// -----

func.func @im2col_result(%x: tensor<?x3x8x8xf32>) {
  // expected-error @+1 {{'ttensor.im2col' result must be [None, 27] (positions, channels x taps) of the image's element type, got [None, 9] of f32}}
  %r = "ttensor.im2col"(%x) {circular = false, flip = false, kernel = [3, 3], stride = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1]} : (tensor<?x3x8x8xf32>) -> tensor<?x9xf32>
  return
}

// -----

func.func @col2im_input(%p: tensor<16x4xf32>, %x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'ttensor.col2im' input must be [12, 9] (positions, channels x taps) of the image's element type, got [16, 4] of f32}}
  %r = "ttensor.col2im"(%p, %x) {kernel = [3], stride = [1], padding = [0, 0], dilation = [1]} : (tensor<16x4xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return
}

// -----

func.func @col2im_result(%p: tensor<12x9xf32>, %x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'ttensor.col2im' the result must have like's type tensor<2x3x8xf32>, got tensor<2x3x8xbf16>}}
  %r = "ttensor.col2im"(%p, %x) {kernel = [3], stride = [1], padding = [0, 0], dilation = [1]} : (tensor<12x9xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xbf16>
  return
}

// -----

func.func @im2col_circular(%x: tensor<2x1x4xf32>) {
  // expected-error @+1 {{'ttensor.im2col' circular padding [5, 0] must be at most the static extent 4}}
  %r = "ttensor.im2col"(%x) {circular = true, flip = true, kernel = [6], stride = [1], padding = [5, 0], dilation = [1]} : (tensor<2x1x4xf32>) -> tensor<8x6xf32>
  return
}
