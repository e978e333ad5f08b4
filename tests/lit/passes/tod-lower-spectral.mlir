// tessera-tod-lower of the spectral ops (passes/linalg_kernels.py): the operator's matrix factorized by ONE
// looping kernel (ttensor.linalg: one-sided Jacobi svd, Jacobi eigh, Gelfand's spectral radius), its packed
// result sliced into U, V and the values; reconstruct x = U (s ⊙ (Vᵀ x)), pinv x = V (g ⊙ (Uᵀ x)).
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-tod-lower)' | FileCheck %s

// A tall matrix (6×4): packed [6 + 4 + 1, 4], U rows 0..5, V rows 6..9, σ row 10; truncated to 2 columns.
// CHECK-LABEL: func.func @svd_reconstruct
// CHECK-SAME:    (%[[M:.+]]: tensor<6x4xf32>, %[[X:.+]]: tensor<4xf32>)
// CHECK:         %[[P:.+]] = "ttensor.linalg"(%[[M]]) {fn = "svd", transposed = false} : (tensor<6x4xf32>) -> tensor<11x4xf32>
// CHECK:         %[[U:.+]] = "ttensor.slice"(%[[P]]) {offsets = [0, 0]} : (tensor<11x4xf32>) -> tensor<6x4xf32>
// CHECK:         %[[V:.+]] = "ttensor.slice"(%[[P]]) {offsets = [6, 0]} : (tensor<11x4xf32>) -> tensor<4x4xf32>
// CHECK:         "ttensor.slice"(%[[P]]) {offsets = [10, 0]} : (tensor<11x4xf32>) -> tensor<1x4xf32>
// CHECK:         %[[U2:.+]] = "ttensor.slice"(%[[U]]) {offsets = [0, 0]} : (tensor<6x4xf32>) -> tensor<6x2xf32>
// CHECK:         %[[V2:.+]] = "ttensor.slice"(%[[V]]) {offsets = [0, 0]} : (tensor<4x4xf32>) -> tensor<4x2xf32>
// CHECK:         %[[VT:.+]] = "ttensor.transpose"(%[[V2]]) {perm = [1, 0]}
// CHECK:         %[[VX:.+]] = "ttensor.matmul"(%[[VT]], {{.+}}) {accum = f32} : (tensor<2x4xf32>, tensor<4x1xf32>) -> tensor<2x1xf32>
// CHECK:         %[[SVX:.+]] = "ttensor.binary"(%[[VX]], {{.+}}) {fn = "mul"} : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
// CHECK:         "ttensor.matmul"(%[[U2]], %[[SVX]]) {accum = f32} : (tensor<6x2xf32>, tensor<2x1xf32>) -> tensor<6x1xf32>
// CHECK-NOT:     tod.
func.func @svd_reconstruct(%m: tensor<6x4xf32>, %x: tensor<4xf32>) -> tensor<6xf32> {
  %a = "tod.dense"(%m) : (tensor<6x4xf32>) -> !tod.operator<4, 6, f32, f32>
  %s = "tod.spectral"(%a) : (!tod.operator<4, 6, f32, f32>) -> !tod.spectral_operator<4, 6, 4, f32, "svd">
  %t = "tod.truncate"(%s) {k = 2 : i64} : (!tod.spectral_operator<4, 6, 4, f32, "svd">) -> !tod.spectral_operator<4, 6, 2, f32, "svd">
  %r = "tod.reconstruct"(%t) : (!tod.spectral_operator<4, 6, 2, f32, "svd">) -> !tod.operator<4, 6, f32, f32>
  %y = "tod.apply"(%r, %x) : (!tod.operator<4, 6, f32, f32>, tensor<4xf32>) -> tensor<6xf32>
  return %y : tensor<6xf32>
}

// -----

