# The vjp of flash attention on sm_90a with TESSERA_ATTENTION_FUSED_DQ=1: the attention_grad ops'
# attention_bwd group becomes one kernel computing dK, dV and adding dQ into an f32 accumulator by bulk
# tensor reductions, between the preprocessing kernel (delta = rowsum(dO ∘ O), the vjp's cast, product and
# row sum joined to the group; it also zeroes the accumulator) and one rounding it to dQ
# (backends/ptx/attention_bwd_sm90.py). Without the variable this happens too (at D = 64 and 128,
# FUSED_DQ_HEAD_DIMS); with it at 0, or under the "strict" numerics profile, dQ has a kernel of its own
# (attention-bwd-sm90.py).
# RUN: env TESSERA_ATTENTION_FUSED_DQ=1 tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: env TESSERA_ATTENTION_FUSED_DQ=1 tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx

from tessera import bf16, function, op, tensor, vjp


@function
def causal(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
           V: tensor[bf16, "B", "H", "T", 128]):
    return op.flash_attention(Q, K, V, causal=True, scale=0.08838834764831845)


dcausal = vjp(causal)

# The forward of the vjp writes O and LSE (f32, one per query row).
# KERNELS-LABEL: func.func private @dcausal__attention0(
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "O"}
# KERNELS-SAME:    memref<?x?xf32> {tessera.dims = ["BH", "SQ"], tessera.name = "LSE"}
# KERNELS-SAME:    tessera.writes = array<i64: 3, 4>
# delta from O and dO, and the accumulator (an f32 intermediate of Q's extents) zeroed, by one kernel first;
# no elementwise or row kernel computes delta.
# KERNELS-NOT:   func.func private @dcausal__elementwise
# KERNELS-NOT:   func.func private @dcausal__row
# KERNELS-LABEL: func.func private @dcausal__attention_bwd1_pre(
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "O"}, memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "dO"}
# KERNELS-SAME:    memref<?x?xf32> {tessera.dims = ["BH", "SQ"], tessera.name = "Delta"}, memref<?x?x?xf32> {tessera.dims = ["BH", "SQ", 128], tessera.name = "dQacc"}
# KERNELS-SAME:    attention.backward = "pre"
# KERNELS-SAME:    tessera.writes = array<i64: 2, 3>
# dK, dV and dQ from one kernel: K and V held (128 rows), Q and dO streamed in 64-query blocks; dQacc has
# a seventh tensor map (f32 boxes of 32 head dimensions × 64 queries) for the bulk reductions.
# KERNELS-LABEL: func.func private @dcausal__attention_bwd1(
# KERNELS-SAME:    {tessera.dims = ["BH", "SQ", 128], tessera.name = "dO"}
# KERNELS-SAME:    {tessera.dims = ["BH", "SQ"], tessera.name = "LSE"}, memref<?x?xf32> {tessera.dims = ["BH", "SQ"], tessera.name = "Delta"}
# KERNELS-SAME:    {tessera.dims = ["BH", "SK", 128], tessera.name = "dK"}, memref<?x?x?xbf16> {tessera.dims = ["BH", "SK", 128], tessera.name = "dV"}
# KERNELS-SAME:    memref<?x?x?xf32> {tessera.dims = ["BH", "SQ", 128], tessera.name = "dQacc"}
# KERNELS-SAME:    attention.backward = "dkdvdq", attention.causal = "true"
# KERNELS-SAME:    ptx.tensor_maps = "Q:0:64x64x1:128;K:1:64x128x1:128;V:2:64x128x1:128;dO:3:64x64x1:128;dK:6:64x64x1:128;dV:7:64x64x1:128;dQacc:8:32x64x1:128"
# KERNELS-SAME:    tessera.writes = array<i64: 6, 7, 8>
# dQ = scale · dQacc, rounded to bf16.
# KERNELS-LABEL: func.func private @dcausal__attention_bwd1_dq_cast(
# KERNELS-SAME:    tessera.name = "dQacc"}, memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "dQ"}
# KERNELS-SAME:    attention.backward = "dq_cast"
# KERNELS-SAME:    tessera.writes = array<i64: 1>

