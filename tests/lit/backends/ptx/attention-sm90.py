# Graph IR flash attention on sm_90a becomes the warp-specialized attention kernel (backends/ptx/attention_sm90.py),
# declared at the kernels stage and linked in as LLVM IR at llir.
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: FileCheck %s --check-prefix=PRODUCER < %t.ptx
# RUN: FileCheck %s --check-prefix=CONSUMER < %t.ptx
# RUN: FileCheck %s --check-prefix=SOFTMAX < %t.ptx
# RUN: FileCheck %s --check-prefix=TURNS < %t.ptx

from tessera import function, op, tensor, bf16


@function
def causal(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
           V: tensor[bf16, "B", "H", "T", 128]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention(Q, K, V, causal=True, scale=0.08838834764831845)

# Batch and heads fold into BH; the head dimension stays static.
# KERNELS-LABEL: func.func private @causal__attention0(
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "Q"}
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "O"}
# KERNELS-SAME:    attention.causal = "true", pipeline.stages = "3"
# KERNELS-SAME:    ptx.tensor_maps = "Q:0:64x128x1:128;K:1:64x128x1:128;V:2:64x128x1:128;O:3:64x64x1:128"
# KERNELS-SAME:    tessera.writes = array<i64: 3>

# Four tensor maps by value (Q, K, V and O's for the bulk stores), then Q, K, V, O and BH, SQ, SK.
# PTX-LABEL: .visible .entry causal__attention0(
# PTX-NEXT:    .param .align 64 .b8 causal__attention0_param_0[128],
# PTX-NEXT:    .param .align 64 .b8 causal__attention0_param_1[128],
# PTX-NEXT:    .param .align 64 .b8 causal__attention0_param_2[128],
# PTX-NEXT:    .param .align 64 .b8 causal__attention0_param_3[128],
# PTX:       .maxntid 384

# The producer loads Q's two 64-column boxes once, then K's and V's per key block (3-D boxes).
# PRODUCER:         setmaxnreg.dec.sync.aligned.u32 24;
# PRODUCER-COUNT-2: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# PRODUCER:         mbarrier.try_wait.parity.shared::cta.b64
# PRODUCER-COUNT-4: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes

# A consumer: S = Q·Kᵀ (eight k16 steps, the first with scale-d false); then the softmax and P·V below.
# CONSUMER:         setmaxnreg.inc.sync.aligned.u32 240;
# CONSUMER:         setp.ne.b32 p, %r{{[0-9]+}}, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
# CONSUMER-COUNT-7: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, 1, 1, 1, 0, 0;
# CONSUMER:         wgmma.wait_group.sync.aligned 0;

# The softmax (LLVM places its blocks in either order): row maxima across the quad, exp2, P rounded to bf16.
# SOFTMAX-DAG: shfl.sync.bfly.b32
# SOFTMAX-DAG: ex2.approx.ftz.f32
# SOFTMAX-DAG: cvt.rn.bf16x2.f32
# P·V, P's four fragment registers as the A operand (V transposed: MN-major), then the stage is released.
# SOFTMAX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, 1, 1, 1, 1;
# SOFTMAX-DAG: mbarrier.arrive.shared::cta.b64

# The two consumers' turns at the tensor cores (named barriers 3 and 4 of their 256 threads): warpgroup 1
# hands the first turn over; each takes its own, issues its products, gives the other's; warpgroup 0 takes
# one more at the end so that every barrier completes.
# TURNS:     @p bar.arrive %r{{[0-9]+}}, 256;
# TURNS:     bar.sync %r{{[0-9]+}}, 256;
# TURNS:     wgmma.mma_async
# TURNS:     bar.arrive %r{{[0-9]+}}, 256;
# TURNS:     @p bar.sync %r{{[0-9]+}}, 256;

# O / l leaves through the warpgroup's rows of the Q buffer: stmatrix, a proxy fence, the warpgroup's named
# barrier, then the leader's two 3-D bulk stores (64 columns each), waited for before the CTA ends.
# TURNS-COUNT-8: stmatrix.sync.aligned.m8n8.x4.shared.b16
# TURNS:         fence.proxy.async.shared::cta;
# TURNS:         bar.sync %r{{[0-9]+}}, 128;
# TURNS-COUNT-2: cp.async.bulk.tensor.3d.global.shared::cta.bulk_group
# TURNS:         @p cp.async.bulk.commit_group; @p cp.async.bulk.wait_group.read 0;
