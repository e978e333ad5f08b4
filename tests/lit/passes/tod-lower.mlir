// tessera-tod-lower: each tod.apply becomes its operator's action in ttensor ops (the first step of the
// schedule stage); the operators themselves are erased, never materialized.
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-tod-lower)' | FileCheck %s

// Dense: one GEMM of the matrix and the vector taken as a column.
// CHECK-LABEL: func.func @dense
// CHECK-SAME:    (%[[M:.+]]: tensor<8x6xf32>, %[[X:.+]]: tensor<6xf32>)
// CHECK-NEXT:    %[[C:.+]] = "ttensor.reshape"(%[[X]]) : (tensor<6xf32>) -> tensor<6x1xf32>
// CHECK-NEXT:    %[[Y:.+]] = "ttensor.matmul"(%[[M]], %[[C]]) {accum = f32} : (tensor<8x6xf32>, tensor<6x1xf32>) -> tensor<8x1xf32>
// CHECK-NEXT:    %[[R:.+]] = "ttensor.reshape"(%[[Y]]) : (tensor<8x1xf32>) -> tensor<8xf32>
// CHECK-NEXT:    return %[[R]]
// CHECK-NOT:     tod.
func.func @dense(%m: tensor<8x6xf32>, %x: tensor<6xf32>) -> tensor<8xf32> {
  %a = "tod.dense"(%m) : (tensor<8x6xf32>) -> !tod.operator<6, 8, f32, f32>
  %y = "tod.apply"(%a, %x) : (!tod.operator<6, 8, f32, f32>, tensor<6xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// The adjoint of a real dense operator multiplies by the matrix read transposed. A stack of column vectors is
// one 2-D GEMM, (Mᵀ Xᵢ)ᵀ = Xᵢᵀ M with the stack folded into its rows: every target's GEMM takes that.
// CHECK-LABEL: func.func @adjoint_batched
// CHECK-SAME:    (%[[M:.+]]: tensor<8x6xf32>, %[[X:.+]]: tensor<2x8x3xf32>)
// CHECK-NEXT:    %[[XT:.+]] = "ttensor.transpose"(%[[X]]) {perm = [0, 2, 1]} : (tensor<2x8x3xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[R:.+]] = "ttensor.reshape"(%[[XT]]) : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT:    %[[Y:.+]] = "ttensor.matmul"(%[[R]], %[[M]]) {accum = f32} : (tensor<6x8xf32>, tensor<8x6xf32>) -> tensor<6x6xf32>
// CHECK-NEXT:    %[[YS:.+]] = "ttensor.reshape"(%[[Y]]) : (tensor<6x6xf32>) -> tensor<2x3x6xf32>
// CHECK-NEXT:    %[[YT:.+]] = "ttensor.transpose"(%[[YS]]) {perm = [0, 2, 1]} : (tensor<2x3x6xf32>) -> tensor<2x6x3xf32>
// CHECK-NEXT:    return %[[YT]]
func.func @adjoint_batched(%m: tensor<8x6xf32>, %x: tensor<2x8x3xf32>) -> tensor<2x6x3xf32> {
  %a = "tod.dense"(%m) : (tensor<8x6xf32>) -> !tod.operator<6, 8, f32, f32>
  %t = "tod.adjoint"(%a) : (!tod.operator<6, 8, f32, f32>) -> !tod.operator<8, 6, f32, f32>
  %y = "tod.apply"(%t, %x) : (!tod.operator<8, 6, f32, f32>, tensor<2x8x3xf32>) -> tensor<2x6x3xf32>
  return %y : tensor<2x6x3xf32>
}

// -----

// s · diag(d) + A: the diagonal and the scale are elementwise products, the sum an elementwise add.
// CHECK-LABEL: func.func @scaled_diagonal_plus
// CHECK-SAME:    (%[[M:.+]]: tensor<4x4xf32>, %[[D:.+]]: tensor<4xf32>, %[[S:.+]]: tensor<f32>, %[[X:.+]]: tensor<4x2xf32>)
// CHECK-NEXT:    %[[DC:.+]] = "ttensor.reshape"(%[[D]]) : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:    %[[DX:.+]] = "ttensor.binary"(%[[X]], %[[DC]]) {fn = "mul"} : (tensor<4x2xf32>, tensor<4x1xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %[[SDX:.+]] = "ttensor.binary"(%[[DX]], %[[S]]) {fn = "mul"} : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %[[MX:.+]] = "ttensor.matmul"(%[[M]], %[[X]])
// CHECK-NEXT:    %[[R:.+]] = "ttensor.binary"(%[[SDX]], %[[MX]]) {fn = "add"}
// CHECK-NEXT:    return %[[R]]
func.func @scaled_diagonal_plus(%m: tensor<4x4xf32>, %d: tensor<4xf32>, %s: tensor<f32>, %x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %dg = "tod.diag"(%d) : (tensor<4xf32>) -> !tod.operator<4, 4, f32, f32>
  %sd = "tod.scale"(%s, %dg) : (tensor<f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %p = "tod.plus"(%sd, %a) : (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %y = "tod.apply"(%p, %x) : (!tod.operator<4, 4, f32, f32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A factorization U diag(s) Vᵀ applied to x is a GEMM chain, right to left: Vᵀ x, the scaling, U (·).
// CHECK-LABEL: func.func @factorized
// CHECK-SAME:    (%[[U:.+]]: tensor<8x2xf32>, %[[S:.+]]: tensor<2xf32>, %[[V:.+]]: tensor<6x2xf32>, %[[X:.+]]: tensor<6x1xf32>)
// CHECK-NEXT:    %[[VT:.+]] = "ttensor.transpose"(%[[V]]) {perm = [1, 0]}
// CHECK-NEXT:    %[[VX:.+]] = "ttensor.matmul"(%[[VT]], %[[X]]) {accum = f32} : (tensor<2x6xf32>, tensor<6x1xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %[[SC:.+]] = "ttensor.reshape"(%[[S]]) : (tensor<2xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %[[SVX:.+]] = "ttensor.binary"(%[[VX]], %[[SC]]) {fn = "mul"}
// CHECK-NEXT:    %[[Y:.+]] = "ttensor.matmul"(%[[U]], %[[SVX]]) {accum = f32} : (tensor<8x2xf32>, tensor<2x1xf32>) -> tensor<8x1xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @factorized(%u: tensor<8x2xf32>, %s: tensor<2xf32>, %v: tensor<6x2xf32>, %x: tensor<6x1xf32>) -> tensor<8x1xf32> {
  %du = "tod.dense"(%u) : (tensor<8x2xf32>) -> !tod.operator<2, 8, f32, f32>
  %ds = "tod.diag"(%s) : (tensor<2xf32>) -> !tod.operator<2, 2, f32, f32>
  %dv = "tod.dense"(%v) : (tensor<6x2xf32>) -> !tod.operator<2, 6, f32, f32>
  %vt = "tod.adjoint"(%dv) : (!tod.operator<2, 6, f32, f32>) -> !tod.operator<6, 2, f32, f32>
  %c1 = "tod.compose"(%ds, %vt) : (!tod.operator<2, 2, f32, f32>, !tod.operator<6, 2, f32, f32>) -> !tod.operator<6, 2, f32, f32>
  %c2 = "tod.compose"(%du, %c1) : (!tod.operator<2, 8, f32, f32>, !tod.operator<6, 2, f32, f32>) -> !tod.operator<6, 8, f32, f32>
  %y = "tod.apply"(%c2, %x) : (!tod.operator<6, 8, f32, f32>, tensor<6x1xf32>) -> tensor<8x1xf32>
  return %y : tensor<8x1xf32>
}

// -----

// (A ⊗ B) x = vec(A X Bᵀ), X the 2×4 row-major matrix of x: B on Xᵀ, then A on the transpose, two GEMMs and
// no 12×8 product.
// CHECK-LABEL: func.func @kronecker
// CHECK-SAME:    (%[[A:.+]]: tensor<3x2xf32>, %[[B:.+]]: tensor<4x4xf32>, %[[X:.+]]: tensor<8xf32>)
// CHECK:         %[[XM:.+]] = "ttensor.reshape"(%{{.+}}) : (tensor<1x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[XT:.+]] = "ttensor.transpose"(%[[XM]]) {perm = [1, 0]} : (tensor<2x4xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %[[BX:.+]] = "ttensor.matmul"(%[[B]], %[[XT]]) {accum = f32} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %[[XB:.+]] = "ttensor.transpose"(%[[BX]]) {perm = [1, 0]} : (tensor<4x2xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[AXB:.+]] = "ttensor.matmul"(%[[A]], %[[XB]]) {accum = f32} : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    "ttensor.reshape"(%[[AXB]]) : (tensor<3x4xf32>) -> tensor<12xf32>
// CHECK-NOT:     tod.
func.func @kronecker(%a: tensor<3x2xf32>, %b: tensor<4x4xf32>, %x: tensor<8xf32>) -> tensor<12xf32> {
  %da = "tod.dense"(%a) : (tensor<3x2xf32>) -> !tod.operator<2, 3, f32, f32>
  %db = "tod.dense"(%b) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %k = "tod.kronecker"(%da, %db) : (!tod.operator<2, 3, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<8, 12, f32, f32>
  %y = "tod.apply"(%k, %x) : (!tod.operator<8, 12, f32, f32>, tensor<8xf32>) -> tensor<12xf32>
  return %y : tensor<12xf32>
}

// -----

// One action per (operator, tensor) in a function: M x is multiplied once for both applies that need it.
// CHECK-LABEL: func.func @shared_action
// CHECK:         %[[MX:.+]] = "ttensor.matmul"(%arg0, %{{.+}}) {accum = f32} : (tensor<6x6xf32>, tensor<6x1xf32>)
// CHECK:         "ttensor.matmul"(%{{.+}}, %[[MX]])
// CHECK-NOT:     "ttensor.matmul"
// CHECK:         return
func.func @shared_action(%m: tensor<6x6xf32>, %x: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  %a = "tod.dense"(%m) : (tensor<6x6xf32>) -> !tod.operator<6, 6, f32, f32>
  %y = "tod.apply"(%a, %x) : (!tod.operator<6, 6, f32, f32>, tensor<6xf32>) -> tensor<6xf32>
  %t = "tod.adjoint"(%a) : (!tod.operator<6, 6, f32, f32>) -> !tod.operator<6, 6, f32, f32>
  %c = "tod.compose"(%t, %a) : (!tod.operator<6, 6, f32, f32>, !tod.operator<6, 6, f32, f32>) -> !tod.operator<6, 6, f32, f32>
  %z = "tod.apply"(%c, %x) : (!tod.operator<6, 6, f32, f32>, tensor<6xf32>) -> tensor<6xf32>
  return %y, %z : tensor<6xf32>, tensor<6xf32>
}
