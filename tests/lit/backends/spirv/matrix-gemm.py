# Graph IR matmuls on Intel's matrix hardware where it is declared (backends/matrix_gemm.py, `--arch xe-hpc`):
# a bf16/f16 GEMM group is a generated kernel of 64x64 blocks of C, four subgroups of 32 each multiplying a
# 32x32 quarter as SPV_KHR_cooperative_matrix 8x16x16 products (4 row tiles x 2 column tiles x 2 k tiles =
# 16 OpCooperativeMatrixMulAddKHR per K step of 32), the panels and the f32 accumulator in Workgroup memory
# (row strides 32 and 64, 64-bit), between two OpControlBarriers; bf16 matrices as SPV_KHR_bfloat16's. Without
# the declaration the same program's GEMM is the SIMT GEMM (FMA units), recorded; f32 operands are the SIMT GEMM
# on either, recorded where cooperative matrices were declared.
# RUN: tessera-cc %s --target spirv --arch xe-hpc --compile-to=spirv | FileCheck %s --check-prefix=COOP
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=PLAIN
# RUN: tessera-cc %s --target spirv --arch xe-hpc -o %t.tessera && tessera-objdump %t.tessera --no-ir | FileCheck %s --check-prefix=RECORD
# RUN: tessera-cc %s --target spirv -o %t.plain.tessera && tessera-objdump %t.plain.tessera --no-ir | FileCheck %s --check-prefix=UNDECLARED

from tessera import bf16, f32, function, op, tensor

# The stage's module is MLIR's 1.6 one (its cooperative-matrix ops claim 1.6); the binary is declared 1.3
# (tests/unit/test_matrix_gemm.py validates it with spirv-val).
# COOP:         spirv.module @__spv__tessera_kernels Physical64 OpenCL requires #spirv.vce<v1.6, [{{.*}}CooperativeMatrixKHR{{.*}}], [{{.*}}SPV_KHR_cooperative_matrix{{.*}}]>
# COOP-LABEL:   spirv.func @mm__gemm0(
# COOP:           spirv.ControlBarrier <Workgroup>, <Workgroup>
# COOP-COUNT-8:   spirv.KHR.CooperativeMatrixLoad %{{.+}}, %cst64_i64{{.*}}, <RowMajor> : !spirv.ptr<f32, Workgroup>, i64 -> !spirv.coopmatrix<8x16xf32, Subgroup, MatrixAcc>
# COOP-COUNT-8:   spirv.KHR.CooperativeMatrixLoad %{{.+}}, %cst32_i64{{.*}}, <RowMajor> : !spirv.ptr<bf16, Workgroup>, i64 -> !spirv.coopmatrix<8x16xbf16, Subgroup, MatrixA>
# COOP-COUNT-4:   spirv.KHR.CooperativeMatrixLoad %{{.+}}, %cst64_i64{{.*}}, <RowMajor> : !spirv.ptr<bf16, Workgroup>, i64 -> !spirv.coopmatrix<16x16xbf16, Subgroup, MatrixB>
# COOP-COUNT-16:  spirv.KHR.CooperativeMatrixMulAdd
# COOP-COUNT-8:   spirv.KHR.CooperativeMatrixStore %{{.+}}, %{{.+}}, %cst64_i64{{.*}}, <RowMajor> : !spirv.ptr<f32, Workgroup>
# COOP:           spirv.ControlBarrier <Workgroup>, <Workgroup>
# COOP-LABEL:   spirv.func @single__gemm0(
# COOP-NOT:       CooperativeMatrix
# COOP:           spirv.FMul %{{.+}}, %{{.+}} : f32
# COOP-NEXT:      spirv.FAdd %{{.+}}, %{{.+}} : f32
# COOP-NOT:       CooperativeMatrix

# PLAIN-NOT:    CooperativeMatrix
# PLAIN-LABEL:  spirv.func @mm__gemm0(
# PLAIN:          spirv.FMul %{{.+}}, %{{.+}} : f32
# PLAIN-NEXT:     spirv.FAdd %{{.+}}, %{{.+}} : f32
# PLAIN-NOT:    CooperativeMatrix

# RECORD-LABEL: - name: mm__gemm0
# RECORD:         spirv.arch: xe-hpc
# RECORD:         spirv.mma: "8x16x16 bf16: cooperative matrix"
# RECORD-LABEL: - name: single__gemm0
# RECORD:         fallbacks: "f32 GEMM on FMA units (the SIMT GEMM): the cooperative-matrix GEMM takes bf16/f16 operands"
# RECORD-NOT:     spirv.mma

# UNDECLARED-LABEL: - name: mm__gemm0
# UNDECLARED-NOT:     spirv.mma
# UNDECLARED:         fallbacks: "bf16 computed in f32; bf16 GEMM on FMA units (the SIMT GEMM): no matrix unit declared for spirv (--arch xe-hpc declares cooperative matrices)"


@function
def mm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B)


@function
def single(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return op.matmul(A, B)