// A wide matrix (3×5) is factorized transposed: the kernel's U is V (signs follow it: transposed = true).
// The pseudoinverse's cut: |s|/max|s| > rcond, 1/s kept, 0 else.
// CHECK-LABEL: func.func @svd_wide_pinv
// CHECK:         %[[T:.+]] = "ttensor.transpose"(%{{.+}}) {perm = [1, 0]} : (tensor<3x5xf64>) -> tensor<5x3xf64>
// CHECK:         %[[P:.+]] = "ttensor.linalg"(%[[T]]) {fn = "svd", transposed = true} : (tensor<5x3xf64>) -> tensor<9x3xf64>
// CHECK:         %[[V:.+]] = "ttensor.slice"(%[[P]]) {offsets = [0, 0]} : (tensor<9x3xf64>) -> tensor<5x3xf64>
// CHECK:         %[[U:.+]] = "ttensor.slice"(%[[P]]) {offsets = [5, 0]} : (tensor<9x3xf64>) -> tensor<3x3xf64>
// CHECK:         "ttensor.slice"(%[[P]]) {offsets = [8, 0]} : (tensor<9x3xf64>) -> tensor<1x3xf64>
// CHECK:         %[[TOP:.+]] = "ttensor.reduce"({{.+}}) {axes = [0], keepdims = false, kind = "max"} : (tensor<3xf64>) -> tensor<f64>
// CHECK:         %[[RATIO:.+]] = "ttensor.binary"({{.+}}, %[[TOP]]) {fn = "div"} : (tensor<3xf64>, tensor<f64>) -> tensor<3xf64>
// CHECK:         %[[KEEP:.+]] = "ttensor.binary"(%[[RATIO]], {{.+}}) {fn = "gt"} : (tensor<3xf64>, tensor<f64>) -> tensor<3xi1>
// CHECK:         %[[G:.+]] = "ttensor.select"(%[[KEEP]], {{.+}}) : (tensor<3xi1>, tensor<3xf64>, tensor<f64>) -> tensor<3xf64>
// CHECK-NOT:     tod.
func.func @svd_wide_pinv(%m: tensor<3x5xf64>, %y: tensor<3xf64>) -> tensor<5xf64> {
  %a = "tod.dense"(%m) : (tensor<3x5xf64>) -> !tod.operator<5, 3, f64, f64>
  %p = "tod.pseudoinverse"(%a) {rcond = 1.0e-12 : f64} : (!tod.operator<5, 3, f64, f64>) -> !tod.operator<3, 5, f64, f64>
  %x = "tod.apply"(%p, %y) : (!tod.operator<3, 5, f64, f64>, tensor<3xf64>) -> tensor<5xf64>
  return %x : tensor<5xf64>
}

// -----

// eigh: packed [2n + 1, n], eigenvectors rows 0..n-1, eigenvalues row 2n; U = V.
// CHECK-LABEL: func.func @eigh
// CHECK:         %[[P:.+]] = "ttensor.linalg"(%{{.+}}) {fn = "eigh", transposed = false} : (tensor<4x4xf32>) -> tensor<9x4xf32>
// CHECK:         "ttensor.slice"(%[[P]]) {offsets = [0, 0]} : (tensor<9x4xf32>) -> tensor<4x4xf32>
// CHECK:         "ttensor.slice"(%[[P]]) {offsets = [8, 0]} : (tensor<9x4xf32>) -> tensor<1x4xf32>
// CHECK-NOT:     "ttensor.linalg"
// CHECK-NOT:     tod.
func.func @eigh(%m: tensor<4x4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %s = "tod.spectral"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.spectral_operator<4, 4, 4, f32, "eigh">
  %r = "tod.reconstruct"(%s) : (!tod.spectral_operator<4, 4, 4, f32, "eigh">) -> !tod.operator<4, 4, f32, f32>
  %y = "tod.apply"(%r, %x) : (!tod.operator<4, 4, f32, f32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The spectral radius: one kernel, ρ at [2n, 0] of its packed result; the norm: σ₁ of the svd.
// CHECK-LABEL: func.func @queries
// CHECK:         %[[R:.+]] = "ttensor.linalg"(%{{.+}}) {fn = "spectral_radius", transposed = false} : (tensor<4x4xf32>) -> tensor<9x4xf32>
// CHECK:         %[[RS:.+]] = "ttensor.slice"(%[[R]]) {offsets = [8, 0]} : (tensor<9x4xf32>) -> tensor<1x1xf32>
// CHECK:         "ttensor.reshape"(%[[RS]]) : (tensor<1x1xf32>) -> tensor<f32>
// CHECK:         %[[S:.+]] = "ttensor.linalg"(%{{.+}}) {fn = "svd", transposed = false} : (tensor<4x4xf32>) -> tensor<9x4xf32>
// CHECK:         "ttensor.slice"(%{{.+}}) {offsets = [0, 0]} : (tensor<1x4xf32>) -> tensor<1x1xf32>
// CHECK-NOT:     tod.
func.func @queries(%m: tensor<4x4xf32>) -> (tensor<f32>, tensor<f32>) {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %r = "tod.spectral_radius"(%a) : (!tod.operator<4, 4, f32, f32>) -> tensor<f32>
  %n = "tod.norm"(%a) : (!tod.operator<4, 4, f32, f32>) -> tensor<f32>
  return %r, %n : tensor<f32>, tensor<f32>
}
