# An SGD update fused into the GEMM that computes the gradient (issue 15 speed, CPU): W − lr·(Xᵀ·dY) joins
# dW's GEMM as the epilogue steps scale_by (the run-time 0-d lr) and sub_from (W minus the product), on a
# target whose TargetFacts.gemm_epilogue lists them (the CPU's), so no elementwise kernel reads dW back. A
# constant learning rate stays a constant scale; the bias's update (a reduction's result) stays elementwise.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, function, op, tensor, value_and_grad


@function
def loss(X: tensor[f32, "M", 32], W: tensor[f32, 32, 64], b: tensor[f32, 64], Y: tensor[f32, "M", 64]):
    E = op.bias_add(X @ W, b) - Y
    return op.mean(E * E)


lg = value_and_grad(loss, argnums=(1, 2))


@function
def step(X: tensor[f32, "M", 32], W: tensor[f32, 32, 64], b: tensor[f32, 64], Y: tensor[f32, "M", 64], lr: f32):
    value, gW, gb = lg(X, W, b, Y)
    return value, W - lr * gW, b - lr * gb


@function
def step_const(X: tensor[f32, "M", 32], W: tensor[f32, 32, 64], b: tensor[f32, 64], Y: tensor[f32, "M", 64]):
    value, gW, gb = lg(X, W, b, Y)
    return W - 0.5 * gW

# FUSE-LABEL: func.func @step(
# FUSE:         %[[DW:.+]] = "ttensor.matmul"(%arg0, %{{.+}}) {accum = f32, tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "gemm", tessera.transpose_a}
# FUSE:         %[[S:.+]] = "ttensor.binary"(%arg4, %[[DW]]) {fn = "mul", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.binary"(%arg1, %[[S]]) {fn = "sub", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.binary"(%arg4, %{{.+}}) {fn = "mul", tessera.group = [[B:[0-9]+]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         "ttensor.binary"(%arg2, %{{.+}}) {fn = "sub", tessera.group = [[B]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         return

# FUSE-LABEL: func.func @step_const(
# FUSE:         %[[DW:.+]] = "ttensor.matmul"(%arg0, %{{.+}}) {accum = f32, tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "gemm", tessera.transpose_a}
# FUSE:         %[[S:.+]] = "ttensor.binary"(%{{.+}}, %[[DW]]) {fn = "mul", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE:         "ttensor.binary"(%arg1, %[[S]]) {fn = "sub", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# FUSE-NOT:     "elementwise"
# FUSE:         return

# KERN: func.func @step__gemm{{[0-9]+}}({{.*}}tessera.name = "factor"{{.*}}tessera.name = "minuend"{{.*}}epilogue = ["scale_by", "sub_from"]
# KERN: func.func @step_const__gemm{{[0-9]+}}({{.*}}tessera.name = "alpha"{{.*}}tessera.name = "minuend"{{.*}}epilogue = ["scale", "sub_from"]
