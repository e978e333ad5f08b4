// tessera-simt-to-warps: per-lane values become vector<W x T>, lane-contiguous accesses masked loads and
// stores, varying `if` a lane mask, warp shuffles vector shuffles.
// RUN: tessera-opt %s --split-input-file --tessera-simt-to-warps=warp-size=8 | FileCheck %s

// CHECK-LABEL: func.func @saxpy(
// CHECK-SAME:    %[[A:[^:]+]]: f32 {tessera.name = "a"}
// CHECK-SAME:    %[[BIDX:[^:]+]]: index, %{{[^:]+}}: index, %{{[^:]+}}: index, %[[BDIMX:[^:]+]]: index
// CHECK-SAME:    attributes {tessera.kernel, tessera.warp_size = 8 : i32}
// CHECK:         %[[XW:.+]] = arith.ceildivui %[[BDIMX]], %{{.+}} : index
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             scf.for %[[W:.+]] = %{{.+}} to %[[XW]]
// CHECK:               %[[LANES:.+]] = vector.step : vector<8xindex>
// CHECK:               %[[ACTIVE:.+]] = arith.cmpi ult, %{{.+}}, %{{.+}} : vector<8xindex>
// CHECK:               %[[BASE:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK:               %[[IN:.+]] = arith.cmpi slt, %{{.+}}, %{{.+}} : vector<8xindex>
// CHECK:               %[[MASK:.+]] = arith.andi %[[ACTIVE]], %[[IN]] : vector<8xi1>
// CHECK:               %[[X:.+]] = vector.maskedload %{{.+}}[%[[BASE]]], %[[MASK]], %{{.+}} : memref<?xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK:               %[[AV:.+]] = vector.broadcast %[[A]] : f32 to vector<8xf32>
// CHECK:               arith.mulf %[[AV]], %[[X]] : vector<8xf32>
// CHECK:               vector.maskedstore %{{.+}}[%[[BASE]]], %[[MASK]], %{{.+}} : memref<?xf32>, vector<8xi1>, vector<8xf32>
func.func @saxpy(%a: f32 {tessera.name = "a"},
                 %X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"},
                 %Out: memref<?xf32> {tessera.dims = ["N"], tessera.name = "Out"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %n = memref.dim %X, %c0 : memref<?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %x = memref.load %X[%i] : memref<?xf32>
    %y = arith.mulf %a, %x : f32
    memref.store %y, %Out[%i] : memref<?xf32>
  }
  return
}

// -----

// CHECK-LABEL: func.func @shuffle(
// CHECK:         %[[V:.+]] = vector.maskedload
// CHECK:         vector.shuffle %[[V]], %[[V]] [2, 3, 4, 5, 6, 7, 6, 7] : vector<8xf32>, vector<8xf32>
func.func @shuffle(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"},
                   %Out: memref<?xf32> {tessera.dims = ["N"], tessera.name = "Out"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  %c2 = arith.constant 2 : index
  %s = "ttile.shuffle_down"(%v, %c2) : (f32, index) -> f32
  memref.store %s, %Out[%i] : memref<?xf32>
  return
}

// -----

// A varying if with a result is predicated: both sides run and a select merges them.
// CHECK-LABEL: func.func @select_merge(
// CHECK:         %[[C:.+]] = arith.cmpf ogt, %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK:         arith.select %[[C]], %{{.+}}, %{{.+}} : vector<8xi1>, vector<8xf32>
func.func @select_merge(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  %zero = arith.constant 0.0 : f32
  %pos = arith.cmpf ogt, %v, %zero : f32
  %r = scf.if %pos -> (f32) {
    scf.yield %v : f32
  } else {
    scf.yield %zero : f32
  }
  memref.store %r, %X[%i] : memref<?xf32>
  return
}

// -----

// A uniform store index under the warp's mask becomes a scatter (the address may be out of bounds for
// inactive lanes, so it cannot be an unmasked store).
// CHECK-LABEL: func.func @per_warp(
// CHECK:         vector.scatter
func.func @per_warp(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %lane = "ttile.lane_id"() : () -> index
  %w = "ttile.warp_id"() : () -> index
  %c0 = arith.constant 0 : index
  %first = arith.cmpi eq, %lane, %c0 : index
  scf.if %first {
    %one = arith.constant 1.0 : f32
    memref.store %one, %X[%w] : memref<?xf32>
  }
  return
}

// -----

// Regression: a uniform op with operands is rebuilt on the lowered values (it used to be cloned with the
// erased kernel's operands). A loop-carried value the body keeps uniform stays a scalar iteration argument.
// CHECK-LABEL: func.func @uniform_carried(
// CHECK:         %[[HALF:.+]] = arith.floordivsi %{{.+}}, %{{.+}} : index
// CHECK:         scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[V:.+]] = %{{.+}}, %[[OFF:.+]] = %[[HALF]]) -> (vector<8xf32>, index)
// CHECK:           arith.floordivsi %[[OFF]], %{{.+}} : index
func.func @uniform_carried(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v0 = memref.load %X[%i] : memref<?xf32>
  %ws = "ttile.warp_size"() : () -> index
  %c2 = arith.constant 2 : index
  %half = arith.floordivsi %ws, %c2 : index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r:2 = scf.for %k = %c0 to %c3 step %c1 iter_args(%v = %v0, %off = %half) -> (f32, index) {
    %s = "ttile.shuffle_down"(%v, %off) : (f32, index) -> f32
    %sum = arith.addf %v, %s : f32
    %next = arith.floordivsi %off, %c2 : index
    scf.yield %sum, %next : f32, index
  }
  memref.store %r#0, %X[%i] : memref<?xf32>
  return
}
