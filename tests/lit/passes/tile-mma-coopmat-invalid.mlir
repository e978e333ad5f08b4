// What the cooperative-matrix lowering refuses (the device was declared to have the hardware, the product
// has its shape, but the program asks for what cooperative matrices do not do), reported at the op.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(tessera-tile-mma{wave=32 matrix=coopmat})'

gpu.module @tessera_kernels {
  gpu.func @dynamic_row_stride(%C: memref<?x?xf32>) workgroup(%sA: memref<8x16xf16, #gpu.address_space<workgroup>>, %sB: memref<16x16xf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : f32
    %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[8, 16], f32, "acc">
    %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<8x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[8, 16], f16, "a">
    %b = "ttile.ldmatrix"(%sB, %c0, %c0) : (memref<16x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], f16, "b">
    %d = "ttile.mma"(%a, %b, %acc) {shape = [8, 16, 16]} : (!ttile.fragment<[8, 16], f16, "a">, !ttile.fragment<[16, 16], f16, "b">, !ttile.fragment<[8, 16], f32, "acc">) -> !ttile.fragment<[8, 16], f32, "acc">
    // expected-error @+1 {{a cooperative-matrix store needs memory with contiguous rows and a static row stride, got memref<?x?xf32>}}
    "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[8, 16], f32, "acc">, memref<?x?xf32>, index, index) -> ()
    gpu.return
  }
}

// -----

gpu.module @tessera_kernels {
  gpu.func @filled_a(%C: memref<8x16xf32>) workgroup(%sB: memref<16x16xf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f16
    %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[8, 16], f32, "acc">
    // expected-error @+1 {{fills a fragment of role 'a': on the cooperative-matrix path only accumulators are filled (load A and B with ttile.ldmatrix)}}
    %a = "ttile.fill"(%one) : (f16) -> !ttile.fragment<[8, 16], f16, "a">
    %b = "ttile.ldmatrix"(%sB, %c0, %c0) : (memref<16x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], f16, "b">
    %d = "ttile.mma"(%a, %b, %acc) {shape = [8, 16, 16]} : (!ttile.fragment<[8, 16], f16, "a">, !ttile.fragment<[16, 16], f16, "b">, !ttile.fragment<[8, 16], f32, "acc">) -> !ttile.fragment<[8, 16], f32, "acc">
    "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[8, 16], f32, "acc">, memref<8x16xf32>, index, index) -> ()
    gpu.return
  }
}

// -----

gpu.module @tessera_kernels {
  gpu.func @stored_b(%C: memref<8x16xf32>, %Bout: memref<16x16xf16>) workgroup(%sA: memref<8x16xf16, #gpu.address_space<workgroup>>, %sB: memref<16x16xf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : f32
    %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[8, 16], f32, "acc">
    %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<8x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[8, 16], f16, "a">
    %b = "ttile.ldmatrix"(%sB, %c0, %c0) : (memref<16x16xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], f16, "b">
    %d = "ttile.mma"(%a, %b, %acc) {shape = [8, 16, 16]} : (!ttile.fragment<[8, 16], f16, "a">, !ttile.fragment<[16, 16], f16, "b">, !ttile.fragment<[8, 16], f32, "acc">) -> !ttile.fragment<[8, 16], f32, "acc">
    // expected-error @+1 {{stores a fragment of role 'b': on the cooperative-matrix path only accumulators are stored}}
    "ttile.store_fragment"(%b, %Bout, %c0, %c0) : (!ttile.fragment<[16, 16], f16, "b">, memref<16x16xf16>, index, index) -> ()
    "ttile.store_fragment"(%d, %C, %c0, %c0) : (!ttile.fragment<[8, 16], f32, "acc">, memref<8x16xf32>, index, index) -> ()
    gpu.return
  }
}
