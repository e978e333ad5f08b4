# The derivative of attention as Graph IR (passes/autodiff_attention.py): the vjp of flash_attention adds one
# attention_lse beside the forward copy, delta = rowsum(f32(dO) · f32(O)) from a cast, mul and sum, and one
# attention_grad per operand. The CPU has no fused backward kernels for bf16, so the schedule stage rewrites
# them into the GEMM fallback (passes/decompose.py): P recomputed, the S×S matrices materialised.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=CANON < %t/01-canonical.mlir
# RUN: FileCheck %s --check-prefix=SCHED < %t/02-schedule.mlir

from tessera import bf16, function, op, tensor, vjp


@function
def attn(Q: tensor[bf16, 2, "S", 64], K: tensor[bf16, 2, "S", 64], V: tensor[bf16, 2, "S", 32]):
    return op.flash_attention(Q, K, V, causal=True, scale=0.125)


g = vjp(attn)

# CANON-LABEL: func.func @g(
# CANON-SAME:    %[[Q:[a-z0-9]+]]: tensor<2x?x64xbf16>
# CANON-SAME:    %[[K:[a-z0-9]+]]: tensor<2x?x64xbf16>
# CANON-SAME:    %[[V:[a-z0-9]+]]: tensor<2x?x32xbf16>
# CANON-SAME:    %[[DO:[a-z0-9]+]]: tensor<2x?x32xbf16>
# CANON:         %[[LSE:.+]] = "ttensor.attention_lse"(%[[Q]], %[[K]]) {causal = true, scale = 1.250000e-01 : f32} : (tensor<2x?x64xbf16>, tensor<2x?x64xbf16>) -> tensor<2x?xf32>
# CANON-NEXT:    %[[O:.+]] = "ttensor.flash_attention"(%[[Q]], %[[K]], %[[V]]) {causal = true, scale = 1.250000e-01 : f32}
# CANON-NEXT:    %[[DOF:.+]] = "ttensor.cast"(%[[DO]]) {accum = f32} : (tensor<2x?x32xbf16>) -> tensor<2x?x32xf32>
# CANON-NEXT:    %[[OF:.+]] = "ttensor.cast"(%[[O]]) {accum = f32} : (tensor<2x?x32xbf16>) -> tensor<2x?x32xf32>
# CANON-NEXT:    %[[PROD:.+]] = "ttensor.binary"(%[[DOF]], %[[OF]]) {fn = "mul"}
# CANON-NEXT:    %[[DELTA:.+]] = "ttensor.reduce"(%[[PROD]]) {axes = [2], keepdims = false, kind = "sum"} : (tensor<2x?x32xf32>) -> tensor<2x?xf32>
# CANON-NEXT:    %[[DQ:.+]] = "ttensor.attention_grad"(%[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[DELTA]]) {causal = true, scale = 1.250000e-01 : f32, wrt = "q"} : {{.+}} -> tensor<2x?x64xbf16>
# CANON-NEXT:    %[[DK:.+]] = "ttensor.attention_grad"(%[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[DELTA]]) {causal = true, scale = 1.250000e-01 : f32, wrt = "k"} : {{.+}} -> tensor<2x?x64xbf16>
# CANON-NEXT:    %[[DV:.+]] = "ttensor.attention_grad"(%[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[DELTA]]) {causal = true, scale = 1.250000e-01 : f32, wrt = "v"} : {{.+}} -> tensor<2x?x32xbf16>
# CANON-NEXT:    return %[[O]], %[[DQ]], %[[DK]], %[[DV]]

# The fallback: the forward's decomposition, delta, then P recomputed (the causal softmax of scale·QKᵀ),
# dP = dO·Vᵀ, dS = P ∘ (dP − delta) · scale, and dQ = dS·K, dK = dSᵀ·Q, dV = Pᵀ·dO in bf16 operands; the
# CPU's GEMMs read Kᵀ, Vᵀ, dSᵀ and Pᵀ in place (passes/fold_transposes.py: tessera.transpose_a/_b).
# SCHED-LABEL: func.func @g(
# SCHED-NOT:     attention_lse
# SCHED:         "ttensor.reduce"({{.+}}) {axes = [2], keepdims = false, kind = "sum"}
# SCHED:         "ttensor.matmul"({{.+}}) {accum = f32, tessera.transpose_b} : (tensor<2x?x64xbf16>, tensor<2x?x64xbf16>) -> tensor<2x?x?xf32>
# SCHED:         %[[P:.+]] = "ttensor.softmax"({{.+}}) {axis = 2 : i64, tessera.causal = "S"} : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
# SCHED:         %[[DP:.+]] = "ttensor.matmul"({{.+}}) {accum = f32, tessera.transpose_b} : (tensor<2x?x32xbf16>, tensor<2x?x32xbf16>) -> tensor<2x?x?xf32>
# SCHED:         %[[D:.+]] = "ttensor.reshape"({{.+}}) {tessera.result_dims = ["2", "S", "1"]} : (tensor<2x?xf32>) -> tensor<2x?x1xf32>
# SCHED:         %[[SUB:.+]] = "ttensor.binary"(%[[DP]], %[[D]]) {fn = "sub"}
# SCHED:         %[[PS:.+]] = "ttensor.binary"(%[[P]], %[[SUB]]) {fn = "mul"}
# SCHED:         "ttensor.matmul"({{.+}}) {accum = f32} : (tensor<2x?x?xbf16>, tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
# SCHED:         "ttensor.matmul"({{.+}}) {accum = f32, tessera.transpose_a} : (tensor<2x?x?xbf16>, tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
# SCHED:         "ttensor.matmul"({{.+}}) {accum = f32, tessera.transpose_a} : (tensor<2x?x?xbf16>, tensor<2x?x32xbf16>) -> tensor<2x?x32xbf16>
# SCHED-NOT:     ttensor.transpose
# SCHED-NOT:     attention_grad
