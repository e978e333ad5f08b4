# bf16/f16 GEMMs whose rows are not a multiple of 16 bytes on ptx: the tensor-core kernels move rows in 16-byte
# chunks (sm_80's cp.async copies of A [M, K] and B [K, N]; sm_90a's TMA of A, B and C as stored), so the group
# runs on the SIMT GEMM (backends/simt_gemm.py, its non-batched form over the step's own arguments) instead:
# chosen at compile time where an extent is static (N = 9 keys below, Kᵀ read in place on sm_90a as [N, K]),
# as the plan step's first `prefer` alternative, taken at the launch where K or N is not a multiple of 8, where
# they are symbolic; recorded in tessera.fallbacks. Before: refused ('N = 9 is not a multiple of 8') on sm_80,
# an ArgumentError at the call on sm_90a.
# RUN: tessera-cc %s --target ptx --arch sm_80 --compile-to=kernels | FileCheck %s --check-prefixes=CHECK,SM80
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefixes=CHECK,SM90

from tessera import bf16, f16, function, op, tensor

# CHECK:      fallbacks\22: [\22bf16 GEMM rows of N = 9 (not a multiple of 16 bytes): the SIMT GEMM\22]
# CHECK:      prefer\22: [{\22when\22: \22(K - 8*(K//8)) + (N - 8*(N//8))\22, \22kernel\22: \22symbolic__gemm0_simt\22
# CHECK:      fallbacks\22: [\22f16 GEMM rows not a multiple of 16 bytes (K, N at the launch): the SIMT GEMM there\22]
# SM80:       func.func @keys__gemm1(%arg0: memref<?x?xbf16> {tessera.dims = ["M", "K"]{{.*}}%arg1: memref<?x?xbf16> {tessera.dims = ["K", "N"]
# SM90:       func.func @keys__gemm0(%arg0: memref<?x?xbf16> {tessera.dims = ["M", "K"]{{.*}}%arg1: memref<?x?xbf16> {tessera.dims = ["N", "K"]
# CHECK-SAME:   tessera.kernel
# CHECK:        "ttile.block_id"() {dim = 2 : i64}
# CHECK:        "ttile.block_id"() {dim = 1 : i64}
# CHECK:        "ttile.block_id"() {dim = 0 : i64}
# CHECK:        arith.{{(floor)?}}divsi
# CHECK:      func.func @symbolic__gemm0_simt(


@function
def keys(Q: tensor[bf16, "S", 64], K: tensor[bf16, 9, 64]):
    return Q @ op.transpose(K, (1, 0))


@function
def symbolic(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"]):
    return A @ B
