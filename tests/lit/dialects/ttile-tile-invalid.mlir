// One case per verifier rule of the tile-level ttile ops.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @mma_on_vectors(%a: vector<4xf32>, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' A must be a !ttile.fragment, got vector<4xf32>}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (vector<4xf32>, !ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @fragment_of_rank_three(%a: !ttile.fragment<[16, 16, 2], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' A must have a shape of two positive sizes [rows, cols], got !ttile.fragment<[16, 16, 2], bf16, "a">}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16, 2], bf16, "a">, !ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @unknown_role(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "c">) {
  // expected-error @+1 {{'ttile.mma' C has role 'c'; fragment roles are a, b, acc}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 8], f32, "c">) -> !ttile.fragment<[16, 8], f32, "c">
  return
}

// -----

func.func @operands_swapped(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' A must be a fragment of role 'a', got !ttile.fragment<[16, 8], bf16, "b">}}
  %0 = "ttile.mma"(%b, %a, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @result_not_like_c(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' result type !ttile.fragment<[16, 8], bf16, "acc"> must equal C's type !ttile.fragment<[16, 8], f32, "acc">}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], bf16, "acc">
  return
}

// -----

func.func @inner_sizes_differ(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[32, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' A is 16x16 but B is 32x8: A's columns must equal B's rows}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[32, 8], bf16, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @accumulator_shape(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 16], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' C must be 16x8 (A's rows by B's columns), got 16x16}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 16], f32, "acc">) -> !ttile.fragment<[16, 16], f32, "acc">
  return
}

// -----

func.func @instruction_shape_of_two(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' shape must be three positive sizes [m, n, k], got [16, 8]}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @not_a_multiple(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' M x N x K = 16x8x16 is not a multiple of the instruction shape [16, 16, 16]}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 16, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], bf16, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @f32_inputs(%a: !ttile.fragment<[16, 8], f32, "a">, %b: !ttile.fragment<[8, 8], f32, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' inputs must be bf16, f16, tf32, f8E4M3FN, f8E5M2 or i8, got f32}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 8]} : (!ttile.fragment<[16, 8], f32, "a">, !ttile.fragment<[8, 8], f32, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @mixed_inputs(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], f16, "b">, %c: !ttile.fragment<[16, 8], f32, "acc">) {
  // expected-error @+1 {{'ttile.mma' A and B must have one element type (only the fp8 kinds mix), got bf16 and f16}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], f16, "b">, !ttile.fragment<[16, 8], f32, "acc">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @f16_accumulator(%a: !ttile.fragment<[16, 16], f16, "a">, %b: !ttile.fragment<[16, 8], f16, "b">, %c: !ttile.fragment<[16, 8], f16, "acc">) {
  // expected-error @+1 {{'ttile.mma' f16 inputs accumulate in f32, got f16}}
  %0 = "ttile.mma"(%a, %b, %c) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16], f16, "a">, !ttile.fragment<[16, 8], f16, "b">, !ttile.fragment<[16, 8], f16, "acc">) -> !ttile.fragment<[16, 8], f16, "acc">
  return
}

// -----

func.func @fill_other_type(%x: f16) {
  // expected-error @+1 {{'ttile.fill' value of type f16 must have the fragment's element type f32}}
  %0 = "ttile.fill"(%x) : (f16) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}

// -----

func.func @ldmatrix_from_global(%g: memref<64x64xbf16>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' loads from shared memory (#gpu.address_space<workgroup>), got memref<64x64xbf16>}}
  %0 = "ttile.ldmatrix"(%g, %i, %i) : (memref<64x64xbf16>, index, index) -> !ttile.fragment<[16, 16], bf16, "a">
  return
}

// -----

