# The cotangent through a GELU fused into the GEMM that computes it (issue 15 speed, CPU): in a backward,
# dZ = (dE·W2ᵀ) ∘ gelu'(Z) joins dH's GEMM as the epilogue step gelu_grad (gelu_tanh_grad for the tanh form),
# on a target whose TargetFacts.gemm_epilogue lists them (the CPU's): autodiff's ops computing gelu'(Z) join
# the group, and the kernel computes the derivative from Z, so no elementwise kernel reads dH and Z back. A
# cotangent that is no GEMM's result (the loss's own, through a GELU of a parameter) stays elementwise.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, function, op, tensor, value_and_grad


@function
def mlp(X: tensor[f32, "M", 32], W1: tensor[f32, 32, 64], W2: tensor[f32, 64, 16]):
    return op.mean(op.gelu(X @ W1) @ W2)


@function
def mlp_tanh(X: tensor[f32, "M", 32], W1: tensor[f32, 32, 64], W2: tensor[f32, 64, 16]):
    return op.mean(op.gelu(X @ W1, approximate="tanh") @ W2)


@function
def direct(X: tensor[f32, "M", 32]):
    return op.mean(op.gelu(X))


g = value_and_grad(mlp, argnums=(1,))
g_tanh = value_and_grad(mlp_tanh, argnums=(1,))
g_direct = value_and_grad(direct, argnums=(0,))


@function
def grads(X: tensor[f32, "M", 32], W1: tensor[f32, 32, 64], W2: tensor[f32, 64, 16]):
    return g(X, W1, W2)


@function
def grads_tanh(X: tensor[f32, "M", 32], W1: tensor[f32, 32, 64], W2: tensor[f32, 64, 16]):
    return g_tanh(X, W1, W2)


@function
def grads_direct(X: tensor[f32, "M", 32]):
    return g_direct(X)

# FUSE-LABEL: func.func @grads(
# FUSE:         %[[Z:.+]] = "ttensor.matmul"(%arg0, %arg1) {accum = f32, tessera.group = [[F:[0-9]+]] : i32, tessera.group_kind = "gemm"}
# FUSE:         %[[DH:.+]] = "ttensor.matmul"(%{{.+}}, %arg2) {accum = f32, tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "gemm", tessera.transpose_b}
# FUSE:         "ttensor.unary"(%{{.+}}) {fn = "erf", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.unary"(%[[Z]]) {fn = "square", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.unary"(%{{.+}}) {fn = "exp", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         %[[D:.+]] = "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "add", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         %[[DZ:.+]] = "ttensor.binary"(%[[DH]], %[[D]]) {fn = "mul", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.matmul"(%arg0, %[[DZ]]) {{.*}}tessera.group_kind = "gemm", tessera.transpose_a}
# FUSE-NOT:     "elementwise"
# FUSE:         return

# FUSE-LABEL: func.func @grads_tanh(
# FUSE:         %[[DH:.+]] = "ttensor.matmul"(%{{.+}}, %arg2) {accum = f32, tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "gemm", tessera.transpose_b}
# FUSE:         "ttensor.unary"(%{{.+}}) {fn = "tanh", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         %[[DZ:.+]] = "ttensor.binary"(%[[DH]], %{{.+}}) {fn = "mul", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.matmul"(%arg0, %[[DZ]]) {{.*}}tessera.group_kind = "gemm", tessera.transpose_a}
# FUSE-NOT:     "elementwise"
# FUSE:         return

# FUSE-LABEL: func.func @grads_direct(
# FUSE:         "ttensor.unary"(%{{.+}}) {fn = "erf", tessera.group = [[E:[0-9]+]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         "ttensor.binary"(%{{.+}}, %{{.+}}) {fn = "mul", tessera.group = [[E]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         return

# KERN: func.func @grads__gemm{{[0-9]+}}({{.*}}tessera.name = "z"{{.*}}epilogue = ["gelu_grad"]
# KERN: func.func @grads_tanh__gemm{{[0-9]+}}({{.*}}tessera.name = "z_tanh"{{.*}}epilogue = ["gelu_tanh_grad"]
