// Every ttile op parses, prints and parses again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @launch_queries
func.func @launch_queries() -> (index, index, index, index, index) {
  // CHECK: "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %0 = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  // CHECK: "ttile.local_id"() {dim = 1 : i64} : () -> index
  %1 = "ttile.local_id"() {dim = 1 : i64} : () -> index
  // CHECK: "ttile.block_id"() {dim = 2 : i64} : () -> index
  %2 = "ttile.block_id"() {dim = 2 : i64} : () -> index
  // CHECK: "ttile.block_dim"() {dim = 0 : i64} : () -> index
  %3 = "ttile.block_dim"() {dim = 0 : i64} : () -> index
  // CHECK: "ttile.grid_dim"() {dim = 0 : i64} : () -> index
  %4 = "ttile.grid_dim"() {dim = 0 : i64} : () -> index
  return %0, %1, %2, %3, %4 : index, index, index, index, index
}

// CHECK-LABEL: func.func @warp_ops
// CHECK-SAME:    (%[[V:.+]]: f32, %[[OFF:.+]]: index)
func.func @warp_ops(%v: f32, %off: index) -> (index, index, index, f32) {
  // CHECK: "ttile.lane_id"() : () -> index
  %0 = "ttile.lane_id"() : () -> index
  // CHECK: "ttile.warp_id"() : () -> index
  %1 = "ttile.warp_id"() : () -> index
  // CHECK: "ttile.warp_size"() : () -> index
  %2 = "ttile.warp_size"() : () -> index
  // CHECK: "ttile.shuffle_down"(%[[V]], %[[OFF]]) : (f32, index) -> f32
  %3 = "ttile.shuffle_down"(%v, %off) : (f32, index) -> f32
  // CHECK: "ttile.shuffle_xor"(%[[V]], %[[OFF]]) : (f32, index) -> f32
  %4 = "ttile.shuffle_xor"(%v, %off) : (f32, index) -> f32
  return %0, %1, %2, %4 : index, index, index, f32
}

// CHECK-LABEL: func.func @philox
func.func @philox(%i: index) -> f32 {
  // CHECK: "ttile.philox_uniform"(%{{.+}}) {seed = 42 : ui64} : (index) -> f32
  %0 = "ttile.philox_uniform"(%i) {seed = 42 : ui64} : (index) -> f32
  return %0 : f32
}
