// tessera-tod-lower of expm and its Fréchet derivative (passes/matrix_functions.py): the operator's matrix (a
// dense factor is its own), the identity as an im2col of a padded 1, the 1-norm, 8 comparisons counting the
// squarings s, the scaling by 2^-s, Paterson–Stockmeyer's GEMMs, 8 conditional squarings, NaN beyond them.
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-tod-lower)' | FileCheck %s

// f32 (m = 16, θ = 2.478): the squarings' thresholds are θ·2^(k−1); 3 powers, 3 Horner GEMMs, 8 squarings.
// CHECK-LABEL: func.func @expm
// CHECK-SAME:    (%[[M:.+]]: tensor<4x4xf32>, %[[X:.+]]: tensor<4xf32>)
// CHECK:         %[[EYE:.+]] = "ttensor.im2col"({{.+}}) {circular = false, dilation = [1], flip = true, kernel = [4], padding = [3, 3], stride = [1]} : (tensor<1x1x1xf32>) -> tensor<4x4xf32>
// CHECK:         %[[ABS:.+]] = "ttensor.unary"(%[[M]]) {fn = "abs"}
// CHECK:         %[[COLS:.+]] = "ttensor.reduce"(%[[ABS]]) {axes = [0], keepdims = false, kind = "sum"}
// CHECK:         %[[NORM:.+]] = "ttensor.reduce"(%[[COLS]]) {axes = [0], keepdims = false, kind = "max"} : (tensor<4xf32>) -> tensor<f32>
// CHECK:         %[[T1:.+]] = "ttensor.constant"() {value = 2.47828078 : f32}
// CHECK:         %[[S1:.+]] = "ttensor.binary"(%[[NORM]], %[[T1]]) {fn = "gt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-COUNT-7: "ttensor.binary"(%[[NORM]], {{.+}}) {fn = "gt"}
// CHECK-COUNT-8: "ttensor.select"({{.+}}) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK:         %[[XS:.+]] = "ttensor.binary"(%[[M]], {{.+}}) {fn = "mul"} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
// CHECK:         %[[X2:.+]] = "ttensor.matmul"(%[[XS]], %[[XS]])
// CHECK:         %[[X3:.+]] = "ttensor.matmul"(%[[X2]], %[[XS]])
// CHECK:         %[[X4:.+]] = "ttensor.matmul"(%[[X3]], %[[XS]])
// CHECK:         "ttensor.binary"(%[[EYE]], {{.+}}) {fn = "mul"}
// CHECK-COUNT-3: "ttensor.matmul"(%[[X4]], {{.+}})
// CHECK:         %[[R:.+]] = "ttensor.matmul"(%[[P:.+]], %[[P]])
// CHECK-NEXT:    "ttensor.select"(%[[S1]], %[[R]], %[[P]]) : (tensor<i1>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-COUNT-7: "ttensor.select"
// CHECK:         %[[OK:.+]] = "ttensor.binary"(%[[NORM]], {{.+}}) {fn = "le"}
// CHECK:         %[[NAN:.+]] = "ttensor.constant"() {value = 0x7FC00000 : f32}
// CHECK:         %[[E:.+]] = "ttensor.select"(%[[OK]], {{.+}}, %[[NAN]])
// CHECK:         "ttensor.matmul"(%[[E]], {{.+}}) {accum = f32} : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
// CHECK-NOT:     tod.
func.func @expm(%m: tensor<4x4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %e = "tod.expm"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %y = "tod.apply"(%e, %x) : (!tod.operator<4, 4, f32, f32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A scaled operator's matrix is its action on the identity; exp(A) is formed once for both applies, and the
// adjoint's multiplies by it read transposed.
// CHECK-LABEL: func.func @scaled_and_adjoint
// CHECK:         %[[EYE:.+]] = "ttensor.im2col"
// CHECK:         %[[A:.+]] = "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "mul"} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
// CHECK:         %[[E:.+]] = "ttensor.select"({{.+}}) : (tensor<i1>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
// CHECK-NEXT:    "ttensor.matmul"(%[[E]], {{.+}})
// CHECK-NEXT:    "ttensor.reshape"
// CHECK-NEXT:    %[[ET:.+]] = "ttensor.transpose"(%[[E]]) {perm = [1, 0]}
// CHECK-NEXT:    "ttensor.matmul"(%[[ET]], {{.+}})
// CHECK-NOT:     "ttensor.im2col"
func.func @scaled_and_adjoint(%m: tensor<4x4xf32>, %s: tensor<f32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %b = "tod.scale"(%s, %a) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %e = "tod.expm"(%b) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %y = "tod.apply"(%e, %x) : (!tod.operator<4, 4, f32, f32>, tensor<4xf32>) -> tensor<4xf32>
  %et = "tod.adjoint"(%e) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %z = "tod.apply"(%et, %x) : (!tod.operator<4, 4, f32, f32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %z : tensor<4xf32>, tensor<4xf32>
}

// -----

// f64 (m = 30, θ = 3.540): products are an elementwise product [m, n, k] of views and a sum over n, no GEMM.
// CHECK-LABEL: func.func @expm_f64
// CHECK:         %[[T1:.+]] = "ttensor.constant"() {value = 3.539666348743689{{[0-9]}} : f64}
// CHECK:         %[[L:.+]] = "ttensor.reshape"(%[[XS:.+]]) : (tensor<3x3xf64>) -> tensor<3x3x1xf64>
// CHECK-NEXT:    %[[R:.+]] = "ttensor.reshape"(%[[XS]]) : (tensor<3x3xf64>) -> tensor<1x3x3xf64>
// CHECK-NEXT:    %[[P:.+]] = "ttensor.binary"(%[[L]], %[[R]]) {fn = "mul"} : (tensor<3x3x1xf64>, tensor<1x3x3xf64>) -> tensor<3x3x3xf64>
// CHECK-NEXT:    "ttensor.reduce"(%[[P]]) {axes = [1], keepdims = false, kind = "sum"} : (tensor<3x3x3xf64>) -> tensor<3x3xf64>
// CHECK-NOT:     "ttensor.matmul"
// CHECK:         return
func.func @expm_f64(%m: tensor<3x3xf64>, %x: tensor<3xf64>) -> tensor<3xf64> {
  %a = "tod.dense"(%m) : (tensor<3x3xf64>) -> !tod.operator<3, 3, f64, f64>
  %e = "tod.expm"(%a) : (!tod.operator<3, 3, f64, f64>) -> !tod.operator<3, 3, f64, f64>
  %y = "tod.apply"(%e, %x) : (!tod.operator<3, 3, f64, f64>, tensor<3xf64>) -> tensor<3xf64>
  return %y : tensor<3xf64>
}

// -----

// The Fréchet derivative: the direction scaled as A is (θ of the derivative, 2.108 in f32), its powers'
// derivatives by the product rule, each squaring (R, L) ← (R², R L + L R) selected; the last one L only.
// CHECK-LABEL: func.func @derivative
// CHECK-SAME:    (%[[M:.+]]: tensor<4x4xf32>, %[[D:.+]]: tensor<4x4xf32>)
// CHECK:         "ttensor.constant"() {value = 2.10759187 : f32}
// CHECK:         %[[DX:.+]] = "ttensor.binary"(%[[D]], {{.+}}) {fn = "mul"} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
// CHECK:         "ttensor.matmul"(%[[DX]], %[[XS:.+]])
// CHECK-COUNT-14: "ttensor.select"({{.+}}) : (tensor<i1>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK:         %[[RL:[0-9]+]] = "ttensor.matmul"(%[[RR:[0-9]+]], %[[LL:[0-9]+]])
// CHECK-NEXT:    %[[LR:.+]] = "ttensor.matmul"(%[[LL]], %[[RR]])
// CHECK-NEXT:    %[[SUM:.+]] = "ttensor.binary"(%[[RL]], %[[LR]]) {fn = "add"}
// CHECK-NEXT:    %[[L:.+]] = "ttensor.select"({{.+}}, %[[SUM]], %[[LL]])
// CHECK-NOT:     "ttensor.matmul"
// CHECK:         %[[OUT:.+]] = "ttensor.select"(%{{.+}}, %[[L]], %{{.+}}) : (tensor<i1>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
// CHECK-NEXT:    return %[[OUT]]
func.func @derivative(%m: tensor<4x4xf32>, %d: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %l = "tod.expm_derivative"(%a, %d) : (!tod.operator<4, 4, f32, f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %l : tensor<4x4xf32>
}