# The forward stores its LSE with plain global stores after the log2 of the row sums.
# PTX-LABEL: .visible .entry dcausal__attention0(
# PTX:       lg2.approx.f32
# PTX:       st.global.b32
# The dK/dV kernel: seven tensor maps by value; the producer loads K's and V's boxes, then Q's and dO's per
# block; a consumer multiplies Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (m64n64, shared operands, the first k16 step with
# scale-d false), exponentiates, then dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ and dSᵀ as register fragments (dO
# and Q MN-major) and dQᵀ = Kᵀ·dSᵀ with both operands from shared memory, both MN-major (dSᵀ staged there
# by stmatrix, both warpgroups' halves in before a 256-thread barrier), writes dQᵀ to shared memory (once the
# dQ warp has freed it: named barrier 8 + c) and arrives at named barrier 6 + c, where the producer
# warpgroup's dQ warp waits, adds it into dQacc by bulk tensor reductions and frees the buffer once they
# have read it (FlashAttention-3's way); the consumer releases the stage, and stores dV and dK by TMA (LLVM places the
# blocks in either order). The block's statistics are read from the warpgroup's copy in shared memory, two
# columns a load.
# The preprocessing kernel: 16-byte loads of O and dO (eight bf16 each), the row's 16 threads' sums added by
# four butterfly shuffles, 16-byte zero stores of the accumulator.
# PTX-LABEL: .visible .entry dcausal__attention_bwd1_pre(
# PTX:       ld.global.v4.b32
# PTX:       ld.global.v4.b32
# PTX-COUNT-4: shfl.sync.bfly.b32
# PTX:       st.global.v4.b32 [%rd{{[0-9]+}}], {0f00000000, 0f00000000, 0f00000000, 0f00000000};
# PTX-LABEL: .visible .entry dcausal__attention_bwd1(
# PTX-COUNT-7: .param .align 64 .b8 dcausal__attention_bwd1_param_{{[0-9]}}[128],
# PTX:       .maxntid 384
# PTX-DAG:   setmaxnreg.dec.sync.aligned.u32 24;
# PTX-DAG:   cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# PTX-DAG:   setmaxnreg.inc.sync.aligned.u32 240;
# PTX-DAG:   setp.ne.b32 p, %r{{[0-9]+}}, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
# PTX-DAG:   ex2.approx.ftz.f32
# PTX-DAG:   wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, 1, 1, 1, 1;
# PTX-DAG:   mbarrier.arrive.shared::cta.b64
# PTX-DAG:   cp.async.bulk.tensor.3d.global.shared::cta.bulk_group
# PTX-DAG:   stmatrix.sync.aligned.m8n8.x4.shared.b16
# PTX-DAG:   bar.sync 5, 256;
# PTX-DAG:   wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, 1, 1, 1, 1, 1;
# PTX-DAG:   st.shared.f32 [%r{{[0-9]+}}+{{[0-9]+}}]
# PTX-DAG:   ld.shared.v2.f32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r{{[0-9]+}}+32];
# PTX-DAG:   cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group
# PTX-DAG:   cp.async.bulk.wait_group.read 0;
# PTX-DAG:   @p bar.sync %r{{[0-9]+}}, 160;
# PTX-DAG:   bar.arrive %r{{[0-9]+}}, 160;
# PTX-DAG:   bar.sync 6, 160;
# PTX-DAG:   bar.sync 7, 160;
# PTX-DAG:   cp.async.bulk.wait_group.read 1;
# PTX-DAG:   @p bar.arrive 8, 160;
# PTX-DAG:   @p bar.arrive 9, 160;
# The accumulator's kernels: 16-byte zero stores; 16-byte loads, 8-byte bf16 stores.
# PTX-LABEL: .visible .entry dcausal__attention_bwd1_dq_cast(
# PTX:       ld.global.v4.b32
# PTX:       st.global.v2.b32
