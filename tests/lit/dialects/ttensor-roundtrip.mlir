// Every ttensor op parses, prints and parses again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @gemm_epilogue
// CHECK-SAME:    (%[[A:.+]]: tensor<?x64xbf16>, %[[B:.+]]: tensor<64x32xbf16>, %[[BIAS:.+]]: tensor<32xbf16>)
func.func @gemm_epilogue(%a: tensor<?x64xbf16>, %b: tensor<64x32xbf16>, %bias: tensor<32xbf16>) -> tensor<?x32xbf16> {
  // CHECK: %[[C:.+]] = "ttensor.matmul"(%[[A]], %[[B]]) {accum = f32} : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  %c = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  // CHECK: %[[D:.+]] = "ttensor.bias_add"(%[[C]], %[[BIAS]]) {axis = 1 : i64}
  %d = "ttensor.bias_add"(%c, %bias) {axis = 1 : i64} : (tensor<?x32xbf16>, tensor<32xbf16>) -> tensor<?x32xbf16>
  // CHECK: "ttensor.unary"(%[[D]]) {fn = "gelu"}
  %e = "ttensor.unary"(%d) {fn = "gelu"} : (tensor<?x32xbf16>) -> tensor<?x32xbf16>
  return %e : tensor<?x32xbf16>
}

// CHECK-LABEL: func.func @batched
func.func @batched(%a: tensor<8x1x16x64xf16>, %b: tensor<4x64x16xf16>) -> tensor<8x4x16x16xf32> {
  // CHECK: "ttensor.matmul"(%{{.+}}, %{{.+}}) {accum = f32} : (tensor<8x1x16x64xf16>, tensor<4x64x16xf16>) -> tensor<8x4x16x16xf32>
  %c = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<8x1x16x64xf16>, tensor<4x64x16xf16>) -> tensor<8x4x16x16xf32>
  return %c : tensor<8x4x16x16xf32>
}

// CHECK-LABEL: func.func @transposed_operands
func.func @transposed_operands(%a: tensor<3x64x16xf32>, %b: tensor<3x8x64xf32>) -> tensor<3x16x8xf32> {
  // CHECK: "ttensor.matmul"(%{{.+}}, %{{.+}}) {accum = f32, tessera.transpose_a, tessera.transpose_b} : (tensor<3x64x16xf32>, tensor<3x8x64xf32>) -> tensor<3x16x8xf32>
  %c = "ttensor.matmul"(%a, %b) {accum = f32, tessera.transpose_a, tessera.transpose_b} : (tensor<3x64x16xf32>, tensor<3x8x64xf32>) -> tensor<3x16x8xf32>
  return %c : tensor<3x16x8xf32>
}

// Python's floor division and modulo of integer tensors; an integer sum stays in the tensor's type; a
// comparison makes a bool (i1) tensor, which select (numpy's where) takes.
// CHECK-LABEL: func.func @integer_floordiv_mod
func.func @integer_floordiv_mod(%a: tensor<4x8xi8>, %b: tensor<8xi8>) {
  // CHECK: "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "floordiv"} : (tensor<4x8xi8>, tensor<8xi8>) -> tensor<4x8xi8>
  %q = "ttensor.binary"(%a, %b) {fn = "floordiv"} : (tensor<4x8xi8>, tensor<8xi8>) -> tensor<4x8xi8>
  // CHECK: "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "mod"} : (tensor<4x8xi8>, tensor<4x8xi8>) -> tensor<4x8xi8>
  %r = "ttensor.binary"(%q, %a) {fn = "mod"} : (tensor<4x8xi8>, tensor<4x8xi8>) -> tensor<4x8xi8>
  // CHECK: "ttensor.reduce"(%{{.+}}) {axes = [1], keepdims = false, kind = "sum"} : (tensor<4x8xi8>) -> tensor<4xi8>
  %s = "ttensor.reduce"(%r) {kind = "sum", axes = [1], keepdims = false} : (tensor<4x8xi8>) -> tensor<4xi8>
  // CHECK: %[[LT:.+]] = "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "lt"} : (tensor<4x8xi8>, tensor<8xi8>) -> tensor<4x8xi1>
  %lt = "ttensor.binary"(%a, %b) {fn = "lt"} : (tensor<4x8xi8>, tensor<8xi8>) -> tensor<4x8xi1>
  // CHECK: "ttensor.select"(%[[LT]], %{{.+}}, %{{.+}}) : (tensor<4x8xi1>, tensor<4x8xi8>, tensor<8xi8>) -> tensor<4x8xi8>
  %w = "ttensor.select"(%lt, %a, %b) : (tensor<4x8xi1>, tensor<4x8xi8>, tensor<8xi8>) -> tensor<4x8xi8>
  return
}

