// The atomics and the fence parse, print and parse again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @atomics
func.func @atomics(%h: memref<?x?xi32>, %f: memref<?xf32, #gpu.address_space<workgroup>>, %l: memref<?xi64>, %i: index, %v: i32, %x: f32, %c: i64, %n: i64) -> (i32, f32, i64) {
  // CHECK: "ttile.atomic_rmw"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) {kind = "max", order = "release", scope = "system"} : (i32, memref<?x?xi32>, index, index) -> i32
  %0 = "ttile.atomic_rmw"(%v, %h, %i, %i) {kind = "max", order = "release", scope = "system"} : (i32, memref<?x?xi32>, index, index) -> i32
  // CHECK: "ttile.atomic_rmw"(%{{.+}}, %{{.+}}, %{{.+}}) {kind = "add", order = "relaxed", scope = "block"} : (f32, memref<?xf32, #gpu.address_space<workgroup>>, index) -> f32
  %1 = "ttile.atomic_rmw"(%x, %f, %i) {kind = "add", order = "relaxed", scope = "block"} : (f32, memref<?xf32, #gpu.address_space<workgroup>>, index) -> f32
  // CHECK: "ttile.atomic_cas"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) {order = "seq_cst", scope = "device"} : (i64, i64, memref<?xi64>, index) -> i64
  %2 = "ttile.atomic_cas"(%c, %n, %l, %i) {order = "seq_cst", scope = "device"} : (i64, i64, memref<?xi64>, index) -> i64
  // CHECK: "ttile.fence"() {order = "acquire", scope = "block"} : () -> ()
  "ttile.fence"() {order = "acquire", scope = "block"} : () -> ()
  return %0, %1, %2 : i32, f32, i64
}

// CHECK-LABEL: func.func @float_max
func.func @float_max(%m: memref<?xf32>, %i: index, %x: f32) -> f32 {
  // CHECK: "ttile.atomic_rmw"(%{{.+}}, %{{.+}}, %{{.+}}) {kind = "max", order = "seq_cst", scope = "device"} : (f32, memref<?xf32>, index) -> f32
  %0 = "ttile.atomic_rmw"(%x, %m, %i) {kind = "max", order = "seq_cst", scope = "device"} : (f32, memref<?xf32>, index) -> f32
  return %0 : f32
}
