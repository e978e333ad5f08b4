# Graph IR matmuls on AMD matrix units (backends/matrix_gemm.py): bf16/f16 GEMM groups are a generated kernel of
# 64x64 blocks of C whose four waves multiply 32x32 quarters in warp fragments: on CDNA (gfx942) four
# v_mfma_f32_32x32x8 per K step of 32 (bf16 as i16 bit patterns, the _1k form), on RDNA 3 (gfx1100) 2 x 2 x 2
# v_wmma_f32_16x16x16; the panels and the f32 accumulator in LDS, K steps between two s_barriers; the epilogue
# (scale, residual, gelu) in f32 after them. f32 operands stay on the SIMT GEMM (one fmul and fadd per k),
# recorded in the kernel's fallbacks, as tessera-objdump shows; the matrix kernels say what their products were.
# RUN: tessera-cc %s --target amdgpu --arch gfx942 --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target amdgpu --arch gfx942 --compile-to=llir | FileCheck %s --check-prefixes=CHECK,MFMA
# RUN: tessera-cc %s --target amdgpu --arch gfx1100 --compile-to=llir | FileCheck %s --check-prefixes=CHECK,WMMA
# RUN: tessera-cc %s --target amdgpu --arch gfx942 -o %t.tessera && tessera-objdump %t.tessera --no-ir | FileCheck %s --check-prefix=RECORD

from tessera import bf16, f16, f32, function, op, tensor

# KERNELS-LABEL: func.func @mm__gemm0(
# KERNELS:         memref.alloca() {tessera.name = "SA"} : memref<64x32xbf16, #gpu.address_space<workgroup>>
# KERNELS-NEXT:    memref.alloca() {tessera.name = "SB"} : memref<32x64xbf16, #gpu.address_space<workgroup>>
# KERNELS-NEXT:    memref.alloca() {tessera.name = "SC"} : memref<64x64xf32, #gpu.address_space<workgroup>>
# KERNELS:         scf.for
# KERNELS:           "ttile.barrier"()
# KERNELS:           "ttile.ldmatrix"({{.*}}) : (memref<64x64xf32, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[32, 32], f32, "acc">
# KERNELS-NEXT:      "ttile.ldmatrix"({{.*}}) : (memref<64x32xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[32, 32], bf16, "a">
# KERNELS-NEXT:      "ttile.ldmatrix"({{.*}}) : (memref<32x64xbf16, #gpu.address_space<workgroup>>, index, index) -> !ttile.fragment<[32, 32], bf16, "b">
# KERNELS-NEXT:      "ttile.mma"({{.*}}) {shape = [32, 32, 8]}
# KERNELS-NEXT:      "ttile.store_fragment"(
# KERNELS-NEXT:      "ttile.barrier"()

# CHECK:       @__wg_mm__gemm0_0 = internal unnamed_addr addrspace(3) global [2048 x bfloat] undef
# CHECK:       @__wg_mm__gemm0_2 = internal unnamed_addr addrspace(3) global [4096 x float] undef
# CHECK-LABEL: define amdgpu_kernel void @mm__gemm0(
# CHECK:         call void @llvm.amdgcn.s.barrier()
# MFMA-COUNT-4:  call <16 x float> @llvm.amdgcn.mfma.f32.32x32x8bf16.1k(<4 x i16>
# WMMA-COUNT-8:  call <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v16i16(<16 x i16>
# CHECK-NOT:     define
# CHECK:         call void @llvm.amdgcn.s.barrier()
# CHECK-LABEL: define amdgpu_kernel void @scaled__gemm0(
# MFMA-COUNT-4:  call <16 x float> @llvm.amdgcn.mfma.f32.32x32x8f16(<4 x half>
# WMMA-COUNT-8:  call <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16(<16 x half>
# CHECK:         call void @llvm.amdgcn.s.barrier()
# CHECK:         fmul float
# CHECK:         fadd float
# CHECK:         fptrunc float %{{.+}} to half
# CHECK-LABEL: define amdgpu_kernel void @single__gemm0(
# CHECK-NOT:     mfma
# CHECK-NOT:     wmma
# CHECK:         fmul float
# CHECK-NEXT:    fadd float
# CHECK-NOT:     mfma
# CHECK-NOT:     wmma
# CHECK-LABEL: declare

# RECORD-LABEL: - name: mm__gemm0
# RECORD:         launch: {grid: from-arguments, block: any, warp_size: 64}
# RECORD:         resources: {regs_per_thread: {{[0-9]+}}, smem_per_cta: 24576}
# RECORD:         amdgpu.mma: "32x32x8 bf16: mfma"
# RECORD-LABEL: - name: scaled__gemm0
# RECORD:         amdgpu.mma: "32x32x8 f16: mfma"
# RECORD-LABEL: - name: single__gemm0
# RECORD-NOT:     amdgpu.mma
# RECORD:         fallbacks: "f32 GEMM on FMA units (the SIMT GEMM): the MFMA GEMM takes bf16/f16 operands"


@function
def mm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B)


@function
def scaled(A: tensor[f16, "Z", "M", "K"], B: tensor[f16, "Z", "K", "N"], R: tensor[f16, "Z", "M", "N"]):
    return op.gelu(op.matmul(A, B) * 0.5 + R)


@function
def single(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return op.matmul(A, B)
