# The sm_90a fp8 GEMM in 128x256 tiles (the default for 16-bit results; $TESSERA_SM90_GEMM_FP8_BN=256 asks for
# it, =128 keeps 128x128 tiles: backends/ptx/gemm_lowering.py _fp8_tile, gemm_sm90.py fp8_halves): each consumer
# keeps 128 fp32 sums a thread and ONE product of 64 registers, which each K step fills twice: m64n128k32
# wgmmas over B's columns 0-127 (four k32 slices of the 128-byte step), committed and waited for, added to the
# first half of the sums; the same over columns 128-255 into the second half; then the stage is freed (one mbarrier arrive). Bf16
# results only: an f32 result keeps the 128-wide tile (its plain-store epilogue spilled in ptxas at 256).
# With TESSERA_SM90_GEMM_FP8_BN=128 the fp8 kernel is the 128x128 one.
# With TESSERA_SM90_GEMM_FP8_PROMOTE=1 each K step is promoted alone (the f32 result's kernel always is):
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_GEMM_FP8_PROMOTE=1 tessera-cc %s --target ptx --arch sm_90a \
# RUN:   --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_GEMM_FP8_BN=256 tessera-cc %s --target ptx --arch sm_90a \
# RUN:   --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_GEMM_FP8_BN=128 tessera-cc %s --target ptx --arch sm_90a \
# RUN:   --compile-to=kernels | FileCheck %s --check-prefix=OFF
# "256rs": the same with the step's A read into registers once (four ldmatrix.x4, one a k32 slice) and both
# halves' wgmmas taking four registers of A each (wgmma's RS form), B by descriptor.
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_GEMM_FP8_BN=256rs tessera-cc %s --target ptx --arch sm_90a \
# RUN:   --compile-to=ptx | FileCheck %s --check-prefix=RS
# The default for 16-bit results (gemm_lowering.FP8_PROMOTE_16BIT), and everywhere with
# TESSERA_SM90_GEMM_FP8_PROMOTE=2 (gemm_sm90.Sm90GemmSpec.promote): two K steps (256 elements of K) summed in the
# product before each promotion: both steps' stages waited for, then for each half of N the first step's four
# wgmmas into a fresh product and the second's four into the same one, ONE commit, one wait, 64 adds; both
# stages freed after the second half (two arrives); an odd last step promoted alone as before.
# RUN: env TESSERA_CACHE=0 tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx \
# RUN:   | FileCheck %s --check-prefix=PROMOTE
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_GEMM_FP8_PROMOTE=2 tessera-cc %s --target ptx --arch sm_90a \
# RUN:   --compile-to=ptx | FileCheck %s --check-prefix=PROMOTE
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_GEMM_FP8_PROMOTE=2 tessera-cc %s --target ptx --arch sm_90a \
# RUN:   --compile-to=kernels | FileCheck %s --check-prefix=PROMOTEK
# The compilation assembles the PTX with ptxas for sm_90a where it is installed.

from tessera import function, op, tensor, bf16, f32, fp8_e4m3


@function
def scaled(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32],
           sb: tensor[f32]) -> tensor[bf16, "M", "N"]:
    return op.cast(op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb)), bf16)


@function
def wide_f32(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32],
             sb: tensor[f32]) -> tensor[f32, "M", "N"]:
    return op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb))

# PTX-LABEL: .entry scaled__gemm0(
# PTX:         setmaxnreg.inc.sync.aligned.u32 232;
# PTX:         mbarrier.try_wait.parity.shared::cta.b64
# PTX:         wgmma.fence.sync.aligned;
# PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{[{](%r[0-9]+, ){63}%r[0-9]+[}]}}
# PTX-NOT:     wgmma.mma_async
# PTX:         wgmma.commit_group.sync.aligned;
# PTX-NOT:     wgmma.mma_async
# PTX:         wgmma.wait_group.sync.aligned 0;
# PTX-COUNT-64: add.rn.f32
# PTX-NOT:     wgmma.mma_async
# PTX-NOT:     mbarrier.arrive
# PTX:         wgmma.fence.sync.aligned;
# PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{[{](%r[0-9]+, ){63}%r[0-9]+[}]}}
# PTX-NOT:     wgmma.mma_async
# PTX:         wgmma.commit_group.sync.aligned;
# PTX-NOT:     wgmma.mma_async
# PTX:         wgmma.wait_group.sync.aligned 0;
# PTX-COUNT-64: add.rn.f32
# PTX-NOT:     wgmma.mma_async
# PTX:         mbarrier.arrive
# PTX-NOT:     wgmma.mma_async
# PTX-NOT:     m64n256
# PTX-LABEL: .entry wide_f32__gemm0(
# PTX-NOT:     m64n256
# PTX:         wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3

