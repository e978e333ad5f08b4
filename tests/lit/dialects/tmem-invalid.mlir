// One case per tmem verifier rule.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @unknown_scope() {
  // expected-error @+1 {{'tmem.alloc' scope must be one of global, shared, private, register; got 'smem'}}
  %0 = "tmem.alloc"() {scope = "smem", align = 16 : i64} : () -> memref<64xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @missing_alignment() {
  // expected-error @+1 {{'tmem.alloc' needs attribute 'align' (an integer)}}
  %0 = "tmem.alloc"() {scope = "global"} : () -> memref<64xf32>
  return
}

// -----

func.func @scope_and_memory_space_disagree() {
  // expected-error @+1 {{'tmem.alloc' 'shared' allocations live in #gpu.address_space<workgroup>, but the result's memory space is #gpu.address_space<private>}}
  %0 = "tmem.alloc"() {scope = "shared", align = 16 : i64} : () -> memref<64xf32, #gpu.address_space<private>>
  return
}

// -----

func.func @target_memory_space() {
  // expected-error @+1 {{'tmem.alloc' memory space must be a #gpu.address_space (Tile IR is target-neutral), got 3 : i64}}
  %0 = "tmem.alloc"() {scope = "shared", align = 16 : i64} : () -> memref<64xf32, 3>
  return
}

// -----

