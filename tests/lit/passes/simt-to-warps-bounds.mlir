// tessera-simt-to-warps{bounds-checks=true}: accesses not provably within their tensor's extents are checked;
// a failing check masks the lanes off and records the block's report (tensor and source line) in its slot.
// RUN: tessera-opt %s --split-input-file --pass-pipeline='builtin.module(tessera-simt-to-warps{warp-size=8 bounds-checks=true})' | FileCheck %s

// Guarded by `i < X.shape[0]`, and Out shares X's extent N: nothing to check, and the warps run unguarded.
// CHECK-LABEL: func.func @proven(
// CHECK-SAME:    %{{[^:]+}}: index, %[[SLOT:[^:]+]]: memref<1xindex>) attributes
// CHECK-NOT:     memref.get_global
// CHECK-NOT:     memref.load %[[SLOT]]
// CHECK:         return
func.func @proven(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"},
                  %Out: memref<?xf32> {tessera.dims = ["N"], tessera.name = "Out"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %n = memref.dim %X, %c0 : memref<?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %x = memref.load %X[%i] : memref<?xf32>
    memref.store %x, %Out[%i] : memref<?xf32>
  }
  return
}

// -----

// Out has its own extent M: its store is checked. The fast path adds one scalar compare (the last lane below
// M: the first, a thread id, is non-negative); the masked path masks off the lanes outside and reports when
// an active one was.
// CHECK:       memref.global "private" constant @[[REPORT:__tessera_oob_other_extent_0]] : memref<{{[0-9]+}}xi8>
// CHECK-LABEL: func.func @other_extent(
// CHECK-SAME:    %[[OUT:[^:]+]]: memref<?xf32> {tessera.dims = ["M"], tessera.name = "Out"}
// CHECK-SAME:    %[[SLOT:[^:]+]]: memref<1xindex>) attributes
// CHECK:         scf.for
// CHECK:           %[[PRIOR:.+]] = memref.load %[[SLOT]][%{{.+}}] : memref<1xindex>
// CHECK:           %[[CLEAR:.+]] = arith.cmpi eq, %[[PRIOR]], %{{.+}} : index
// CHECK:           scf.if %[[CLEAR]] {
// CHECK-NOT:         memref.load %{{.+}}[%{{.+}}] : memref<1xindex>
// CHECK:             %[[M:.+]] = memref.dim %[[OUT]]
// CHECK:             %[[LAST:.+]] = arith.addi %[[BASE:.+]], %c7 : index
// CHECK-NEXT:        %[[LAST_IN:.+]] = arith.cmpi ult, %[[LAST]], %[[M]] : index
// CHECK-NEXT:        %[[FAST:.+]] = arith.andi %{{.+}}, %[[LAST_IN]] : i1
// CHECK-NEXT:        scf.if %[[FAST]] {
// CHECK:               vector.store %{{.+}}, %[[OUT]][%[[BASE]]]
// CHECK:             } else {
// CHECK:               %[[LANES_IN:.+]] = arith.cmpi ult, %{{.+}}, %{{.+}} : vector<8xindex>
// CHECK:               %[[SAFE:.+]] = arith.andi %[[MASK:.+]], %[[LANES_IN]] : vector<8xi1>
// CHECK:               %[[OUTSIDE:.+]] = arith.xori %[[MASK]], %[[SAFE]] : vector<8xi1>
// CHECK:               %[[ANY:.+]] = vector.reduction <or>, %[[OUTSIDE]] : vector<8xi1> into i1
// CHECK:               scf.if %[[ANY]] {
// CHECK:                 scf.if
// CHECK:                   %[[TEXT:.+]] = memref.get_global @[[REPORT]]
// CHECK:                   %[[ADDR:.+]] = memref.extract_aligned_pointer_as_index %[[TEXT]]
// CHECK:                   memref.store %[[ADDR]], %[[SLOT]]
// CHECK:               vector.maskedstore %[[OUT]][%[[BASE]]], %[[SAFE]]
func.func @other_extent(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"},
                        %Out: memref<?xf32> {tessera.dims = ["M"], tessera.name = "Out"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %n = memref.dim %X, %c0 : memref<?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %x = memref.load %X[%i] : memref<?xf32>
    memref.store %x, %Out[%i] : memref<?xf32> loc("k.py":14:9)
  }
  return
}

// -----

// The report names the tensor and the source line: "tensor 'Out' accessed outside its extents at k.py:14".
// CHECK: memref.global "private" constant @__tessera_oob_report_text_0 : memref<53xi8> = dense<[116, 101, 110, 115, 111, 114, 32, 39, 79, 117, 116, 39, 32, 97, 99, 99, 101, 115, 115, 101, 100, 32, 111, 117, 116, 115, 105, 100, 101, 32, 105, 116, 115, 32, 101, 120, 116, 101, 110, 116, 115, 32, 97, 116, 32, 107, 46, 112, 121, 58, 49, 52, 0]>
func.func @report_text(%Out: memref<?xf32> {tessera.dims = ["M"], tessera.name = "Out"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c1 = arith.constant 1 : index
  %j = arith.addi %i, %c1 : index
  %v = arith.constant 1.0 : f32
  memref.store %v, %Out[%j] : memref<?xf32> loc("k.py":14:9)
  return
}

// -----

// A guard proves nothing of an index that may be negative (i - 1), nor of another dimension; a loop over
// range(X.shape[1]) proves its induction variable below that extent. A uniform access at the kernel's top
// level is one scalar check.
// CHECK-LABEL: func.func @facts(
// CHECK:         scf.if %{{.+}} -> (f32) {
// CHECK:           memref.load %{{.+}}[%{{.+}}, %{{.+}}] : memref<?x?xf32>
// CHECK:         } else {
// CHECK:           memref.get_global @__tessera_oob_facts_0
// CHECK:         scf.for
// CHECK-NOT:       memref.get_global
// CHECK:           vector.gather
// CHECK:         memref.get_global @__tessera_oob_facts_1
// CHECK:         vector.gather
func.func @facts(%X: memref<?x?xf32> {tessera.dims = ["N", "K"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %first = memref.load %X[%c0, %c5] : memref<?x?xf32> loc("k.py":3:1)
  %n = memref.dim %X, %c0 : memref<?x?xf32>
  %k = memref.dim %X, %c1 : memref<?x?xf32>
  %in = arith.cmpi slt, %i, %n : index
  scf.if %in {
    %s = scf.for %j = %c0 to %k step %c1 iter_args(%acc = %first) -> (f32) {
      %x = memref.load %X[%i, %j] : memref<?x?xf32>
      %a = arith.addf %acc, %x : f32
      scf.yield %a : f32
    }
    %p = arith.subi %i, %c1 : index
    %y = memref.load %X[%p, %c0] : memref<?x?xf32> loc("k.py":9:1)
    %z = arith.addf %s, %y : f32
    memref.store %z, %X[%i, %c0] : memref<?x?xf32>
  }
  return
}