// CHECK-LABEL: func.func @elementwise_and_norms
func.func @elementwise_and_norms(%x: tensor<4x128xf32>, %g: tensor<128xf32>) -> tensor<4x128xf32> {
  // CHECK: %[[TWO:.+]] = "ttensor.constant"() {value = 2.000000e+00 : f32} : () -> tensor<f32>
  %two = "ttensor.constant"() {value = 2.0 : f32} : () -> tensor<f32>
  // CHECK: "ttensor.binary"(%{{.+}}, %[[TWO]]) {fn = "mul"} : (tensor<4x128xf32>, tensor<f32>) -> tensor<4x128xf32>
  %y = "ttensor.binary"(%x, %two) {fn = "mul"} : (tensor<4x128xf32>, tensor<f32>) -> tensor<4x128xf32>
  // CHECK: "ttensor.softmax"(%{{.+}}) {axis = 1 : i64}
  %s = "ttensor.softmax"(%y) {axis = 1 : i64} : (tensor<4x128xf32>) -> tensor<4x128xf32>
  // CHECK: "ttensor.log_softmax"(%{{.+}}) {axis = -1 : i64}
  %ls = "ttensor.log_softmax"(%s) {axis = -1 : i64} : (tensor<4x128xf32>) -> tensor<4x128xf32>
  // CHECK: "ttensor.layernorm"(%{{.+}}, %{{.+}}) {eps = 9.99999974E-6 : f32, operandSegmentSizes = array<i32: 1, 1, 0>}
  %l = "ttensor.layernorm"(%ls, %g) {eps = 1.0e-5 : f32, operandSegmentSizes = array<i32: 1, 1, 0>} : (tensor<4x128xf32>, tensor<128xf32>) -> tensor<4x128xf32>
  // CHECK: "ttensor.rmsnorm"(%{{.+}}) {eps = 9.99999997E-7 : f32, operandSegmentSizes = array<i32: 1, 0>}
  %r = "ttensor.rmsnorm"(%l) {eps = 1.0e-6 : f32, operandSegmentSizes = array<i32: 1, 0>} : (tensor<4x128xf32>) -> tensor<4x128xf32>
  // CHECK: "ttensor.dropout"(%{{.+}}) {offset = 0 : i64, p = 1.000000e-01 : f32, seed = 42 : ui64}
  %d = "ttensor.dropout"(%r) {p = 0.1 : f32, seed = 42 : ui64, offset = 0 : i64} : (tensor<4x128xf32>) -> tensor<4x128xf32>
  return %d : tensor<4x128xf32>
}

// CHECK-LABEL: func.func @layout_and_reductions
func.func @layout_and_reductions(%x: tensor<4x8x16xf32>) -> (tensor<4x8xf32>, tensor<16x8x4xf32>, tensor<32x16xf32>, tensor<2x4x8x16xf32>, tensor<4x8x16xbf16>) {
  // CHECK: "ttensor.reduce"(%{{.+}}) {axes = [2], keepdims = false, kind = "sum"} : (tensor<4x8x16xf32>) -> tensor<4x8xf32>
  %s = "ttensor.reduce"(%x) {kind = "sum", axes = [2], keepdims = false} : (tensor<4x8x16xf32>) -> tensor<4x8xf32>
  // CHECK: "ttensor.transpose"(%{{.+}}) {perm = [2, 1, 0]}
  %t = "ttensor.transpose"(%x) {perm = [2, 1, 0]} : (tensor<4x8x16xf32>) -> tensor<16x8x4xf32>
  // CHECK: "ttensor.reshape"(%{{.+}}) : (tensor<4x8x16xf32>) -> tensor<32x16xf32>
  %r = "ttensor.reshape"(%x) : (tensor<4x8x16xf32>) -> tensor<32x16xf32>
  // CHECK: "ttensor.broadcast"(%{{.+}}) : (tensor<4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %b = "ttensor.broadcast"(%x) : (tensor<4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // CHECK: "ttensor.cast"(%{{.+}}) {accum = f32} : (tensor<4x8x16xf32>) -> tensor<4x8x16xbf16>
  %c = "ttensor.cast"(%x) {accum = f32} : (tensor<4x8x16xf32>) -> tensor<4x8x16xbf16>
  return %s, %t, %r, %b, %c : tensor<4x8xf32>, tensor<16x8x4xf32>, tensor<32x16xf32>, tensor<2x4x8x16xf32>, tensor<4x8x16xbf16>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x8x256x64xbf16>, %v: tensor<2x8x256x64xbf16>) -> tensor<2x8x128x64xbf16> {
  // CHECK: "ttensor.flash_attention"(%{{.+}}, %{{.+}}, %{{.+}}) {causal = true, scale = 1.250000e-01 : f32}
  %o = "ttensor.flash_attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32} : (tensor<2x8x128x64xbf16>, tensor<2x8x256x64xbf16>, tensor<2x8x256x64xbf16>) -> tensor<2x8x128x64xbf16>
  return %o : tensor<2x8x128x64xbf16>
}

