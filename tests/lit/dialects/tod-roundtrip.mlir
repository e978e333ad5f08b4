// Every tod op and type parses, prints and parses again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @constructors
// CHECK-SAME:    (%[[M:.+]]: tensor<4x8xf32>, %[[D:.+]]: tensor<8xf32>, %[[U:.+]]: tensor<8x2xf32>, %[[H:.+]]: tensor<3xf32>)
func.func @constructors(%m: tensor<4x8xf32>, %d: tensor<8xf32>, %u: tensor<8x2xf32>, %h: tensor<3xf32>)
    -> (!tod.operator<8, 8, f32, f32>, !tod.operator<4, 8, f32, f32>, !tod.operator<8, 4, f32, f32>,
        !tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, complex<f32>, f32>,
        !tod.operator<8, 8, complex<f32>, f32>, !tod.operator<8, 8, f32, f32>) {
  // CHECK: "tod.eye"() : () -> !tod.operator<8 : i64, 8 : i64, f32, f32>
  %0 = "tod.eye"() : () -> !tod.operator<8, 8, f32, f32>
  // CHECK: "tod.zero"() : () -> !tod.operator<4 : i64, 8 : i64, f32, f32>
  %1 = "tod.zero"() : () -> !tod.operator<4, 8, f32, f32>
  // CHECK: "tod.dense"(%[[M]]) : (tensor<4x8xf32>) -> !tod.operator<8 : i64, 4 : i64, f32, f32>
  %2 = "tod.dense"(%m) : (tensor<4x8xf32>) -> !tod.operator<8, 4, f32, f32>
  // CHECK: "tod.diag"(%[[D]]) : (tensor<8xf32>) -> !tod.operator<8 : i64, 8 : i64, f32, f32>
  %3 = "tod.diag"(%d) : (tensor<8xf32>) -> !tod.operator<8, 8, f32, f32>
  // CHECK: "tod.projector"(%[[U]]) : (tensor<8x2xf32>) -> !tod.operator<8 : i64, 8 : i64, f32, f32>
  %4 = "tod.projector"(%u) : (tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32>
  // CHECK: "tod.fft"() : () -> !tod.operator<8 : i64, 8 : i64, complex<f32>, f32>
  %5 = "tod.fft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  // CHECK: "tod.ifft"() : () -> !tod.operator<8 : i64, 8 : i64, complex<f32>, f32>
  %6 = "tod.ifft"() : () -> !tod.operator<8, 8, complex<f32>, f32>
  // CHECK: "tod.conv1d"(%[[H]]) : (tensor<3xf32>) -> !tod.operator<8 : i64, 8 : i64, f32, f32>
  %7 = "tod.conv1d"(%h) : (tensor<3xf32>) -> !tod.operator<8, 8, f32, f32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : !tod.operator<8, 8, f32, f32>, !tod.operator<4, 8, f32, f32>,
      !tod.operator<8, 4, f32, f32>, !tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, f32, f32>,
      !tod.operator<8, 8, complex<f32>, f32>, !tod.operator<8, 8, complex<f32>, f32>, !tod.operator<8, 8, f32, f32>
}

// CHECK-LABEL: func.func @structure
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<2 : i64, 3 : i64, f32, f32>, %[[B:.+]]: !tod.operator<4 : i64, 5 : i64, f32, f32>)
func.func @structure(%a: !tod.operator<2, 3, f32, f32>, %b: !tod.operator<4, 5, f32, f32>)
    -> (!tod.operator<8, 15, f32, f32>, !tod.operator<8, 15, f32, f32>, !tod.operator<6, 8, f32, f32>) {
  // CHECK: "tod.kronecker"(%[[A]], %[[B]]) : (!tod.operator<2 : i64, 3 : i64, f32, f32>, !tod.operator<4 : i64, 5 : i64, f32, f32>) -> !tod.operator<8 : i64, 15 : i64, f32, f32>
  %0 = "tod.kronecker"(%a, %b) : (!tod.operator<2, 3, f32, f32>, !tod.operator<4, 5, f32, f32>) -> !tod.operator<8, 15, f32, f32>
  // CHECK: "tod.tensor"(%[[A]], %[[B]]) : (!tod.operator<2 : i64, 3 : i64, f32, f32>, !tod.operator<4 : i64, 5 : i64, f32, f32>) -> !tod.operator<8 : i64, 15 : i64, f32, f32>
  %1 = "tod.tensor"(%a, %b) : (!tod.operator<2, 3, f32, f32>, !tod.operator<4, 5, f32, f32>) -> !tod.operator<8, 15, f32, f32>
  // CHECK: "tod.direct_sum"(%[[A]], %[[B]]) : (!tod.operator<2 : i64, 3 : i64, f32, f32>, !tod.operator<4 : i64, 5 : i64, f32, f32>) -> !tod.operator<6 : i64, 8 : i64, f32, f32>
  %2 = "tod.direct_sum"(%a, %b) : (!tod.operator<2, 3, f32, f32>, !tod.operator<4, 5, f32, f32>) -> !tod.operator<6, 8, f32, f32>
  return %0, %1, %2 : !tod.operator<8, 15, f32, f32>, !tod.operator<8, 15, f32, f32>, !tod.operator<6, 8, f32, f32>
}

