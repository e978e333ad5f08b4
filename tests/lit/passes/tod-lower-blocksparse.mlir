// tessera-tod-lower of a block-sparse operator descriptor (blocks [nnz, b, b], i32 block rows and cols [nnz]):
// one-hot matrices of the coordinates (an exact f32 compare with 0 … n − 1, the row sums of an im2col's
// lower-triangular ones, less 1), the gather of x's block columns as a GEMM, the block products (a batched GEMM;
// in f64 products and sums) and the scatter-sum into the block rows as the transposed one-hot's GEMM: no
// atomics, the operator never formed, and no tod op left.
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-tod-lower)' | FileCheck %s

// A 6x4 operator of three 2x2 blocks (R = 3 block rows, C = 2 block columns) applied to a vector.
// CHECK-LABEL: func.func @apply_vector
// CHECK-SAME:    (%[[B:.+]]: tensor<3x2x2xf32>, %[[R:.+]]: tensor<3xi32>, %[[C:.+]]: tensor<3xi32>, %[[X:.+]]: tensor<4xf32>)
// CHECK-SAME:    tessera.operators = {{.*}}blocksparse
// CHECK:         %[[X1:.+]] = "ttensor.reshape"(%[[X]]) : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK:         %[[L2:.+]] = "ttensor.im2col"({{.*}}) {circular = false, dilation = [1], flip = false, kernel = [2], padding = [1, 0], stride = [1]} : (tensor<1x1x2xf32>) -> tensor<2x2xf32>
// CHECK:         %[[CF:.+]] = "ttensor.cast"(%[[C]]) {accum = f32} : (tensor<3xi32>) -> tensor<3xf32>
// CHECK:         %[[HC:.+]] = "ttensor.binary"({{.*}}) {fn = "eq"} : (tensor<3x1xf32>, tensor<1x2xf32>) -> tensor<3x2xi1>
// CHECK:         %[[OC:.+]] = "ttensor.select"(%[[HC]], {{.*}}) : (tensor<3x2xi1>, tensor<f32>, tensor<f32>) -> tensor<3x2xf32>
// CHECK:         %[[XV:.+]] = "ttensor.reshape"(%[[X1]]) : (tensor<4x1xf32>) -> tensor<2x2xf32>
// CHECK:         %[[XG:.+]] = "ttensor.matmul"(%[[OC]], %[[XV]]) {accum = f32} : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
// CHECK:         %[[XG3:.+]] = "ttensor.reshape"(%[[XG]]) : (tensor<3x2xf32>) -> tensor<3x2x1xf32>
// CHECK:         %[[P:.+]] = "ttensor.matmul"(%[[B]], %[[XG3]]) {accum = f32} : (tensor<3x2x2xf32>, tensor<3x2x1xf32>) -> tensor<3x2x1xf32>
// CHECK:         "ttensor.cast"(%[[R]]) {accum = f32} : (tensor<3xi32>) -> tensor<3xf32>
// CHECK:         %[[HR:.+]] = "ttensor.binary"({{.*}}) {fn = "eq"} : (tensor<3x1xf32>, tensor<1x3xf32>) -> tensor<3x3xi1>
// CHECK:         %[[OR:.+]] = "ttensor.select"(%[[HR]], {{.*}}) : (tensor<3x3xi1>, tensor<f32>, tensor<f32>) -> tensor<3x3xf32>
// CHECK:         %[[P2:.+]] = "ttensor.reshape"(%[[P]]) : (tensor<3x2x1xf32>) -> tensor<3x2xf32>
// CHECK:         %[[ORT:.+]] = "ttensor.transpose"(%[[OR]]) {perm = [1, 0]} : (tensor<3x3xf32>) -> tensor<3x3xf32>
// CHECK:         %[[Y:.+]] = "ttensor.matmul"(%[[ORT]], %[[P2]]) {accum = f32} : (tensor<3x3xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK:         %[[Y2:.+]] = "ttensor.reshape"(%[[Y]]) : (tensor<3x2xf32>) -> tensor<6x1xf32>
// CHECK:         %[[Y1:.+]] = "ttensor.reshape"(%[[Y2]]) : (tensor<6x1xf32>) -> tensor<6xf32>
// CHECK-NEXT:    return %[[Y1]]
// CHECK-NOT:     tod.
func.func @apply_vector(%b: tensor<3x2x2xf32>, %r: tensor<3xi32>, %c: tensor<3xi32>, %x: tensor<4xf32>) -> tensor<6xf32> {
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<3x2x2xf32>, tensor<3xi32>, tensor<3xi32>) -> !tod.operator<4, 6, f32, f32>
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 6, f32, f32>, tensor<4xf32>) -> tensor<6xf32>
  return %y : tensor<6xf32>
}

// -----

