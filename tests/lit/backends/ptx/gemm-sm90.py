# A Graph IR matmul on sm_90a: its fusion group becomes the warp-specialized wgmma/TMA kernel
# (backends/ptx/gemm_sm90.py), declared at the kernels stage and linked in as LLVM IR at llir.
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: FileCheck %s --check-prefix=PRODUCER < %t.ptx
# RUN: FileCheck %s --check-prefix=CONSUMER < %t.ptx
# RUN: FileCheck %s --check-prefix=EPILOGUE < %t.ptx
# RUN: FileCheck %s --check-prefix=WIDE < %t.ptx
# RUN: FileCheck %s --check-prefix=WIDEMMA < %t.ptx
# RUN: FileCheck %s --check-prefix=WIDESTORE < %t.ptx
# RUN: not tessera-cc %s --target ptx --arch sm_75 -o %t.tessera 2>&1 | FileCheck %s --check-prefix=SM75

from tessera import function, op, tensor, bf16


@function(tile=(128, 128, 64), stages=5)
def linear_gelu(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]) -> tensor[bf16, "T", "F"]:
    return op.gelu(op.bias_add(op.matmul(X, W), b))

# The kernel has no MLIR body: its signature (A, B, C, bias, then the extents) and the LLVM IR.
# KERNELS-LABEL: func.func private @linear_gelu__gemm0(
# KERNELS-SAME:    memref<?x?xbf16> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    memref<?xbf16> {tessera.dims = ["N"], tessera.name = "bias"}
# KERNELS-SAME:    tessera.kernel
# KERNELS-SAME:    tessera.kernel_props = {epilogue = "bias,gelu", pipeline.stages = "5", ptx.tensor_maps = "A:0:64x128:128;B:1:64x64:128;C:2:64x64:128", tile.K = "64", tile.M = "128", tile.N = "128"}
# KERNELS-SAME:    tessera.llvm_ir = "
# KERNELS-SAME:    tessera.writes = array<i64: 2>

# Three tensor maps by value (A, B and C's for the bulk stores), then A, B, C, bias and M, K, N; 3 warpgroups.
# PTX-LABEL: .visible .entry linear_gelu__gemm0(
# PTX-NEXT:    .param .align 64 .b8 linear_gelu__gemm0_param_0[128],
# PTX-NEXT:    .param .align 64 .b8 linear_gelu__gemm0_param_1[128],
# PTX-NEXT:    .param .align 64 .b8 linear_gelu__gemm0_param_2[128],
# PTX:       .maxntid 384
# PTX:         mbarrier.init.shared::cta.b64
# PTX:         fence.mbarrier_init.release.cluster;
# (LLVM places the two roles' code in either order.)
# The producer gives registers away and issues the bulk tensor copies of a stage: A's box, B's two.
# PRODUCER:         setmaxnreg.dec.sync.aligned.u32 40;
# PRODUCER:         mbarrier.try_wait.parity.shared::cta.b64
# PRODUCER:         mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 32768;
# PRODUCER-COUNT-3: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# The consumers: four k16 steps of m64n128 per stage, one group kept in flight.
# CONSUMER:         setmaxnreg.inc.sync.aligned.u32 232;
# CONSUMER:         wgmma.fence.sync.aligned;
# CONSUMER-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
# CONSUMER:         wgmma.commit_group.sync.aligned;
# CONSUMER:         wgmma.wait_group.sync.aligned 1;
# CONSUMER:         mbarrier.arrive.shared::cta.b64
# CONSUMER:         wgmma.wait_group.sync.aligned 0;
# The epilogue: bias (bf16, widened; LLVM may hoist its loads above the wait), GELU inlined (no calls),
# rounded pairs into shared memory by stmatrix, a proxy fence, then the leader's bulk stores of two boxes.
# EPILOGUE:         ld.global.b16
# EPILOGUE-NOT:     call
# EPILOGUE:         @p cp.async.bulk.wait_group.read 0;
# EPILOGUE:         cvt.rn.bf16x2.f32
# EPILOGUE-COUNT-8: stmatrix.sync.aligned.m8n8.x4.shared.b16
# EPILOGUE:         fence.proxy.async.shared::cta;
# EPILOGUE-COUNT-2: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
# EPILOGUE:         @p cp.async.bulk.commit_group;

# A GEMM of symbolic extents without hints: the cost model's tile for a nominal 4096 (128x256, 4 stages),
# and the other shapes (128x192, 4 stages; 128x128, 6 stages), which the plan takes at the launch where one
# scores higher.
@function
def plain(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return A @ B

# KERNELS-LABEL: func.func private @plain__gemm0(
# KERNELS-SAME:    pipeline.stages = "4"{{.*}}tile.N = "256"
# KERNELS-LABEL: func.func private @plain__gemm0_n192(
# KERNELS-SAME:    pipeline.stages = "4"{{.*}}tile.N = "192"
# KERNELS-LABEL: func.func private @plain__gemm0_n128(
# KERNELS-SAME:    pipeline.stages = "6"{{.*}}tile.N = "128"

# A 128x192 tile (a hint here; the cost model's choice for 3072 x 3072): each stage's copies are A's box and
# B's three 64-column boxes (16 KiB + 3 x 8 KiB), each k16 step one m64n192k16 wgmma, and the epilogue's
# stores two passes: 128 columns (two boxes), then 64 (one). (wide is the module's last kernel.)
@function(tile=(128, 192, 64))
def wide(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return A @ B

# KERNELS-LABEL: func.func private @wide__gemm0(
# KERNELS-SAME:    pipeline.stages = "4", ptx.tensor_maps = "A:0:64x128:128;B:1:64x64:128;C:2:64x64:128"{{.*}}tile.N = "192"
# WIDE-LABEL: .visible .entry wide__gemm0(
# WIDE:         .maxntid 384
# WIDE:         mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 40960;
# WIDE:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd[[A:[0-9]+]],
# WIDE:         add.s32 {{.*}}, 16384;
# WIDE-NEXT:    // begin inline asm
# WIDE-NEXT:    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd[[B:[0-9]+]],
# WIDE-NOT:     %rd[[A]],
# WIDE:         add.s32 {{.*}}, 24576;
# WIDE-NEXT:    // begin inline asm
# WIDE-NEXT:    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd[[B]],
# WIDE:         add.s32 {{.*}}, 32768;
# WIDE-NEXT:    // begin inline asm
# WIDE-NEXT:    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd[[B]],
# # WIDEMMA-LABEL:     .visible .entry wide__gemm0(
# WIDEMMA-COUNT-4:   wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16
# WIDEMMA-NOT:       wgmma.mma_async.sync.aligned.m64n{{(128|256)}}k16
# # WIDESTORE-LABEL:   .visible .entry wide__gemm0(
# WIDESTORE:         @p cp.async.bulk.wait_group.read 0;
# WIDESTORE-COUNT-8: stmatrix.sync.aligned.m8n8.x4.shared.b16
# WIDESTORE:         fence.proxy.async.shared::cta;
# WIDESTORE-COUNT-2: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
# WIDESTORE:         @p cp.async.bulk.commit_group;
# WIDESTORE:         @p cp.async.bulk.wait_group.read 0;
# WIDESTORE-COUNT-4: stmatrix.sync.aligned.m8n8.x4.shared.b16
# WIDESTORE:         fence.proxy.async.shared::cta;
# WIDESTORE-COUNT-1: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
# WIDESTORE:         @p cp.async.bulk.commit_group;
# WIDESTORE-NOT:     cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
# 
# SM75: error: matmul on the ptx target needs a tensor-core architecture (--arch sm_80, {{.*}}, sm_90a), not sm_75
