# The SIMT GEMM (backends/simt_gemm.py) on AMDGPU and SPIR-V: one work-item per element of C, k ascending with
# one product and one sum per step; work-groups numbered across grid x, y and z of at most 65535 each
# ((z*65535 + y)*65535 + x, kernelgen.folded_block), split into column block, row block and batch entry by two
# divisions; a batched rhs's entry z reads the lhs's min(z, its count - 1), so a 2-D lhs is broadcast; f16
# widened to f32 at the loads; i8 x i8 sign-extended and accumulated in i32. On AMDGPU, bf16/f16 GEMMs run
# on MFMA/WMMA by default (backends/matrix_gemm.py; amdgpu/matrix-gemm.py), so the AMDGPU runs are strict's,
# under which every float GEMM is this kernel.
# RUN: tessera-cc %s --target amdgpu --profile strict --compile-to=llir | FileCheck %s --check-prefix=AMDGPU
# RUN: tessera-cc %s --target amdgpu --arch gfx1100 --profile strict --compile-to=llir | FileCheck %s --check-prefix=AMDGPU
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=SPIRV

from tessera import f16, f32, function, i8, op, tensor

# AMDGPU-LABEL: define amdgpu_kernel void @bias_relu__gemm0(
# AMDGPU:         @llvm.amdgcn.workgroup.id.z()
# AMDGPU:         @llvm.amdgcn.workgroup.id.y()
# AMDGPU:         @llvm.amdgcn.workgroup.id.x()
# AMDGPU:         sdiv i64 %{{[0-9]+}}, %{{[0-9]+}}
# AMDGPU:         sdiv i64 %{{[0-9]+}}, %{{[0-9]+}}
# AMDGPU:         @llvm.smin.i64(
# AMDGPU:         fmul float
# AMDGPU-NEXT:    fadd float
# AMDGPU-LABEL: define amdgpu_kernel void @batched__gemm0(
# AMDGPU:         fpext half %{{.+}} to float
# AMDGPU:         fpext half %{{.+}} to float
# AMDGPU-NEXT:    fmul float
# AMDGPU:         fptrunc float %{{.+}} to half
# AMDGPU-LABEL: define amdgpu_kernel void @int8__gemm0(
# AMDGPU:         sext {{.*}}i8{{.*}} to {{.*}}i32
# AMDGPU:         mul nsw {{.*}}i32
# AMDGPU:         store i32

# SPIRV-LABEL: spirv.func @bias_relu__gemm0(
# SPIRV:         spirv.IMul %{{.+}}, %cst65535_i64 : i64
# SPIRV:         spirv.IMul %{{.+}}, %cst65535_i64 : i64
# SPIRV:         spirv.SDiv %{{[0-9]+}}, %{{[0-9]+}} : i64
# SPIRV:         spirv.SDiv %{{[0-9]+}}, %{{[0-9]+}} : i64
# SPIRV:         spirv.CL.s_min
# SPIRV:         spirv.FMul %{{.+}}, %{{.+}} : f32
# SPIRV-NEXT:    spirv.FAdd %{{.+}}, %{{.+}} : f32
# SPIRV-LABEL: spirv.func @batched__gemm0(
# SPIRV:         spirv.FConvert %{{.+}} : f16 to f32
# SPIRV:         spirv.FConvert %{{.+}} : f32 to f16
# SPIRV-LABEL: spirv.func @int8__gemm0(
# SPIRV:         spirv.SConvert %{{.+}} : i8 to i32
# SPIRV:         spirv.SConvert %{{.+}} : i8 to i32
# SPIRV:         spirv.IMul %{{.+}}, %{{.+}} : i32


@function
def bias_relu(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.relu(op.matmul(A, B) + b)


@function
def batched(A: tensor[f16, "Z", "M", "K"], B: tensor[f16, "Z", "K", "N"]):
    return op.matmul(A, B)


@function
def int8(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return op.matmul(A, B)