# KERNELS-LABEL: func.func private @scaled__gemm0(
# KERNELS-SAME:    ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e4m3, 2 halves of N a K step, promoted every 2 K steps"
# KERNELS-SAME:    ptx.tensor_maps = "A:0:128x128:128;B:1:128x256:128;C:2:64x64:128"
# KERNELS-SAME:    tile.N = "256"
# KERNELS-LABEL: func.func private @wide_f32__gemm0(
# KERNELS-SAME:    pipeline.stages = "6", ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e4m3"
# KERNELS-SAME:    tile.N = "128"

# OFF-LABEL: func.func private @scaled__gemm0(
# OFF-SAME:    pipeline.stages = "6", ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e4m3, promoted every 2 K steps"
# OFF-SAME:    tile.N = "128"

# RS-LABEL: .entry scaled__gemm0(
# RS:         mbarrier.try_wait.parity.shared::cta.b64
# RS-COUNT-4: ldmatrix.sync.aligned.m8n8.x4.shared.b16
# RS-NOT:     ldmatrix
# RS:         wgmma.fence.sync.aligned;
# RS-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{[{](%r[0-9]+, ){63}%r[0-9]+[}]}}, {{[{](%r[0-9]+, ){3}%r[0-9]+[}]}}, %rd
# RS:         wgmma.wait_group.sync.aligned 0;
# RS-COUNT-64: add.rn.f32
# RS-NOT:     ldmatrix
# RS:         wgmma.fence.sync.aligned;
# RS-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{[{](%r[0-9]+, ){63}%r[0-9]+[}]}}, {{[{](%r[0-9]+, ){3}%r[0-9]+[}]}}, %rd
# RS:         wgmma.wait_group.sync.aligned 0;
# RS-COUNT-64: add.rn.f32
# RS:         mbarrier.arrive

# PROMOTE-LABEL: .entry scaled__gemm0(
# PROMOTE:         mbarrier.try_wait.parity.shared::cta.b64
# PROMOTE:         mbarrier.try_wait.parity.shared::cta.b64
# PROMOTE-NOT:     wgmma.mma_async
# PROMOTE:         wgmma.fence.sync.aligned;
# PROMOTE-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{[{](%r[0-9]+, ){63}%r[0-9]+[}]}}
# PROMOTE-NOT:     wgmma.mma_async
# PROMOTE:         wgmma.commit_group.sync.aligned;
# PROMOTE-NOT:     wgmma.mma_async
# PROMOTE:         wgmma.wait_group.sync.aligned 0;
# PROMOTE-COUNT-64: add.rn.f32
# PROMOTE-NOT:     wgmma.mma_async
# PROMOTE-NOT:     mbarrier.arrive
# PROMOTE:         wgmma.fence.sync.aligned;
# PROMOTE-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{[{](%r[0-9]+, ){63}%r[0-9]+[}]}}
# PROMOTE-NOT:     wgmma.mma_async
# PROMOTE:         wgmma.commit_group.sync.aligned;
# PROMOTE:         wgmma.wait_group.sync.aligned 0;
# PROMOTE-COUNT-64: add.rn.f32
# PROMOTE-NOT:     wgmma.mma_async
# PROMOTE:         mbarrier.arrive
# PROMOTE-NOT:     wgmma.mma_async
# PROMOTE:         mbarrier.arrive
# PROMOTE-LABEL: .entry wide_f32__gemm0(

# PROMOTEK-LABEL: func.func private @scaled__gemm0(
# PROMOTEK-SAME:    ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e4m3, 2 halves of N a K step, promoted every 2 K steps"
# PROMOTEK-LABEL: func.func private @wide_f32__gemm0(
# PROMOTEK-SAME:    ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e4m3, promoted every 2 K steps"
