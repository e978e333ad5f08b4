// One case per ttensor verifier rule.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @matmul_memref(%a: memref<4x4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.matmul' operands and results must be ranked tensors, got memref<4x4xf32>}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32} : (memref<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.matmul' operands must have rank >= 2, got 1 and 2}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<4xf32>, tensor<4x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_contracting(%a: tensor<4x64xf32>, %b: tensor<32x8xf32>) {
  // expected-error @+1 {{'ttensor.matmul' contracting dimensions must match: lhs has 64, rhs has 32}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<4x64xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x4x8xf32>, %b: tensor<5x8x2xf32>) {
  // expected-error @+1 {{'ttensor.matmul' batch dimensions [3] and [5] do not broadcast}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<3x4x8xf32>, tensor<5x8x2xf32>) -> tensor<3x4x2xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+1 {{'ttensor.matmul' result shape [4, 3] does not match [4, 2]}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @matmul_transpose_attr(%a: tensor<8x4xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+1 {{'ttensor.matmul' attribute 'tessera.transpose_a' must be a unit attribute, got true}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32, tessera.transpose_a = true} : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @matmul_transposed_contracting(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+1 {{'ttensor.matmul' contracting dimensions must match: lhs has 4, rhs has 8}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32, tessera.transpose_a} : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  return
}

// -----

func.func @matmul_transposed_result(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{'ttensor.matmul' result shape [4, 8] does not match [4, 2]}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32, tessera.transpose_b} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_kinds(%a: tensor<4x8xf32>, %b: tensor<8x2xi8>) {
  // expected-error @+1 {{'ttensor.matmul' operands must both be floating point or both integer}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<4x8xf32>, tensor<8x2xi8>) -> tensor<4x2xf32>
  return
}

// -----

func.func @matmul_accum(%a: tensor<4x8xi8>, %b: tensor<8x2xi8>) {
  // expected-error @+1 {{'ttensor.matmul' accumulator type f32 must be of the operands' kind (float or integer)}}
  %r = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<4x8xi8>, tensor<8x2xi8>) -> tensor<4x2xi32>
  return
}

// -----

