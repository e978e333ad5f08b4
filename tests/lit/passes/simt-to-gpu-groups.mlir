// tessera-simt-to-gpu on cooperative groups, barriers and lane reductions (NVIDIA's lowering; AMDGPU's and
// SPIR-V's differ only in the syncs: tests/lit/backends/*/groups.py). A group is a compile-time partition:
// its rank is the linear thread index modulo its size, its sync the block's barrier when it spans whole warps
// and bar.warp.sync on its lanes' mask within a warp; reductions are xor butterflies.
// RUN: tessera-opt %s --split-input-file --tessera-simt-to-gpu | FileCheck %s
// RUN: tessera-opt %s --split-input-file --tessera-simt-to-gpu=warp-size=64 | FileCheck %s --check-prefix=W64

// CHECK-LABEL: gpu.func @groups(
// CHECK-NOT:     ttile.cooperative_group
// CHECK:         gpu.barrier
// CHECK:         %[[LINEAR:.+]] = arith.addi %{{.+}}, %thread_id_x : index
// CHECK:         %[[C64:.+]] = arith.constant 64 : index
// CHECK:         arith.remui %[[LINEAR]], %[[C64]] : index
// CHECK:         %[[LANE:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK:         %[[FIRST:.+]] = arith.andi %[[LANE]], %{{.+}} : i32
// CHECK:         %[[MASK:.+]] = arith.shli %{{.+}}, %[[FIRST]] : i32
// CHECK:         llvm.call_intrinsic "llvm.nvvm.bar.warp.sync"(%[[MASK]]) : (i32) -> ()
// CHECK:         gpu.barrier
// With 64-lane waves the 64-thread group is one wave: a wave-level sync, no block barrier.
// W64-LABEL:   gpu.func @groups(
// W64:           gpu.barrier
// W64-NOT:       gpu.barrier
// W64:           llvm.call_intrinsic "llvm.nvvm.bar.warp.sync"
// W64:           llvm.call_intrinsic "llvm.nvvm.bar.warp.sync"
// W64:           gpu.return
func.func @groups(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %g = "ttile.cooperative_group"() : () -> !ttile.group<64 : i64>
  %q = "ttile.cooperative_group"() : () -> !ttile.group<4 : i64>
  "ttile.barrier"() : () -> ()
  %r = "ttile.thread_rank"(%g) : (!ttile.group<64 : i64>) -> index
  %one = arith.constant 1.0 : f32
  memref.store %one, %X[%r] : memref<?xf32>
  "ttile.group_sync"(%q) : (!ttile.group<4 : i64>) -> ()
  "ttile.group_sync"(%g) : (!ttile.group<64 : i64>) -> ()
  return
}

// -----

// warp_reduce: log2(W) xor steps from W/2 down; group_reduce of 8: steps 4, 2, 1; max is arith.maximumf, as
// on the CPU.
// CHECK-LABEL: gpu.func @reduce(
// CHECK:         %[[C16:.+]] = arith.constant 16 : i32
// CHECK:         %[[S:.+]], %{{.+}} = gpu.shuffle xor %[[V:.+]], %[[C16]], %{{.+}} : f32
// CHECK:         arith.maximumf %[[V]], %[[S]] : f32
// CHECK-COUNT-4: gpu.shuffle xor
// CHECK:         %[[C4:.+]] = arith.constant 4 : i32
// CHECK:         gpu.shuffle xor %{{.+}}, %[[C4]], %{{.+}} : f32
// CHECK:         arith.addf
// CHECK-COUNT-2: gpu.shuffle xor
// CHECK-NOT:     gpu.shuffle
// CHECK:         gpu.return
// W64-LABEL:   gpu.func @reduce(
// W64:           %[[C32:.+]] = arith.constant 32 : i32
// W64:           gpu.shuffle xor %{{.+}}, %[[C32]], %{{.+}} : f32
func.func @reduce(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  %m = "ttile.warp_reduce"(%v) {kind = "max"} : (f32) -> f32
  %s = "ttile.group_reduce"(%m) {kind = "sum", group_size = 8 : i64} : (f32) -> f32
  memref.store %s, %X[%i] : memref<?xf32>
  return
}

// -----

// A shared array becomes a workgroup attribution of the gpu.func (address space 3 after the NVVM and ROCDL
// conversions); a tile.cp_async store stays a load and a store here (cp.async needs the ptx backend's sm_80+).
// CHECK-LABEL: gpu.func @shared(
// CHECK-SAME:    workgroup(%[[S:.+]] : memref<64xf32, #gpu.address_space<workgroup>>)
// CHECK:         memref.store %{{.+}}, %[[S]][%{{.+}}] {tessera.cp_async} : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK:         gpu.barrier
// CHECK:         memref.load %[[S]]
func.func @shared(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %s = memref.alloca() : memref<64xf32, #gpu.address_space<workgroup>>
  %l = "ttile.local_id"() {dim = 0 : i64} : () -> index
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  memref.store %v, %s[%l] {tessera.cp_async} : memref<64xf32, #gpu.address_space<workgroup>>
  "ttile.barrier"() : () -> ()
  %w = memref.load %s[%l] : memref<64xf32, #gpu.address_space<workgroup>>
  memref.store %w, %X[%i] : memref<?xf32>
  return
}
