// Cooperative groups, warp and group reductions and shared arrays on the CPU; a barrier splits the kernel into
// phases.
// RUN: tessera-opt %s --split-input-file --tessera-simt-to-warps=warp-size=8 | FileCheck %s

// A warp reduction is one vector reduction over the active lanes: a uniform scalar.
// CHECK-LABEL: func.func @warp_max(
// CHECK:         %[[M:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : vector<8xi1>, vector<8xf32>
// CHECK:         vector.reduction <maximumf>, %[[M]] : vector<8xf32> into f32
func.func @warp_max(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  %m = "ttile.warp_reduce"(%v) {kind = "max"} : (f32) -> f32
  memref.store %m, %X[%i] : memref<?xf32>
  return
}

// -----

// Groups of 4 lanes: butterfly steps 2 then 1.
// CHECK-LABEL: func.func @group_sum(
// CHECK:         vector.shuffle %{{.+}}, %{{.+}} [2, 3, 0, 1, 6, 7, 4, 5]
// CHECK:         vector.shuffle %{{.+}}, %{{.+}} [1, 0, 3, 2, 5, 4, 7, 6]
func.func @group_sum(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  %s = "ttile.group_reduce"(%v) {kind = "sum", group_size = 4 : i64} : (f32) -> f32
  memref.store %s, %X[%i] : memref<?xf32>
  return
}

// -----

// A group larger than the warp synchronizes by phases: two loops over the block's warps.
// CHECK-LABEL: func.func @phases(
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         memref.store %{{.+}}, %{{.+}}[%{{.+}}] : memref<?xf32>
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         arith.remui %{{.+}}, %{{.+}} : vector<8xindex>
// CHECK:         vector.scatter
func.func @phases(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %g = "ttile.cooperative_group"() : () -> !ttile.group<16 : i64>
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  memref.store %one, %X[%c0] : memref<?xf32>
  "ttile.group_sync"(%g) : (!ttile.group<16 : i64>) -> ()
  %r = "ttile.thread_rank"(%g) : (!ttile.group<16 : i64>) -> index
  memref.store %one, %X[%r] : memref<?xf32>
  return
}

// -----

// Philox-4x32-10 on the lanes' counters: ten rounds of 32x32->64 multiplies; keys are folded constants.
// CHECK-LABEL: func.func @philox(
// CHECK-COUNT-20: arith.mului_extended %{{.+}}, %{{.+}} : vector<8xi32>
// CHECK:         arith.shrui %{{.+}}, %{{.+}} : vector<8xi32>
// CHECK:         arith.uitofp %{{.+}} : vector<8xi32> to vector<8xf32>
func.func @philox(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %u = "ttile.philox_uniform"(%i) {seed = 42 : ui64} : (index) -> f32
  memref.store %u, %X[%i] : memref<?xf32>
  return
}

// -----

// A shared array is one buffer per block, made before the phases (every phase and warp sees it), with dynamic
// extents as a tensor parameter's; the workgroup alloca is gone.
// CHECK-LABEL: func.func @shared(
// CHECK:         %[[C64:.+]] = arith.constant 64 : index
// CHECK:         %[[BUF:.+]] = memref.alloca(%[[C64]]) : memref<?xf32>
// CHECK-NOT:     address_space<workgroup>
// CHECK:         scf.for
// CHECK:           vector.maskedstore %[[BUF]]
// CHECK:         scf.for
// CHECK:           vector.gather %[[BUF]]
func.func @shared(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %s = memref.alloca() : memref<64xf32, #gpu.address_space<workgroup>>
  %l = "ttile.local_id"() {dim = 0 : i64} : () -> index
  %one = arith.constant 1.0 : f32
  memref.store %one, %s[%l] : memref<64xf32, #gpu.address_space<workgroup>>
  "ttile.barrier"() : () -> ()
  %l2 = "ttile.local_id"() {dim = 0 : i64} : () -> index
  %c63 = arith.constant 63 : index
  %r = arith.subi %c63, %l2 : index
  %v = memref.load %s[%r] : memref<64xf32, #gpu.address_space<workgroup>>
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  memref.store %v, %X[%i] : memref<?xf32>
  return
}
