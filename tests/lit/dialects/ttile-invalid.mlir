// One case per ttile verifier rule.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @axis_out_of_range() -> index {
  // expected-error @+1 {{'ttile.thread_id' axis must be 0 (x), 1 (y) or 2 (z), got 3}}
  %0 = "ttile.thread_id"() {dim = 3 : i64} : () -> index
  return %0 : index
}

// -----

func.func @negative_axis() -> index {
  // expected-error @+1 {{'ttile.block_dim' axis must be 0 (x), 1 (y) or 2 (z), got -1}}
  %0 = "ttile.block_dim"() {dim = -1 : i64} : () -> index
  return %0 : index
}

// -----

func.func @shuffle_type_mismatch(%v: f32, %off: index) -> i32 {
  // expected-error @+1 {{'ttile.shuffle_down' result type i32 must equal the shuffled value's type f32}}
  %0 = "ttile.shuffle_down"(%v, %off) : (f32, index) -> i32
  return %0 : i32
}

// -----

func.func @shuffle_vector(%v: vector<4xf32>, %off: index) -> vector<4xf32> {
  // expected-error @+1 {{'ttile.shuffle_down' shuffled value must be a scalar integer or float, got vector<4xf32>}}
  %0 = "ttile.shuffle_down"(%v, %off) : (vector<4xf32>, index) -> vector<4xf32>
  return %0 : vector<4xf32>
}

// -----

func.func @shuffle_negative_offset(%v: f32) -> f32 {
  %off = arith.constant -4 : index
  // expected-error @+1 {{'ttile.shuffle_down' offset must be non-negative, got -4}}
  %0 = "ttile.shuffle_down"(%v, %off) : (f32, index) -> f32
  return %0 : f32
}

// -----

func.func @xor_negative_mask(%v: f32) -> f32 {
  %m = arith.constant -1 : index
  // expected-error @+1 {{'ttile.shuffle_xor' mask must be non-negative, got -1}}
  %0 = "ttile.shuffle_xor"(%v, %m) : (f32, index) -> f32
  return %0 : f32
}

// -----

func.func @philox_seed(%i: index) -> f32 {
  // expected-error @+1 {{'ttile.philox_uniform' seed must be a 64-bit unsigned integer, got -1 : i64}}
  %0 = "ttile.philox_uniform"(%i) {seed = -1 : i64} : (index) -> f32
  return %0 : f32
}
