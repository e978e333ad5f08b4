// Every tile-level ttile op and type parses, prints and parses again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// One K step of a bf16 GEMM: copy the A and B panels into shared memory, wait, load fragments, multiply.
// CHECK-LABEL: func.func @gemm_step
// CHECK-SAME:    (%[[A:.+]]: memref<?x?xbf16>, %[[B:.+]]: memref<?x?xbf16>, %[[C:.+]]: memref<?x?xf32>, %[[M0:.+]]: index, %[[K0:.+]]: index)
func.func @gemm_step(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %c: memref<?x?xf32>, %m0: index, %k0: index) {
  // CHECK: %[[C0:.+]] = arith.constant 0 : index
  // CHECK: %[[C16:.+]] = arith.constant 16 : index
  // CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  // CHECK: %[[SA:.+]] = "tmem.alloc"() {align = 128 : i64, pad = [0, 0, 8], scope = "shared"}
  %sa = "tmem.alloc"() {scope = "shared", align = 128 : i64, pad = [0, 0, 8]}
      : () -> memref<2x64x32xbf16, strided<[2560, 40, 1]>, #gpu.address_space<workgroup>>
  // CHECK: %[[SB:.+]] = "tmem.alloc"() {align = 128 : i64, scope = "shared"}
  %sb = "tmem.alloc"() {scope = "shared", align = 128 : i64} : () -> memref<2x32x64xbf16, #gpu.address_space<workgroup>>
  // CHECK: %[[TA:.+]] = "ttile.async_copy"(%[[A]], %[[SA]], %[[M0]], %[[K0]], %[[C0]], %[[C0]], %[[C0]])
  // CHECK-SAME: {chunk = 16 : i64, shape = [64, 32]}
  // CHECK-SAME: -> !ttile.async_token
  %ta = "ttile.async_copy"(%a, %sa, %m0, %k0, %c0, %c0, %c0) {shape = [64, 32], chunk = 16 : i64}
      : (memref<?x?xbf16>, memref<2x64x32xbf16, strided<[2560, 40, 1]>, #gpu.address_space<workgroup>>,
         index, index, index, index, index) -> !ttile.async_token
  // CHECK: %[[TB:.+]] = "ttile.async_copy"(%[[B]], %[[SB]], %[[K0]], %[[C0]], %[[C0]], %[[C0]], %[[C0]])
  // CHECK-SAME: {chunk = 16 : i64, shape = [32, 64]}
  %tb = "ttile.async_copy"(%b, %sb, %k0, %c0, %c0, %c0, %c0) {shape = [32, 64], chunk = 16 : i64}
      : (memref<?x?xbf16>, memref<2x32x64xbf16, #gpu.address_space<workgroup>>,
         index, index, index, index, index) -> !ttile.async_token
  // CHECK: %[[G:.+]] = "ttile.async_commit"(%[[TA]], %[[TB]]) : (!ttile.async_token, !ttile.async_token) -> !ttile.async_token
  %g = "ttile.async_commit"(%ta, %tb) : (!ttile.async_token, !ttile.async_token) -> !ttile.async_token
  // CHECK: "ttile.async_wait"(%[[G]]) {pending = 0 : i64} : (!ttile.async_token) -> ()
  "ttile.async_wait"(%g) {pending = 0 : i64} : (!ttile.async_token) -> ()
  // CHECK: "ttile.barrier"() : () -> ()
  "ttile.barrier"() : () -> ()
  // CHECK: %[[FA:.+]] = "ttile.ldmatrix"(%[[SA]], %[[C0]], %[[C16]], %[[C0]])
  // CHECK-SAME: -> !ttile.fragment<[16, 16], bf16, "a">
  %fa = "ttile.ldmatrix"(%sa, %c0, %c16, %c0)
      : (memref<2x64x32xbf16, strided<[2560, 40, 1]>, #gpu.address_space<workgroup>>, index, index, index)
      -> !ttile.fragment<[16, 16], bf16, "a">
  // CHECK: %[[FB:.+]] = "ttile.ldmatrix"(%[[SB]], %[[C0]], %[[C0]], %[[C16]]) {transpose}
  // CHECK-SAME: -> !ttile.fragment<[16, 16], bf16, "b">
  %fb = "ttile.ldmatrix"(%sb, %c0, %c0, %c16) {transpose}
      : (memref<2x32x64xbf16, #gpu.address_space<workgroup>>, index, index, index) -> !ttile.fragment<[16, 16], bf16, "b">
  // CHECK: %[[ACC:.+]] = "ttile.fill"(%[[ZERO]]) : (f32) -> !ttile.fragment<[16, 16], f32, "acc">
  %acc = "ttile.fill"(%zero) : (f32) -> !ttile.fragment<[16, 16], f32, "acc">
  // CHECK: %[[D:.+]] = "ttile.mma"(%[[FA]], %[[FB]], %[[ACC]]) {shape = [16, 8, 16]}
  // CHECK-SAME: : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 16], bf16, "b">, !ttile.fragment<[16, 16], f32, "acc">) -> !ttile.fragment<[16, 16], f32, "acc">
  %d = "ttile.mma"(%fa, %fb, %acc) {shape = [16, 8, 16]}
      : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 16], bf16, "b">, !ttile.fragment<[16, 16], f32, "acc">)
      -> !ttile.fragment<[16, 16], f32, "acc">
  // CHECK: "ttile.store_fragment"(%[[D]], %[[C]], %[[M0]], %[[C0]]) : (!ttile.fragment<[16, 16], f32, "acc">, memref<?x?xf32>, index, index) -> ()
  "ttile.store_fragment"(%d, %c, %m0, %c0) : (!ttile.fragment<[16, 16], f32, "acc">, memref<?x?xf32>, index, index) -> ()
  return
}