func.func @ldmatrix_from_a_row(%s: memref<64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' the source must have rank 2 or more (a fragment covers its two innermost dimensions), got memref<64xbf16, #gpu.address_space<workgroup>>}}
  %0 = "ttile.ldmatrix"(%s, %i) : (memref<64xbf16, #gpu.address_space<workgroup>>, index) -> !ttile.fragment<[16, 16], bf16, "a">
  return
}

// -----

func.func @ldmatrix_element_type(%s: memref<64x64xf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' element types differ: the fragment holds bf16, the source f16}}
  %0 = "ttile.ldmatrix"(%s, %i, %i) : (memref<64x64xf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "a">
  return
}

// -----

func.func @ldmatrix_strided_rows(%s: memref<64x64xbf16, strided<[128, 2]>, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' the source's innermost dimension must be contiguous (stride 1), got memref<64x64xbf16, strided<[128, 2]>, #gpu.address_space<workgroup>>}}
  %0 = "ttile.ldmatrix"(%s, %i, %i) : (memref<64x64xbf16, strided<[128, 2]>, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "a">
  return
}

// -----

func.func @ldmatrix_index_count(%s: memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' needs 3 indices for the source, got 2}}
  %0 = "ttile.ldmatrix"(%s, %i, %i) : (memref<2x64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "a">
  return
}

// -----

func.func @ldmatrix_too_big(%s: memref<8x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' extent 16 does not fit dimension 0 (8) of the source}}
  %0 = "ttile.ldmatrix"(%s, %i, %i) : (memref<8x64xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "a">
  return
}

// -----

func.func @ldmatrix_out_of_bounds(%s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  %c56 = arith.constant 56 : index
  // expected-error @+1 {{'ttile.ldmatrix' 56..71 is out of bounds of dimension 1 (64) of the source}}
  %0 = "ttile.ldmatrix"(%s, %i, %c56) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "a">
  return
}

// -----

// Untransposed, the 16x32 fragment would fit.
func.func @ldmatrix_transposed_out_of_bounds(%s: memref<16x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' extent 32 does not fit dimension 0 (16) of the source}}
  %0 = "ttile.ldmatrix"(%s, %i, %i) {transpose} : (memref<16x64xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 32], bf16, "b">
  return
}

// -----

func.func @ldmatrix_transpose_flag(%s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.ldmatrix' attribute 'transpose' must be a unit attribute, got true}}
  %0 = "ttile.ldmatrix"(%s, %i, %i) {transpose = true} : (memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[16, 16], bf16, "b">
  return
}

// -----

func.func @store_to_private(%f: !ttile.fragment<[16, 8], f32, "acc">, %p: memref<16x8xf32, #gpu.address_space<private>>, %i: index) {
  // expected-error @+1 {{'ttile.store_fragment' stores to global or shared memory, not to private memory: memref<16x8xf32, #gpu.address_space<private>>}}
  "ttile.store_fragment"(%f, %p, %i, %i) : (!ttile.fragment<[16, 8], f32, "acc">, memref<16x8xf32, #gpu.address_space<private>>, index, index) -> ()
  return
}

// -----

func.func @store_out_of_bounds(%f: !ttile.fragment<[16, 8], f32, "acc">, %g: memref<64x64xf32>, %i: index) {
  %c60 = arith.constant 60 : index
  // expected-error @+1 {{'ttile.store_fragment' 60..75 is out of bounds of dimension 0 (64) of the destination}}
  "ttile.store_fragment"(%f, %g, %c60, %i) : (!ttile.fragment<[16, 8], f32, "acc">, memref<64x64xf32>, index, index) -> ()
  return
}

// -----

func.func @copy_from_shared(%s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %t: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' copies from global memory, got memref<64x64xbf16, #gpu.address_space<workgroup>>}}
  %0 = "ttile.async_copy"(%s, %t, %i, %i, %i, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_to_global(%g: memref<?x?xbf16>, %h: memref<64x64xbf16>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' copies to shared memory (#gpu.address_space<workgroup>), got memref<64x64xbf16>}}
  %0 = "ttile.async_copy"(%g, %h, %i, %i, %i, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<?x?xbf16>, memref<64x64xbf16>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_converts(%g: memref<?x?xf16>, %s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' element types differ: f16 and bf16}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<?x?xf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_index_count(%g: memref<?x?xbf16>, %s: memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' needs 2 source and 3 destination indices, got 4 in all}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<?x?xbf16>, memref<2x64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_box_rank(%g: memref<?x?xbf16>, %s: memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' shape must be 1 to 2 positive sizes, got [2, 64, 64]}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i, %i) {shape = [2, 64, 64], chunk = 16 : i64} : (memref<?x?xbf16>, memref<2x64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_chunk_size(%g: memref<?x?xbf16>, %s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' chunk must be 4, 8 or 16 bytes, got 32}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i) {shape = [64, 64], chunk = 32 : i64} : (memref<?x?xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_index_elements(%g: memref<?xindex>, %s: memref<64xindex, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' element type must be an integer, a float or a vector of them, got index}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i) {shape = [64], chunk = 16 : i64} : (memref<?xindex>, memref<64xindex, #gpu.address_space<workgroup>>, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_rows_not_chunks(%g: memref<?x?xbf16>, %s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' a row of the box is 24 bytes, which 16-byte chunks do not divide}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i) {shape = [64, 12], chunk = 16 : i64} : (memref<?x?xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_strided_source(%g: memref<64x64xbf16, strided<[128, 2]>>, %s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  // expected-error @+1 {{'ttile.async_copy' the source's innermost dimension must be contiguous (stride 1), got memref<64x64xbf16, strided<[128, 2]>>}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<64x64xbf16, strided<[128, 2]>>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_misaligned_start(%g: memref<?x?xbf16>, %s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  %c3 = arith.constant 3 : index
  // expected-error @+1 {{'ttile.async_copy' the box starts 6 bytes into a row of the source, not on a 16-byte boundary}}
  %0 = "ttile.async_copy"(%g, %s, %i, %c3, %i, %i) {shape = [64, 32], chunk = 16 : i64} : (memref<?x?xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_odd_padding(%g: memref<?x?xbf16>, %i: index) {
  %s = "tmem.alloc"() {scope = "shared", align = 128 : i64, pad = [0, 1]} : () -> memref<64x64xbf16, strided<[65, 1]>, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'ttile.async_copy' rows of the destination are 130 bytes apart, not a multiple of the 16-byte chunk}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<?x?xbf16>, memref<64x64xbf16, strided<[65, 1]>, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_out_of_bounds(%g: memref<?x?xbf16>, %s: memref<64x64xbf16, #gpu.address_space<workgroup>>, %i: index) {
  %c32 = arith.constant 32 : index
  // expected-error @+1 {{'ttile.async_copy' 32..95 is out of bounds of dimension 0 (64) of the destination}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %c32, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<?x?xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @copy_underaligned_buffer(%g: memref<?x?xbf16>, %i: index) {
  %s = "tmem.alloc"() {scope = "shared", align = 8 : i64} : () -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'ttile.async_copy' 16-byte chunks need the destination aligned to 16 bytes, but its 'tmem.alloc' has align = 8}}
  %0 = "ttile.async_copy"(%g, %s, %i, %i, %i, %i) {shape = [64, 64], chunk = 16 : i64} : (memref<?x?xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>, index, index, index, index) -> !ttile.async_token
  return
}

// -----

func.func @commit_nothing() {
  // expected-error @+1 {{'ttile.async_commit' needs at least one copy to commit}}
  %0 = "ttile.async_commit"() : () -> !ttile.async_token
  return
}

// -----

func.func @commit_a_group(%t: !ttile.async_token) {
  %g = "ttile.async_commit"(%t) : (!ttile.async_token) -> !ttile.async_token
  // expected-error @+1 {{'ttile.async_commit' operand 1 is a group; groups hold copies, not other groups}}
  %h = "ttile.async_commit"(%t, %g) : (!ttile.async_token, !ttile.async_token) -> !ttile.async_token
  return
}

// -----

func.func @wait_negative(%g: !ttile.async_token) {
  // expected-error @+1 {{'ttile.async_wait' pending must be non-negative, got -1}}
  "ttile.async_wait"(%g) {pending = -1 : i64} : (!ttile.async_token) -> ()
  return
}

// -----

func.func @wait_on_a_copy(%src: memref<?xf32>, %dst: memref<64xf32, #gpu.address_space<workgroup>>, %i: index) {
  %t = "ttile.async_copy"(%src, %dst, %i, %i) {shape = [64], chunk = 16 : i64} : (memref<?xf32>, memref<64xf32, #gpu.address_space<workgroup>>, index, index) -> !ttile.async_token
  // expected-error @+1 {{'ttile.async_wait' waits on a group: commit the copy with 'ttile.async_commit' first}}
  "ttile.async_wait"(%t) {pending = 0 : i64} : (!ttile.async_token) -> ()
  return
}

// -----

func.func @reduce_kind(%v: f32) {
  // expected-error @+1 {{'ttile.warp_reduce' kind must be one of sum, max, min; got 'prod'}}
  %0 = "ttile.warp_reduce"(%v) {kind = "prod"} : (f32) -> f32
  return
}

// -----

func.func @reduce_vector(%v: vector<4xf32>) {
  // expected-error @+1 {{'ttile.warp_reduce' reduces scalar integers or floats, got vector<4xf32>}}
  %0 = "ttile.warp_reduce"(%v) {kind = "sum"} : (vector<4xf32>) -> vector<4xf32>
  return
}

// -----

func.func @reduce_changes_type(%v: f16) {
  // expected-error @+1 {{'ttile.group_reduce' result type f32 must equal the reduced value's type f16}}
  %0 = "ttile.group_reduce"(%v) {kind = "sum", group_size = 4 : i64} : (f16) -> f32
  return
}

// -----

func.func @group_of_twelve_lanes(%v: f32) {
  // expected-error @+1 {{'ttile.group_reduce' group_size must be a positive power of two, got 12}}
  %0 = "ttile.group_reduce"(%v) {kind = "max", group_size = 12 : i64} : (f32) -> f32
  return
}

// -----

func.func @cooperative_group_of_48() {
  // expected-error @+1 {{'ttile.cooperative_group' group size must be a positive power of two, got !ttile.group<48 : i64>}}
  %0 = "ttile.cooperative_group"() : () -> !ttile.group<48 : i64>
  return
}

// -----

func.func @sync_bad_group(%g: !ttile.group<0 : i64>) {
  // expected-error @+1 {{'ttile.group_sync' group size must be a positive power of two, got !ttile.group<0 : i64>}}
  "ttile.group_sync"(%g) : (!ttile.group<0 : i64>) -> ()
  return
}

// -----

func.func @rank_in_bad_group(%g: !ttile.group<24 : i64>) {
  // expected-error @+1 {{'ttile.thread_rank' group size must be a positive power of two, got !ttile.group<24 : i64>}}
  %0 = "ttile.thread_rank"(%g) : (!ttile.group<24 : i64>) -> index
  return
}

// -----

// A wrong operand count reaches IRDL's check, not a Python error in the verifier.
func.func @mma_without_accumulator(%a: !ttile.fragment<[16, 16], bf16, "a">, %b: !ttile.fragment<[16, 8], bf16, "b">) {
  // expected-error @+1 {{op expects exactly 3 operands, but got 2}}
  %0 = "ttile.mma"(%a, %b) {shape = [16, 8, 16]} : (!ttile.fragment<[16, 16], bf16, "a">, !ttile.fragment<[16, 8], bf16, "b">) -> !ttile.fragment<[16, 8], f32, "acc">
  return
}
