// One case per tod verifier rule.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @extent_not_positive() {
  // expected-error @+1 {{'tod.zero' result Din must be a positive integer or "?", got 0 : i64}}
  %0 = "tod.zero"() : () -> !tod.operator<0, 4, f32, f32>
  return
}

// -----

func.func @integer_entries() {
  // expected-error @+1 {{'tod.eye' result element type i32 must be a float or complex<float> type}}
  %0 = "tod.eye"() : () -> !tod.operator<4, 4, i32, f32>
  return
}

// -----

func.func @narrow_accumulator() {
  // expected-error @+1 {{'tod.eye' result accumulation type f32 must be a float at least as wide as f64}}
  %0 = "tod.eye"() : () -> !tod.operator<4, 4, f64, f32>
  return
}

// -----

func.func @not_an_operator(%t: tensor<4x4xf32>, %a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.compose' lhs must be a !tod.operator, got tensor<4x4xf32>}}
  %0 = "tod.compose"(%t, %a) : (tensor<4x4xf32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @eye_not_square() {
  // expected-error @+1 {{'tod.eye' needs a square operator: the identity maps 4 -> 8}}
  %0 = "tod.eye"() : () -> !tod.operator<4, 8, f32, f32>
  return
}

// -----

func.func @zero_dynamic() {
  // expected-error @+1 {{'tod.zero' needs static extents, got ? -> 4}}
  %0 = "tod.zero"() : () -> !tod.operator<"?", 4, f32, f32>
  return
}

// -----

func.func @dense_not_a_matrix(%m: tensor<8xf32>) {
  // expected-error @+1 {{'tod.dense' matrix must have rank 2, got tensor<8xf32>}}
  %0 = "tod.dense"(%m) : (tensor<8xf32>) -> !tod.operator<8, 8, f32, f32>
  return
}

// -----

func.func @dense_integer_matrix(%m: tensor<4x8xi32>) {
  // expected-error @+1 {{'tod.dense' matrix entries must be float or complex, got i32}}
  %0 = "tod.dense"(%m) : (tensor<4x8xi32>) -> !tod.operator<8, 4, f32, f32>
  return
}

// -----

func.func @dense_extents_swapped(%m: tensor<4x8xf32>) {
  // expected-error @+1 {{'tod.dense' result must be an operator 8 -> 4 of f32, got 4 -> 8 of f32}}
  %0 = "tod.dense"(%m) : (tensor<4x8xf32>) -> !tod.operator<4, 8, f32, f32>
  return
}

// -----

func.func @diag_of_matrix(%d: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.diag' diagonal must have rank 1, got tensor<4x4xf32>}}
  %0 = "tod.diag"(%d) : (tensor<4x4xf32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @projector_too_many_columns(%u: tensor<3x5xf32>) {
  // expected-error @+1 {{'tod.projector' basis of 5 columns in dimension 3 cannot be orthonormal: needs k <= n}}
  %0 = "tod.projector"(%u) : (tensor<3x5xf32>) -> !tod.operator<3, 3, f32, f32>
  return
}

// -----

func.func @fft_real() {
  // expected-error @+1 {{'tod.fft' is complex: the element type must be complex<float>, got f32}}
  %0 = "tod.fft"() : () -> !tod.operator<8, 8, f32, f32>
  return
}

// -----

func.func @ifft_not_square() {
  // expected-error @+1 {{'tod.ifft' needs a square operator: the transform maps 8 -> 4}}
  %0 = "tod.ifft"() : () -> !tod.operator<8, 4, complex<f32>, f32>
  return
}

// -----

func.func @conv1d_kernel_too_long(%h: tensor<9xf32>) {
  // expected-error @+1 {{'tod.conv1d' kernel of length 9 is longer than the signal length 8}}
  %0 = "tod.conv1d"(%h) : (tensor<9xf32>) -> !tod.operator<8, 8, f32, f32>
  return
}

// -----

func.func @kronecker_extents(%a: !tod.operator<2, 3, f32, f32>, %b: !tod.operator<4, 5, f32, f32>) {
  // expected-error @+1 {{'tod.kronecker' result must be an operator 8 -> 15 of f32, got 6 -> 8 of f32}}
  %0 = "tod.kronecker"(%a, %b) : (!tod.operator<2, 3, f32, f32>, !tod.operator<4, 5, f32, f32>) -> !tod.operator<6, 8, f32, f32>
  return
}

// -----

func.func @tensor_precisions(%a: !tod.operator<2, 2, f32, f32>, %b: !tod.operator<2, 2, f64, f64>) {
  // expected-error @+1 {{'tod.tensor' operands have different precisions: f32 and f64}}
  %0 = "tod.tensor"(%a, %b) : (!tod.operator<2, 2, f32, f32>, !tod.operator<2, 2, f64, f64>) -> !tod.operator<4, 4, f64, f64>
  return
}

// -----

func.func @direct_sum_extents(%a: !tod.operator<2, 3, f32, f32>, %b: !tod.operator<4, 5, f32, f32>) {
  // expected-error @+1 {{'tod.direct_sum' result must be an operator 6 -> 8 of f32, got 8 -> 15 of f32}}
  %0 = "tod.direct_sum"(%a, %b) : (!tod.operator<2, 3, f32, f32>, !tod.operator<4, 5, f32, f32>) -> !tod.operator<8, 15, f32, f32>
  return
}

// -----

func.func @compose_does_not_chain(%a: !tod.operator<4, 2, f32, f32>, %b: !tod.operator<4, 8, f32, f32>) {
  // expected-error @+1 {{'tod.compose' extents do not chain: rhs maps 4 -> 8 but lhs takes 4}}
  %0 = "tod.compose"(%a, %b) : (!tod.operator<4, 2, f32, f32>, !tod.operator<4, 8, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  return
}

// -----

func.func @compose_real_result_of_complex(%a: !tod.operator<4, 4, f32, f32>, %f: !tod.operator<4, 4, complex<f32>, f32>) {
  // expected-error @+1 {{'tod.compose' result must be an operator 4 -> 4 of complex<f32>, got 4 -> 4 of f32}}
  %0 = "tod.compose"(%a, %f) : (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, complex<f32>, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @adjoint_not_transposed(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.adjoint' result must be an operator 2 -> 4 of f32, got 4 -> 2 of f32}}
  %0 = "tod.adjoint"(%a) : (!tod.operator<4, 2, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  return
}

// -----

func.func @plus_extents(%a: !tod.operator<4, 2, f32, f32>, %b: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.plus' operands must have equal extents: 4 -> 2 and 4 -> 4}}
  %0 = "tod.plus"(%a, %b) : (!tod.operator<4, 2, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  return
}

// -----

func.func @scale_by_vector(%s: tensor<4xf32>, %a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.scale' factor must have rank 0, got tensor<4xf32>}}
  %0 = "tod.scale"(%s, %a) : (tensor<4xf32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @scale_by_integer(%s: tensor<i32>, %a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.scale' factor must hold a float or complex number, got tensor<i32>}}
  %0 = "tod.scale"(%s, %a) : (tensor<i32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @power_negative(%a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.power' exponent must be non-negative, got -1}}
  %0 = "tod.power"(%a) {exponent = -1 : i64} : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @power_not_square(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.power' needs a square operator: the operator maps 4 -> 2}}
  %0 = "tod.power"(%a) {exponent = 2 : i64} : (!tod.operator<4, 2, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  return
}

// -----

func.func @commutator_two_spaces(%a: !tod.operator<4, 4, f32, f32>, %b: !tod.operator<2, 2, f32, f32>) {
  // expected-error @+1 {{'tod.commutator' operands must act on one space: 4 and 2}}
  %0 = "tod.commutator"(%a, %b) : (!tod.operator<4, 4, f32, f32>, !tod.operator<2, 2, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @commutator_not_square(%a: !tod.operator<4, 2, f32, f32>, %b: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.commutator' needs a square operator: lhs maps 4 -> 2}}
  %0 = "tod.commutator"(%a, %b) : (!tod.operator<4, 2, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @sym_not_square(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.sym' needs a square operator: the operator maps 4 -> 2}}
  %0 = "tod.sym"(%a) : (!tod.operator<4, 2, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  return
}

// -----

func.func @skew_not_square(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.skew' needs a square operator: the operator maps 4 -> 2}}
  %0 = "tod.skew"(%a) : (!tod.operator<4, 2, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  return
}

// -----

func.func @expm_not_square(%a: !tod.operator<"?", 2, f32, f32>) {
  // expected-error @+1 {{'tod.expm' result must be an operator ? -> 2 of f32, got 2 -> 3 of f32}}
  %0 = "tod.expm"(%a) : (!tod.operator<"?", 2, f32, f32>) -> !tod.operator<2, 3, f32, f32>
  return
}

// -----

func.func @resolvent_not_square(%a: !tod.operator<4, 2, f32, f32>, %z: tensor<f32>) {
  // expected-error @+1 {{'tod.resolvent' needs a square operator: the operator maps 4 -> 2}}
  %0 = "tod.resolvent"(%a, %z) : (!tod.operator<4, 2, f32, f32>, tensor<f32>) -> !tod.operator<4, 2, f32, f32>
  return
}

// -----

func.func @resolvent_precisions(%a: !tod.operator<4, 4, f32, f32>, %z: tensor<f64>) {
  // expected-error @+1 {{'tod.resolvent' operator and z have different precisions: f32 and f64}}
  %0 = "tod.resolvent"(%a, %z) : (!tod.operator<4, 4, f32, f32>, tensor<f64>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @apply_to_scalar(%a: !tod.operator<4, 4, f32, f32>, %x: tensor<f32>) {
  // expected-error @+1 {{'tod.apply' input must have rank >= 1 (a vector, or a stack of column vectors)}}
  %0 = "tod.apply"(%a, %x) : (!tod.operator<4, 4, f32, f32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @apply_length(%a: !tod.operator<8, 4, f32, f32>, %x: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'tod.apply' operator takes vectors of length 8 but axis 1 of the input has 4}}
  %0 = "tod.apply"(%a, %x) : (!tod.operator<8, 4, f32, f32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  return
}

// -----

func.func @apply_result(%a: !tod.operator<8, 4, f32, f32>, %x: tensor<8x3xf32>) {
  // expected-error @+1 {{'tod.apply' result must be a tensor<4x3xf32>, got tensor<8x3xf32>}}
  %0 = "tod.apply"(%a, %x) : (!tod.operator<8, 4, f32, f32>, tensor<8x3xf32>) -> tensor<8x3xf32>
  return
}

// -----

func.func @apply_integers(%a: !tod.operator<4, 4, f32, f32>, %x: tensor<4xi32>) {
  // expected-error @+1 {{'tod.apply' input entries must be float or complex, got i32}}
  %0 = "tod.apply"(%a, %x) : (!tod.operator<4, 4, f32, f32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @eig_not_square(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.spectral' needs a square operator: the operator maps 4 -> 2}}
  %0 = "tod.spectral"(%a) : (!tod.operator<4, 2, f32, f32>) -> !tod.spectral_operator<4, 2, 2, complex<f32>, "eig">
  return
}

// -----

func.func @eig_real(%a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.spectral' result must be a !tod.spectral_operator<4, 4, 4, complex<f32>, "eig"> (an eig of the operand)}}
  %0 = "tod.spectral"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.spectral_operator<4, 4, 4, f32, "eig">
  return
}

// -----

func.func @svd_rank(%a: !tod.operator<8, 4, f32, f32>) {
  // expected-error @+1 {{'tod.spectral' result must be a !tod.spectral_operator<8, 4, 4, f32, "svd"> (an svd of the operand)}}
  %0 = "tod.spectral"(%a) : (!tod.operator<8, 4, f32, f32>) -> !tod.spectral_operator<8, 4, 8, f32, "svd">
  return
}

// -----

func.func @unknown_kind(%a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.spectral' result kind must be one of svd, eig, eigh, got 'qr'}}
  %0 = "tod.spectral"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.spectral_operator<4, 4, 4, f32, "qr">
  return
}

// -----

func.func @truncate_zero(%s: !tod.spectral_operator<4, 4, 4, f32, "svd">) {
  // expected-error @+1 {{'tod.truncate' k must be at least 1, got 0}}
  %0 = "tod.truncate"(%s) {k = 0 : i64} : (!tod.spectral_operator<4, 4, 4, f32, "svd">) -> !tod.spectral_operator<4, 4, 0, f32, "svd">
  return
}

// -----

func.func @truncate_past_rank(%s: !tod.spectral_operator<4, 4, 4, f32, "svd">) {
  // expected-error @+1 {{'tod.truncate' k = 5 exceeds the factorization's rank 4}}
  %0 = "tod.truncate"(%s) {k = 5 : i64} : (!tod.spectral_operator<4, 4, 4, f32, "svd">) -> !tod.spectral_operator<4, 4, 5, f32, "svd">
  return
}

// -----

func.func @truncate_result(%s: !tod.spectral_operator<4, 4, 4, f32, "svd">) {
  // expected-error @+1 {{'tod.truncate' result must be the operand's type with rank 2}}
  %0 = "tod.truncate"(%s) {k = 2 : i64} : (!tod.spectral_operator<4, 4, 4, f32, "svd">) -> !tod.spectral_operator<4, 4, 3, f32, "svd">
  return
}

// -----

func.func @reconstruct_result(%s: !tod.spectral_operator<4, 4, 4, complex<f32>, "eig">) {
  // expected-error @+1 {{'tod.reconstruct' result must be an operator 4 -> 4 of complex<f32>, got 4 -> 4 of f32}}
  %0 = "tod.reconstruct"(%s) : (!tod.spectral_operator<4, 4, 4, complex<f32>, "eig">) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @pseudoinverse_of_eig(%s: !tod.spectral_operator<4, 4, 4, complex<f32>, "eig">) {
  // expected-error @+1 {{'tod.pseudoinverse' needs an svd or eigh factorization}}
  %0 = "tod.pseudoinverse"(%s) {rcond = 0.0 : f64} : (!tod.spectral_operator<4, 4, 4, complex<f32>, "eig">) -> !tod.operator<4, 4, complex<f32>, f32>
  return
}

// -----

func.func @pseudoinverse_rcond(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.pseudoinverse' rcond must be in [0, 1), got 1.0}}
  %0 = "tod.pseudoinverse"(%a) {rcond = 1.0 : f64} : (!tod.operator<4, 2, f32, f32>) -> !tod.operator<2, 4, f32, f32>
  return
}

// -----

func.func @norm_complex(%a: !tod.operator<4, 4, complex<f32>, f32>) {
  // expected-error @+1 {{'tod.norm' result must be a tensor<f32>, got tensor<complex<f32>>}}
  %0 = "tod.norm"(%a) : (!tod.operator<4, 4, complex<f32>, f32>) -> tensor<complex<f32>>
  return
}

// -----

func.func @is_unitary_tol(%a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.is_unitary' tol must be positive, got 0.0}}
  %0 = "tod.is_unitary"(%a) {tol = 0.0 : f64} : (!tod.operator<4, 4, f32, f32>) -> tensor<i1>
  return
}

// -----

func.func @spectral_radius_not_square(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.spectral_radius' needs a square operator: the operator maps 4 -> 2}}
  %0 = "tod.spectral_radius"(%a) : (!tod.operator<4, 2, f32, f32>) -> tensor<f32>
  return
}

// -----

func.func @power_without_exponent(%a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.power' needs attribute 'exponent' (an integer)}}
  %0 = "tod.power"(%a) : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return
}

// -----

func.func @truncate_float_k(%s: !tod.spectral_operator<4, 4, 4, f32, "svd">) {
  // expected-error @+1 {{'tod.truncate' attribute 'k' must be an integer, got 2.000000e+00 : f32}}
  %0 = "tod.truncate"(%s) {k = 2.0 : f32} : (!tod.spectral_operator<4, 4, 4, f32, "svd">) -> !tod.spectral_operator<4, 4, 2, f32, "svd">
  return
}

// -----

func.func @truncate_an_operator(%a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.truncate' operand must be a !tod.spectral_operator, got !tod.operator<4 : i64, 4 : i64, f32, f32>}}
  %0 = "tod.truncate"(%a) {k = 2 : i64} : (!tod.operator<4, 4, f32, f32>) -> !tod.spectral_operator<4, 4, 2, f32, "svd">
  return
}

// -----

func.func @pseudoinverse_without_rcond(%a: !tod.operator<4, 2, f32, f32>) {
  // expected-error @+1 {{'tod.pseudoinverse' needs attribute 'rcond' (a float)}}
  %0 = "tod.pseudoinverse"(%a) : (!tod.operator<4, 2, f32, f32>) -> !tod.operator<2, 4, f32, f32>
  return
}

// -----

func.func @matrix_shape(%a: !tod.operator<4, 8, f32, f32>) {
  // expected-error @+1 {{'tod.matrix' result must be a tensor<8x4xf32>, got tensor<4x8xf32>}}
  %0 = "tod.matrix"(%a) : (!tod.operator<4, 8, f32, f32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @expm_derivative_not_square(%a: !tod.operator<4, 8, f32, f32>, %d: tensor<8x4xf32>) {
  // expected-error @+1 {{'tod.expm_derivative' needs a square operator: the operator maps 4 -> 8}}
  %0 = "tod.expm_derivative"(%a, %d) : (!tod.operator<4, 8, f32, f32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @expm_derivative_complex(%a: !tod.operator<4, 4, complex<f32>, f32>, %d: tensor<4x4xcomplex<f32>>) {
  // expected-error @+1 {{'tod.expm_derivative' needs a real operator, got entries of complex<f32>}}
  %0 = "tod.expm_derivative"(%a, %d) : (!tod.operator<4, 4, complex<f32>, f32>, tensor<4x4xcomplex<f32>>) -> tensor<4x4xcomplex<f32>>
  return
}

// -----

func.func @expm_derivative_direction(%a: !tod.operator<4, 4, f32, f32>, %d: tensor<4x4xf64>) {
  // expected-error @+1 {{'tod.expm_derivative' direction must be a tensor<4x4xf32> (the operand's matrix shape), got tensor<4x4xf64>}}
  %0 = "tod.expm_derivative"(%a, %d) : (!tod.operator<4, 4, f32, f32>, tensor<4x4xf64>) -> tensor<4x4xf32>
  return
}

// -----

func.func @expm_derivative_result(%a: !tod.operator<4, 4, f32, f32>, %d: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.expm_derivative' result must be a tensor<4x4xf32>, got tensor<4x4xf64>}}
  %0 = "tod.expm_derivative"(%a, %d) : (!tod.operator<4, 4, f32, f32>, tensor<4x4xf32>) -> tensor<4x4xf64>
  return
}

// -----

func.func @spectral_derivative_complex(%a: !tod.operator<4, 4, complex<f32>, f32>, %d: tensor<4x4xcomplex<f32>>) {
  // expected-error @+1 {{'tod.spectral_derivative' needs a real operator, got entries of complex<f32>}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "svd", rank = 0 : i64, function = "reconstruct", rcond = 0.0 : f64} : (!tod.operator<4, 4, complex<f32>, f32>, tensor<4x4xcomplex<f32>>) -> tensor<4x4xcomplex<f32>>
  return
}

// -----

func.func @spectral_derivative_kind(%a: !tod.operator<4, 4, f32, f32>, %d: tensor<4x4xf32>) {
  // expected-error @+1 {{'tod.spectral_derivative' kind must be svd or eigh, got 'eig'}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "eig", rank = 0 : i64, function = "reconstruct", rcond = 0.0 : f64} : (!tod.operator<4, 4, f32, f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @spectral_derivative_eigh_square(%a: !tod.operator<4, 8, f32, f32>, %d: tensor<8x4xf32>) {
  // expected-error @+1 {{'tod.spectral_derivative' needs a square operator: the operator maps 4 -> 8}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "eigh", rank = 0 : i64, function = "reconstruct", rcond = 0.0 : f64} : (!tod.operator<4, 8, f32, f32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @spectral_derivative_rank(%a: !tod.operator<4, 8, f32, f32>, %d: tensor<8x4xf32>) {
  // expected-error @+1 {{'tod.spectral_derivative' rank must be in [0, 4] (0: every term), got 5}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "svd", rank = 5 : i64, function = "reconstruct", rcond = 0.0 : f64} : (!tod.operator<4, 8, f32, f32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @spectral_derivative_function(%a: !tod.operator<4, 8, f32, f32>, %d: tensor<8x4xf32>) {
  // expected-error @+1 {{'tod.spectral_derivative' function must be one of reconstruct, pseudoinverse, got 'expm'}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "svd", rank = 0 : i64, function = "expm", rcond = 0.0 : f64} : (!tod.operator<4, 8, f32, f32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @spectral_derivative_rcond(%a: !tod.operator<4, 8, f32, f32>, %d: tensor<8x4xf32>) {
  // expected-error @+1 {{'tod.spectral_derivative' rcond must be in [0, 1) for pseudoinverse and 0 for reconstruct, got 0.001}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "svd", rank = 0 : i64, function = "reconstruct", rcond = 1.0e-3 : f64} : (!tod.operator<4, 8, f32, f32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @spectral_derivative_direction(%a: !tod.operator<4, 8, f32, f32>, %d: tensor<4x8xf32>) {
  // expected-error @+1 {{'tod.spectral_derivative' direction must be a tensor<8x4xf32> (the operand's matrix shape), got tensor<4x8xf32>}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "svd", rank = 2 : i64, function = "pseudoinverse", rcond = 0.0 : f64} : (!tod.operator<4, 8, f32, f32>, tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @spectral_derivative_result(%a: !tod.operator<4, 8, f32, f32>, %d: tensor<8x4xf32>) {
  // expected-error @+1 {{'tod.spectral_derivative' result must be a tensor<8x4xf32>, got tensor<4x8xf32>}}
  %0 = "tod.spectral_derivative"(%a, %d) {kind = "svd", rank = 2 : i64, function = "pseudoinverse", rcond = 0.0 : f64} : (!tod.operator<4, 8, f32, f32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @conv1d_cotangent_not_square(%c: tensor<6x5xf32>, %h: tensor<3xf32>) {
  // expected-error @+1 {{'tod.conv1d_cotangent' cotangent must be a square matrix of the kernel's entries f32, got tensor<6x5xf32>}}
  %0 = "tod.conv1d_cotangent"(%c, %h) : (tensor<6x5xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @conv1d_cotangent_long_kernel(%c: tensor<2x2xf32>, %h: tensor<3xf32>) {
  // expected-error @+1 {{'tod.conv1d_cotangent' kernel of length 3 is longer than the signal length 2}}
  %0 = "tod.conv1d_cotangent"(%c, %h) : (tensor<2x2xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @conv1d_cotangent_result(%c: tensor<6x6xf32>, %h: tensor<3xf32>) {
  // expected-error @+1 {{'tod.conv1d_cotangent' result must be a tensor<3xf32>, got tensor<6xf32>}}
  %0 = "tod.conv1d_cotangent"(%c, %h) : (tensor<6x6xf32>, tensor<3xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @direct_sum_cotangent_shape(%c: tensor<6x6xf32>, %a: !tod.operator<3, 2, f32, f32>, %b: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.direct_sum_cotangent' cotangent must be a tensor<6x7xf32> (the sum's matrix shape), got tensor<6x6xf32>}}
  %0 = "tod.direct_sum_cotangent"(%c, %a, %b) {part = 0 : i64} : (tensor<6x6xf32>, !tod.operator<3, 2, f32, f32>, !tod.operator<4, 4, f32, f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @direct_sum_cotangent_part(%c: tensor<6x7xf32>, %a: !tod.operator<3, 2, f32, f32>, %b: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.direct_sum_cotangent' part must be 0 (lhs) or 1 (rhs), got 2}}
  %0 = "tod.direct_sum_cotangent"(%c, %a, %b) {part = 2 : i64} : (tensor<6x7xf32>, !tod.operator<3, 2, f32, f32>, !tod.operator<4, 4, f32, f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @direct_sum_cotangent_result(%c: tensor<6x7xf32>, %a: !tod.operator<3, 2, f32, f32>, %b: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.direct_sum_cotangent' result must be a tensor<4x4xf32>, got tensor<2x3xf32>}}
  %0 = "tod.direct_sum_cotangent"(%c, %a, %b) {part = 1 : i64} : (tensor<6x7xf32>, !tod.operator<3, 2, f32, f32>, !tod.operator<4, 4, f32, f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @spectral_radius_gradient_not_square(%a: !tod.operator<4, 8, f32, f32>) {
  // expected-error @+1 {{'tod.spectral_radius_gradient' needs a square operator: the operator maps 4 -> 8}}
  %0 = "tod.spectral_radius_gradient"(%a) : (!tod.operator<4, 8, f32, f32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @spectral_radius_gradient_complex(%a: !tod.operator<4, 4, complex<f32>, f32>) {
  // expected-error @+1 {{'tod.spectral_radius_gradient' needs a real operator, got entries of complex<f32>}}
  %0 = "tod.spectral_radius_gradient"(%a) : (!tod.operator<4, 4, complex<f32>, f32>) -> tensor<4x4xcomplex<f32>>
  return
}

// -----

func.func @spectral_radius_gradient_result(%a: !tod.operator<4, 4, f32, f32>) {
  // expected-error @+1 {{'tod.spectral_radius_gradient' result must be a tensor<4x4xf32>, got tensor<4x4xf64>}}
  %0 = "tod.spectral_radius_gradient"(%a) : (!tod.operator<4, 4, f32, f32>) -> tensor<4x4xf64>
  return
}
