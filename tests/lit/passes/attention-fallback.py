# Attention where the target has no fused kernel (AMDGPU, SPIR-V, ptx before sm_90a with
# TESSERA_ATTENTION_SM80=0): the schedule phase decomposes flash_attention into two GEMMs and a softmax (the
# causal mask on the softmax) and its backward into GEMMs, and records both in the function's fallbacks;
# sm_90a keeps flash_attention for its kernel where that takes Q's type and head dimension (bf16 or f16 by 64
# or 128), and decomposes the others the same way; sm_80 … sm_90 (sm_86 here) by default keep the forward
# for their mma.sync kernel on the same terms and decompose every backward (no attention_grad kernel).
# RUN: tessera-cc %s --target amdgpu --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --target spirv --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: env TESSERA_ATTENTION_SM80=0 tessera-cc %s --target ptx --arch sm_86 --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --target ptx --arch sm_86 --compile-to=schedule | FileCheck %s --check-prefix=SM86
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=schedule | FileCheck %s --check-prefix=SM90A

from tessera import function, op, tensor, vjp

# SCHED-LABEL: func.func @causal(
# SCHED-SAME:    tessera.fallbacks = ["flash_attention (f16) as two GEMMs and a softmax (the probabilities materialised)"]
# SCHED:         "ttensor.matmul"
# SCHED:         "ttensor.softmax"{{.*}}tessera.causal = "S"
# SCHED:         "ttensor.matmul"
# SCHED-NOT:     "ttensor.flash_attention"

# SM90A-LABEL: func.func @causal(
# SM90A-NOT:     tessera.fallbacks
# SM90A:         "ttensor.flash_attention"

# SM86-LABEL: func.func @causal(
# SM86-NOT:     tessera.fallbacks
# SM86:         "ttensor.flash_attention"
@function
def causal(Q: tensor[f16, "S", 64], K: tensor[f16, "S", 64], V: tensor[f16, "S", 64]):
    return op.flash_attention(Q, K, V, causal=True)


# SCHED-LABEL: func.func @d32(
# SCHED-SAME:    tessera.fallbacks = ["flash_attention (f16) as two GEMMs and a softmax (the probabilities materialised)"]

# SM90A-LABEL: func.func @d32(
# SM90A-SAME:    tessera.fallbacks = ["flash_attention (f16) as two GEMMs and a softmax (the probabilities materialised)"]
# SM90A-NOT:     "ttensor.flash_attention"

# SM86-LABEL: func.func @d32(
# SM86-SAME:    tessera.fallbacks = ["flash_attention (f16) as two GEMMs and a softmax (the probabilities materialised)"]
# SM86-NOT:     "ttensor.flash_attention"
@function
def d32(Q: tensor[f16, "S", 32], K: tensor[f16, "S", 32], V: tensor[f16, "S", 32]):
    return op.flash_attention(Q, K, V)


# SCHED-LABEL: func.func @vjp_causal(
# SCHED-SAME:    tessera.fallbacks = ["attention's backward (f16) as GEMMs (P and dS materialised)", "flash_attention (f16) as two GEMMs and a softmax (the probabilities materialised)"]
# SCHED-NOT:     "ttensor.attention_grad"

# SM90A-LABEL: func.func @vjp_causal(
# SM90A-NOT:     tessera.fallbacks
# SM90A:         "ttensor.attention_grad"

# The forward's kernel, the backward as GEMMs (recomputing P).
# SM86-LABEL: func.func @vjp_causal(
# SM86-SAME:    tessera.fallbacks = ["attention's backward (f16) as GEMMs (P and dS materialised)"]
# SM86:         "ttensor.flash_attention"
# SM86-NOT:     "ttensor.attention_grad"
vjp_causal = vjp(causal)