// CHECK-LABEL: func.func @algebra
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<"?", "?", f64, f64>, %[[B:.+]]: !tod.operator<"?", "?", f64, f64>, %[[S:.+]]: tensor<f64>, %[[Z:.+]]: tensor<complex<f64>>)
func.func @algebra(%a: !tod.operator<"?", "?", f64, f64>, %b: !tod.operator<"?", "?", f64, f64>, %s: tensor<f64>,
                   %z: tensor<complex<f64>>) -> !tod.operator<"?", "?", complex<f64>, f64> {
  // CHECK: "tod.compose"(%[[A]], %[[B]]) : (!tod.operator<"?", "?", f64, f64>, !tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  %0 = "tod.compose"(%a, %b) : (!tod.operator<"?", "?", f64, f64>, !tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.adjoint"
  %1 = "tod.adjoint"(%0) : (!tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.plus"
  %2 = "tod.plus"(%1, %a) : (!tod.operator<"?", "?", f64, f64>, !tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.scale"(%[[S]], %{{.+}}) : (tensor<f64>, !tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  %3 = "tod.scale"(%s, %2) : (tensor<f64>, !tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.power"(%{{.+}}) {exponent = 3 : i64}
  %4 = "tod.power"(%3) {exponent = 3 : i64} : (!tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.commutator"
  %5 = "tod.commutator"(%4, %a) : (!tod.operator<"?", "?", f64, f64>, !tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.sym"
  %6 = "tod.sym"(%5) : (!tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.skew"
  %7 = "tod.skew"(%6) : (!tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.expm"
  %8 = "tod.expm"(%7) : (!tod.operator<"?", "?", f64, f64>) -> !tod.operator<"?", "?", f64, f64>
  // CHECK: "tod.resolvent"(%{{.+}}, %[[Z]]) : (!tod.operator<"?", "?", f64, f64>, tensor<complex<f64>>) -> !tod.operator<"?", "?", complex<f64>, f64>
  %9 = "tod.resolvent"(%8, %z) : (!tod.operator<"?", "?", f64, f64>, tensor<complex<f64>>) -> !tod.operator<"?", "?", complex<f64>, f64>
  return %9 : !tod.operator<"?", "?", complex<f64>, f64>
}

// CHECK-LABEL: func.func @application
func.func @application(%a: !tod.operator<8, 4, f32, f32>, %x: tensor<8xf32>, %xs: tensor<2x8x3xf32>,
                       %f: !tod.operator<8, 8, complex<f32>, f32>) -> (tensor<4xf32>, tensor<2x4x3xf32>, tensor<8xcomplex<f32>>) {
  // CHECK: "tod.apply"(%{{.+}}, %{{.+}}) : (!tod.operator<8 : i64, 4 : i64, f32, f32>, tensor<8xf32>) -> tensor<4xf32>
  %0 = "tod.apply"(%a, %x) : (!tod.operator<8, 4, f32, f32>, tensor<8xf32>) -> tensor<4xf32>
  // CHECK: "tod.apply"(%{{.+}}, %{{.+}}) : (!tod.operator<8 : i64, 4 : i64, f32, f32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
  %1 = "tod.apply"(%a, %xs) : (!tod.operator<8, 4, f32, f32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
  // CHECK: "tod.apply"(%{{.+}}, %{{.+}}) : (!tod.operator<8 : i64, 8 : i64, complex<f32>, f32>, tensor<8xf32>) -> tensor<8xcomplex<f32>>
  %2 = "tod.apply"(%f, %x) : (!tod.operator<8, 8, complex<f32>, f32>, tensor<8xf32>) -> tensor<8xcomplex<f32>>
  return %0, %1, %2 : tensor<4xf32>, tensor<2x4x3xf32>, tensor<8xcomplex<f32>>
}

// CHECK-LABEL: func.func @spectral
func.func @spectral(%a: !tod.operator<8, 4, f32, f32>, %b: !tod.operator<6, 6, f32, f32>)
    -> (!tod.operator<8, 4, f32, f32>, !tod.operator<4, 8, f32, f32>, !tod.operator<4, 8, f32, f32>,
        !tod.operator<6, 6, complex<f32>, f32>, !tod.operator<6, 6, f32, f32>) {
  // CHECK: %[[S:.+]] = "tod.spectral"(%{{.+}}) : (!tod.operator<8 : i64, 4 : i64, f32, f32>) -> !tod.spectral_operator<8 : i64, 4 : i64, 4 : i64, f32, "svd">
  %s = "tod.spectral"(%a) : (!tod.operator<8, 4, f32, f32>) -> !tod.spectral_operator<8, 4, 4, f32, "svd">
  // CHECK: %[[T:.+]] = "tod.truncate"(%[[S]]) {k = 2 : i64} : (!tod.spectral_operator<8 : i64, 4 : i64, 4 : i64, f32, "svd">) -> !tod.spectral_operator<8 : i64, 4 : i64, 2 : i64, f32, "svd">
  %t = "tod.truncate"(%s) {k = 2 : i64} : (!tod.spectral_operator<8, 4, 4, f32, "svd">) -> !tod.spectral_operator<8, 4, 2, f32, "svd">
  // CHECK: "tod.reconstruct"(%[[T]]) : (!tod.spectral_operator<8 : i64, 4 : i64, 2 : i64, f32, "svd">) -> !tod.operator<8 : i64, 4 : i64, f32, f32>
  %r = "tod.reconstruct"(%t) : (!tod.spectral_operator<8, 4, 2, f32, "svd">) -> !tod.operator<8, 4, f32, f32>
  // CHECK: "tod.pseudoinverse"(%[[T]]) {rcond = 1.000000e-03 : f64}
  %p = "tod.pseudoinverse"(%t) {rcond = 1.0e-3 : f64} : (!tod.spectral_operator<8, 4, 2, f32, "svd">) -> !tod.operator<4, 8, f32, f32>
  // CHECK: "tod.pseudoinverse"(%{{.+}}) {rcond = 0.000000e+00 : f64} : (!tod.operator<8 : i64, 4 : i64, f32, f32>) -> !tod.operator<4 : i64, 8 : i64, f32, f32>
  %q = "tod.pseudoinverse"(%a) {rcond = 0.0 : f64} : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  // CHECK: "tod.spectral"(%{{.+}}) : (!tod.operator<6 : i64, 6 : i64, f32, f32>) -> !tod.spectral_operator<6 : i64, 6 : i64, 6 : i64, complex<f32>, "eig">
  %e = "tod.spectral"(%b) : (!tod.operator<6, 6, f32, f32>) -> !tod.spectral_operator<6, 6, 6, complex<f32>, "eig">
  %er = "tod.reconstruct"(%e) : (!tod.spectral_operator<6, 6, 6, complex<f32>, "eig">) -> !tod.operator<6, 6, complex<f32>, f32>
  // CHECK: "tod.spectral"(%{{.+}}) : (!tod.operator<6 : i64, 6 : i64, f32, f32>) -> !tod.spectral_operator<6 : i64, 6 : i64, 6 : i64, f32, "eigh">
  %h = "tod.spectral"(%b) : (!tod.operator<6, 6, f32, f32>) -> !tod.spectral_operator<6, 6, 6, f32, "eigh">
  %hp = "tod.pseudoinverse"(%h) {rcond = 1.0e-3 : f64} : (!tod.spectral_operator<6, 6, 6, f32, "eigh">) -> !tod.operator<6, 6, f32, f32>
  return %r, %p, %q, %er, %hp : !tod.operator<8, 4, f32, f32>, !tod.operator<4, 8, f32, f32>,
      !tod.operator<4, 8, f32, f32>, !tod.operator<6, 6, complex<f32>, f32>, !tod.operator<6, 6, f32, f32>
}

// CHECK-LABEL: func.func @diagnostics
func.func @diagnostics(%a: !tod.operator<8, 8, complex<f32>, f32>) -> (tensor<f32>, tensor<i1>, tensor<f32>) {
  // CHECK: "tod.norm"(%{{.+}}) : (!tod.operator<8 : i64, 8 : i64, complex<f32>, f32>) -> tensor<f32>
  %0 = "tod.norm"(%a) : (!tod.operator<8, 8, complex<f32>, f32>) -> tensor<f32>
  // CHECK: "tod.is_unitary"(%{{.+}}) {tol = 1.000000e-04 : f64} : (!tod.operator<8 : i64, 8 : i64, complex<f32>, f32>) -> tensor<i1>
  %1 = "tod.is_unitary"(%a) {tol = 1.0e-4 : f64} : (!tod.operator<8, 8, complex<f32>, f32>) -> tensor<i1>
  // CHECK: "tod.spectral_radius"(%{{.+}}) : (!tod.operator<8 : i64, 8 : i64, complex<f32>, f32>) -> tensor<f32>
  %2 = "tod.spectral_radius"(%a) : (!tod.operator<8, 8, complex<f32>, f32>) -> tensor<f32>
  return %0, %1, %2 : tensor<f32>, tensor<i1>, tensor<f32>
}

// The ops the autodiff pass writes (passes/autodiff_operators.py).
// CHECK-LABEL: func.func @derivatives
func.func @derivatives(%a: !tod.operator<8, 4, f64, f64>, %b: !tod.operator<4, 4, f64, f64>, %d: tensor<4x8xf64>,
                       %e: tensor<4x4xf64>, %h: tensor<3xf64>, %t: tensor<8x12xf64>)
    -> (tensor<4x8xf64>, tensor<4x4xf64>, tensor<4x8xf64>, tensor<3xf64>, tensor<4x4xf64>, tensor<4x4xf64>) {
  // CHECK: "tod.matrix"(%{{.+}}) : (!tod.operator<8 : i64, 4 : i64, f64, f64>) -> tensor<4x8xf64>
  %m = "tod.matrix"(%a) : (!tod.operator<8, 4, f64, f64>) -> tensor<4x8xf64>
  // CHECK: "tod.expm_derivative"(%{{.+}}, %{{.+}}) : (!tod.operator<4 : i64, 4 : i64, f64, f64>, tensor<4x4xf64>) -> tensor<4x4xf64>
  %x = "tod.expm_derivative"(%b, %e) : (!tod.operator<4, 4, f64, f64>, tensor<4x4xf64>) -> tensor<4x4xf64>
  // CHECK: "tod.spectral_derivative"(%{{.+}}, %{{.+}}) {function = "pseudoinverse", kind = "svd", rank = 2 : i64, rcond = 1.000000e-03 : f64} : (!tod.operator<8 : i64, 4 : i64, f64, f64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %s = "tod.spectral_derivative"(%a, %d) {kind = "svd", rank = 2 : i64, function = "pseudoinverse", rcond = 1.0e-3 : f64} : (!tod.operator<8, 4, f64, f64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  // CHECK: "tod.conv1d_cotangent"(%{{.+}}, %{{.+}}) : (tensor<4x4xf64>, tensor<3xf64>) -> tensor<3xf64>
  %c = "tod.conv1d_cotangent"(%e, %h) : (tensor<4x4xf64>, tensor<3xf64>) -> tensor<3xf64>
  // CHECK: "tod.direct_sum_cotangent"(%{{.+}}, %{{.+}}, %{{.+}}) {part = 1 : i64} : (tensor<8x12xf64>, !tod.operator<8 : i64, 4 : i64, f64, f64>, !tod.operator<4 : i64, 4 : i64, f64, f64>) -> tensor<4x4xf64>
  %ds = "tod.direct_sum_cotangent"(%t, %a, %b) {part = 1 : i64} : (tensor<8x12xf64>, !tod.operator<8, 4, f64, f64>, !tod.operator<4, 4, f64, f64>) -> tensor<4x4xf64>
  // CHECK: "tod.spectral_radius_gradient"(%{{.+}}) : (!tod.operator<4 : i64, 4 : i64, f64, f64>) -> tensor<4x4xf64>
  %rg = "tod.spectral_radius_gradient"(%b) : (!tod.operator<4, 4, f64, f64>) -> tensor<4x4xf64>
  return %m, %x, %s, %c, %ds, %rg : tensor<4x8xf64>, tensor<4x4xf64>, tensor<4x8xf64>, tensor<3xf64>, tensor<4x4xf64>,
      tensor<4x4xf64>
}
