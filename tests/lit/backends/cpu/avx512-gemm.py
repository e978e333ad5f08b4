# The CPU's AVX-512 GEMM paths where there is no AMX (backends/cpu/gemm_i8.py's _vectors, _vnni; gemm_bf16.py's
# _avx512): A is read in place — its words broadcast from A's rows, no packed copy of A (the kernel allocates
# one buffer, B's panel) — and B is packed. vnni's vpdpbusd multiplies u8 by s8: its panel holds B + 128 (a
# flipped sign bit), A is read signed, and each row's result loses 128·Σ_k A[i, k] (a sum of the row, shifted
# by 7); A's bytes are not offset any more.
# REQUIRES: avx512-bf16
# (every CPU with AVX-512 BF16 has AVX-512 VNNI; lit.cfg.py names no vnni feature)
# RUN: env TESSERA_CPU_BF16_GEMM=avx512 TESSERA_CPU_INT8_GEMM=vnni tessera-cc %s --compile-to=llir | FileCheck %s

# CHECK-LABEL: define {{.*}}@mm__gemm0_bf16gemm_avx512(
# CHECK:         call {{.*}}@aligned_alloc(
# CHECK:         call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(
# CHECK-NOT:     call {{.*}}@aligned_alloc(
# CHECK:         call void @free(
# CHECK-NOT:     call {{.*}}@aligned_alloc(
# CHECK-LABEL: define {{.*}}@mm8__gemm0_i8gemm_vnni(
# CHECK:         call {{.*}}@aligned_alloc(
# CHECK-NOT:     call {{.*}}@aligned_alloc(
# CHECK:         xor <64 x i8> %{{.+}}, splat (i8 -128)
# CHECK-NOT:     xor i32 %{{.+}}, -2139062144
# CHECK:         @llvm.vector.reduce.add.v16i32(
# CHECK-NEXT:    shl i32 %{{.+}}, 7
# CHECK:         call <16 x i32> @llvm.x86.avx512.vpdpbusd.512(<16 x i32>
# CHECK-NOT:     call {{.*}}@aligned_alloc(
# CHECK-NOT:     xor i32 %{{.+}}, -2139062144
# CHECK:         call void @free(
# CHECK-LABEL: define void @tsr_cpu_mm__gemm0(

@function
def mm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B, out_dtype=f32)

@function
def mm8(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
