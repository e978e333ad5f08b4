# f32 matmuls under input precision tf32 on sm_90a: wgmma's tf32 kind reads its operands K-major only, so the
# kernel (backends/ptx/gemm_sm90_tf32.py) computes Cᵀ = Bᵀ·Aᵀ: A's [rows, 32 of K] boxes by TMA as wgmma's
# K-major B, B's [32 of K, 32 of N] boxes by TMA as stored, read into registers as wgmma's A. No copy of B.
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --kernel linear_tf32 --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: FileCheck %s --check-prefix=PRODUCER < %t.ptx
# RUN: FileCheck %s --check-prefix=EPILOGUE < %t.ptx

from tessera import function, op, tensor, f32


@function(input_precision="tf32", tile=(128, 256, 32), stages=4)
def linear_tf32(X: tensor[f32, "T", 264], W: tensor[f32, 264, "F"], b: tensor[f32, "F"]) -> tensor[f32, "T", "F"]:
    return op.gelu(op.bias_add(op.matmul(X, W), b))


@function(input_precision="tf32")
def odd_n(A: tensor[f32, "M", 64], B: tensor[f32, 64, 70]) -> tensor[f32, "M", 70]:
    return op.matmul(A, B)

# A [M, K] and B [K, N] as stored; the schedule's 128x256 tile taken transposed: 256 rows of C (wgmma's N) x 128
# columns (two consumers of 64). Where N is known at the launch only, N not a multiple of 4 (B's rows by TMA)
# takes the FMA kernel.
# KERNELS-LABEL: func.func private @linear_tf32__gemm0_fma(
# KERNELS-SAME:    input_precision = "ieee"
# KERNELS-LABEL: func.func private @linear_tf32__gemm0(
# KERNELS-SAME:    memref<?x?xf32> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    memref<?x?xf32> {tessera.dims = ["K", "N"], tessera.name = "B"}
# KERNELS-SAME:    epilogue = "bias,gelu", input_precision = "tf32", pipeline.stages = "4", ptx.mma = "wgmma m64n256k8 tf32 x tf32, A from registers (C^T = B^T A^T)", ptx.tensor_maps = "A:0:32x256:128;B:1:32x32:128", tile.K = "32", tile.M = "256", tile.N = "128"
# N static and not a multiple of 4: B copied to [N, K] (transpose.py), then gemm_sm90.py's tf32 kernel.
# KERNELS-LABEL: func.func private @odd_n__gemm0_pack_b(
# KERNELS-SAME:    transpose = "f32 [K, N] -> [N, K]"
# KERNELS-LABEL: func.func private @odd_n__gemm0(
# KERNELS-SAME:    memref<?x?xf32> {tessera.dims = ["N", "K"], tessera.name = "B"}
# KERNELS-SAME:    ptx.mma = "wgmma m64n{{(128|256)}}k8 tf32 x tf32", ptx.tensor_maps = "A:0:32x128:128;B:1:32x{{(128|256)}}:128"

# Two tensor maps, 3 warpgroups. The consumer's K step: wait for the stage, eight 8-byte fragment loads of B
# (k = t and t + 4 of each k8 slice, slices 1 KiB apart), then four m64n256k8 wgmmas with A in four registers
# and B (A's box) by one descriptor, retired before the next step's loads (the fragments are not rewritten under
# an in-flight wgmma; the other consumer's keep the tensor cores busy).
# PTX-LABEL: .visible .entry linear_tf32__gemm0(
# PTX-NEXT:    .param .align 64 .b8 linear_tf32__gemm0_param_0[128],
# PTX-NEXT:    .param .align 64 .b8 linear_tf32__gemm0_param_1[128],
# PTX-NEXT:    .param .u64 {{.*}}linear_tf32__gemm0_param_2,
# PTX:       .maxntid 384
# PTX:         mbarrier.try_wait.parity.shared::cta.b64
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[P:[0-9]+]]+0];
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[Q:[0-9]+]]+0];
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[P]]+1024];
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[Q]]+1024];
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[P]]+2048];
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[Q]]+2048];
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[P]]+3072];
# PTX:         ld.shared.v2.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r[[Q]]+3072];
# PTX:         wgmma.fence.sync.aligned;
# PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{[{](%r[0-9]+, ){127}%r[0-9]+[}]}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, 1, 1, 1;
# PTX:         wgmma.commit_group.sync.aligned;
# PTX-NEXT:    // end inline asm
# PTX-NEXT:    // begin inline asm
# PTX-NEXT:    wgmma.wait_group.sync.aligned 0;
# PTX:         mbarrier.arrive.shared::cta.b64
# PTX-NOT:     wgmma.wait_group.sync.aligned 1;
# The producer gives its registers away; a stage is 48 KiB: A's box of 256 rows, B's four 32-column boxes.
# PRODUCER-LABEL: .visible .entry linear_tf32__gemm0(
# PRODUCER:         setmaxnreg.dec.sync.aligned.u32 40;
# PRODUCER:         mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 49152;
# PRODUCER-COUNT-5: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# PRODUCER-NOT:     cp.async.bulk.tensor
# PRODUCER:         mbarrier.try_wait
# The epilogue: bias (indexed by the accumulator's row: a column of C), GELU inlined, pairs of adjacent columns
# of C stored by 8 bytes, 2 x 256 / 8 stores a thread, and no other (LLVM places the loop's blocks after it).
# EPILOGUE-LABEL: .visible .entry linear_tf32__gemm0(
# EPILOGUE-NOT:     call
# EPILOGUE-COUNT-64: @p st.global.v2.f32
# EPILOGUE-NOT:     st.global
# EPILOGUE:         ret;
