// tessera-tod-lower's refusals of block-sparse descriptors it cannot apply, at the descriptor, naming the target.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(tessera-tod-lower{target=ptx})'

func.func @dynamic_block_count_f64(%b: tensor<?x2x2xf64>, %r: tensor<?xi32>, %c: tensor<?xi32>, %x: tensor<4xf64>) -> tensor<6xf64> {
  // expected-error @+1 {{'tod.descriptor' has no kernel lowering yet on ptx: an f64 block-sparse operator applies with a static block count only (its products are elementwise products and sums) (run it with tessera.interpret)}}
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<?x2x2xf64>, tensor<?xi32>, tensor<?xi32>) -> !tod.operator<4, 6, f64, f64>
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 6, f64, f64>, tensor<4xf64>) -> tensor<6xf64>
  return %y : tensor<6xf64>
}

// -----

func.func @dynamic_columns(%b: tensor<3x2x2xf32>, %r: tensor<3xi32>, %c: tensor<3xi32>, %x: tensor<4x?xf32>) -> tensor<6x?xf32> {
  // expected-error @+1 {{'tod.descriptor' has no kernel lowering yet on ptx: a block-sparse operator applies to tensors of static extents only (run it with tessera.interpret)}}
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<3x2x2xf32>, tensor<3xi32>, tensor<3xi32>) -> !tod.operator<4, 6, f32, f32>
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 6, f32, f32>, tensor<4x?xf32>) -> tensor<6x?xf32>
  return %y : tensor<6x?xf32>
}

// -----

func.func @complex_blocks(%b: tensor<3x2x2xcomplex<f32>>, %r: tensor<3xi32>, %c: tensor<3xi32>, %x: tensor<4xcomplex<f32>>) -> tensor<6xcomplex<f32>> {
  // expected-error @+1 {{'tod.descriptor' has no kernel lowering yet on ptx: a block-sparse operator of complex blocks is not lowered yet (run it with tessera.interpret)}}
  %a = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<3x2x2xcomplex<f32>>, tensor<3xi32>, tensor<3xi32>) -> !tod.operator<4, 6, complex<f32>, f32>
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 6, complex<f32>, f32>, tensor<4xcomplex<f32>>) -> tensor<6xcomplex<f32>>
  return %y : tensor<6xcomplex<f32>>
}
