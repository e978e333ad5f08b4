# CPU attention reads K's rows: the transpose making Kᵀ joins the attention group (passes/fusion.py
# keys_transpose) and the fused kernel packs each key strip from K's rows by register transposes
# (backends/cpu/attention.py keys_rows), so the plan of bench/graph_cpu.py's attention rows has one kernel and
# no layout (transpose) kernel.
# RUN: tessera-cc %s --compile-to=fusion | FileCheck %s --check-prefix=FUSE
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=NONE

# No layout kernel anywhere in the module (`written` is its last function).
# NONE-NOT:    __layout
# NONE:        func.func @written__attention0(
# NONE-NOT:    __layout

from tessera import f32, function, op, tensor

# FUSE-LABEL:  func.func @attention(
# FUSE:          "ttensor.transpose"{{.*}}tessera.group = [[A:[0-9]+]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.softmax"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE-NOT:      group_kind = "layout"

# KERN-LABEL:  func.func @attention__attention0(
# KERN-SAME:     tessera.dims = ["B", "SK", "D"], tessera.name = "K"
# KERN-SAME:     keys_rows
# The strip of keys: VW rows of K loaded whole and transposed in registers.
# KERN:          vector.shuffle
# KERN:          vector.fma
@function
def attention(Q: tensor[f32, "B", "S", 64], K: tensor[f32, "B", "S", 64], V: tensor[f32, "B", "S", 64]):
    return op.flash_attention(Q, K, V)


# FUSE-LABEL:  func.func @causal(
# FUSE:          "ttensor.transpose"{{.*}}tessera.group = [[C:[0-9]+]] : i32, tessera.group_kind = "attention"
# FUSE-NOT:      group_kind = "layout"

# KERN-LABEL:  func.func @causal__attention0(
# KERN-SAME:     tessera.name = "K"
# KERN-SAME:     causal = true
# KERN-SAME:     keys_rows
@function
def causal(Q: tensor[f32, "B", "S", 64], K: tensor[f32, "B", "S", 64], V: tensor[f32, "B", "S", 64]):
    return op.flash_attention(Q, K, V, causal=True)


# Written out with K.T, D = 40 (not whole vectors: the last values of d are copied one at a time).
# FUSE-LABEL:  func.func @written(
# FUSE:          "ttensor.transpose"{{.*}}tessera.group = [[W:[0-9]+]] : i32, tessera.group_kind = "attention"
# FUSE-NOT:      group_kind = "layout"

# KERN-LABEL:  func.func @written__attention0(
# KERN-SAME:     tessera.name = "K"
# KERN-SAME:     keys_rows
@function
def written(Q: tensor[f32, "S", 40], K: tensor[f32, "T", 40], V: tensor[f32, "T", 8]):
    return op.softmax(Q @ K.T * 0.25) @ V
