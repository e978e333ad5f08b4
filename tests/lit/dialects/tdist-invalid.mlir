// One case per tdist verifier rule.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @mesh_lengths(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' mesh_axes ['dp'] and mesh_shape [4, 2] must be non-empty and of equal length}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4, 2], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @mesh_sizes(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' mesh axes must be distinct with positive sizes}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp", "dp"], mesh_shape = [4, 2], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @mesh_axis(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' axis 'tp' is not an axis of the mesh}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "tp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @algo(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' algo must be one of ring, tree, binary_tree, auto, got 'butterfly'}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "butterfly", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @bucket(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' bucket_bytes must be non-negative}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "ring", deterministic = false, bucket_bytes = -1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @reduction(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' reduction must be one of sum, max, min, mean, prod, got 'xor'}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "xor", algo = "ring", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @ranked(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' operand and result must be ranked tensors}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @element_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' the element type must be kept: f32 -> f16}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<8xf16>
  return
}

// -----

func.func @all_reduce_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' result type tensor<4xf32> must equal the input type tensor<8xf32>}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @gather_dim(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_gather' dim 1 must be an axis of the rank-1 tensor, kept in the result}}
  %r = "tdist.all_gather"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", dim = 1 : i64} : (tensor<8xf32>) -> tensor<32xf32>
  return
}

// -----

func.func @gather_shape(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_gather' result shape [16] must be [32]}}
  %r = "tdist.all_gather"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", dim = 0 : i64} : (tensor<8xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @scatter_divisible(%x: tensor<6xf32>) {
  // expected-error @+1 {{'tdist.reduce_scatter' extent 6 of dim 0 is not divisible by the 4 devices of the axis}}
  %r = "tdist.reduce_scatter"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", dim = 0 : i64, op = "sum", algo = "ring", deterministic = false} : (tensor<6xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @broadcast_root(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.broadcast' root 4 is not a device of the axis (0..3)}}
  %r = "tdist.broadcast"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", root = 4 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @broadcast_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.broadcast' result type tensor<8x1xf32> must equal the input type tensor<8xf32>}}
  %r = "tdist.broadcast"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", root = 0 : i64} : (tensor<8xf32>) -> tensor<8x1xf32>
  return
}

// -----

func.func @attribute_kind(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_gather' has an attribute of the wrong kind}}
  %r = "tdist.all_gather"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = 3 : i64, dim = 0 : i64} : (tensor<8xf32>) -> tensor<32xf32>
  return
}

// -----

func.func @chunk_weights_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' tessera.chunk_weights must be a non-empty array of positive integers, one per chunk (tessera.chunks of them), got [6, 1]}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64, tessera.chunks = 3 : i64, tessera.chunk_weights = [6, 1]} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @chunk_weights_zero(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' tessera.chunk_weights must be a non-empty array of positive integers, one per chunk (tessera.chunks of them), got [6, 0]}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64, tessera.chunks = 2 : i64, tessera.chunk_weights = [6, 0]} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @chunk_weights_kind(%x: tensor<8xf32>) {
  // expected-error @+1 {{'tdist.all_reduce' tessera.chunk_weights must be a non-empty array of positive integers, one per chunk (tessera.chunks of them), got "6"}}
  %r = "tdist.all_reduce"(%x) {mesh_axes = ["dp"], mesh_shape = [4], axis = "dp", op = "sum", algo = "auto", deterministic = false, bucket_bytes = 0 : i64, tessera.chunks = 2 : i64, tessera.chunk_weights = "6"} : (tensor<8xf32>) -> tensor<8xf32>
  return
}
