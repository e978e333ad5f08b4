// One case per verifier rule of ttile.atomic_rmw, ttile.atomic_cas and ttile.fence.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @unknown_kind(%m: memref<?xi32>, %i: index, %v: i32) {
  // expected-error @+1 {{'ttile.atomic_rmw' kind must be one of add, max; got 'min'}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "min", order = "relaxed", scope = "device"} : (i32, memref<?xi32>, index) -> i32
  return
}

// -----

func.func @unknown_order(%m: memref<?xi32>, %i: index, %v: i32) {
  // expected-error @+1 {{'ttile.atomic_rmw' order must be one of relaxed, acquire, release, acq_rel, seq_cst; got 'consume'}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "add", order = "consume", scope = "device"} : (i32, memref<?xi32>, index) -> i32
  return
}

// -----

func.func @unknown_scope(%m: memref<?xi32>, %i: index, %v: i32) {
  // expected-error @+1 {{'ttile.atomic_rmw' scope must be one of block, device, system; got 'warp'}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "add", order = "relaxed", scope = "warp"} : (i32, memref<?xi32>, index) -> i32
  return
}

// -----

func.func @private_memory(%m: memref<4xi32, #gpu.address_space<private>>, %i: index, %v: i32) {
  // expected-error @+1 {{'ttile.atomic_rmw' an atomic on private memory is shared with no other thread: memref<4xi32, #gpu.address_space<private>>}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "add", order = "relaxed", scope = "block"} : (i32, memref<4xi32, #gpu.address_space<private>>, index) -> i32
  return
}

// -----

func.func @index_count(%m: memref<?x?xi32>, %i: index, %v: i32) {
  // expected-error @+1 {{'ttile.atomic_rmw' takes one index per dimension of memref<?x?xi32>: 2, got 1}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "add", order = "relaxed", scope = "device"} : (i32, memref<?x?xi32>, index) -> i32
  return
}

// -----

func.func @value_type(%m: memref<?xi32>, %i: index, %v: i64) {
  // expected-error @+1 {{'ttile.atomic_rmw' value and result must have the memory's element type i32, got i64}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "add", order = "relaxed", scope = "device"} : (i64, memref<?xi32>, index) -> i32
  return
}

// -----

func.func @double_max(%m: memref<?xf64>, %i: index, %v: f64) {
  // expected-error @+1 {{'ttile.atomic_rmw' atomic max takes i32, i64 or f32 elements, got f64}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "max", order = "relaxed", scope = "device"} : (f64, memref<?xf64>, index) -> f64
  return
}

// -----

func.func @narrow_add(%m: memref<?xi16>, %i: index, %v: i16) {
  // expected-error @+1 {{'ttile.atomic_rmw' atomic add takes i32, i64 or f32 elements, got i16}}
  %0 = "ttile.atomic_rmw"(%v, %m, %i) {kind = "add", order = "relaxed", scope = "device"} : (i16, memref<?xi16>, index) -> i16
  return
}

// -----

func.func @cas_compare_type(%m: memref<?xi64>, %i: index, %c: i32, %v: i64) {
  // expected-error @+1 {{'ttile.atomic_cas' compare, value and result must have the memory's element type i64, got i32}}
  %0 = "ttile.atomic_cas"(%c, %v, %m, %i) {order = "acq_rel", scope = "device"} : (i32, i64, memref<?xi64>, index) -> i64
  return
}

// -----

func.func @cas_float(%m: memref<?xf32>, %i: index, %c: f32, %v: f32) {
  // expected-error @+1 {{'ttile.atomic_cas' compare-and-swap takes i32 or i64 elements, got f32}}
  %0 = "ttile.atomic_cas"(%c, %v, %m, %i) {order = "acq_rel", scope = "device"} : (f32, f32, memref<?xf32>, index) -> f32
  return
}

// -----

func.func @cas_not_memory(%m: vector<4xi32>, %i: index, %c: i32, %v: i32) {
  // expected-error @+1 {{'ttile.atomic_cas' accesses a memref, got vector<4xi32>}}
  %0 = "ttile.atomic_cas"(%c, %v, %m, %i) {order = "acq_rel", scope = "device"} : (i32, i32, vector<4xi32>, index) -> i32
  return
}

// -----

func.func @relaxed_fence() {
  // expected-error @+1 {{'ttile.fence' a relaxed fence orders nothing; order must be acquire, release, acq_rel or seq_cst}}
  "ttile.fence"() {order = "relaxed", scope = "device"} : () -> ()
  return
}

// -----

func.func @fence_scope() {
  // expected-error @+1 {{'ttile.fence' scope must be one of block, device, system; got 'cluster'}}
  "ttile.fence"() {order = "seq_cst", scope = "cluster"} : () -> ()
  return
}

// -----

func.func @fence_without_order() {
  // expected-error @+1 {{'ttile.fence' needs attribute 'order' (a string)}}
  "ttile.fence"() {scope = "device"} : () -> ()
  return
}
