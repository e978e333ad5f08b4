# Graph IR flash attention on sm_80 … sm_90 becomes the mma.sync attention kernel by default
# (backends/ptx/attention_sm80.py), declared at the kernels stage and linked in as LLVM IR at llir; with
# TESSERA_ATTENTION_SM80=0 the schedule phase decomposes it into two GEMMs and a softmax, recorded.
# RUN: tessera-cc %s --target ptx --arch sm_80 --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --target ptx --arch sm_89 --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --target ptx --arch sm_80 --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_80 --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: env TESSERA_ATTENTION_SM80=0 tessera-cc %s --target ptx --arch sm_80 --compile-to=schedule | FileCheck %s --check-prefix=OFF

from tessera import function, op, tensor, bf16


@function
def causal(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
           V: tensor[bf16, "B", "H", "T", 128]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention(Q, K, V, causal=True, scale=0.08838834764831845)

# The flash_attention stays whole: no fallback recorded.
# SCHED-LABEL: func.func @causal(
# SCHED-NOT:     tessera.fallbacks
# SCHED:         "ttensor.flash_attention"
# SCHED-NOT:     "ttensor.matmul"

# The decomposition, where the kernel is switched off.
# OFF-LABEL: func.func @causal(
# OFF-SAME:    tessera.fallbacks = ["flash_attention (bf16) as two GEMMs and a softmax (the probabilities materialised)"]
# OFF:         "ttensor.matmul"
# OFF:         "ttensor.softmax"
# OFF:         "ttensor.matmul"

# Batch and heads fold into BH; the head dimension stays static; no tensor maps (cp.async, not TMA).
# KERNELS-LABEL: func.func private @causal__attention0(
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "Q"}
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "O"}
# KERNELS-SAME:    attention.causal = "true", pipeline.stages = "2", tile.K = "128", tile.M = "128", tile.N = "64"
# KERNELS-NOT:     ptx.tensor_maps
# KERNELS-SAME:    tessera.writes = array<i64: 3>

# Q, K, V, O and BH, SQ, SK; 8 warps. Q, K_0 and V_0 copied (three commit groups), Q's fragments loaded
# once; per key block: S by mma.sync from K's ldmatrix, the softmax (quad shuffles, exp2, P rounded to bf16
# pairs), P·V with V by ldmatrix.trans; then O / l by 32-bit stores (LLVM places the blocks in any order).
# PTX-LABEL: .visible .entry causal__attention0(
# PTX-COUNT-4: .param .u64 {{.*}}causal__attention0_param_{{[0-3]}},
# PTX:         .maxntid 256
# PTX-DAG:     cp.async.cg.shared.global
# PTX-DAG:     cp.async.commit_group;
# PTX-DAG:     cp.async.wait_group 2;
# PTX-DAG:     ldmatrix.sync.aligned.m8n8.x4.shared.b16
# PTX-DAG:     cp.async.wait_group 1;
# PTX-DAG:     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# PTX-DAG:     shfl.sync.bfly.b32
# PTX-DAG:     ex2.approx.ftz.f32
# PTX-DAG:     cvt.rn.bf16x2.f32
# PTX-DAG:     ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
# PTX-DAG:     st.global.b32
