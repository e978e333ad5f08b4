# Attention fusion on the CPU: matmul(Q, Kᵀ) → · scale → softmax → dropout → matmul(·, V) is one fusion group,
# lowered to one kernel that keeps each block of query rows' scores and probabilities in a scratch buffer and
# never writes P; K's transpose joins the group (the fused kernel packs its key strips from K's rows), so no
# layout kernel writes Kᵀ.
# RUN: tessera-cc %s --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --compile-to=fusion | FileCheck %s --check-prefix=FUSE
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import function, op, tensor

# The schedule phase decomposes flash_attention; the causal mask travels on the softmax.
# SCHED-LABEL: func.func @causal(
# SCHED:         "ttensor.matmul"
# SCHED:         "ttensor.softmax"{{.*}}tessera.causal = "S"
# SCHED:         "ttensor.matmul"
# SCHED-NOT:     "ttensor.flash_attention"

# FUSE-LABEL:  func.func @causal(
# FUSE:          "ttensor.transpose"{{.*}}tessera.group = [[A:[0-9]+]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.binary"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.softmax"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
@function
def causal(Q: tensor[f32, "S", 64], K: tensor[f32, "S", 64], V: tensor[f32, "S", 64]):
    return op.flash_attention(Q, K, V, causal=True)


# Written out, with dropout: the dropout joins the group too.
# FUSE-LABEL:  func.func @dropped(
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[D:[0-9]+]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.softmax"{{.*}}tessera.group = [[D]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.dropout"{{.*}}tessera.group = [[D]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[D]] : i32, tessera.group_kind = "attention"

# KERN-NOT:    func.func @dropped__row
# KERN-NOT:    func.func @dropped__gemm
# KERN-LABEL:  func.func @dropped__attention0(
# KERN-SAME:     tessera.name = "K"
# KERN-SAME:     tessera.attention = {causal = false, cols = {{[0-9]+}} : i64, dropout = 1.000000e-01 : f32, keys_rows, rows = {{[0-9]+}} : i64, scale = 2.500000e-01 : f32}
# The block's scratch: rows × Sk (rounded up to vectors, and one more), on the heap.
# KERN:          memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
# Scores: the GEMM's register tile over D, from a packed strip of Kᵀ; each row's running maximum.
# KERN:          vector.fma
# KERN:          arith.maximumf
# Softmax: the row maximum, the exponentials and their sum.
# KERN:          vector.reduction <maximumf>
# Dropout of the exponentials (after the sum): Philox-4x32-10 rounds on vectors of counters.
# KERN:          arith.mului_extended {{.*}} : vector<{{[0-9]+}}xi32>
# KERN:          arith.cmpf oge
# KERN:          vector.reduction <add>
# E·V, and the block's rows of O scaled by 1/Σ.
# KERN:          vector.fma
# KERN:          arith.mulf
# KERN:          memref.dealloc
@function
def dropped(Q: tensor[f32, "B", "S", 32], K: tensor[f32, "B", "T", 32], V: tensor[f32, "B", "T", 16]):
    P = op.dropout(op.softmax(Q @ op.transpose(K, perm=(0, 2, 1)) * 0.25), p=0.1, seed=42, offset=3)
    return P @ V
