# Attention's backward on the CPU: the attention_lse of the derivative joins the forward's attention group (its
# kernel writes lse beside O), the attention_grad ops of one attention form one attention_bwd group, lowered to
# one kernel (backends/cpu/attention_bwd.py) that recomputes P and dS in strips of key blocks, never S×S.
# RUN: tessera-cc %s --compile-to=fusion | FileCheck %s --check-prefix=FUSE
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import f32, function, grad, op, tensor


@function
def loss(Q: tensor[f32, "B", "S", 64], K: tensor[f32, "B", "T", 64], V: tensor[f32, "B", "T", 32],
         W: tensor[f32, "B", "S", 32]):
    return op.sum(op.flash_attention(Q, K, V, causal=True, scale=0.125) * W)


# FUSE-LABEL:  func.func @dkv(
# FUSE:          "ttensor.attention_lse"{{.*}}tessera.group = [[A:[0-9]+]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.softmax"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[A]] : i32, tessera.group_kind = "attention"
# FUSE:          "ttensor.attention_grad"{{.*}}tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "attention_bwd", wrt = "k"
# FUSE:          "ttensor.attention_grad"{{.*}}tessera.group = [[G]] : i32, tessera.group_kind = "attention_bwd", wrt = "v"

# The forward's kernel with its lse output: the row maximum plus the log of the sum of exponentials.
# KERN-LABEL:  func.func @dkv__attention{{[0-9]+}}(
# KERN-SAME:     tessera.name = "LSE"
# KERN-SAME:     tessera.attention = {causal = true, cols = {{[0-9]+}} : i64, keys_rows, lse, rows = {{[0-9]+}} : i64, scale = 1.250000e-01 : f32}
# KERN:          vector.reduction <maximumf>
# KERN:          vector.reduction <add>
# KERN:          math.log
# KERN:          memref.store
# KERN-NOT:    func.func @dkv__gemm
# The backward: Q, K, V, dO, LSE, DELTA, then the gradients wanted (dK, dV; no dQ).
# KERN-LABEL:  func.func @dkv__attention_bwd{{[0-9]+}}(
# KERN-SAME:     tessera.name = "dO"
# KERN-SAME:     tessera.name = "LSE"
# KERN-SAME:     tessera.name = "DELTA"
# KERN-SAME:     tessera.name = "dK"
# KERN-SAME:     tessera.name = "dV"
# KERN-NOT:      tessera.name = "dQ"
# KERN-SAME:     tessera.attention_bwd = {causal = true, cols = {{[0-9]+}} : i64, rows = {{[0-9]+}} : i64, scale = 1.250000e-01 : f32, wrt = ["k", "v"]}
# Packed Kᵀ and Vᵀ of a key block, the P and dS strips (SQ × NR) and a tile buffer, on the heap: nothing S×S.
# KERN-COUNT-5:  memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
# Register-tile products (S, dP, dV, dK), then the strips freed.
# KERN:          vector.fma
# KERN-COUNT-5:  memref.dealloc
# KERN-NOT:    func.func @dkv__gemm
dkv = grad(loss, argnums=(1, 2))
