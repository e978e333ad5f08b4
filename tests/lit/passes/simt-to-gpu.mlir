// tessera-simt-to-gpu: launch queries and warp shuffles become gpu ops; narrow values shuffle as i32.
// RUN: tessera-opt %s --tessera-simt-to-gpu | FileCheck %s

// CHECK:       module attributes {gpu.container_module}
// CHECK:       gpu.module @tessera_kernels
// CHECK-LABEL: gpu.func @butterfly(%[[X:[^:]+]]: !llvm.ptr<1>, %[[N:[^:]+]]: i64) kernel
// CHECK:         %[[V:.+]] = memref.load
// CHECK:         %[[BITS:.+]] = arith.bitcast %[[V]] : f16 to i16
// CHECK:         %[[WIDE:.+]] = arith.extui %[[BITS]] : i16 to i32
// CHECK:         %[[S:.+]], %{{.+}} = gpu.shuffle xor %[[WIDE]], %{{.+}}, %{{.+}} : i32
// CHECK:         %[[NARROW:.+]] = arith.trunci %[[S]] : i32 to i16
// CHECK:         arith.bitcast %[[NARROW]] : i16 to f16
// CHECK:         gpu.shuffle down %{{.+}}, %{{.+}}, %{{.+}} : i64
// The global warp index: linear block index times warps per block, plus the warp in the block.
// CHECK:         arith.ceildivui %{{.+}}, %{{.+}} : index
// CHECK:         arith.divui %{{.+}}, %{{.+}} : index
// CHECK:         gpu.return
func.func @butterfly(%X: memref<?xf16> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf16>
  %c4 = arith.constant 4 : index
  %s = "ttile.shuffle_xor"(%v, %c4) : (f16, index) -> f16
  %wide = arith.constant 7 : i64
  %t = "ttile.shuffle_down"(%wide, %c4) : (i64, index) -> i64
  %w = "ttile.warp_id"() : () -> index
  memref.store %s, %X[%w] : memref<?xf16>
  return
}
