// What the fragment lowering refuses, reported at the op.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(tessera-tile-mma{wave=32})'

gpu.module @tessera_kernels {
  gpu.func @loop_carried(%C: memref<16x16xf32>, %n: index) workgroup(%sA: memref<16x16xf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{a fragment may be used only by ttile.mma and ttile.store_fragment in the block that makes it, not by 'scf.for' (a loop-carried accumulator, say): carry it through memory instead}}
    %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[16, 16], f32, "acc">
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%x = %acc) -> (!ttile.fragment<[16, 16], f32, "acc">) {
      scf.yield %x : !ttile.fragment<[16, 16], f32, "acc">
    }
    gpu.return
  }
}

// -----

gpu.module @tessera_kernels {
  gpu.func @too_wide(%C: memref<16x64xf32>) workgroup(%sA: memref<16x16xf16, #gpu.address_space<workgroup>>, %sB: memref<16x64xf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : f32
    %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[16, 64], f32, "acc">
    %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<16x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], f16, "a">
    %b = "ttile.ldmatrix"(%sB, %c0, %c0) : (memref<16x64xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 64], f16, "b">
    // expected-error @+1 {{an 16x64 accumulator has no FMA layout on 32 lanes: its columns must divide the wave and its rows be a multiple of 32 / columns}}
    %d = "ttile.mma"(%a, %b, %acc) {shape = [16, 16, 16]} : (!ttile.fragment<[16, 16], f16, "a">, !ttile.fragment<[16, 64], f16, "b">, !ttile.fragment<[16, 64], f32, "acc">) -> !ttile.fragment<[16, 64], f32, "acc">
    "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[16, 64], f32, "acc">, memref<16x64xf32>, index, index) -> ()
    gpu.return
  }
}
