# The operator algebra's op.* surface and Python operators on operators, as the frontend emits them.
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s

from tessera import c64, f32, f64, function, op, tensor


# Constructors. Extents named on tensors flow into operator types; fft is complex.
# CHECK-LABEL: func.func @constructors(
# CHECK:         "tod.eye"() : () -> !tod.operator<8 : i64, 8 : i64, f32, f32>
# CHECK:         "tod.zero"() : () -> !tod.operator<8 : i64, 4 : i64, f32, f32>
# CHECK:         "tod.dense"(%arg0) : (tensor<?x8xf32>) -> !tod.operator<8 : i64, "?", f32, f32>
# CHECK:         "tod.diag"(%arg1) : (tensor<8xf32>) -> !tod.operator<8 : i64, 8 : i64, f32, f32>
# CHECK:         "tod.projector"(%arg2) : (tensor<8x2xf32>) -> !tod.operator<8 : i64, 8 : i64, f32, f32>
# CHECK:         "tod.fft"() : () -> !tod.operator<8 : i64, 8 : i64, complex<f32>, f32>
# CHECK:         "tod.ifft"() : () -> !tod.operator<8 : i64, 8 : i64, complex<f64>, f64>
# CHECK:         "tod.conv1d"(%arg3) : (tensor<3xf32>) -> !tod.operator<8 : i64, 8 : i64, f32, f32>
# CHECK:         "tod.kronecker"
# CHECK-SAME:      -> !tod.operator<64 : i64, 64 : i64, f32, f32>
# CHECK:         "tod.direct_sum"
# CHECK-SAME:      -> !tod.operator<16 : i64, 16 : i64, f32, f32>
@function
def constructors(M: tensor[f32, "R", 8], d: tensor[f32, 8], U: tensor[f32, 8, 2], h: tensor[f32, 3],
                 x: tensor[f32, 8]):
    I = op.eye(8)
    Z = op.zero(8, 4)
    A = op.dense(M)
    D = op.diag(d)
    P = op.projector(U)
    F = op.fft(8)
    G = op.ifft(8, dtype=f64)
    C = op.conv1d(h, 8)
    K = op.kronecker(I, D)
    S = op.direct_sum(P, C)
    return A @ x, Z @ x, F @ x


# The algebra, with Python's operators: @ composes operators and applies them to tensors; + and - add;
# a number or a 0-d tensor scales; ** takes a power.
# CHECK-LABEL: func.func @algebra(
# CHECK:         %[[A:.+]] = "tod.dense"(%arg0)
# CHECK:         %[[B:.+]] = "tod.dense"(%arg1)
# CHECK:         %[[AB:.+]] = "tod.compose"(%[[A]], %[[B]])
# CHECK:         %[[AH:.+]] = "tod.adjoint"(%[[A]])
# CHECK:         %[[SUM:.+]] = "tod.plus"(%[[AB]], %[[AH]])
# CHECK:         %[[TWO:.+]] = "ttensor.constant"() {value = 2.000000e+00 : f32}
# CHECK:         %[[S2:.+]] = "tod.scale"(%[[TWO]], %[[SUM]])
# CHECK:         %[[NEG:.+]] = "ttensor.constant"() {value = -1.000000e+00 : f32}
# CHECK:         %[[MB:.+]] = "tod.scale"(%[[NEG]], %[[B]])
# CHECK:         %[[DIFF:.+]] = "tod.plus"(%[[S2]], %[[MB]])
# CHECK:         "tod.scale"(%arg2, %[[DIFF]]) : (tensor<f32>, !tod.operator<4 : i64, 4 : i64, f32, f32>)
# CHECK:         "tod.power"(%{{.+}}) {exponent = 3 : i64}
# CHECK:         "tod.tensor"
# CHECK:         "tod.commutator"(%[[A]], %[[B]])
# CHECK:         "tod.sym"
# CHECK:         "tod.skew"
# CHECK:         "tod.expm"
# CHECK:         "tod.resolvent"(%{{.+}}, %{{.+}}) : (!tod.operator<4 : i64, 4 : i64, f32, f32>, tensor<f32>)
# CHECK:         "tod.apply"(%{{.+}}, %arg3) : (!tod.operator<4 : i64, 4 : i64, f32, f32>, tensor<4x2xf32>) -> tensor<4x2xf32>
@function
def algebra(M: tensor[f32, 4, 4], N: tensor[f32, 4, 4], s: f32, X: tensor[f32, 4, 2]):
    A = op.dense(M)
    B = op.dense(N)
    T = s * (2.0 * (A @ B + op.adjoint(A)) - B)
    T = T ** 3
    K = op.tensor(A, B)
    E = op.expm(op.sym(op.commutator(A, B)) + op.skew(A))
    R = op.resolvent(E, 0.5)
    return op.apply(R @ T, X)


# Spectral ops and diagnostics; a complex tensor and operator mix into complex results.
# CHECK-LABEL: func.func @spectral(
# CHECK:         %[[S:.+]] = "tod.spectral"(%{{.+}}) : (!tod.operator<6 : i64, 8 : i64, f64, f64>) -> !tod.spectral_operator<6 : i64, 8 : i64, 6 : i64, f64, "svd">
# CHECK:         %[[T:.+]] = "tod.truncate"(%[[S]]) {k = 2 : i64}
# CHECK:         "tod.reconstruct"(%[[T]]) : (!tod.spectral_operator<6 : i64, 8 : i64, 2 : i64, f64, "svd">) -> !tod.operator<6 : i64, 8 : i64, f64, f64>
# CHECK:         "tod.pseudoinverse"(%[[T]]) {rcond = {{.+}} : f64} : (!tod.spectral_operator<6 : i64, 8 : i64, 2 : i64, f64, "svd">) -> !tod.operator<8 : i64, 6 : i64, f64, f64>
# CHECK:         "tod.spectral"(%{{.+}}) : (!tod.operator<8 : i64, 8 : i64, f64, f64>) -> !tod.spectral_operator<8 : i64, 8 : i64, 8 : i64, complex<f64>, "eig">
# CHECK:         "tod.apply"(%{{.+}}, %arg1) : (!tod.operator<6 : i64, 8 : i64, f64, f64>, tensor<6xcomplex<f64>>) -> tensor<8xcomplex<f64>>
# CHECK:         "tod.norm"(%{{.+}}) : (!tod.operator<8 : i64, 8 : i64, complex<f64>, f64>) -> tensor<f64>
# CHECK:         "tod.is_unitary"(%{{.+}}) {tol = {{.+}} : f64} : (!tod.operator<8 : i64, 6 : i64, f64, f64>) -> tensor<i1>
# CHECK:         "tod.spectral_radius"(%{{.+}}) : (!tod.operator<8 : i64, 8 : i64, f64, f64>) -> tensor<f64>
@function
def spectral(M: tensor[f64, 8, 6], z: tensor[c128, 6]):
    A = op.dense(M)
    S = op.truncate(op.spectral(A, kind="svd"), 2)
    L = op.reconstruct(S)
    P = op.pseudoinverse(S)
    G = A @ P
    E = op.reconstruct(op.spectral(G, kind="eig"))
    return L @ z, op.norm(E), op.is_unitary(P), op.spectral_radius(G)
