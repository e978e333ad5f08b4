// tessera-cpu-to-llvm: a warp-vectorized kernel becomes LLVM dialect only; vector memory ops become masked
// intrinsics and per-lane libm calls are expanded (erf has no LLVM intrinsic).
// RUN: tessera-opt %s --tessera-simt-to-warps=warp-size=4 --tessera-cpu-to-llvm | FileCheck %s

// CHECK-LABEL: llvm.func @k(
// CHECK-NOT:     memref.
// CHECK-NOT:     {{(= |^ *)vector\.}}
// CHECK:         llvm.load %{{.+}} : !llvm.ptr -> vector<4xf32>
// CHECK:         llvm.intr.masked.load %{{.+}} -> vector<4xf32>
// CHECK-COUNT-4: llvm.call @erff
// CHECK:         llvm.store %{{.+}} : vector<4xf32>, !llvm.ptr
// CHECK:         llvm.intr.masked.store
// CHECK-NOT:     scf.
func.func @k(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  %e = math.erf %v : f32
  memref.store %e, %X[%i] : memref<?xf32>
  return
}