// CHECK-LABEL: func.func @attention_fp8
func.func @attention_fp8(%q: tensor<2x128x128xbf16>, %k: tensor<2x77x128xbf16>) -> tensor<2x128x128xbf16> {
  // CHECK: "ttensor.flash_attention_fp8"(%{{.+}}, %{{.+}}, %{{.+}}) {causal = false, scale = 0.0883883461 : f32}
  %o = "ttensor.flash_attention_fp8"(%q, %k, %k) {causal = false, scale = 0.0883883461 : f32} : (tensor<2x128x128xbf16>, tensor<2x77x128xbf16>, tensor<2x77x128xbf16>) -> tensor<2x128x128xbf16>
  return %o : tensor<2x128x128xbf16>
}

// The form with descales: e4m3 Q, K, V and three f32 0-d descales, a bf16 result (no operandSegmentSizes: one
// variadic group, read by position).
// CHECK-LABEL: func.func @attention_fp8_descaled
func.func @attention_fp8_descaled(%q: tensor<2x128x128xf8E4M3FN>, %k: tensor<2x77x128xf8E4M3FN>, %s: tensor<f32>) -> tensor<2x128x128xbf16> {
  // CHECK: "ttensor.flash_attention_fp8"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) {causal = true, scale = 0.0883883461 : f32} : (tensor<2x128x128xf8E4M3FN>, tensor<2x77x128xf8E4M3FN>, tensor<2x77x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<2x128x128xbf16>
  %o = "ttensor.flash_attention_fp8"(%q, %k, %k, %s, %s, %s) {causal = true, scale = 0.0883883461 : f32} : (tensor<2x128x128xf8E4M3FN>, tensor<2x77x128xf8E4M3FN>, tensor<2x77x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<2x128x128xbf16>
  return %o : tensor<2x128x128xbf16>
}

// CHECK-LABEL: func.func @attention_backward
func.func @attention_backward(%q: tensor<2x?x64xbf16>, %k: tensor<2x256x64xbf16>, %v: tensor<2x256x32xbf16>, %do: tensor<2x?x32xbf16>, %delta: tensor<2x?xf32>) -> (tensor<2x?xf32>, tensor<2x?x64xbf16>, tensor<2x256x64xbf16>, tensor<2x256x32xbf16>) {
  // CHECK: %[[LSE:.+]] = "ttensor.attention_lse"(%{{.+}}, %{{.+}}) {causal = false, scale = 1.250000e-01 : f32} : (tensor<2x?x64xbf16>, tensor<2x256x64xbf16>) -> tensor<2x?xf32>
  %lse = "ttensor.attention_lse"(%q, %k) {causal = false, scale = 0.125 : f32} : (tensor<2x?x64xbf16>, tensor<2x256x64xbf16>) -> tensor<2x?xf32>
  // CHECK: "ttensor.attention_grad"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[LSE]], %{{.+}}) {causal = false, scale = 1.250000e-01 : f32, wrt = "q"} : {{.+}} -> tensor<2x?x64xbf16>
  %dq = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "q"} : (tensor<2x?x64xbf16>, tensor<2x256x64xbf16>, tensor<2x256x32xbf16>, tensor<2x?x32xbf16>, tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x?x64xbf16>
  // CHECK: "ttensor.attention_grad"({{.+}}) {causal = true, scale = 1.250000e-01 : f32, wrt = "k"} : {{.+}} -> tensor<2x256x64xbf16>
  %dk = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = true, scale = 0.125 : f32, wrt = "k"} : (tensor<2x?x64xbf16>, tensor<2x256x64xbf16>, tensor<2x256x32xbf16>, tensor<2x?x32xbf16>, tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x256x64xbf16>
  // CHECK: "ttensor.attention_grad"({{.+}}) {causal = false, scale = 1.250000e-01 : f32, wrt = "v"} : {{.+}} -> tensor<2x256x32xbf16>
  %dv = "ttensor.attention_grad"(%q, %k, %v, %do, %lse, %delta) {causal = false, scale = 0.125 : f32, wrt = "v"} : (tensor<2x?x64xbf16>, tensor<2x256x64xbf16>, tensor<2x256x32xbf16>, tensor<2x?x32xbf16>, tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x256x32xbf16>
  return %lse, %dq, %dk, %dv : tensor<2x?xf32>, tensor<2x?x64xbf16>, tensor<2x256x64xbf16>, tensor<2x256x32xbf16>
}

// CHECK-LABEL: func.func @fp8_policy
func.func @fp8_policy(%x: tensor<16x32xf32>) -> tensor<16x32xf8E4M3FN> {
  // CHECK: "ttensor.cast"(%{{.+}}) {accum = f32} : (tensor<16x32xf32>) -> tensor<16x32xf8E4M3FN>
  %c = "ttensor.cast"(%x) {accum = f32} : (tensor<16x32xf32>) -> tensor<16x32xf8E4M3FN>
  return %c : tensor<16x32xf8E4M3FN>
}

// Partial tiles: 77 rows in 3 blocks of 32, padded on the way in, masked to -inf, cropped on the way out.
// CHECK-LABEL: func.func @partial_tiles
func.func @partial_tiles(%q: tensor<77x64xf32>, %o: tensor<77x64xf32>) -> tensor<77x64xf32> {
  // CHECK: %[[B:.+]] = "ttensor.load_blocks"(%{{.+}}) {other = 0.000000e+00 : f32, step = 32 : i64} : (tensor<77x64xf32>) -> tensor<3x32x64xf32>
  %b = "ttensor.load_blocks"(%q) {step = 32 : i64, other = 0.0 : f32} : (tensor<77x64xf32>) -> tensor<3x32x64xf32>
  // CHECK: "ttensor.mask_blocks"(%[[B]], %{{.+}}) {axis = 1 : i64, other = 0xFF800000 : f32, step = 32 : i64}
  %m = "ttensor.mask_blocks"(%b, %q) {axis = 1 : i64, step = 32 : i64, other = 0xFF800000 : f32} : (tensor<3x32x64xf32>, tensor<77x64xf32>) -> tensor<3x32x64xf32>
  // CHECK: "ttensor.store_blocks"(%{{.+}}, %{{.+}}) : (tensor<3x32x64xf32>, tensor<77x64xf32>) -> tensor<77x64xf32>
  %s = "ttensor.store_blocks"(%m, %o) : (tensor<3x32x64xf32>, tensor<77x64xf32>) -> tensor<77x64xf32>
  return %s : tensor<77x64xf32>
}

// Scaled quantization: per tensor to i8, per channel to e4m3, per block of 4 back to f32.
// CHECK-LABEL: func.func @quantized
func.func @quantized(%x: tensor<4x8xf32>, %s: tensor<f32>, %c: tensor<8xf32>, %b: tensor<4x2xf32>) -> (tensor<4x8xf8E4M3FN>, tensor<4x8xf32>) {
  // CHECK: %[[Q:.+]] = "ttensor.quantize"(%{{.+}}, %{{.+}}) {axis = 0 : i64, block = 0 : i64, granularity = "tensor"} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi8>
  %q = "ttensor.quantize"(%x, %s) {granularity = "tensor", axis = 0, block = 0} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi8>
  // CHECK: "ttensor.quantize"(%{{.+}}, %{{.+}}) {axis = 1 : i64, block = 0 : i64, granularity = "channel"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf8E4M3FN>
  %e = "ttensor.quantize"(%x, %c) {granularity = "channel", axis = 1, block = 0} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf8E4M3FN>
  // CHECK: "ttensor.dequantize"(%[[Q]], %{{.+}}) {axis = 0 : i64, block = 4 : i64, granularity = "block"} : (tensor<4x8xi8>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %d = "ttensor.dequantize"(%q, %b) {granularity = "block", axis = 0, block = 4} : (tensor<4x8xi8>, tensor<4x2xf32>) -> tensor<4x8xf32>
  return %e, %d : tensor<4x8xf8E4M3FN>, tensor<4x8xf32>
}

// An amax history: the new amax first, the oldest dropped.
// CHECK-LABEL: func.func @history
func.func @history(%a: tensor<f32>, %h: tensor<16xf32>) -> tensor<16xf32> {
  // CHECK: "ttensor.push"(%{{.+}}, %{{.+}}) : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %0 = "ttensor.push"(%a, %h) : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}