// The "adjoint" flag (the payload describes a 4x6 operator, the descriptor is its 6x4 transpose), in f64: the
// gather reads the block rows, the scatter the block columns, the blocks transposed; every product is an
// elementwise product and a sum (no f64 GEMM).
// CHECK-LABEL: func.func @adjoint_flag_f64
// CHECK-SAME:    (%[[B:.+]]: tensor<3x2x2xf64>, %[[R:.+]]: tensor<3xi32>, %[[C:.+]]: tensor<3xi32>, %[[X:.+]]: tensor<4x5xf64>)
// CHECK:         "ttensor.cast"(%[[R]]) {accum = f32} : (tensor<3xi32>) -> tensor<3xf32>
// CHECK:         %[[OR:.+]] = "ttensor.select"({{.*}}) : (tensor<3x2xi1>, tensor<f64>, tensor<f64>) -> tensor<3x2xf64>
// CHECK:         %[[XV:.+]] = "ttensor.reshape"(%[[X]]) : (tensor<4x5xf64>) -> tensor<2x10xf64>
// CHECK:         "ttensor.reshape"(%[[OR]]) : (tensor<3x2xf64>) -> tensor<3x2x1xf64>
// CHECK:         "ttensor.reshape"(%[[XV]]) : (tensor<2x10xf64>) -> tensor<1x2x10xf64>
// CHECK:         "ttensor.binary"({{.*}}) {fn = "mul"} : (tensor<3x2x1xf64>, tensor<1x2x10xf64>) -> tensor<3x2x10xf64>
// CHECK:         "ttensor.reduce"({{.*}}) {axes = [1], keepdims = false, kind = "sum"} : (tensor<3x2x10xf64>) -> tensor<3x10xf64>
// CHECK:         %[[BT:.+]] = "ttensor.transpose"(%[[B]]) {perm = [0, 2, 1]} : (tensor<3x2x2xf64>) -> tensor<3x2x2xf64>
// CHECK:         "ttensor.reshape"(%[[BT]]) : (tensor<3x2x2xf64>) -> tensor<3x2x2x1xf64>
// CHECK:         "ttensor.binary"({{.*}}) {fn = "mul"} : (tensor<3x2x2x1xf64>, tensor<3x1x2x5xf64>) -> tensor<3x2x2x5xf64>
// CHECK:         "ttensor.reduce"({{.*}}) {axes = [2], keepdims = false, kind = "sum"} : (tensor<3x2x2x5xf64>) -> tensor<3x2x5xf64>
// CHECK:         "ttensor.cast"(%[[C]]) {accum = f32} : (tensor<3xi32>) -> tensor<3xf32>
// CHECK:         "ttensor.select"({{.*}}) : (tensor<3x3xi1>, tensor<f64>, tensor<f64>) -> tensor<3x3xf64>
// CHECK:         "ttensor.binary"({{.*}}) {fn = "mul"} : (tensor<3x3x1xf64>, tensor<1x3x10xf64>) -> tensor<3x3x10xf64>
// CHECK:         %[[S:.+]] = "ttensor.reduce"({{.*}}) {axes = [1], keepdims = false, kind = "sum"} : (tensor<3x3x10xf64>) -> tensor<3x10xf64>
// CHECK-NEXT:    %[[Y:.+]] = "ttensor.reshape"(%[[S]]) : (tensor<3x10xf64>) -> tensor<6x5xf64>
// CHECK-NEXT:    return %[[Y]]
// CHECK-NOT:     tod.
func.func @adjoint_flag_f64(%b: tensor<3x2x2xf64>, %r: tensor<3xi32>, %c: tensor<3xi32>, %x: tensor<4x5xf64>) -> tensor<6x5xf64> {
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = ["adjoint"]} : (tensor<3x2x2xf64>, tensor<3xi32>, tensor<3xi32>) -> !tod.operator<4, 6, f64, f64>
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 6, f64, f64>, tensor<4x5xf64>) -> tensor<6x5xf64>
  return %y : tensor<6x5xf64>
}

// -----

// An unapplied block-sparse parameter is recorded and erased: no kernels.
// CHECK-LABEL: func.func @unapplied
// CHECK-SAME:    tessera.operators = {{.*}}blocksparse
// CHECK-NEXT:    return %{{.+}} : tensor<4xf32>
func.func @unapplied(%b: tensor<3x2x2xf32>, %r: tensor<3xi32>, %c: tensor<3xi32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<3x2x2xf32>, tensor<3xi32>, tensor<3xi32>) -> !tod.operator<4, 6, f32, f32>
  return %x : tensor<4xf32>
}

// -----

// No blocks (nnz = 0, which only IR spells: the frontend's extents are positive): the zero operator.
// CHECK-LABEL: func.func @no_blocks
// CHECK-NEXT:    %[[Z:.+]] = "ttensor.constant"() {value = 0.000000e+00 : f32} : () -> tensor<f32>
// CHECK-NEXT:    %[[Y:.+]] = "ttensor.broadcast"(%[[Z]]) : (tensor<f32>) -> tensor<6x3xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @no_blocks(%b: tensor<0x2x2xf32>, %r: tensor<0xi32>, %c: tensor<0xi32>, %x: tensor<4x3xf32>) -> tensor<6x3xf32> {
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<0x2x2xf32>, tensor<0xi32>, tensor<0xi32>) -> !tod.operator<4, 6, f32, f32>
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 6, f32, f32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}

// -----

// A block count known only at run time (0 included): the one-hots and the products have a dynamic row count,
// the scatter GEMM a dynamic inner extent.
// CHECK-LABEL: func.func @dynamic_block_count
// CHECK:         "ttensor.select"({{.*}}) : (tensor<?x2xi1>, tensor<f32>, tensor<f32>) -> tensor<?x2xf32>
// CHECK:         "ttensor.matmul"({{.*}}) {accum = f32} : (tensor<?x2x2xf32>, tensor<?x2x3xf32>) -> tensor<?x2x3xf32>
// CHECK:         "ttensor.matmul"({{.*}}) {accum = f32} : (tensor<3x?xf32>, tensor<?x6xf32>) -> tensor<3x6xf32>
// CHECK-NOT:     tod.
func.func @dynamic_block_count(%b: tensor<?x2x2xf32>, %r: tensor<?xi32>, %c: tensor<?xi32>, %x: tensor<4x3xf32>) -> tensor<6x3xf32> {
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<?x2x2xf32>, tensor<?xi32>, tensor<?xi32>) -> !tod.operator<4, 6, f32, f32>
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 6, f32, f32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}
