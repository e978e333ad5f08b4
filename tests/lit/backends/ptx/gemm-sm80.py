# Graph IR matmuls on sm_80 … sm_90: each fusion group becomes the mma.sync/cp.async kernel
# (backends/ptx/gemm_sm80.py), declared at the kernels stage and linked in as LLVM IR at llir.
# RUN: tessera-cc %s --target ptx --arch sm_80 --kernel linear_relu --kernel gemm_tf32 --compile-to=kernels \
# RUN:   | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_80 --kernel linear_relu --kernel gemm_tf32 --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: FileCheck %s --check-prefix=TF32 < %t.ptx
# RUN: tessera-cc %s --target ptx --arch sm_86 --kernel linear_relu --compile-to=ptx | FileCheck %s --check-prefix=SM86
# RUN: tessera-cc %s --target ptx --arch sm_80 --kernel unaligned -o %t.tessera
# RUN: tessera-objdump --no-ir %t.tessera | FileCheck %s --check-prefix=UNALIGNED

from tessera import function, op, tensor, bf16, f32, tf32


@function
def linear_relu(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]) -> tensor[bf16, "T", "F"]:
    return op.relu(op.bias_add(op.matmul(X, W), b))


@function
def gemm_tf32(A: tensor[tf32, "M", "K"], B: tensor[tf32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B, out_dtype=f32)

# No tensor maps (cp.async reads global memory itself); the signature is A, B, C, bias, then M, K, N.
# KERNELS-LABEL: func.func private @linear_relu__gemm0(
# KERNELS-SAME:    memref<?x?xbf16> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    memref<?xbf16> {tessera.dims = ["N"], tessera.name = "bias"}
# KERNELS-SAME:    tessera.kernel
# KERNELS-SAME:    tessera.kernel_props = {epilogue = "bias,relu", pipeline.stages = "4", ptx.mma = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", tile.K = "32", tile.M = "128", tile.N = "128"}
# KERNELS-SAME:    tessera.llvm_ir = "
# KERNELS-SAME:    tessera.writes = array<i64: 2>
# KERNELS-LABEL: func.func private @gemm_tf32__gemm0(
# KERNELS-SAME:    memref<?x?xtf32> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    ptx.mma = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", tile.K = "16"

# Eight warps, two CTAs an SM (128 registers a thread).
# PTX:       .target sm_80
# PTX-LABEL: .visible .entry linear_relu__gemm0(
# PTX-NEXT:    .param .u64 .ptr .global .align 1 linear_relu__gemm0_param_0,
# PTX:       .maxntid 256
# PTX-NEXT:  .minnctapersm 2
# The prologue fills three of the four stages, a commit group each; chunks outside the matrix read 0 bytes.
# PTX-COUNT-4: @p cp.async.cg.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}}; }
# PTX:         cp.async.commit_group;
# PTX-COUNT-4: @p cp.async.cg.shared.global
# PTX:         cp.async.commit_group;
# PTX-COUNT-4: @p cp.async.cg.shared.global
# PTX:         cp.async.commit_group;
# PTX-NOT:     cp.async.wait_group
# The K loop: wait for the oldest stage, one barrier, refill the stage read last time, then two k16 steps of
# two ldmatrix.x4 for A, four ldmatrix.x4.trans for B (two n8 blocks each) and 2x8 mma.sync.
# PTX:       [[LOOP:\$L__BB[0-9_]+]]:
# PTX:         cp.async.wait_group 2;
# PTX:         bar.sync 0;
# PTX-COUNT-4: @p cp.async.cg.shared.global
# PTX:         cp.async.commit_group;
# PTX-COUNT-2: ldmatrix.sync.aligned.m8n8.x4.shared.b16
# PTX-COUNT-4: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
# PTX-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# PTX-COUNT-2: ldmatrix.sync.aligned.m8n8.x4.shared.b16
# PTX-COUNT-4: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
# PTX-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# PTX:         bra {{.*}}[[LOOP]];
# The epilogue: nothing left in flight, bias (bf16, widened), ReLU inlined, predicated bf16x2 stores.
# PTX:         cp.async.wait_group 0;
# PTX-NOT:     call
# PTX:         ld.global.b16
# PTX:         max.{{(NaN.)?}}f32
# PTX:         cvt.rn.bf16x2.f32
# PTX:         @p st.global.b32
# PTX-NOT:     wgmma
# PTX-LABEL: .visible .entry gemm_tf32__gemm0(

# tf32: A by ldmatrix (four 8x4 f32 blocks), B by 32-bit loads (ldmatrix.trans moves 16-bit elements only).
# TF32-LABEL: .visible .entry gemm_tf32__gemm0(
# TF32:         cp.async.wait_group 2;
# TF32-COUNT-2: ldmatrix.sync.aligned.m8n8.x4.shared.b16
# TF32-COUNT-16: ld.shared.b32
# TF32-COUNT-16: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
# TF32:         @p st.global.v2.f32

# sm_86 has 100 KiB of shared memory an SM: three stages, so two CTAs fit.
# SM86:       .target sm_86
# SM86:       cp.async.wait_group 1;


@function
def unaligned(A: tensor[bf16, "M", 100], B: tensor[bf16, 100, "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B)

# K = 100 bf16 (200-byte rows of A, not whole 16-byte chunks): the SIMT GEMM (backends/simt_gemm.py) instead of
# the mma.sync kernel, recorded; before, refused ('K = 100 is not a multiple of 8').
# UNALIGNED:      - name: unaligned__gemm0
# UNALIGNED:        model: simt
# UNALIGNED:        fallbacks: "bf16 GEMM rows of K = 100 (not a multiple of 16 bytes): the SIMT GEMM"
