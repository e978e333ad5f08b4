# The CPU's int8 GEMM (backends/cpu/gemm_i8.py): an i8 x i8 matmul becomes a kernel generated whole as LLVM
# IR, declared with its IR and the argument it writes (C), on the path TESSERA_CPU_INT8_GEMM pins (plain
# here, which every CPU runs: sign-extended vectors, no AMX or VNNI instruction). An unknown path is refused at
# the matmul's line.
# RUN: env TESSERA_CPU_INT8_GEMM=plain tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: env TESSERA_CPU_INT8_GEMM=plain tessera-cc %s --compile-to=llir | FileCheck %s --check-prefix=LLIR
# RUN: not env TESSERA_CPU_INT8_GEMM=simd tessera-cc %s 2>&1 | FileCheck %s --check-prefix=ERR

# KERN:      func.func private @mm__gemm0(memref<?x?xi8> {tessera.dims = ["M", "K"], tessera.name = "A"},
# KERN-SAME:   memref<?x?xi8> {tessera.dims = ["K", "N"], tessera.name = "B"},
# KERN-SAME:   memref<?x?xi32> {tessera.dims = ["M", "N"], tessera.name = "C"}, index
# KERN-SAME:   tessera.gemm_i8 = {block = array<i64: {{[0-9]+}}, {{[0-9]+}}>, path = "plain"}, tessera.kernel
# KERN-SAME:   tessera.tile_kernel, tessera.writes = array<i64: 2>

# LLIR-LABEL: define hidden void @mm__gemm0_i8gemm(
# LLIR-NOT:     tdpbssd
# LLIR-NOT:     vpdpbusd
# LLIR:         sext <{{[0-9]+}} x i8> %{{.+}} to <{{[0-9]+}} x i32>
# The products fit i32 (nsw); the sums wrap as the reference's do (no nsw).
# LLIR:         mul nsw <{{[0-9]+}} x i32>
# LLIR-NEXT:    mul nsw <{{[0-9]+}} x i32>
# LLIR:         add <{{[0-9]+}} x i32>
# LLIR-LABEL: define void @tsr_cpu_mm__gemm0(

# ERR: int8-gemm.py:[[# @LINE + 4]]:12: error: unknown int8 GEMM path 'simd' (paths: auto, amx, vnni, plain)

@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
