// Warp fragments as cooperative matrices (matrix=coopmat: SPIR-V where Intel's matrix hardware is declared):
// one gpu.subgroup_mma_* op per 8x16x16 instruction tile, products of other shapes as vector FMAs.
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-tile-mma{wave=32 matrix=coopmat},canonicalize,cse)' | FileCheck %s

module attributes {gpu.container_module} {
  gpu.module @tessera_kernels {
    // A 16x32 accumulator from 16x32 and 32x32 f16 tiles: 2x2 accumulator tiles of 8x16, 2 k tiles each, so
    // 4 A tiles (rows 0/8, columns 0/16), 4 B tiles, 8 products in k order, 4 stores, all at the row stride 32.
    // CHECK-LABEL: gpu.func @f16_8x16x16(
    // CHECK-NOT:     gpu.lane_id
    // CHECK-DAG:     %[[C0:.+]] = arith.constant 0 : index
    // CHECK-DAG:     %[[C8:.+]] = arith.constant 8 : index
    // CHECK-DAG:     %[[C16:.+]] = arith.constant 16 : index
    // CHECK:         %[[ACC:.+]] = gpu.subgroup_mma_constant_matrix %{{.+}} : !gpu.mma_matrix<8x16xf32, "COp">
    // CHECK:         %[[A00:.+]] = gpu.subgroup_mma_load_matrix %[[SA:.+]][%[[C0]], %[[C0]]] {leadDimension = 32 : index} : memref<16x32xf16, #gpu.address_space<workgroup>> -> !gpu.mma_matrix<8x16xf16, "AOp">
    // CHECK:         %[[A01:.+]] = gpu.subgroup_mma_load_matrix %[[SA]][%[[C0]], %[[C16]]] {leadDimension = 32 : index}
    // CHECK:         %[[A10:.+]] = gpu.subgroup_mma_load_matrix %[[SA]][%[[C8]], %[[C0]]] {leadDimension = 32 : index}
    // CHECK:         %[[A11:.+]] = gpu.subgroup_mma_load_matrix %[[SA]][%[[C8]], %[[C16]]] {leadDimension = 32 : index}
    // CHECK:         %[[B00:.+]] = gpu.subgroup_mma_load_matrix %[[SB:.+]][%[[C0]], %[[C0]]] {leadDimension = 32 : index} : memref<32x32xf16, #gpu.address_space<workgroup>> -> !gpu.mma_matrix<16x16xf16, "BOp">
    // CHECK:         %[[B01:.+]] = gpu.subgroup_mma_load_matrix %[[SB]][%[[C0]], %[[C16]]]
    // CHECK:         %[[B10:.+]] = gpu.subgroup_mma_load_matrix %[[SB]][%[[C16]], %[[C0]]]
    // CHECK:         %[[B11:.+]] = gpu.subgroup_mma_load_matrix %[[SB]][%[[C16]], %[[C16]]]
    // CHECK:         %[[D0:.+]] = gpu.subgroup_mma_compute %[[A00]], %[[B00]], %[[ACC]] : !gpu.mma_matrix<8x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp"> -> !gpu.mma_matrix<8x16xf32, "COp">
    // CHECK:         %[[D00:.+]] = gpu.subgroup_mma_compute %[[A01]], %[[B10]], %[[D0]]
    // CHECK:         %[[D1:.+]] = gpu.subgroup_mma_compute %[[A00]], %[[B01]], %[[ACC]]
    // CHECK:         %[[D01:.+]] = gpu.subgroup_mma_compute %[[A01]], %[[B11]], %[[D1]]
    // CHECK-COUNT-4: gpu.subgroup_mma_compute
    // CHECK:         gpu.subgroup_mma_store_matrix %[[D00]], %{{.+}}[%[[C0]], %[[C0]]] {leadDimension = 32 : index} : !gpu.mma_matrix<8x16xf32, "COp">, memref<16x32xf32>
    // CHECK:         gpu.subgroup_mma_store_matrix %[[D01]], %{{.+}}[%[[C0]], %[[C16]]] {leadDimension = 32 : index}
    // CHECK-COUNT-2: gpu.subgroup_mma_store_matrix
    // CHECK-NOT:     math.fma
    gpu.func @f16_8x16x16(%C: memref<16x32xf32>)
        workgroup(%sA: memref<16x32xf16, #gpu.address_space<workgroup>>, %sB: memref<32x32xf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[16, 32], f32, "acc">
      %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<16x32xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 32], f16, "a">
      %b = "ttile.ldmatrix"(%sB, %c0, %c0) : (memref<32x32xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[32, 32], f16, "b">
      %d = "ttile.mma"(%a, %b, %acc) {shape = [8, 16, 16]} : (!ttile.fragment<[16, 32], f16, "a">, !ttile.fragment<[32, 32], f16, "b">, !ttile.fragment<[16, 32], f32, "acc">) -> !ttile.fragment<[16, 32], f32, "acc">
      "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[16, 32], f32, "acc">, memref<16x32xf32>, index, index) -> ()
      gpu.return
    }

    // bf16: loaded as f16 matrices from the bf16 memory seen as f16 (the placeholder the SPIR-V backend
    // types bf16). A transposed B (a K-major panel: element (i, j) at [j, i]) is column-major tiles; its
    // second tile (columns 16..31 of the fragment) starts at row 16. The leading index (a stage) is kept.
    // CHECK-LABEL: gpu.func @bf16_transposed(
    // CHECK-DAG:     %[[Z:.+]] = arith.constant 0 : index
    // CHECK-DAG:     %[[C16:.+]] = arith.constant 16 : index
    // CHECK:         %[[VA:.+]] = builtin.unrealized_conversion_cast %{{.+}} : memref<2x8x16xbf16, #gpu.address_space<workgroup>> to memref<2x8x16xf16, #gpu.address_space<workgroup>>
    // CHECK:         gpu.subgroup_mma_load_matrix %[[VA]][%[[S:[^,]+]], %[[Z]], %[[Z]]] {leadDimension = 16 : index} : memref<2x8x16xf16, #gpu.address_space<workgroup>> -> !gpu.mma_matrix<8x16xf16, "AOp">
    // CHECK:         %[[VB:.+]] = builtin.unrealized_conversion_cast %{{.+}} : memref<32x16xbf16, #gpu.address_space<workgroup>> to memref<32x16xf16, #gpu.address_space<workgroup>>
    // CHECK:         gpu.subgroup_mma_load_matrix %[[VB]][%[[Z]], %[[Z]]] {leadDimension = 16 : index, transpose} : memref<32x16xf16, #gpu.address_space<workgroup>> -> !gpu.mma_matrix<16x16xf16, "BOp">
    // CHECK:         gpu.subgroup_mma_load_matrix %[[VB]][%[[C16]], %[[Z]]] {leadDimension = 16 : index, transpose}
    // CHECK-COUNT-2: gpu.subgroup_mma_compute
    // CHECK-COUNT-2: gpu.subgroup_mma_store_matrix %{{.+}} {leadDimension = 32 : index}
    gpu.func @bf16_transposed(%C: memref<8x32xf32>, %s: index)
        workgroup(%sA: memref<2x8x16xbf16, #gpu.address_space<workgroup>>, %sB: memref<32x16xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[8, 32], f32, "acc">
      %a = "ttile.ldmatrix"(%sA, %s, %c0, %c0) : (memref<2x8x16xbf16, #gpu.address_space<workgroup>>, index, index, index) -> !ttile.fragment<[8, 16], bf16, "a">
      %b = "ttile.ldmatrix"(%sB, %c0, %c0) {transpose} : (memref<32x16xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 32], bf16, "b">
      %d = "ttile.mma"(%a, %b, %acc) {shape = [8, 16, 16]} : (!ttile.fragment<[8, 16], bf16, "a">, !ttile.fragment<[16, 32], bf16, "b">, !ttile.fragment<[8, 32], f32, "acc">) -> !ttile.fragment<[8, 32], f32, "acc">
      "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[8, 32], f32, "acc">, memref<8x32xf32>, index, index) -> ()
      gpu.return
    }

    // A shape without a cooperative form (16x16x16) stays vector FMAs on the declared device.
    // CHECK-LABEL: gpu.func @f16_16x16x16(
    // CHECK-NOT:     gpu.subgroup_mma
    // CHECK:         math.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<4xf32>
    gpu.func @f16_16x16x16(%C: memref<16x16xf32>)
        workgroup(%sA: memref<16x16xf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[16, 16], f32, "acc">
      %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<16x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], f16, "a">
      %b = "ttile.ldmatrix"(%sA, %c0, %c0) {transpose} : (memref<16x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], f16, "b">
      %d = "ttile.mma"(%a, %b, %acc) {shape = [16, 16, 16]} : (!ttile.fragment<[16, 16], f16, "a">, !ttile.fragment<[16, 16], f16, "b">, !ttile.fragment<[16, 16], f32, "acc">) -> !ttile.fragment<[16, 16], f32, "acc">
      "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[16, 16], f32, "acc">, memref<16x16xf32>, index, index) -> ()
      gpu.return
    }
  }
}
