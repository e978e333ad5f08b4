// Every tdist op parses, prints and parses again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @collectives
// CHECK-SAME:    (%[[X:.+]]: tensor<16x64xf32>)
func.func @collectives(%x: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<64x64xf32>, tensor<4x64xf32>, tensor<16x64xf32>) {
  // CHECK: "tdist.all_reduce"(%[[X]]) {algo = "binary_tree", axis = "dp", bucket_bytes = 16777216 : i64, deterministic = true, mesh_axes = ["dp", "tp"], mesh_shape = [4, 2], op = "sum"}
  %a = "tdist.all_reduce"(%x) {mesh_axes = ["dp", "tp"], mesh_shape = [4, 2], axis = "dp", op = "sum", algo = "binary_tree", deterministic = true, bucket_bytes = 16777216 : i64} : (tensor<16x64xf32>) -> tensor<16x64xf32>
  // CHECK: "tdist.all_gather"(%[[X]]) {axis = "dp", dim = 0 : i64, mesh_axes = ["dp", "tp"], mesh_shape = [4, 2]} : (tensor<16x64xf32>) -> tensor<64x64xf32>
  %g = "tdist.all_gather"(%x) {mesh_axes = ["dp", "tp"], mesh_shape = [4, 2], axis = "dp", dim = 0 : i64} : (tensor<16x64xf32>) -> tensor<64x64xf32>
  // CHECK: "tdist.reduce_scatter"(%[[X]]) {algo = "ring", axis = "dp", deterministic = false, dim = 0 : i64, mesh_axes = ["dp", "tp"], mesh_shape = [4, 2], op = "max"} : (tensor<16x64xf32>) -> tensor<4x64xf32>
  %s = "tdist.reduce_scatter"(%x) {mesh_axes = ["dp", "tp"], mesh_shape = [4, 2], axis = "dp", dim = 0 : i64, op = "max", algo = "ring", deterministic = false} : (tensor<16x64xf32>) -> tensor<4x64xf32>
  // CHECK: "tdist.broadcast"(%[[X]]) {axis = "tp", mesh_axes = ["dp", "tp"], mesh_shape = [4, 2], root = 1 : i64}
  %b = "tdist.broadcast"(%x) {mesh_axes = ["dp", "tp"], mesh_shape = [4, 2], axis = "tp", root = 1 : i64} : (tensor<16x64xf32>) -> tensor<16x64xf32>
  return %a, %g, %s, %b : tensor<16x64xf32>, tensor<64x64xf32>, tensor<4x64xf32>, tensor<16x64xf32>
}