func.func @dynamic_shared(%n: index) {
  // expected-error @+1 {{'tmem.alloc' shared allocations must have a static shape (their size is fixed when the kernel is compiled), got memref<?xf32, #gpu.address_space<workgroup>>}}
  %0 = "tmem.alloc"(%n) {scope = "shared", align = 16 : i64} : (index) -> memref<?xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @missing_dynamic_size(%n: index) {
  // expected-error @+1 {{'tmem.alloc' needs one size operand per dynamic dimension: 2, got 1}}
  %0 = "tmem.alloc"(%n) {scope = "global", align = 16 : i64} : (index) -> memref<?x?xf32>
  return
}

// -----

func.func @index_elements() {
  // expected-error @+1 {{'tmem.alloc' element type must be an integer, a float or a vector of them, got index}}
  %0 = "tmem.alloc"() {scope = "global", align = 8 : i64} : () -> memref<16xindex>
  return
}

// -----

func.func @alignment_not_power_of_two() {
  // expected-error @+1 {{'tmem.alloc' alignment must be a power of two, got 48}}
  %0 = "tmem.alloc"() {scope = "global", align = 48 : i64} : () -> memref<64xf32>
  return
}

// -----

func.func @alignment_below_element_size() {
  // expected-error @+1 {{'tmem.alloc' alignment 8 is less than the 16-byte element size}}
  %0 = "tmem.alloc"() {scope = "register", align = 8 : i64} : () -> memref<4xvector<4xf32>, #gpu.address_space<private>>
  return
}

// -----

func.func @padding_per_dimension() {
  // expected-error @+1 {{'tmem.alloc' padding must have one entry per dimension (2), got [8]}}
  %0 = "tmem.alloc"() {scope = "shared", align = 16 : i64, pad = [8]} : () -> memref<64x64xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @negative_padding() {
  // expected-error @+1 {{'tmem.alloc' padding must be non-negative, got [0, -1]}}
  %0 = "tmem.alloc"() {scope = "shared", align = 16 : i64, pad = [0, -1]} : () -> memref<64x64xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @padding_dynamic_shape(%n: index) {
  // expected-error @+1 {{'tmem.alloc' padding needs a static shape}}
  %0 = "tmem.alloc"(%n) {scope = "global", align = 16 : i64, pad = [0, 4]} : (index) -> memref<?x64xf32>
  return
}

// -----

func.func @padding_not_in_the_layout() {
  // expected-error @+1 {{'tmem.alloc' with pad = [0, 8] the result must have strides [72, 1] and offset 0, got memref<128x64xbf16, #gpu.address_space<workgroup>>}}
  %0 = "tmem.alloc"() {scope = "shared", align = 16 : i64, pad = [0, 8]} : () -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @gaps_without_padding() {
  // expected-error @+1 {{'tmem.alloc' the result must have strides [4, 1] and offset 0, got memref<4x4xf32, strided<[8, 1]>>}}
  %0 = "tmem.alloc"() {scope = "global", align = 16 : i64} : () -> memref<4x4xf32, strided<[8, 1]>>
  return
}

// -----

func.func @dynamic_strided(%n: index) {
  // expected-error @+1 {{'tmem.alloc' a dynamically shaped allocation must have the identity layout, got memref<?xf32, strided<[2]>>}}
  %0 = "tmem.alloc"(%n) {scope = "global", align = 16 : i64} : (index) -> memref<?xf32, strided<[2]>>
  return
}

// -----

func.func @swizzled_global() {
  // expected-error @+1 {{'tmem.alloc' swizzle applies to shared memory banks, not to 'global' allocations}}
  %0 = "tmem.alloc"() {scope = "global", align = 128 : i64, swizzle = 128 : i64} : () -> memref<64x64xbf16>
  return
}

// -----

func.func @unknown_swizzle() {
  // expected-error @+1 {{'tmem.alloc' swizzle must be 32, 64 or 128 bytes, got 96}}
  %0 = "tmem.alloc"() {scope = "shared", align = 128 : i64, swizzle = 96 : i64} : () -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @swizzle_short_rows() {
  // expected-error @+1 {{'tmem.alloc' swizzling moves 16-byte chunks, but a row is 8 bytes}}
  %0 = "tmem.alloc"() {scope = "shared", align = 128 : i64, swizzle = 64 : i64} : () -> memref<64x4xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @swizzle_partial_line() {
  // expected-error @+1 {{'tmem.alloc' a swizzled allocation must be whole 128-byte lines, got 48 bytes}}
  %0 = "tmem.alloc"() {scope = "shared", align = 128 : i64, swizzle = 32 : i64} : () -> memref<3x8xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @free_shared() {
  %0 = "tmem.alloc"() {scope = "shared", align = 16 : i64} : () -> memref<64xf32, #gpu.address_space<workgroup>>
  // expected-error @+1 {{'tmem.dealloc' frees only global memory; workgroup storage ends with the kernel}}
  "tmem.dealloc"(%0) : (memref<64xf32, #gpu.address_space<workgroup>>) -> ()
  return
}

// -----

func.func @free_a_view() {
  %0 = "tmem.alloc"() {scope = "global", align = 64 : i64} : () -> memref<1024xi8>
  %1 = "tmem.alias"(%0) {offset = 0 : i64} : (memref<1024xi8>) -> memref<256xf32>
  // expected-error @+1 {{'tmem.dealloc' frees a view made by 'tmem.alias'; free the allocation it views instead}}
  "tmem.dealloc"(%1) : (memref<256xf32>) -> ()
  return
}

// -----

func.func @place_shared(%s: memref<64xf32, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'tmem.place' only global memory is cached in L2; the operand is in workgroup memory}}
  "tmem.place"(%s) {l2 = "persist"} : (memref<64xf32, #gpu.address_space<workgroup>>) -> ()
  return
}

// -----

func.func @unknown_l2_policy(%g: memref<64xf32>) {
  // expected-error @+1 {{'tmem.place' l2 must be one of persist, normal, stream; got 'pin'}}
  "tmem.place"(%g) {l2 = "pin"} : (memref<64xf32>) -> ()
  return
}

// -----

func.func @fraction_above_one(%g: memref<64xf32>) {
  // expected-error @+1 {{'tmem.place' fraction must be in (0, 1], got 1.5}}
  "tmem.place"(%g) {l2 = "persist", fraction = 1.5 : f32} : (memref<64xf32>) -> ()
  return
}

// -----

func.func @alias_other_space(%g: memref<1024xi8>) {
  // expected-error @+1 {{'tmem.alias' a view stays in its source's memory space: memref<1024xi8> cannot be viewed as memref<256xf32, #gpu.address_space<workgroup>>}}
  %0 = "tmem.alias"(%g) {offset = 0 : i64} : (memref<1024xi8>) -> memref<256xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @alias_negative_offset(%g: memref<1024xi8>) {
  // expected-error @+1 {{'tmem.alias' offset must be non-negative, got -4}}
  %0 = "tmem.alias"(%g) {offset = -4 : i64} : (memref<1024xi8>) -> memref<16xf32>
  return
}

// -----

func.func @alias_index_elements(%g: memref<1024xi8>) {
  // expected-error @+1 {{'tmem.alias' element type must be an integer, a float or a vector of them, got index}}
  %0 = "tmem.alias"(%g) {offset = 0 : i64} : (memref<1024xi8>) -> memref<16xindex>
  return
}

// -----

func.func @alias_misaligned(%g: memref<1024xi8>) {
  // expected-error @+1 {{'tmem.alias' offset 2 is not a multiple of the view's 4-byte element size}}
  %0 = "tmem.alias"(%g) {offset = 2 : i64} : (memref<1024xi8>) -> memref<16xf32>
  return
}

// -----

func.func @alias_of_dynamic(%g: memref<?xi8>) {
  // expected-error @+1 {{'tmem.alias' source and result must have static shapes and strides, so the view's bounds are known}}
  %0 = "tmem.alias"(%g) {offset = 0 : i64} : (memref<?xi8>) -> memref<16xf32>
  return
}

// -----

func.func @alias_overrun(%g: memref<1024xi8>) {
  // expected-error @+1 {{'tmem.alias' the view's 1024 bytes at offset 512 overrun the source's 1024 bytes}}
  %0 = "tmem.alias"(%g) {offset = 512 : i64} : (memref<1024xi8>) -> memref<256xf32>
  return
}

// -----

func.func @pad_changes_type(%t: tensor<64x64xf32>) -> tensor<64x72xf32> {
  // expected-error @+1 {{'tmem.pad' result type tensor<64x72xf32> must equal the source type tensor<64x64xf32>}}
  %0 = "tmem.pad"(%t) {pad = [0, 8]} : (tensor<64x64xf32>) -> tensor<64x72xf32>
  return %0 : tensor<64x72xf32>
}

// -----

func.func @pad_unranked(%t: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'tmem.pad' source must be a ranked tensor, got tensor<*xf32>}}
  %0 = "tmem.pad"(%t) {pad = [0, 8]} : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @pad_per_dimension(%t: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{'tmem.pad' padding must have one entry per dimension (2), got [0, 0, 1]}}
  %0 = "tmem.pad"(%t) {pad = [0, 0, 1]} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

func.func @swizzle_changes_type(%t: tensor<64x64xf16>) -> tensor<64x64xbf16> {
  // expected-error @+1 {{'tmem.swizzle' result type tensor<64x64xbf16> must equal the source type tensor<64x64xf16>}}
  %0 = "tmem.swizzle"(%t) {bytes = 128 : i64} : (tensor<64x64xf16>) -> tensor<64x64xbf16>
  return %0 : tensor<64x64xbf16>
}

// -----

func.func @swizzle_dynamic_rows(%t: tensor<64x?xbf16>) -> tensor<64x?xbf16> {
  // expected-error @+1 {{'tmem.swizzle' needs a static innermost dimension to swizzle rows of, got tensor<64x?xbf16>}}
  %0 = "tmem.swizzle"(%t) {bytes = 128 : i64} : (tensor<64x?xbf16>) -> tensor<64x?xbf16>
  return %0 : tensor<64x?xbf16>
}

// -----

func.func @swizzle_tensor_unknown_bytes(%t: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  // expected-error @+1 {{'tmem.swizzle' swizzle must be 32, 64 or 128 bytes, got 256}}
  %0 = "tmem.swizzle"(%t) {bytes = 256 : i64} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  return %0 : tensor<64x64xbf16>
}

// -----

func.func @swizzle_tensor_short_rows(%t: tensor<64x4xbf16>) -> tensor<64x4xbf16> {
  // expected-error @+1 {{'tmem.swizzle' swizzling moves 16-byte chunks, but a row is 8 bytes}}
  %0 = "tmem.swizzle"(%t) {bytes = 32 : i64} : (tensor<64x4xbf16>) -> tensor<64x4xbf16>
  return %0 : tensor<64x4xbf16>
}

// -----

func.func @slot_negative(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tmem.slot' slot must be non-negative, got -1}}
  "tmem.slot"() {slot = -1} : () -> ()
  %0 = "ttensor.unary"(%x) {fn = "relu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @slot_twice(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tmem.slot' is given twice for one op}}
  "tmem.slot"() {slot = 0} : () -> ()
  "tmem.slot"() {slot = 1} : () -> ()
  %0 = "ttensor.unary"(%x) {fn = "relu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @slot_before_return(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tmem.slot' must stand right before the Graph IR op it decides for, not before 'func.return'}}
  "tmem.slot"() {slot = 0} : () -> ()
  return %x : tensor<8xf32>
}

// -----

func.func @stage_empty_shape(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'tmem.stage' shape must be positive sizes, got [8, 0]}}
  "tmem.stage"() {buffer = "b_panel", copies = 1, shape = [8, 0]} : () -> ()
  %0 = "ttensor.matmul"(%a, %a) {accum = f32} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @stage_no_copies(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'tmem.stage' copies must be at least 1, got 0}}
  "tmem.stage"() {buffer = "b_panel", copies = 0, shape = [8, 8]} : () -> ()
  %0 = "ttensor.matmul"(%a, %a) {accum = f32} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @stage_same_buffer_twice(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'tmem.stage' is given twice for one op}}
  "tmem.stage"() {buffer = "b_panel", copies = 1, shape = [8, 8]} : () -> ()
  "tmem.stage"() {buffer = "b_panel", copies = 2, shape = [8, 8]} : () -> ()
  %0 = "ttensor.matmul"(%a, %a) {accum = f32} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @stage_not_a_matmul(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tmem.stage' stages a matmul's operands, not those of 'ttensor.unary'}}
  "tmem.stage"() {buffer = "b_panel", copies = 1, shape = [8, 8]} : () -> ()
  %0 = "ttensor.unary"(%x) {fn = "relu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
