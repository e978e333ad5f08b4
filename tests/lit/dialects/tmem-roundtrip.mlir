// Every tmem op parses, prints and parses again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @allocations
// CHECK-SAME:    (%[[N:.+]]: index)
func.func @allocations(%n: index) {
  // CHECK: %[[G:.+]] = "tmem.alloc"(%[[N]]) {align = 64 : i64, scope = "global"} : (index) -> memref<?x128xf32>
  %g = "tmem.alloc"(%n) {scope = "global", align = 64 : i64} : (index) -> memref<?x128xf32>
  // CHECK: "tmem.alloc"() {align = 128 : i64, pad = [0, 8], scope = "shared"}
  // CHECK-SAME: : () -> memref<128x64xbf16, strided<[72, 1]>, #gpu.address_space<workgroup>>
  %padded = "tmem.alloc"() {scope = "shared", align = 128 : i64, pad = [0, 8]}
      : () -> memref<128x64xbf16, strided<[72, 1]>, #gpu.address_space<workgroup>>
  // CHECK: "tmem.alloc"() {align = 1024 : i64, scope = "shared", swizzle = 128 : i64}
  // CHECK-SAME: : () -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  %swizzled = "tmem.alloc"() {scope = "shared", align = 1024 : i64, swizzle = 128 : i64}
      : () -> memref<64x64xbf16, #gpu.address_space<workgroup>>
  // CHECK: "tmem.alloc"() {align = 16 : i64, scope = "register"} : () -> memref<4xvector<4xf32>, #gpu.address_space<private>>
  %regs = "tmem.alloc"() {scope = "register", align = 16 : i64} : () -> memref<4xvector<4xf32>, #gpu.address_space<private>>
  // CHECK: "tmem.alloc"() {align = 4 : i64, scope = "private"} : () -> memref<32xi32, #gpu.address_space<private>>
  %local = "tmem.alloc"() {scope = "private", align = 4 : i64} : () -> memref<32xi32, #gpu.address_space<private>>
  // CHECK: "tmem.dealloc"(%[[G]]) : (memref<?x128xf32>) -> ()
  "tmem.dealloc"(%g) : (memref<?x128xf32>) -> ()
  return
}

// Two pipeline stages carved out of one shared allocation.
// CHECK-LABEL: func.func @stage_buffers
func.func @stage_buffers() {
  // CHECK: %[[BUF:.+]] = "tmem.alloc"() {align = 128 : i64, scope = "shared"} : () -> memref<32768xi8, #gpu.address_space<workgroup>>
  %buf = "tmem.alloc"() {scope = "shared", align = 128 : i64} : () -> memref<32768xi8, #gpu.address_space<workgroup>>
  // CHECK: "tmem.alias"(%[[BUF]]) {offset = 0 : i64}
  // CHECK-SAME: -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  %s0 = "tmem.alias"(%buf) {offset = 0 : i64}
      : (memref<32768xi8, #gpu.address_space<workgroup>>) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  // CHECK: "tmem.alias"(%[[BUF]]) {offset = 16384 : i64}
  %s1 = "tmem.alias"(%buf) {offset = 16384 : i64}
      : (memref<32768xi8, #gpu.address_space<workgroup>>) -> memref<128x64xbf16, #gpu.address_space<workgroup>>
  return
}

// CHECK-LABEL: func.func @placement
// CHECK-SAME:    (%[[W:.+]]: memref<4096x4096xbf16>, %[[X:.+]]: memref<?xf32, #gpu.address_space<global>>)
func.func @placement(%w: memref<4096x4096xbf16>, %x: memref<?xf32, #gpu.address_space<global>>) {
  // CHECK: "tmem.place"(%[[W]]) {fraction = 5.000000e-01 : f32, l2 = "persist"} : (memref<4096x4096xbf16>) -> ()
  "tmem.place"(%w) {l2 = "persist", fraction = 0.5 : f32} : (memref<4096x4096xbf16>) -> ()
  // CHECK: "tmem.place"(%[[X]]) {l2 = "stream"} : (memref<?xf32, #gpu.address_space<global>>) -> ()
  "tmem.place"(%x) {l2 = "stream"} : (memref<?xf32, #gpu.address_space<global>>) -> ()
  return
}

// Layout requests on values that memory planning will place in shared memory.
// CHECK-LABEL: func.func @layout_requests
// CHECK-SAME:    (%[[A:.+]]: tensor<128x64xbf16>)
func.func @layout_requests(%a: tensor<128x64xbf16>) -> (tensor<128x64xbf16>, tensor<128x64xbf16>) {
  // CHECK: "tmem.pad"(%[[A]]) {pad = [0, 8]} : (tensor<128x64xbf16>) -> tensor<128x64xbf16>
  %0 = "tmem.pad"(%a) {pad = [0, 8]} : (tensor<128x64xbf16>) -> tensor<128x64xbf16>
  // CHECK: "tmem.swizzle"(%[[A]]) {bytes = 128 : i64} : (tensor<128x64xbf16>) -> tensor<128x64xbf16>
  %1 = "tmem.swizzle"(%a) {bytes = 128 : i64} : (tensor<128x64xbf16>) -> tensor<128x64xbf16>
  return %0, %1 : tensor<128x64xbf16>, tensor<128x64xbf16>
}
