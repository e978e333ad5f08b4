// One case per rule of tod.descriptor and tod.export (dialects/tod_abi.py), the ABI spec's §5.3 contracts first.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @spectral_without_decomposition(%u: tensor<8x2xf32>, %s: tensor<2xf32>, %v: tensor<6x2xf32>) {
  // expected-error @+1 {{'tod.descriptor' is a spectral (factor) operator: it must declare its decomposition (svd, eig or eigh), ABI spec §5.3}}
  %0 = "tod.descriptor"(%u, %s, %v) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "factor", tag = "none", flags = []} : (tensor<8x2xf32>, tensor<2xf32>, tensor<6x2xf32>) -> !tod.operator<6, 8, f32, f32>
  return
}

// -----

func.func @export_of_adjoint(%m: tensor<4x6xf32>) {
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "A", repr = "dense", tag = "none", flags = []} : (tensor<4x6xf32>) -> !tod.operator<6, 4, f32, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<6, 4, f32, f32>) -> !tod.operator<4, 6, f32, f32>
  // expected-error @+1 {{'tod.export' exports an adjoint: an adjoint crosses the ABI as its operand's descriptor carrying the 'adjoint' flag (ABI spec §5.3), not as tod.adjoint}}
  "tod.export"(%1) {name = "B"} : (!tod.operator<4, 6, f32, f32>) -> ()
  return
}

// -----

func.func @recursion_without_frame(%m: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.descriptor' is a recursion operator: it must declare its stack-frame size (frame_bytes) and its depth, ABI spec §5.3}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "R", repr = "dense", tag = "none", flags = ["recursion"]} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @frame_too_small(%m: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.descriptor' frame_bytes 8 cannot hold one level's vector of 4 f32 entries (16 bytes)}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "R", repr = "dense", tag = "none", flags = ["recursion"], frame_bytes = 8, depth = 2} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @frame_without_recursion(%m: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.descriptor' declares frame_bytes or depth, which only a recursion operator (flag 'recursion') has}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "R", repr = "dense", tag = "none", flags = [], frame_bytes = 16, depth = 2} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @decomposition_on_dense(%m: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.descriptor' declares a decomposition, which only a factor operator has (this one is dense)}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "A", repr = "dense", tag = "none", flags = [], decomposition = "svd"} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @payload_count(%m: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.descriptor' a factor descriptor carries 3 payload tensor(s), got 1}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "A", repr = "factor", tag = "none", flags = [], decomposition = "svd"} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @bad_tag(%d: tensor<4xf32>) {
  // expected-error @+1 {{'tod.descriptor' tag must be one of diag, conv1d; got 'fft'}}
  %0 = "tod.descriptor"(%d) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "A", repr = "implicit", tag = "fft", flags = []} : (tensor<4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @bad_flag(%m: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.descriptor' flag 'hermitian' is not one of unitary, self_adjoint, normal, adjoint, recursion}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "A", repr = "dense", tag = "none", flags = ["hermitian"]} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @flags_out_of_order(%m: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.descriptor' flags ['normal', 'unitary'] repeat a flag or come out of the order unitary, self_adjoint, normal, adjoint, recursion}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "A", repr = "dense", tag = "none", flags = ["normal", "unitary"]} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @adjoint_extents(%m: tensor<4x6xf32>) {
  // expected-error @+1 {{'tod.descriptor' result must be an operator 4 -> 6 of f32, got}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "A", repr = "dense", tag = "none", flags = ["adjoint"]} : (tensor<4x6xf32>) -> !tod.operator<6, 4, f32, f32>
  return
}

// -----

func.func @factor_ranks(%u: tensor<8x2xf32>, %s: tensor<3xf32>, %v: tensor<6x2xf32>) {
  // expected-error @+1 {{'tod.descriptor' U, S and V must have one rank r (U [Dout, r], S [r], V [Din, r]), got 2, 3, 2}}
  %0 = "tod.descriptor"(%u, %s, %v) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "factor", tag = "none", flags = [], decomposition = "svd"} : (tensor<8x2xf32>, tensor<3xf32>, tensor<6x2xf32>) -> !tod.operator<6, 8, f32, f32>
  return
}

// -----

func.func @blocksparse_coordinates(%b: tensor<3x2x2xf32>, %r: tensor<3xi64>, %c: tensor<3xi32>) {
  // expected-error @+1 {{'tod.descriptor' rows must be a tensor of 3 i32 block coordinates, got tensor<3xi64>}}
  %0 = "tod.descriptor"(%b, %r, %c) {operandSegmentSizes = array<i32: 1, 1, 1>, name = "A", repr = "blocksparse", tag = "none", flags = []} : (tensor<3x2x2xf32>, tensor<3xi64>, tensor<3xi32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @export_of_non_descriptor(%m: tensor<4x4xf32>) {
  %0 = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  // expected-error @+1 {{'tod.export' operator must be a tod.descriptor (the payload a caller reads), got tod.dense}}
  "tod.export"(%0) {name = "B"} : (!tod.operator<4, 4, f32, f32>) -> ()
  return
}

// -----

func.func @recursion_deeper_than_declared(%m: tensor<4x4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tod.descriptor' is applied 3 times, more than its declared recursion depth 2}}
  %0 = "tod.descriptor"(%m) {operandSegmentSizes = array<i32: 1, 0, 0>, name = "R", repr = "dense", tag = "none", flags = ["recursion"], frame_bytes = 16, depth = 2} : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  %1 = "tod.apply"(%0, %x) : (!tod.operator<4, 4, f32, f32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "tod.apply"(%0, %1) : (!tod.operator<4, 4, f32, f32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "tod.apply"(%0, %2) : (!tod.operator<4, 4, f32, f32>, tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}
