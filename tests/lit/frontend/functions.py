# Operator programs (`@tessera.function`) as the frontend emits them: Graph IR over builtin tensors.
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s

from tessera import dist, function, op, tensor

mesh = dist.Mesh(axes=["dp"], devices=range(8))


# Named extents stay on the arguments; static ones are in the types.
# CHECK-LABEL: func.func @mlp(
# CHECK-SAME:    %[[X:[^:]+]]: tensor<?x512xbf16> {tessera.dims = ["B", 512], tessera.name = "X"}
# CHECK-SAME:    %[[W:[^:]+]]: tensor<512x?xbf16>
# CHECK-SAME:    %[[BIAS:[^:]+]]: tensor<?xbf16>
# CHECK-SAME:    -> tensor<?x?xbf16> attributes {tessera.function}
# CHECK:         %[[MM:.+]] = "ttensor.matmul"(%[[X]], %[[W]]) {accum = f32} : (tensor<?x512xbf16>, tensor<512x?xbf16>) -> tensor<?x?xbf16>
# CHECK:         %[[B:.+]] = "ttensor.bias_add"(%[[MM]], %[[BIAS]]) {axis = 1 : i64}
# CHECK:         %[[G:.+]] = "ttensor.unary"(%[[B]]) {fn = "gelu_tanh"}
# CHECK:         %[[TWO:.+]] = "ttensor.constant"() {value = 2.000000e+00 : bf16} : () -> tensor<bf16>
# CHECK:         %[[S:.+]] = "ttensor.binary"(%[[G]], %[[TWO]]) {fn = "mul"} : (tensor<?x?xbf16>, tensor<bf16>) -> tensor<?x?xbf16>
# CHECK:         return %[[S]]
@function
def mlp(X: tensor[bf16, "B", 512], W: tensor[bf16, 512, "H"], bias: tensor[bf16, "H"]):
    return op.gelu(op.bias_add(X @ W, bias), approximate="tanh") * 2.0


# CHECK-LABEL: func.func @norms(
# CHECK:         "ttensor.softmax"(%{{.+}}) {axis = 1 : i64}
# CHECK:         "ttensor.layernorm"(%{{.+}}, %{{.+}}, %{{.+}}) {eps = 9.99999974E-6 : f32, operandSegmentSizes = array<i32: 1, 1, 1>}
# CHECK:         "ttensor.rmsnorm"(%{{.+}}) {eps = 9.99999997E-7 : f32, operandSegmentSizes = array<i32: 1, 0>}
@function
def norms(x: tensor[f32, "T", "D"], g: tensor[f32, "D"], b: tensor[f32, "D"]):
    return op.rmsnorm(op.layernorm(op.softmax(x), gamma=g, beta=b))


# CHECK-LABEL: func.func @shapes(
# CHECK:         "ttensor.transpose"(%{{.+}}) {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
# CHECK:         "ttensor.reshape"(%{{.+}}) : (tensor<8x4xf32>) -> tensor<2x16xf32>
# CHECK:         "ttensor.reduce"(%{{.+}}) {axes = [1], keepdims = true, kind = "mean"} : (tensor<2x16xf32>) -> tensor<2x1xf32>
# CHECK:         "ttensor.broadcast"(%{{.+}}) : (tensor<2x1xf32>) -> tensor<3x2x1xf32>
@function
def shapes(x: tensor[f32, 4, 8]):
    y = op.reshape(x.T, (2, -1))
    return op.broadcast_to(op.mean(y, axis=1, keepdims=True), (3, 2, 1))


# fp8 with fp32 accumulation: the cast records the policy; the matmul accumulates in it and returns it.
# CHECK-LABEL: func.func @fp8(
# CHECK:         %[[A8:.+]] = "ttensor.cast"(%{{.+}}) {accum = f32} : (tensor<?x?xf32>) -> tensor<?x?xf8E4M3FN>
# CHECK:         "ttensor.matmul"(%[[A8]], %{{.+}}) {accum = f32} : (tensor<?x?xf8E4M3FN>, tensor<?x?xf8E4M3FN>) -> tensor<?x?xf32>
# CHECK:         "ttensor.dropout"(%{{.+}}) {offset = 0 : i64, p = 1.000000e-01 : f32, seed = 7 : ui64}
@function
def fp8(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    C = op.cast(A, fp8_e4m3 @ accum(fp32)) @ op.cast(B, fp8_e4m3 @ accum(fp32))
    return op.dropout(C, p=0.1, seed=7)


# CHECK-LABEL: func.func @attention(
# CHECK:         "ttensor.flash_attention"(%{{.+}}, %{{.+}}, %{{.+}}) {causal = true, scale = 0.0883883461 : f32}
@function
def attention(Q: tensor[bf16, "S", 128], K: tensor[bf16, "S", 128], V: tensor[bf16, "S", 128]):
    return op.flash_attention(Q, K, V, causal=True)


# CHECK-LABEL: func.func @collective(
# CHECK:         "tdist.all_reduce"(%{{.+}}) {algo = "binary_tree", axis = "dp", bucket_bytes = 16777216 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [8], op = "sum"}
# CHECK:         "tdist.all_gather"(%{{.+}}) {axis = "dp", dim = 0 : i64, mesh_axes = ["dp"], mesh_shape = [8]} : (tensor<16xf32>) -> tensor<128xf32>
@function
def collective(X: tensor[f32, 16]):
    Y = op.all_reduce(X, mesh=mesh, algo="binary_tree", deterministic=True, bucket="16MB")
    return op.all_gather(Y, mesh=mesh)


# Loops over constants unroll.
# CHECK-LABEL: func.func @layers(
# CHECK-COUNT-3: "ttensor.unary"(%{{.+}}) {fn = "tanh"}
# CHECK-NOT:     "ttensor.unary"
@function
def layers(x: tensor[f32, 8]):
    for _ in range(3):
        x = op.tanh(x)
    return x
