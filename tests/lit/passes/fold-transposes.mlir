// tessera-fold-transposes: a transpose of the last two axes feeding a matmul operand becomes the matmul's
// tessera.transpose_a / tessera.transpose_b; the transpose stays while other ops use it.
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-fold-transposes)' | FileCheck %s
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-fold-transposes{fused-attention=true})' | FileCheck %s --check-prefix=ATTN
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-fold-transposes{dtypes=bf16,f16})' | FileCheck %s --check-prefix=BF16

// The backward of C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC, both transposes folded and erased.
// CHECK-LABEL: func.func @backward
// CHECK-SAME:    (%[[A:[^:]+]]: tensor<16x32xf32> {{.*}}, %[[B:[^:]+]]: tensor<32x8xf32> {{.*}}, %[[DC:[^:]+]]: tensor<16x8xf32>
// CHECK-NOT:     ttensor.transpose
// CHECK:         "ttensor.matmul"(%[[DC]], %[[B]]) {accum = f32, tessera.transpose_b} : (tensor<16x8xf32>, tensor<32x8xf32>) -> tensor<16x32xf32>
// CHECK:         "ttensor.matmul"(%[[A]], %[[DC]]) {accum = f32, tessera.transpose_a} : (tensor<16x32xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
// CHECK-NOT:     ttensor.transpose
// Limited to other operand types (a target whose GEMMs read only 16-bit operands transposed), f32 is left.
// BF16-LABEL: func.func @backward
// BF16:         "ttensor.transpose"
// BF16:         "ttensor.matmul"(%{{.+}}, %{{.+}}) {accum = f32} :
// BF16:         "ttensor.transpose"
// BF16:         "ttensor.matmul"(%{{.+}}, %{{.+}}) {accum = f32} :
func.func @backward(%a: tensor<16x32xf32> {tessera.dims = [16, 32]}, %b: tensor<32x8xf32> {tessera.dims = [32, 8]}, %dc: tensor<16x8xf32> {tessera.dims = [16, 8]}) -> (tensor<16x32xf32>, tensor<32x8xf32>) {
  %bt = "ttensor.transpose"(%b) {perm = [1, 0]} : (tensor<32x8xf32>) -> tensor<8x32xf32>
  %da = "ttensor.matmul"(%dc, %bt) {accum = f32} : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  %at = "ttensor.transpose"(%a) {perm = [1, 0]} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %db = "ttensor.matmul"(%at, %dc) {accum = f32} : (tensor<32x16xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
  return %da, %db : tensor<16x32xf32>, tensor<32x8xf32>
}

// Both operands of one batched product; a transpose another op also reads stays for it.
// CHECK-LABEL: func.func @batched_shared
// CHECK:         %[[XT:.+]] = "ttensor.transpose"(%[[X:.+]]) {perm = [0, 2, 1]}
// CHECK:         "ttensor.matmul"(%[[X]], %{{.+}}) {accum = f32, tessera.transpose_a, tessera.transpose_b} : (tensor<2x4x6xf32>, tensor<2x5x4xf32>) -> tensor<2x6x5xf32>
// CHECK:         "ttensor.unary"(%[[XT]])
func.func @batched_shared(%x: tensor<2x4x6xf32> {tessera.dims = [2, 4, 6]}, %y: tensor<2x5x4xf32> {tessera.dims = [2, 5, 4]}) -> (tensor<2x6x5xf32>, tensor<2x6x4xf32>) {
  %xt = "ttensor.transpose"(%x) {perm = [0, 2, 1]} : (tensor<2x4x6xf32>) -> tensor<2x6x4xf32>
  %yt = "ttensor.transpose"(%y) {perm = [0, 2, 1]} : (tensor<2x5x4xf32>) -> tensor<2x4x5xf32>
  %p = "ttensor.matmul"(%xt, %yt) {accum = f32} : (tensor<2x6x4xf32>, tensor<2x4x5xf32>) -> tensor<2x6x5xf32>
  %r = "ttensor.unary"(%xt) {fn = "relu"} : (tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  return %p, %r : tensor<2x6x5xf32>, tensor<2x6x4xf32>
}

// Not folded: a permutation other than the last two axes; a transposed lhs whose batch axes would fold into
// the rows of a 2-D rhs's GEMM.
// CHECK-LABEL: func.func @kept
// CHECK:         %[[P:.+]] = "ttensor.transpose"(%{{.+}}) {perm = [1, 0, 2]}
// CHECK:         "ttensor.matmul"(%[[P]], %{{.+}}) {accum = f32} :
// CHECK:         %[[T:.+]] = "ttensor.transpose"(%{{.+}}) {perm = [0, 2, 1]}
// CHECK:         "ttensor.matmul"(%[[T]], %{{.+}}) {accum = f32} :
func.func @kept(%x: tensor<2x4x6xf32> {tessera.dims = [2, 4, 6]}, %w: tensor<6x3xf32> {tessera.dims = [6, 3]}, %v: tensor<2x6x4xf32> {tessera.dims = [2, 6, 4]}) -> (tensor<4x2x3xf32>, tensor<2x4x3xf32>) {
  %p = "ttensor.transpose"(%x) {perm = [1, 0, 2]} : (tensor<2x4x6xf32>) -> tensor<4x2x6xf32>
  %a = "ttensor.matmul"(%p, %w) {accum = f32} : (tensor<4x2x6xf32>, tensor<6x3xf32>) -> tensor<4x2x3xf32>
  %t = "ttensor.transpose"(%v) {perm = [0, 2, 1]} : (tensor<2x6x4xf32>) -> tensor<2x4x6xf32>
  %b = "ttensor.matmul"(%t, %w) {accum = f32} : (tensor<2x4x6xf32>, tensor<6x3xf32>) -> tensor<2x4x3xf32>
  return %a, %b : tensor<4x2x3xf32>, tensor<2x4x3xf32>
}

// Attention's Q·Kᵀ → softmax → ·V keeps its transpose where the target fuses the chain (fusion's chain
// search reads the arguments' extents, tessera.dims, of every function).
// ATTN-LABEL: func.func @attention
// ATTN:         %[[KT:.+]] = "ttensor.transpose"
// ATTN:         "ttensor.matmul"(%{{.+}}, %[[KT]]) {accum = f32} :
// CHECK-LABEL: func.func @attention
// CHECK-NOT:     ttensor.transpose
// CHECK:         "ttensor.matmul"(%{{.+}}, %{{.+}}) {accum = f32, tessera.transpose_b} :
func.func @attention(%q: tensor<2x8x16xf32> {tessera.dims = [2, 8, 16]}, %k: tensor<2x8x16xf32> {tessera.dims = [2, 8, 16]},
                      %v: tensor<2x8x16xf32> {tessera.dims = [2, 8, 16]}) -> tensor<2x8x16xf32> {
  %kt = "ttensor.transpose"(%k) {perm = [0, 2, 1]} : (tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  %s = "ttensor.matmul"(%q, %kt) {accum = f32} : (tensor<2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<2x8x8xf32>
  %p = "ttensor.softmax"(%s) {axis = 2 : i64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o = "ttensor.matmul"(%p, %v) {accum = f32} : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %o : tensor<2x8x16xf32>
}
