// Warp fragments (ttile.fill/ldmatrix/mma/store_fragment) as MFMA on AMD CDNA and as vector FMAs elsewhere.
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-tile-mma{wave=64 matrix=mfma},canonicalize,cse)' | FileCheck %s --check-prefix=MFMA
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-tile-mma{wave=32},canonicalize,cse)' | FileCheck %s --check-prefix=FMA
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-tile-mma{wave=32 matrix=wmma},canonicalize,cse)' | FileCheck %s --check-prefix=WMMA

module attributes {gpu.container_module} {
  gpu.module @tessera_kernels {
    // A 64x32 accumulator from 64x16 and 16x32 f16 tiles in instructions of 32x32x8: 2 row tiles x 2 k
    // tiles = 4 MFMAs, each lane holding 32 of its elements and reading A at (lane % 32 [+ 32], 4 (lane / 32) + r [+ 8]).
    // MFMA-LABEL: gpu.func @f16_32x32x8(
    // MFMA:         %[[LANE:.+]] = gpu.lane_id
    // MFMA-DAG:     %[[ROW:.+]] = arith.remui %[[LANE]], %c32 : index
    // MFMA-DAG:     %[[HALF:.+]] = arith.divui %[[LANE]], %c32 : index
    // MFMA-DAG:     %[[COL:.+]] = arith.muli %[[HALF]], %c4 : index
    // MFMA:         memref.load %{{.+}}[%[[ROW]], %[[COL]]] : memref<64x16xf16, #gpu.address_space<workgroup>>
    // MFMA-COUNT-4: llvm.call_intrinsic "llvm.amdgcn.mfma.f32.32x32x8f16"({{.*}}) : (vector<4xf16>, vector<4xf16>, vector<16xf32>, i32, i32, i32) -> vector<16xf32>
    // MFMA-NOT:     llvm.call_intrinsic
    // MFMA-COUNT-32: memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}] : memref<64x32xf32>
    // The same product on 32 lanes with FMAs: lane l owns column l of rows 0..63, 16 vector FMAs of 4 per
    // k step, 16 k steps.
    // FMA-LABEL:    gpu.func @f16_32x32x8(
    // FMA-NOT:      llvm.call_intrinsic
    // FMA-COUNT-256: math.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<4xf32>
    // FMA-NOT:      math.fma
    gpu.func @f16_32x32x8(%C: memref<64x32xf32>)
        workgroup(%sA: memref<64x16xf16, #gpu.address_space<workgroup>>, %sB: memref<16x32xf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[64, 32], f32, "acc">
      %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<64x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[64, 16], f16, "a">
      %b = "ttile.ldmatrix"(%sB, %c0, %c0) : (memref<16x32xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 32], f16, "b">
      %d = "ttile.mma"(%a, %b, %acc) {shape = [32, 32, 8]} : (!ttile.fragment<[64, 16], f16, "a">, !ttile.fragment<[16, 32], f16, "b">, !ttile.fragment<[64, 32], f32, "acc">) -> !ttile.fragment<[64, 32], f32, "acc">
      "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[64, 32], f32, "acc">, memref<64x32xf32>, index, index) -> ()
      gpu.return
    }

    // bf16 through the 1k MFMAs, whose operands are i16 bit patterns; 16x16x16 keeps 4 f32 per lane.
    // MFMA-LABEL: gpu.func @bf16_16x16x16(
    // MFMA:         arith.bitcast %{{.+}} : bf16 to i16
    // MFMA:         llvm.call_intrinsic "llvm.amdgcn.mfma.f32.16x16x16bf16.1k"({{.*}}) : (vector<4xi16>, vector<4xi16>, vector<4xf32>, i32, i32, i32) -> vector<4xf32>
    // RDNA 3: one WMMA, A and B replicated in the two half-waves, 8 f32 per lane; the 32x32x8 product above
    // has no WMMA and stays FMAs.
    // WMMA-LABEL: gpu.func @f16_32x32x8(
    // WMMA-NOT:     llvm.call_intrinsic
    // WMMA:         math.fma
    // WMMA-LABEL: gpu.func @bf16_16x16x16(
    // WMMA:         llvm.call_intrinsic "llvm.amdgcn.wmma.f32.16x16x16.bf16"({{.*}}) : (vector<16xi16>, vector<16xi16>, vector<8xf32>) -> vector<8xf32>
    // FMA-LABEL:  gpu.func @bf16_16x16x16(
    // FMA:          arith.extf %{{.+}} : bf16 to f32
    // FMA:          math.fma
    gpu.func @bf16_16x16x16(%C: memref<16x16xf32>)
        workgroup(%sA: memref<16x16xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[16, 16], f32, "acc">
      %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<16x16xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "a">
      %b = "ttile.ldmatrix"(%sA, %c0, %c0) {transpose} : (memref<16x16xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "b">
      %d = "ttile.mma"(%a, %b, %acc) {shape = [16, 16, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 16], bf16, "b">, !ttile.fragment<[16, 16], f32, "acc">) -> !ttile.fragment<[16, 16], f32, "acc">
      "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[16, 16], f32, "acc">, memref<16x16xf32>, index, index) -> ()
      gpu.return
    }
  }
}
