// The warp lowering's own rules, reported at the op.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics --tessera-simt-to-warps

func.func @divergent_loop(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{a loop's bounds must be the same on every lane of a warp}}
  scf.for %k = %c0 to %i step %c1 {
  }
  return
}

// -----

func.func @varying_shuffle_offset(%X: memref<?xf32> {tessera.dims = ["N"], tessera.name = "X"}) attributes {tessera.kernel} {
  %i = "ttile.thread_id"() {dim = 0 : i64} : () -> index
  %v = memref.load %X[%i] : memref<?xf32>
  // expected-error @+1 {{'ttile.shuffle_down' offset must be the same on every lane of a warp}}
  %s = "ttile.shuffle_down"(%v, %i) : (f32, index) -> f32
  memref.store %s, %X[%i] : memref<?xf32>
  return
}
