// tessera-fold-transposes{attention=...}: head split transposes (axes -3 and -2 swapped) on Q, K and V of a
// flash_attention of a listed type fold into it (tessera.seq_heads: it reads [..., S, H, D] in place); the merge
// transpose of its result is replaced by the result, other users get a transpose of it; the rest is left.
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-fold-transposes{attention=bf16,f16})' | FileCheck %s
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-fold-transposes)' | FileCheck %s --check-prefix=OFF

// CHECK-LABEL: func.func @split_merge
// CHECK-SAME:    (%[[Q:[^:]+]]: tensor<2x64x4x128xbf16>, %[[K:[^:]+]]: tensor<2x32x4x128xbf16>, %[[V:[^:]+]]: tensor<2x32x4x128xbf16>)
// CHECK-NOT:     ttensor.transpose
// CHECK:         %[[O:.+]] = "ttensor.flash_attention"(%[[Q]], %[[K]], %[[V]]) {causal = true, scale = 1.250000e-01 : f32, tessera.seq_heads} : (tensor<2x64x4x128xbf16>, tensor<2x32x4x128xbf16>, tensor<2x32x4x128xbf16>) -> tensor<2x64x4x128xbf16>
// CHECK-NOT:     ttensor.transpose
// CHECK:         return %[[O]]
// OFF-LABEL: func.func @split_merge
// OFF-COUNT-3:   "ttensor.transpose"
// OFF:           "ttensor.flash_attention"
// OFF-NOT:       tessera.seq_heads
// OFF:           "ttensor.transpose"
func.func @split_merge(%q: tensor<2x64x4x128xbf16>, %k: tensor<2x32x4x128xbf16>, %v: tensor<2x32x4x128xbf16>) -> tensor<2x64x4x128xbf16> {
  %qt = "ttensor.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<2x64x4x128xbf16>) -> tensor<2x4x64x128xbf16>
  %kt = "ttensor.transpose"(%k) {perm = [0, 2, 1, 3]} : (tensor<2x32x4x128xbf16>) -> tensor<2x4x32x128xbf16>
  %vt = "ttensor.transpose"(%v) {perm = [0, 2, 1, 3]} : (tensor<2x32x4x128xbf16>) -> tensor<2x4x32x128xbf16>
  %o = "ttensor.flash_attention"(%qt, %kt, %vt) {causal = true, scale = 0.125 : f32} : (tensor<2x4x64x128xbf16>, tensor<2x4x32x128xbf16>, tensor<2x4x32x128xbf16>) -> tensor<2x4x64x128xbf16>
  %m = "ttensor.transpose"(%o) {perm = [0, 2, 1, 3]} : (tensor<2x4x64x128xbf16>) -> tensor<2x64x4x128xbf16>
  return %m : tensor<2x64x4x128xbf16>
}

// -----

// Self-attention of one split (Q = K = V): one transpose folded; the result read as [H, S, D] too gets a
// transpose back; a split another op reads stays for it.
// CHECK-LABEL: func.func @shared
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<64x4x64xf16>)
// CHECK:         %[[XT:.+]] = "ttensor.transpose"(%[[X]]) {perm = [1, 0, 2]}
// CHECK:         %[[O:.+]] = "ttensor.flash_attention"(%[[X]], %[[X]], %[[X]]) {{.*}}tessera.seq_heads} {{.*}} -> tensor<64x4x64xf16>
// CHECK:         %[[B:.+]] = "ttensor.transpose"(%[[O]]) {perm = [1, 0, 2]} : (tensor<64x4x64xf16>) -> tensor<4x64x64xf16>
// CHECK:         %[[S:.+]] = "ttensor.binary"(%[[B]], %[[XT]])
// CHECK:         return %[[O]], %[[S]]
func.func @shared(%x: tensor<64x4x64xf16>) -> (tensor<64x4x64xf16>, tensor<4x64x64xf16>) {
  %xt = "ttensor.transpose"(%x) {perm = [1, 0, 2]} : (tensor<64x4x64xf16>) -> tensor<4x64x64xf16>
  %o = "ttensor.flash_attention"(%xt, %xt, %xt) {causal = false, scale = 0.125 : f32} : (tensor<4x64x64xf16>, tensor<4x64x64xf16>, tensor<4x64x64xf16>) -> tensor<4x64x64xf16>
  %m = "ttensor.transpose"(%o) {perm = [1, 0, 2]} : (tensor<4x64x64xf16>) -> tensor<64x4x64xf16>
  %s = "ttensor.binary"(%o, %xt) {fn = "add"} : (tensor<4x64x64xf16>, tensor<4x64x64xf16>) -> tensor<4x64x64xf16>
  return %m, %s : tensor<64x4x64xf16>, tensor<4x64x64xf16>
}

// -----

// Left alone: K not split by a transpose (it would need a copy of its own); an f32 attention (not listed); a
// last-two-axes transpose.
// CHECK-LABEL: func.func @unfolded
// CHECK-NOT:     tessera.seq_heads
// CHECK:         return
func.func @unfolded(%q: tensor<2x64x4x64xbf16>, %k: tensor<2x4x64x64xbf16>, %f: tensor<2x64x4x64xf32>, %g: tensor<2x4x64x64xbf16>) -> (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xbf16>) {
  %qt = "ttensor.transpose"(%q) {perm = [0, 2, 1, 3]} : (tensor<2x64x4x64xbf16>) -> tensor<2x4x64x64xbf16>
  %o = "ttensor.flash_attention"(%qt, %k, %qt) {causal = false, scale = 0.125 : f32} : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>) -> tensor<2x4x64x64xbf16>
  %ft = "ttensor.transpose"(%f) {perm = [0, 2, 1, 3]} : (tensor<2x64x4x64xf32>) -> tensor<2x4x64x64xf32>
  %p = "ttensor.flash_attention"(%ft, %ft, %ft) {causal = false, scale = 0.125 : f32} : (tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>) -> tensor<2x4x64x64xf32>
  %gt = "ttensor.transpose"(%g) {perm = [0, 1, 3, 2]} : (tensor<2x4x64x64xbf16>) -> tensor<2x4x64x64xbf16>
  %r = "ttensor.flash_attention"(%gt, %gt, %gt) {causal = false, scale = 0.125 : f32} : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>) -> tensor<2x4x64x64xbf16>
  return %o, %p, %r : tensor<2x4x64x64xbf16>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xbf16>
}
