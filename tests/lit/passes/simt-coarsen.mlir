// Elementwise SIMT kernels do 16 bytes of consecutive elements per thread (passes/simt_coarsen.py); every
// other kernel is left as written.
// RUN: tessera-opt %s --split-input-file --tessera-simt-coarsen | FileCheck %s

// saxpy: four f32 per thread, one vector access per tensor when the chunk is in bounds and aligned, else the
// elements one by one, each under the kernel's own guard against min(n, the threads asked for).
// CHECK-LABEL: func.func @saxpy(
// CHECK-SAME:    attributes {tessera.coarsen = 4 : i64, tessera.kernel}
// CHECK:         %[[T:.+]] = "ttile.thread_id"() {dim = 0 : i64} : () -> index
// CHECK:         %[[DIM:.+]] = memref.dim
// CHECK:         %[[CALLER:.+]] = builtin.unrealized_conversion_cast to index {tessera.launched_threads}
// CHECK:         %[[BOUND:.+]] = arith.minsi %[[DIM]], %[[CALLER]] : index
// CHECK:         %[[BASE:.+]] = arith.muli %[[T]], %[[C4:.+]] : index
// CHECK:         %[[END:.+]] = arith.addi %[[BASE]], %[[C4]] : index
// CHECK:         %[[WHOLE:.+]] = arith.cmpi sle, %[[END]], %[[BOUND]] : index
// CHECK:         memref.extract_aligned_pointer_as_index
// CHECK:         arith.andi %{{.+}}, %c15
// CHECK:         scf.if
// CHECK:           %[[X:.+]] = vector.load %{{.+}}[%[[BASE]]] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// CHECK-COUNT-4:   vector.extract %[[X]]
// CHECK-COUNT-4:   arith.mulf
// CHECK:           vector.load %{{.+}}[%[[BASE]]] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// CHECK-COUNT-4:   arith.addf
// CHECK:           %[[V:.+]] = vector.from_elements
// CHECK:           vector.store %[[V]], %{{.+}}[%[[BASE]]] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// CHECK:         } else {
// CHECK:           arith.cmpi slt, %[[BASE]], %[[BOUND]] : index
// CHECK:           scf.if
// CHECK:             memref.load
// CHECK-COUNT-3:   arith.cmpi slt, %{{.+}}, %[[BOUND]] : index
// CHECK-NOT:     vector.
// CHECK:         return
func.func @saxpy(%a: f32 {tessera.name = "a"}, %X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"},
                 %Y: memref<?xf32> {tessera.dims = ["N"], tessera.name = "Y"},
                 %O: memref<?xf32> {tessera.dims = ["N"], tessera.name = "Out"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %n = memref.dim %X, %c0 : memref<?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %x = memref.load %X[%i] : memref<?xf32>
    %ax = arith.mulf %a, %x : f32
    %y = memref.load %Y[%i] : memref<?xf32>
    %r = arith.addf %ax, %y : f32
    memref.store %r, %O[%i] : memref<?xf32>
  }
  return
}

// -----

// 16-bit elements: eight per thread; an unsigned guard stays unsigned.
// CHECK-LABEL: func.func @scale_f16(
// CHECK-SAME:    tessera.coarsen = 8 : i64
// CHECK:         arith.minui
// CHECK:         arith.cmpi ule
// CHECK:         vector.load %{{.+}} {alignment = 16 : i64} : memref<?xf16>, vector<8xf16>
// CHECK:         vector.store %{{.+}} {alignment = 16 : i64} : memref<?xf16>, vector<8xf16>
func.func @scale_f16(%X: memref<?xf16> {tessera.dims = ["N"], tessera.name = "X"}, %n: index {tessera.name = "n"})
    attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %in = arith.cmpi ult, %i, %n : index
  scf.if %in {
    %x = memref.load %X[%i] : memref<?xf16>
    %y = arith.addf %x, %x : f16
    memref.store %y, %X[%i] : memref<?xf16>
  }
  return
}

// -----

// A warp shuffle: lanes read each other's values, so the kernel keeps one element per thread.
// CHECK-LABEL: func.func @shuffle(
// CHECK-NOT:     tessera.coarsen
// CHECK:         "ttile.shuffle_down"
// CHECK-NOT:     vector.
func.func @shuffle(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %X, %c0 : memref<?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %x = memref.load %X[%i] : memref<?xf32>
    %s = "ttile.shuffle_down"(%x, %c1) : (f32, index) -> f32
    memref.store %s, %X[%i] : memref<?xf32>
  }
  return
}

// -----

// A barrier orders the block's threads: not coarsened.
// CHECK-LABEL: func.func @barrier(
// CHECK-NOT:     tessera.coarsen
// CHECK:         "ttile.barrier"
func.func @barrier(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %n = memref.dim %X, %c0 : memref<?xf32>
  "ttile.barrier"() : () -> ()
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %x = memref.load %X[%i] : memref<?xf32>
    memref.store %x, %X[%i] : memref<?xf32>
  }
  return
}

// -----

// X[2i]: the index is not the thread's own element, so not coarsened.
// CHECK-LABEL: func.func @strided(
// CHECK-NOT:     tessera.coarsen
// CHECK-NOT:     vector.
func.func @strided(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %X, %c0 : memref<?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %j = arith.muli %i, %c2 : index
    %x = memref.load %X[%j] : memref<?xf32>
    memref.store %x, %X[%i] : memref<?xf32>
  }
  return
}

// -----

// Unguarded: the kernel as written may read past n on purpose (the caller's grid bounds it); not coarsened.
// CHECK-LABEL: func.func @unguarded(
// CHECK-NOT:     tessera.coarsen
func.func @unguarded(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %x = memref.load %X[%i] : memref<?xf32>
  memref.store %x, %X[%i] : memref<?xf32>
  return
}

// -----

// A generated kernel of one row (kernelgen._one_row): [0, i] of a row-major [R, C] tensor is element i too.
// CHECK-LABEL: func.func @one_row(
// CHECK-SAME:    tessera.coarsen = 4 : i64
// CHECK:         vector.load %{{.+}}[%{{.+}}, %{{.+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// CHECK:         vector.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
func.func @one_row(%I: memref<?x?xf32> {tessera.dims = ["R", "C"], tessera.name = "I0"},
                   %O: memref<?x?xf32> {tessera.dims = ["R", "C"], tessera.name = "O0"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c1 = arith.constant 1 : index
  %n = memref.dim %O, %c1 : memref<?x?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %c0 = arith.constant 0 : index
    %x = memref.load %I[%c0, %i] : memref<?x?xf32>
    %y = arith.mulf %x, %x : f32
    memref.store %y, %O[%c0, %i] : memref<?x?xf32>
  }
  return
}

// -----

// [1, i]: another row's element, not i: not coarsened.
// CHECK-LABEL: func.func @second_row(
// CHECK-NOT:     tessera.coarsen
// CHECK-NOT:     vector.
func.func @second_row(%O: memref<?x?xf32> {tessera.dims = ["R", "C"], tessera.name = "O0"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c1 = arith.constant 1 : index
  %n = memref.dim %O, %c1 : memref<?x?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %f = arith.constant 1.0 : f32
    memref.store %f, %O[%c1, %i] : memref<?x?xf32>
  }
  return
}
