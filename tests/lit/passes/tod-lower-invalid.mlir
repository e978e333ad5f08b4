// tessera-tod-lower's refusals, at the op without a lowering, naming it and the target.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(tessera-tod-lower{target=ptx})'

func.func @is_unitary(%m: tensor<4x4xf32>) -> tensor<i1> {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  // expected-error @+1 {{'tod.is_unitary' has no kernel lowering yet on ptx (run it with tessera.interpret)}}
  %r = "tod.is_unitary"(%a) {tol = 1.0e-4 : f64} : (!tod.operator<4, 4, f32, f32>) -> tensor<i1>
  return %r : tensor<i1>
}

// -----

func.func @spectral_radius_too_large(%m: tensor<65x65xf32>) -> tensor<f32> {
  %a = "tod.dense"(%m) : (tensor<65x65xf32>) -> !tod.operator<65, 65, f32, f32>
  // expected-error @+1 {{'tod.spectral_radius' has no kernel lowering yet on ptx: the spectral radius of a 65×65 operator is larger than its one-thread kernel takes, at most 64×64 (run it with tessera.interpret)}}
  %r = "tod.spectral_radius"(%a) : (!tod.operator<65, 65, f32, f32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @eig(%m: tensor<4x4xf32>, %x: tensor<4xf32>) -> tensor<4xcomplex<f32>> {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  // expected-error @+1 {{'tod.spectral' has no kernel lowering yet on ptx: the general eigendecomposition (kind="eig") has complex factors, which compile only as svd or eigh (self-adjoint) ones (run it with tessera.interpret)}}
  %s = "tod.spectral"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.spectral_operator<4, 4, 4, complex<f32>, "eig">
  %r = "tod.reconstruct"(%s) : (!tod.spectral_operator<4, 4, 4, complex<f32>, "eig">) -> !tod.operator<4, 4, complex<f32>, f32>
  %y = "tod.apply"(%r, %x) : (!tod.operator<4, 4, complex<f32>, f32>, tensor<4xf32>) -> tensor<4xcomplex<f32>>
  return %y : tensor<4xcomplex<f32>>
}

// -----

func.func @svd_too_large(%m: tensor<100x70xf64>, %x: tensor<70xf64>) -> tensor<100xf64> {
  %a = "tod.dense"(%m) : (tensor<100x70xf64>) -> !tod.operator<70, 100, f64, f64>
  // expected-error @+1 {{'tod.spectral' has no kernel lowering yet on ptx: an svd of a 100×70 operator is larger than the one-thread Jacobi kernel takes, at most 64 (the smaller extent) and 4096 (the larger) (run it with tessera.interpret)}}
  %s = "tod.spectral"(%a) : (!tod.operator<70, 100, f64, f64>) -> !tod.spectral_operator<70, 100, 70, f64, "svd">
  %r = "tod.reconstruct"(%s) : (!tod.spectral_operator<70, 100, 70, f64, "svd">) -> !tod.operator<70, 100, f64, f64>
  %y = "tod.apply"(%r, %x) : (!tod.operator<70, 100, f64, f64>, tensor<70xf64>) -> tensor<100xf64>
  return %y : tensor<100xf64>
}

// -----

func.func @expm_complex(%x: tensor<8xf32>) -> tensor<8xcomplex<f32>> {
  %f = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  // expected-error @+1 {{'tod.expm' has no kernel lowering yet on ptx for the complex operator of complex<f32> entries (run it with tessera.interpret)}}
  %e = "tod.expm"(%f) : (!tod.operator<8, 8, complex<f32>, f32>) -> !tod.operator<8, 8, complex<f32>, f32>
  %y = "tod.apply"(%e, %x) : (!tod.operator<8, 8, complex<f32>, f32>, tensor<8xf32>) -> tensor<8xcomplex<f32>>
  return %y : tensor<8xcomplex<f32>>
}

// -----

func.func @expm_dynamic(%m: tensor<?x?xf32>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %a = "tod.dense"(%m) : (tensor<?x?xf32>) -> !tod.operator<"?", "?", f32, f32>
  // expected-error @+1 {{'tod.expm' has no kernel lowering yet on ptx for an operator of extents known only at run time (run it with tessera.interpret)}}
  %e = "tod.expm"(%a) : (!tod.operator<"?", "?", f32, f32>) -> !tod.operator<"?", "?", f32, f32>
  %y = "tod.apply"(%e, %x) : (!tod.operator<"?", "?", f32, f32>, tensor<?xf32>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

func.func @complex_read(%x: tensor<8xf32>) -> tensor<8xcomplex<f32>> {
  %f = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  %y = "tod.apply"(%f, %x) : (!tod.operator<8, 8, complex<f32>, f32>, tensor<8xf32>) -> tensor<8xcomplex<f32>>
  // expected-error @+1 {{'ttensor.unary' of a complex tensor has no kernel lowering on ptx: a complex tensor is an operator's result, returned or applied to (run it with tessera.interpret)}}
  %z = "ttensor.unary"(%y) {fn = "neg"} : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
  return %z : tensor<8xcomplex<f32>>
}

// -----

func.func @fft_size(%x: tensor<300000001xf32>) -> tensor<300000001xcomplex<f32>> {
  // expected-error @+1 {{'tod.fft' has no kernel lowering yet on ptx: a Fourier transform of size 300000001 is larger than the 4096 its DFT as GEMMs takes (the FFT takes powers of two, Bluestein's other sizes up to 268435456, both of tensors of static extents with at most 536870912 entries once padded) (run it with tessera.interpret)}}
  %f = "tod.fft"() : () -> !tod.operator<300000001, 300000001, complex<f32>, f32>
  %y = "tod.apply"(%f, %x) : (!tod.operator<300000001, 300000001, complex<f32>, f32>, tensor<300000001xf32>) -> tensor<300000001xcomplex<f32>>
  return %y : tensor<300000001xcomplex<f32>>
}

// -----

func.func @norm_complex(%x: tensor<8xf32>) -> tensor<f32> {
  %f = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  // expected-error @+1 {{'tod.norm' has no kernel lowering yet on ptx: an svd of the complex operator of complex<f32> entries is not lowered yet (run it with tessera.interpret)}}
  %n = "tod.norm"(%f) : (!tod.operator<8, 8, complex<f32>, f32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

func.func @kronecker_dynamic(%a: tensor<2x2xf32>, %b: tensor<3x3xf32>, %x: tensor<6x?xf32>) -> tensor<6x?xf32> {
  %da = "tod.dense"(%a) : (tensor<2x2xf32>) -> !tod.operator<2, 2, f32, f32>
  %db = "tod.dense"(%b) : (tensor<3x3xf32>) -> !tod.operator<3, 3, f32, f32>
  // expected-error @+1 {{'tod.kronecker' has no kernel lowering yet on ptx: a Kronecker product lowers with static extents only}}
  %k = "tod.kronecker"(%da, %db) : (!tod.operator<2, 2, f32, f32>, !tod.operator<3, 3, f32, f32>) -> !tod.operator<6, 6, f32, f32>
  %y = "tod.apply"(%k, %x) : (!tod.operator<6, 6, f32, f32>, tensor<6x?xf32>) -> tensor<6x?xf32>
  return %y : tensor<6x?xf32>
}

// -----

func.func @dynamic_stack(%m: tensor<4x4xf32>, %x: tensor<?x4x2xf32>) -> tensor<?x4x2xf32> {
  %a = "tod.dense"(%m) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  // expected-error @+1 {{a stack of column vectors [?, 4, 2] with extents known only at run time cannot be lowered on ptx yet}}
  %y = "tod.apply"(%a, %x) : (!tod.operator<4, 4, f32, f32>, tensor<?x4x2xf32>) -> tensor<?x4x2xf32>
  return %y : tensor<?x4x2xf32>
}
