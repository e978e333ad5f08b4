# The vjp of flash attention on sm_90a: the forward kernel also writes each query row's LSE (its group holds the
# attention_lse), and the attention_grad ops' attention_bwd group becomes the dK/dV kernel and the dQ kernel
# (backends/ptx/attention_bwd_sm90.py), declared at the kernels stage and linked in as LLVM IR at llir —
# with TESSERA_ATTENTION_FUSED_DQ=0 (or the "strict" numerics profile); by default dQ is added inside the
# dK/dV kernel (attention-bwd-sm90-fused-dq.py).
# RUN: env TESSERA_ATTENTION_FUSED_DQ=0 tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: env TESSERA_ATTENTION_FUSED_DQ=0 tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
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
# dK and dV from one kernel: K and V held (128 rows), Q and dO streamed in 32-query blocks.
# KERNELS-LABEL: func.func private @dcausal__attention_bwd1(
# KERNELS-SAME:    {tessera.dims = ["BH", "SQ", 128], tessera.name = "dO"}
# KERNELS-SAME:    {tessera.dims = ["BH", "SQ"], tessera.name = "LSE"}, memref<?x?xf32> {tessera.dims = ["BH", "SQ"], tessera.name = "Delta"}
# KERNELS-SAME:    {tessera.dims = ["BH", "SK", 128], tessera.name = "dK"}, memref<?x?x?xbf16> {tessera.dims = ["BH", "SK", 128], tessera.name = "dV"}
# KERNELS-SAME:    attention.backward = "dkdv", attention.causal = "true"
# KERNELS-SAME:    ptx.tensor_maps = "Q:0:64x32x1:128;K:1:64x128x1:128;V:2:64x128x1:128;dO:3:64x32x1:128;dK:6:64x64x1:128;dV:7:64x64x1:128"
# KERNELS-SAME:    tessera.writes = array<i64: 6, 7>
# dQ from another: Q and dO held, K and V streamed.
# KERNELS-LABEL: func.func private @dcausal__attention_bwd1_dq(
# KERNELS-SAME:    attention.backward = "dq"
# KERNELS-SAME:    ptx.tensor_maps = "Q:0:64x128x1:128;K:1:64x128x1:128;V:2:64x128x1:128;dO:3:64x128x1:128;dQ:6:64x64x1:128"
# KERNELS-SAME:    tessera.writes = array<i64: 6>

# The forward stores its LSE with plain global stores after the log2 of the row sums.
# PTX-LABEL: .visible .entry dcausal__attention0(
# PTX:       lg2.approx.f32
# PTX:       st.global.b32
# The dK/dV kernel: six tensor maps by value; the producer loads K's and V's boxes, then Q's and dO's per
# block; a consumer multiplies Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (m64n32, shared operands, the first k16 step with
# scale-d false), exponentiates, then dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ and dSᵀ as register fragments (dO
# and Q MN-major), releases the stage, and stores dV and dK by TMA (LLVM places the blocks in either order).
# PTX-LABEL: .visible .entry dcausal__attention_bwd1(
# PTX-COUNT-6: .param .align 64 .b8 dcausal__attention_bwd1_param_{{[0-9]}}[128],
# PTX:       .maxntid 384
# PTX-DAG:   setmaxnreg.dec.sync.aligned.u32 24;
# PTX-DAG:   cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# PTX-DAG:   setmaxnreg.inc.sync.aligned.u32 240;
# PTX-DAG:   setp.ne.b32 p, %r{{[0-9]+}}, 0; wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
# PTX-DAG:   ex2.approx.ftz.f32
# PTX-DAG:   wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, 1, 1, 1, 1;
# PTX-DAG:   mbarrier.arrive.shared::cta.b64
# PTX-DAG:   cp.async.bulk.tensor.3d.global.shared::cta.bulk_group
# PTX:       .visible .entry dcausal__attention_bwd1_dq(