// Mixed fp8 inputs and integer MMA.
// CHECK-LABEL: func.func @mma_dtypes
// CHECK-SAME:    (%[[A8:.+]]: !ttile.fragment<[16, 32], f8E4M3FN, "a">, %[[B8:.+]]: !ttile.fragment<[32, 8], f8E5M2, "b">, %[[C8:.+]]: !ttile.fragment<[16, 8], f32, "acc">,
// CHECK-SAME:     %[[AI:.+]]: !ttile.fragment<[16, 32], i8, "a">, %[[BI:.+]]: !ttile.fragment<[32, 8], i8, "b">, %[[CI:.+]]: !ttile.fragment<[16, 8], i32, "acc">)
func.func @mma_dtypes(%a8: !ttile.fragment<[16, 32], f8E4M3FN, "a">, %b8: !ttile.fragment<[32, 8], f8E5M2, "b">,
                      %c8: !ttile.fragment<[16, 8], f32, "acc">, %ai: !ttile.fragment<[16, 32], i8, "a">,
                      %bi: !ttile.fragment<[32, 8], i8, "b">, %ci: !ttile.fragment<[16, 8], i32, "acc">) {
  // CHECK: "ttile.mma"(%[[A8]], %[[B8]], %[[C8]]) {shape = [16, 8, 32]}
  %0 = "ttile.mma"(%a8, %b8, %c8) {shape = [16, 8, 32]}
      : (!ttile.fragment<[16, 32], f8E4M3FN, "a">, !ttile.fragment<[32, 8], f8E5M2, "b">, !ttile.fragment<[16, 8], f32, "acc">)
      -> !ttile.fragment<[16, 8], f32, "acc">
  // CHECK: "ttile.mma"(%[[AI]], %[[BI]], %[[CI]]) {shape = [16, 8, 32]}
  %1 = "ttile.mma"(%ai, %bi, %ci) {shape = [16, 8, 32]}
      : (!ttile.fragment<[16, 32], i8, "a">, !ttile.fragment<[32, 8], i8, "b">, !ttile.fragment<[16, 8], i32, "acc">)
      -> !ttile.fragment<[16, 8], i32, "acc">
  return
}

// Reductions and the spec's cooperative-group example: g = tile.cooperative_group(size=64); g.sync();
// X[g.thread_rank()] += 1.
// CHECK-LABEL: func.func @groups
// CHECK-SAME:    (%[[V:.+]]: f32, %[[I:.+]]: i32)
func.func @groups(%v: f32, %i: i32) -> (f32, i32, index) {
  // CHECK: "ttile.warp_reduce"(%[[V]]) {kind = "sum"} : (f32) -> f32
  %0 = "ttile.warp_reduce"(%v) {kind = "sum"} : (f32) -> f32
  // CHECK: "ttile.group_reduce"(%[[I]]) {group_size = 8 : i64, kind = "max"} : (i32) -> i32
  %1 = "ttile.group_reduce"(%i) {kind = "max", group_size = 8 : i64} : (i32) -> i32
  // CHECK: %[[G:.+]] = "ttile.cooperative_group"() : () -> !ttile.group<64 : i64>
  %g = "ttile.cooperative_group"() : () -> !ttile.group<64 : i64>
  // CHECK: "ttile.group_sync"(%[[G]]) : (!ttile.group<64 : i64>) -> ()
  "ttile.group_sync"(%g) : (!ttile.group<64 : i64>) -> ()
  // CHECK: "ttile.thread_rank"(%[[G]]) : (!ttile.group<64 : i64>) -> index
  %r = "ttile.thread_rank"(%g) : (!ttile.group<64 : i64>) -> index
  return %0, %1, %r : f32, i32, index
}