func.func @unary_fn(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.unary' unknown function 'cube'}}
  %r = "ttensor.unary"(%a) {fn = "cube"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unary_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.unary' result type tensor<4xf16> must equal the operand type tensor<4xf32>}}
  %r = "ttensor.unary"(%a) {fn = "relu"} : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @unary_float(%a: tensor<4xi32>) {
  // expected-error @+1 {{'ttensor.unary' 'exp' needs a floating-point tensor, got i32}}
  %r = "ttensor.unary"(%a) {fn = "exp"} : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @binary_fn(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.binary' unknown function 'hypot'}}
  %r = "ttensor.binary"(%a, %a) {fn = "hypot"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_div_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{'ttensor.binary' 'div' needs floating-point tensors, got i32}}
  %r = "ttensor.binary"(%a, %a) {fn = "div"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @binary_floordiv_float(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.binary' 'floordiv' needs integer tensors, got f32}}
  %r = "ttensor.binary"(%a, %a) {fn = "floordiv"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_and_float(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.binary' 'and' needs integer or bool (i1) tensors, got f32}}
  %r = "ttensor.binary"(%a, %a) {fn = "and"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_shl_bool(%a: tensor<4xi1>) {
  // expected-error @+1 {{'ttensor.binary' 'shl' needs integer (not i1) tensors, got i1}}
  %r = "ttensor.binary"(%a, %a) {fn = "shl"} : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @unary_invert_float(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.unary' 'invert' needs an integer or bool (i1) tensor, got f32}}
  %r = "ttensor.unary"(%a) {fn = "invert"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_mod_float(%a: tensor<4xf16>) {
  // expected-error @+1 {{'ttensor.binary' 'mod' needs integer tensors, got f16}}
  %r = "ttensor.binary"(%a, %a) {fn = "mod"} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @reduce_mean_int(%a: tensor<4x3xi8>) {
  // expected-error @+1 {{'ttensor.reduce' 'mean' needs a floating-point tensor, got i8}}
  %r = "ttensor.reduce"(%a) {kind = "mean", axes = [1], keepdims = false} : (tensor<4x3xi8>) -> tensor<4xi8>
  return
}

// -----

func.func @reduce_bool(%a: tensor<4x3xi1>) {
  // expected-error @+1 {{'ttensor.reduce' 'sum' of a bool (i1) tensor has no numpy meaning in its own type; cast it first}}
  %r = "ttensor.reduce"(%a) {kind = "sum", axes = [1], keepdims = false} : (tensor<4x3xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_result(%a: tensor<4xi32>) {
  // expected-error @+1 {{'ttensor.binary' a comparison's operand element types must match and its result be i1, got i32, i32 -> i32}}
  %r = "ttensor.binary"(%a, %a) {fn = "lt"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @select_cond(%a: tensor<4xi32>) {
  // expected-error @+1 {{'ttensor.select' the condition must be a bool (i1) tensor, got i32}}
  %r = "ttensor.select"(%a, %a, %a) : (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @select_values(%c: tensor<4xi1>, %a: tensor<4xi32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.select' the values' and the result's element types must match, got i32, f32 -> i32}}
  %r = "ttensor.select"(%c, %a, %b) : (tensor<4xi1>, tensor<4xi32>, tensor<4xf32>) -> tensor<4xi32>
  return
}

// -----

func.func @select_broadcast(%c: tensor<3xi1>, %a: tensor<4xi32>) {
  // expected-error @+1 {{'ttensor.select' shapes [3], [4] and [4] do not broadcast}}
  %r = "ttensor.select"(%c, %a, %a) : (tensor<3xi1>, tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @binary_dtype(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'ttensor.binary' operand and result element types must match}}
  %r = "ttensor.binary"(%a, %b) {fn = "add"} : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_broadcast(%a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.binary' shapes [4, 3] and [4] do not broadcast}}
  %r = "ttensor.binary"(%a, %b) {fn = "add"} : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @binary_result(%a: tensor<4x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'ttensor.binary' result shape [4, 4] does not match the broadcast shape [4, 3]}}
  %r = "ttensor.binary"(%a, %b) {fn = "add"} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @bias_rank(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.bias_add' bias must be 1-D, got rank 2}}
  %r = "ttensor.bias_add"(%a, %b) {axis = 1 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @bias_axis(%a: tensor<4x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'ttensor.bias_add' axis 2 is out of range for rank 2}}
  %r = "ttensor.bias_add"(%a, %b) {axis = 2 : i64} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @bias_length(%a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.bias_add' bias length 4 must equal extent 3 of axis 1}}
  %r = "ttensor.bias_add"(%a, %b) {axis = 1 : i64} : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @bias_types(%a: tensor<4x3xf32>, %b: tensor<3xf16>) {
  // expected-error @+1 {{'ttensor.bias_add' bias and result must have the input's element type}}
  %r = "ttensor.bias_add"(%a, %b) {axis = 1 : i64} : (tensor<4x3xf32>, tensor<3xf16>) -> tensor<4x3xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.softmax' axis 5 is out of range for rank 2}}
  %r = "ttensor.softmax"(%a) {axis = 5 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @softmax_type(%a: tensor<4x3xi32>) {
  // expected-error @+1 {{'ttensor.softmax' input and result must be the same floating-point tensor type}}
  %r = "ttensor.softmax"(%a) {axis = 1 : i64} : (tensor<4x3xi32>) -> tensor<4x3xi32>
  return
}

// -----

func.func @log_softmax_axis(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.log_softmax' axis -3 is out of range for rank 2}}
  %r = "ttensor.log_softmax"(%a) {axis = -3 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @log_softmax_type(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.log_softmax' input and result must be the same floating-point tensor type}}
  %r = "ttensor.log_softmax"(%a) {axis = 1 : i64} : (tensor<4x3xf32>) -> tensor<4x3xf64>
  return
}

// -----

func.func @norm_type(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.layernorm' input and result must be the same floating-point tensor type}}
  %r = "ttensor.layernorm"(%a) {eps = 1.0e-5 : f32, operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<4x3xf32>) -> tensor<4x3xf16>
  return
}

// -----

func.func @norm_eps(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.rmsnorm' eps must be positive, got 0.0}}
  %r = "ttensor.rmsnorm"(%a) {eps = 0.0 : f32, operandSegmentSizes = array<i32: 1, 0>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @norm_params(%a: tensor<4x3xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.layernorm' scale and shift must be 1-D of the last extent 3, got [4]}}
  %r = "ttensor.layernorm"(%a, %g) {eps = 1.0e-5 : f32, operandSegmentSizes = array<i32: 1, 1, 0>} : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @reduce_kind(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.reduce' unknown reduction 'median'}}
  %r = "ttensor.reduce"(%a) {kind = "median", axes = [1], keepdims = false} : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reduce_axes(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.reduce' axes [1, 1] must be distinct and within rank 2}}
  %r = "ttensor.reduce"(%a) {kind = "sum", axes = [1, 1], keepdims = false} : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reduce_result(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.reduce' result must be tensor of shape [4, 1] and element type f32}}
  %r = "ttensor.reduce"(%a) {kind = "max", axes = [1], keepdims = true} : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.transpose' perm [0, 0] must be a permutation of 0..1}}
  %r = "ttensor.transpose"(%a) {perm = [0, 0]} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @transpose_result(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.transpose' result shape [4, 3] does not match the permuted input}}
  %r = "ttensor.transpose"(%a) {perm = [1, 0]} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @reshape_dtype(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.reshape' reshape keeps the element type}}
  %r = "ttensor.reshape"(%a) : (tensor<4x3xf32>) -> tensor<12xf16>
  return
}

// -----

func.func @reshape_count(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.reshape' element counts differ: 12 vs 13}}
  %r = "ttensor.reshape"(%a) : (tensor<4x3xf32>) -> tensor<13xf32>
  return
}

// -----

func.func @broadcast_shape(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.broadcast' [4, 3] cannot be broadcast to [4, 5]}}
  %r = "ttensor.broadcast"(%a) : (tensor<4x3xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.cast' cast keeps the shape: [4, 3] vs [3, 4]}}
  %r = "ttensor.cast"(%a) {accum = f32} : (tensor<4x3xf32>) -> tensor<3x4xbf16>
  return
}

// -----

func.func @cast_accum(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'ttensor.cast' accumulator bf16 must be at least as wide as the element type f32}}
  %r = "ttensor.cast"(%a) {accum = bf16} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @dropout_p(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.dropout' probability p must be in [0, 1), got 1.0}}
  %r = "ttensor.dropout"(%a) {p = 1.0 : f32, seed = 1 : ui64, offset = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_type(%a: tensor<4xi32>) {
  // expected-error @+1 {{'ttensor.dropout' input and result must be the same floating-point tensor type}}
  %r = "ttensor.dropout"(%a) {p = 0.5 : f32, seed = 1 : ui64, offset = 0 : i64} : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @attn_rank(%q: tensor<8x64xf16>, %k: tensor<2x8x64xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' Q, K, V and the result must have the same rank, at least 2}}
  %r = "ttensor.flash_attention"(%q, %k, %k) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf16>, tensor<2x8x64xf16>, tensor<2x8x64xf16>) -> tensor<8x64xf16>
  return
}

// -----

func.func @attn_head(%q: tensor<8x64xf16>, %k: tensor<8x32xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' Q and K head dimensions differ: 64 vs 32}}
  %r = "ttensor.flash_attention"(%q, %k, %k) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf16>, tensor<8x32xf16>, tensor<8x32xf16>) -> tensor<8x32xf16>
  return
}

// -----

func.func @attn_seq(%q: tensor<8x64xf16>, %k: tensor<16x64xf16>, %v: tensor<12x64xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' K and V sequence lengths differ: 16 vs 12}}
  %r = "ttensor.flash_attention"(%q, %k, %v) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf16>, tensor<16x64xf16>, tensor<12x64xf16>) -> tensor<8x64xf16>
  return
}

// -----

func.func @attn_result(%q: tensor<8x64xf16>, %k: tensor<16x64xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' result shape [16, 64] must be [8, 64]}}
  %r = "ttensor.flash_attention"(%q, %k, %k) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf16>, tensor<16x64xf16>, tensor<16x64xf16>) -> tensor<16x64xf16>
  return
}

// -----

func.func @attn_seq_heads_rank(%q: tensor<8x64xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' Q, K, V and the result must have the same rank, at least 3}}
  %r = "ttensor.flash_attention"(%q, %q, %q) {causal = false, scale = 0.125 : f32, tessera.seq_heads} : (tensor<8x64xf16>, tensor<8x64xf16>, tensor<8x64xf16>) -> tensor<8x64xf16>
  return
}

// -----

func.func @attn_seq_heads_unit(%q: tensor<8x2x64xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' attribute 'tessera.seq_heads' must be a unit attribute}}
  %r = "ttensor.flash_attention"(%q, %q, %q) {causal = false, scale = 0.125 : f32, tessera.seq_heads = 1 : i64} : (tensor<8x2x64xf16>, tensor<8x2x64xf16>, tensor<8x2x64xf16>) -> tensor<8x2x64xf16>
  return
}

// -----

// [S, H, D]: the sequence lengths checked on axis -3 (K's 16 keys, V's 12), the heads alike
func.func @attn_seq_heads_seq(%q: tensor<8x2x64xf16>, %k: tensor<16x2x64xf16>, %v: tensor<12x2x64xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' K and V sequence lengths differ: 16 vs 12}}
  %r = "ttensor.flash_attention"(%q, %k, %v) {causal = false, scale = 0.125 : f32, tessera.seq_heads} : (tensor<8x2x64xf16>, tensor<16x2x64xf16>, tensor<12x2x64xf16>) -> tensor<8x2x64xf16>
  return
}

// -----

func.func @attn_scale(%q: tensor<8x64xf16>) {
  // expected-error @+1 {{'ttensor.flash_attention' scale must be positive, got -1.0}}
  %r = "ttensor.flash_attention"(%q, %q, %q) {causal = false, scale = -1.0 : f32} : (tensor<8x64xf16>, tensor<8x64xf16>, tensor<8x64xf16>) -> tensor<8x64xf16>
  return
}

// -----

func.func @constant_value() {
  // expected-error @+1 {{'ttensor.constant' value 1 : i32 must be a scalar attribute of the element type f32}}
  %r = "ttensor.constant"() {value = 1 : i32} : () -> tensor<4xf32>
  return
}

// -----

// Regression: a malformed op is a located error, not a Python exception from the verifier.
func.func @missing_attribute(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.matmul' is missing its attribute 'accum'}}
  %r = "ttensor.matmul"(%a, %a) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @attribute_kind(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.softmax' has an attribute of the wrong kind}}
  %r = "ttensor.softmax"(%a) {axis = "last"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @load_blocks_step(%a: tensor<8x4xf32>) {
  // expected-error @+1 {{'ttensor.load_blocks' step must be positive, got 0}}
  %r = "ttensor.load_blocks"(%a) {step = 0 : i64, other = 0.0 : f32} : (tensor<8x4xf32>) -> tensor<1x8x4xf32>
  return
}

// -----

func.func @load_blocks_rank(%a: tensor<f32>) {
  // expected-error @+1 {{'ttensor.load_blocks' input must have rank >= 1}}
  %r = "ttensor.load_blocks"(%a) {step = 2 : i64, other = 0.0 : f32} : (tensor<f32>) -> tensor<1x2xf32>
  return
}

// -----

func.func @load_blocks_shape(%a: tensor<77x4xf32>) {
  // expected-error @+1 {{'ttensor.load_blocks' result shape [2, 32, 4] must be [3, 32, 4] (blocks, step, rest) of the input's element type}}
  %r = "ttensor.load_blocks"(%a) {step = 32 : i64, other = 0.0 : f32} : (tensor<77x4xf32>) -> tensor<2x32x4xf32>
  return
}

// -----

func.func @load_blocks_float(%a: tensor<8x4xi32>) {
  // expected-error @+1 {{'ttensor.load_blocks' masked tiles are floating point, got i32}}
  %r = "ttensor.load_blocks"(%a) {step = 8 : i64, other = 0.0 : f32} : (tensor<8x4xi32>) -> tensor<1x8x4xi32>
  return
}

// -----

func.func @load_blocks_other(%a: tensor<8x4xf32>) {
  // expected-error @+1 {{'ttensor.load_blocks' other must be a f32 attribute, got 0.000000e+00 : f16}}
  %r = "ttensor.load_blocks"(%a) {step = 8 : i64, other = 0.0 : f16} : (tensor<8x4xf32>) -> tensor<1x8x4xf32>
  return
}

// -----

func.func @store_blocks_rank(%a: tensor<2x8x4xf32>, %d: tensor<16xf32>) {
  // expected-error @+1 {{'ttensor.store_blocks' stores blocks [B, step, ...] (rank 3) into a tensor of one rank less, got rank 1}}
  %r = "ttensor.store_blocks"(%a, %d) : (tensor<2x8x4xf32>, tensor<16xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @store_blocks_type(%a: tensor<2x8x4xf32>, %d: tensor<16x4xf32>) {
  // expected-error @+1 {{'ttensor.store_blocks' the result must have dest's type, and the blocks its element type}}
  %r = "ttensor.store_blocks"(%a, %d) : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf16>
  return
}

// -----

func.func @store_blocks_trailing(%a: tensor<2x8x4xf32>, %d: tensor<16x5xf32>) {
  // expected-error @+1 {{'ttensor.store_blocks' trailing extents [4] and [5] differ}}
  %r = "ttensor.store_blocks"(%a, %d) : (tensor<2x8x4xf32>, tensor<16x5xf32>) -> tensor<16x5xf32>
  return
}

// -----

func.func @store_blocks_count(%a: tensor<2x8x4xf32>, %d: tensor<17x4xf32>) {
  // expected-error @+1 {{'ttensor.store_blocks' 17 rows are 3 blocks of 8, not 2}}
  %r = "ttensor.store_blocks"(%a, %d) : (tensor<2x8x4xf32>, tensor<17x4xf32>) -> tensor<17x4xf32>
  return
}

// -----

func.func @mask_blocks_axis(%a: tensor<2x8x4xf32>, %n: tensor<16xf32>) {
  // expected-error @+1 {{'ttensor.mask_blocks' axis 0 must be an axis of a block, 1..2}}
  %r = "ttensor.mask_blocks"(%a, %n) {axis = 0 : i64, step = 8 : i64, other = 0.0 : f32} : (tensor<2x8x4xf32>, tensor<16xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @mask_blocks_step(%a: tensor<2x8x4xf32>, %n: tensor<16xf32>) {
  // expected-error @+1 {{'ttensor.mask_blocks' step must be positive, got -1}}
  %r = "ttensor.mask_blocks"(%a, %n) {axis = 1 : i64, step = -1 : i64, other = 0.0 : f32} : (tensor<2x8x4xf32>, tensor<16xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @mask_blocks_extent(%a: tensor<2x8x4xf32>, %n: tensor<16xf32>) {
  // expected-error @+1 {{'ttensor.mask_blocks' the masked axis 2 has extent 4, not the block step 8}}
  %r = "ttensor.mask_blocks"(%a, %n) {axis = 2 : i64, step = 8 : i64, other = 0.0 : f32} : (tensor<2x8x4xf32>, tensor<16xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @mask_blocks_bounds(%a: tensor<2x8x4xf32>, %n: tensor<f32>) {
  // expected-error @+1 {{'ttensor.mask_blocks' bounds must have rank >= 1 (its first extent bounds the rows)}}
  %r = "ttensor.mask_blocks"(%a, %n) {axis = 1 : i64, step = 8 : i64, other = 0.0 : f32} : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @mask_blocks_count(%a: tensor<2x8x4xf32>, %n: tensor<30xf32>) {
  // expected-error @+1 {{'ttensor.mask_blocks' 30 rows are 4 blocks of 8, not 2}}
  %r = "ttensor.mask_blocks"(%a, %n) {axis = 1 : i64, step = 8 : i64, other = 0.0 : f32} : (tensor<2x8x4xf32>, tensor<30xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @mask_blocks_result(%a: tensor<2x8x4xf32>, %n: tensor<16xf32>) {
  // expected-error @+1 {{'ttensor.mask_blocks' the result must have the input's type}}
  %r = "ttensor.mask_blocks"(%a, %n) {axis = 1 : i64, step = 8 : i64, other = 0.0 : f32} : (tensor<2x8x4xf32>, tensor<16xf32>) -> tensor<2x8x4xf16>
  return
}

// -----

func.func @lse_rank(%q: tensor<8x64xf32>, %k: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'ttensor.attention_lse' Q and K must have the same rank, at least 2, got 2 and 3}}
  %r = "ttensor.attention_lse"(%q, %k) {causal = true, scale = 0.125 : f32} : (tensor<8x64xf32>, tensor<2x8x64xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @lse_dtype(%q: tensor<8x64xf32>, %k: tensor<8x64xbf16>) {
  // expected-error @+1 {{'ttensor.attention_lse' Q and K must be floating point of one element type, got f32 and bf16}}
  %r = "ttensor.attention_lse"(%q, %k) {causal = true, scale = 0.125 : f32} : (tensor<8x64xf32>, tensor<8x64xbf16>) -> tensor<8xf32>
  return
}

// -----

func.func @lse_batch(%q: tensor<2x8x64xf32>, %k: tensor<4x8x64xf32>) {
  // expected-error @+1 {{'ttensor.attention_lse' Q and K batch extents differ: [2] vs [4]}}
  %r = "ttensor.attention_lse"(%q, %k) {causal = true, scale = 0.125 : f32} : (tensor<2x8x64xf32>, tensor<4x8x64xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @lse_head(%q: tensor<8x64xf32>, %k: tensor<8x32xf32>) {
  // expected-error @+1 {{'ttensor.attention_lse' Q and K head dimensions differ: 64 vs 32}}
  %r = "ttensor.attention_lse"(%q, %k) {causal = true, scale = 0.125 : f32} : (tensor<8x64xf32>, tensor<8x32xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @lse_scale(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>) {
  // expected-error @+1 {{'ttensor.attention_lse' scale must be positive, got 0.0}}
  %r = "ttensor.attention_lse"(%q, %k) {causal = true, scale = 0.0 : f32} : (tensor<8x64xf32>, tensor<16x64xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @lse_result(%q: tensor<8x64xbf16>, %k: tensor<16x64xbf16>) {
  // expected-error @+1 {{'ttensor.attention_lse' the result must be an f32 tensor of shape [8] (one value per query row), got tensor<8xbf16>}}
  %r = "ttensor.attention_lse"(%q, %k) {causal = true, scale = 0.125 : f32} : (tensor<8x64xbf16>, tensor<16x64xbf16>) -> tensor<8xbf16>
  return
}

// -----

func.func @lse_result_shape(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>) {
  // expected-error @+1 {{'ttensor.attention_lse' the result must be an f32 tensor of shape [8] (one value per query row), got tensor<16xf32>}}
  %r = "ttensor.attention_lse"(%q, %k) {causal = true, scale = 0.125 : f32} : (tensor<8x64xf32>, tensor<16x64xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @grad_wrt(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' wrt must be one of q, k, v, got 'o'}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "o"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_qk(%q: tensor<8x64xf32>, %k: tensor<16x32xf32>, %v: tensor<16x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' Q and K head dimensions differ: 64 vs 32}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "q"} : (tensor<8x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_scale(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' scale must be positive, got -0.5}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = -0.5 : f32, wrt = "k"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @grad_v_kind(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xi32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' V and dO must be floating point of Q's rank 2, got tensor<16x32xi32> and tensor<8x32xf32>}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "q"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xi32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_v_seq(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<12x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' V [12, 32] must have K's batch extents and sequence length [16]}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "q"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<12x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_do(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xf32>, %do: tensor<8x64xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' dO must have the attention output's shape [8, 32], got [8, 64]}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "q"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xf32>, tensor<8x64xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_lse(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<16xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' lse must be an f32 tensor of shape [8] (one value per query row), got tensor<16xf32>}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "q"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<16xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_delta(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf16>) {
  // expected-error @+1 {{'ttensor.attention_grad' delta must be an f32 tensor of shape [8] (one value per query row), got tensor<8xf16>}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "q"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf16>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_result(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' the result must have the type of K (tensor<16x64xf32>), got tensor<8x64xf32>}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = true, scale = 0.125 : f32, wrt = "k"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @grad_result_dtype(%q: tensor<8x64xf32>, %k: tensor<16x64xf32>, %v: tensor<16x32xf32>, %do: tensor<8x32xf32>, %lse: tensor<8xf32>, %delta: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.attention_grad' the result must have the type of V (tensor<16x32xf32>), got tensor<16x32xbf16>}}
  %r = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = true, scale = 0.125 : f32, wrt = "v"} : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x32xbf16>
  return
}

// -----

func.func @quantize_integer_input(%x: tensor<4x8xi32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.quantize' the input must be floating point, got i32}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xi32>, tensor<f32>) -> tensor<4x8xi8>
  return
}

// -----

func.func @quantize_to_f16(%x: tensor<4x8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.quantize' the result must be i8, i4, f8E4M3FN or f8E5M2, got f16}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf16>
  return
}

// -----

func.func @quantize_shape(%x: tensor<4x8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.quantize' the result must have the input's shape [4, 8], got [8, 4]}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xf32>, tensor<f32>) -> tensor<8x4xi8>
  return
}

// -----

func.func @quantize_f16_scale(%x: tensor<4x8xf32>, %s: tensor<f16>) {
  // expected-error @+1 {{'ttensor.quantize' the scale must be an f32 tensor, got f16}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xf32>, tensor<f16>) -> tensor<4x8xi8>
  return
}

// -----

func.func @quantize_granularity(%x: tensor<4x8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.quantize' unknown granularity 'row' (known: tensor, channel, block)}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "row", axis = 0, block = 0} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi8>
  return
}

// -----

func.func @quantize_channel_axis(%x: tensor<4x8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'ttensor.quantize' axis 2 is out of range for rank 2}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "channel", axis = 2, block = 0} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi8>
  return
}

// -----

func.func @quantize_block_size(%x: tensor<4x8xf32>, %s: tensor<4x2xf32>) {
  // expected-error @+1 {{'ttensor.quantize' blocks of 0 along the last axis need a positive block and rank >= 1}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "block", axis = 0, block = 0} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x8xi8>
  return
}

// -----

func.func @quantize_block_multiple(%x: tensor<4x8xf32>, %s: tensor<4x2xf32>) {
  // expected-error @+1 {{'ttensor.quantize' the last extent 8 is not a multiple of the block 3}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "block", axis = 0, block = 3} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x8xi8>
  return
}

// -----

func.func @quantize_channel_scale_shape(%x: tensor<4x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.quantize' a per-channel scale must have shape [8], got [4]}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "channel", axis = 1, block = 0} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xi8>
  return
}

// -----

func.func @quantize_i4_odd_last_extent(%x: tensor<4x7xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.quantize' an i4 result needs a static even last extent (two elements a byte), got shape [4, 7]}}
  %0 = "ttensor.quantize"(%x, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x7xf32>, tensor<f32>) -> tensor<4x7xi4>
  return
}

// -----

func.func @i4_outside_quantize(%q: tensor<4x8xi4>) {
  // expected-error @+1 {{'ttensor.unary' an i4 tensor is only quantize's result or dequantize's input; dequantize it first}}
  %0 = "ttensor.unary"(%q) {fn = "neg"} : (tensor<4x8xi4>) -> tensor<4x8xi4>
  return
}

// -----

func.func @dequantize_float_input(%q: tensor<4x8xf16>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.dequantize' the input must be i8, i4, f8E4M3FN or f8E5M2, got f16}}
  %0 = "ttensor.dequantize"(%q, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xf16>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @dequantize_to_integer(%q: tensor<4x8xi8>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.dequantize' the result must be floating point, got i32}}
  %0 = "ttensor.dequantize"(%q, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xi8>, tensor<f32>) -> tensor<4x8xi32>
  return
}

// -----

func.func @dequantize_shape(%q: tensor<4x8xi8>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.dequantize' the result must have the input's shape [4, 8], got [4, 4]}}
  %0 = "ttensor.dequantize"(%q, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xi8>, tensor<f32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @dequantize_block_scale_shape(%q: tensor<4x8xf8E5M2>, %s: tensor<4x4xf32>) {
  // expected-error @+1 {{'ttensor.dequantize' a per-block scale must have shape [4, 2], got [4, 4]}}
  %0 = "ttensor.dequantize"(%q, %s) {granularity = "block", axis = 0, block = 4} : (tensor<4x8xf8E5M2>, tensor<4x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @push_ranks(%v: tensor<2xf32>, %h: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.push' pushes a 0-d value onto a 1-D history, got ranks 1 and 1}}
  %0 = "ttensor.push"(%v, %h) : (tensor<2xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @push_types(%v: tensor<f16>, %h: tensor<4xf32>) {
  // expected-error @+1 {{'ttensor.push' the value, the history and the result must share the history's type tensor<4xf32>, got f16 and tensor<4xf32>}}
  %0 = "ttensor.push"(%v, %h) : (tensor<f16>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @attn_fp8_dtype(%q: tensor<8x64xf16>, %k: tensor<8x64xbf16>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' Q, K, V and the result must share one element type of bf16, f16 or f32 (they are quantized to e4m3 here), got f16, bf16, bf16, f16}}
  %r = "ttensor.flash_attention_fp8"(%q, %k, %k) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf16>, tensor<8x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xf16>
  return
}

// -----

func.func @attn_fp8_quantized(%q: tensor<8x64xf8E4M3FN>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' Q, K, V and the result must share one element type of bf16, f16 or f32 (they are quantized to e4m3 here), got f8E4M3FN, f8E4M3FN, f8E4M3FN, f8E4M3FN}}
  %r = "ttensor.flash_attention_fp8"(%q, %q, %q) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>) -> tensor<8x64xf8E4M3FN>
  return
}

// -----

func.func @attn_fp8_two_descales(%q: tensor<8x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' takes no descales (amax-dynamic) or three (sq, sk, sv), got 2}}
  %r = "ttensor.flash_attention_fp8"(%q, %q, %q, %s, %s) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<8x64xbf16>
  return
}

// -----

func.func @attn_fp8_descale_shape(%q: tensor<8x64xf8E4M3FN>, %s: tensor<f32>, %t: tensor<1xf32>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' the descales sq, sk, sv must be f32 0-d tensors, got tensor<f32>, tensor<1xf32>, tensor<f32>}}
  %r = "ttensor.flash_attention_fp8"(%q, %q, %q, %s, %t, %s) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<f32>, tensor<1xf32>, tensor<f32>) -> tensor<8x64xbf16>
  return
}

// -----

func.func @attn_fp8_descaled_bf16(%q: tensor<8x64xbf16>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' with descales, Q, K, V must be f8E4M3FN and the result bf16, got bf16, bf16, bf16, bf16}}
  %r = "ttensor.flash_attention_fp8"(%q, %q, %q, %s, %s, %s) {causal = false, scale = 0.125 : f32} : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<8x64xbf16>
  return
}

// -----

func.func @attn_fp8_descaled_f32_result(%q: tensor<8x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' with descales, Q, K, V must be f8E4M3FN and the result bf16, got f8E4M3FN, f8E4M3FN, f8E4M3FN, f32}}
  %r = "ttensor.flash_attention_fp8"(%q, %q, %q, %s, %s, %s) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @attn_fp8_descaled_seq(%q: tensor<8x64xf8E4M3FN>, %k: tensor<16x64xf8E4M3FN>, %v: tensor<12x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' K and V sequence lengths differ: 16 vs 12}}
  %r = "ttensor.flash_attention_fp8"(%q, %k, %v, %s, %s, %s) {causal = false, scale = 0.125 : f32} : (tensor<8x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<12x64xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<8x64xbf16>
  return
}

// -----

func.func @attn_fp8_seq(%q: tensor<8x64xbf16>, %k: tensor<16x64xbf16>, %v: tensor<12x64xbf16>) {
  // expected-error @+1 {{'ttensor.flash_attention_fp8' K and V sequence lengths differ: 16 vs 12}}
  %r = "ttensor.flash_attention_fp8"(%q, %k, %v) {causal = true, scale = 0.125 : f32} : (tensor<8x64xbf16>, tensor<16x64xbf16>, tensor<12x64xbf16>) -> tensor<8x64xbf16>
  return
}
