# The CPU's bf16 GEMM (backends/cpu/gemm_bf16.py): a bf16 x bf16 matmul without epilogue becomes a kernel
# generated whole as LLVM IR, declared with its IR and the argument it writes (C, f32), on the path
# TESSERA_CPU_BF16_GEMM pins: amx multiplies 16x32 bf16 tiles into f32 ones (tdpbf16ps), with the avx512
# path (vdpbf16ps) for a process the OS refuses AMX state; avx512 alone has no tile instruction; plain is
# the f32 GEMM of gemm.py. A bf16 result is the f32 one rounded by a conversion kernel. An unknown path is
# refused at the matmul's line.
# REQUIRES: amx-bf16, avx512-bf16
# RUN: env TESSERA_CPU_BF16_GEMM=amx tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: env TESSERA_CPU_BF16_GEMM=amx tessera-cc %s --compile-to=llir | FileCheck %s --check-prefix=AMX
# RUN: env TESSERA_CPU_BF16_GEMM=avx512 tessera-cc %s --compile-to=llir | FileCheck %s --check-prefix=AVX
# RUN: env TESSERA_CPU_BF16_GEMM=plain tessera-cc %s --compile-to=llir | FileCheck %s --check-prefix=PLAIN
# RUN: not env TESSERA_CPU_BF16_GEMM=simd tessera-cc %s 2>&1 | FileCheck %s --check-prefix=ERR

# KERN:      func.func private @mm__gemm0(memref<?x?xbf16> {tessera.dims = ["M", "K"], tessera.name = "A"},
# KERN-SAME:   memref<?x?xbf16> {tessera.dims = ["K", "N"], tessera.name = "B"},
# KERN-SAME:   memref<?x?xf32> {tessera.dims = ["M", "N"], tessera.name = "C"}, index
# KERN-SAME:   tessera.gemm_bf16 = {block = array<i64: {{[0-9]+}}, {{[0-9]+}}>, path = "amx"}, tessera.kernel
# KERN-SAME:   tessera.tile_kernel, tessera.writes = array<i64: 2>
# KERN:      func.func private @mm16__gemm0(
# KERN-SAME:   tessera.gemm_bf16 = {{.+}} path = "amx"
# KERN:      func.func @mm16__gemm0_f32_to_bf16_

# AMX-LABEL: define hidden void @mm__gemm0_bf16gemm(
# AMX:         call x86_amx @llvm.x86.tdpbf16ps.internal(i16 16, i16 64, i16 64,
# AMX:         call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>
# AMX-LABEL: define void @tsr_cpu_mm__gemm0(

# AVX-LABEL: define hidden void @mm__gemm0_bf16gemm(
# AVX-NOT:     tdpbf16ps
# AVX:         call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> %{{.+}}, <32 x bfloat> %{{.+}}, <32 x bfloat> %{{.+}})
# AVX-LABEL: define void @tsr_cpu_mm__gemm0(

# PLAIN-NOT: dpbf16ps
# PLAIN-NOT: bf16gemm

# ERR: bf16-gemm.py:[[# @LINE + 4]]:12: error: unknown bf16 GEMM path 'simd' (paths: auto, amx, avx512, plain)

@function
def mm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B, out_dtype=f32)

@function
def mm16(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return A @ B
