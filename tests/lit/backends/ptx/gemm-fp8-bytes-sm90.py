# fp8 values kernels make, multiplied on sm_90a from their bytes (issue 17; passes/fp8_fallback.py
# one_byte_values): K = 64, a multiple of 16, so the quantizing kernels store e4m3/e5m2 bytes (cvt.rn.satfinite)
# and the wgmma GEMM reads A [M, K] where the first kernel wrote it. B [K, N] is copied to [N, K] bytes unchanged
# (fp8_pack.py's `cols`: wgmma reads 8-bit operands K-major only). No f16 container, no packing from f16 (the
# `rows` kernel and the f16 -> fp8 conversions of tests/lit/backends/ptx/gemm-fp8-sm90.py, where K is symbolic);
# a transposed quantize is read in place (qmmt), with no copy at all.
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s --check-prefix=PTX
# The compilation assembles the PTX with ptxas for sm_90a where it is installed.

from tessera import function, op, tensor, f32, fp8_e4m3, fp8_e5m2


@function
def qmm(X: tensor[f32, "M", 64], W: tensor[f32, 64, "N"], sx: tensor[f32], sw: tensor[f32]) -> tensor[f32, "M", "N"]:
    return op.quantize(X, fp8_e4m3, scale=sx) @ op.quantize(W, fp8_e5m2, scale=sw)

# KERNELS-LABEL: func.func @qmm__elementwise0(
# KERNELS-SAME:    memref<?x?xi8> {tessera.dims = ["R", "C"], tessera.dtype = "fp8_e4m3", tessera.name = "O0"}
# KERNELS:         arith.truncf {{.*}} : f32 to f8E4M3FN
# KERNELS-NOT:     f16
# KERNELS-LABEL: func.func @qmm__elementwise1(
# KERNELS-SAME:    memref<?x?xi8> {tessera.dims = ["R", "C"], tessera.dtype = "fp8_e5m2", tessera.name = "O0"}
# KERNELS:         arith.truncf {{.*}} : f32 to f8E5M2
# KERNELS-NOT:     f16
# KERNELS-NOT:   pack_a
# KERNELS-LABEL: func.func private @qmm__gemm2_pack_b(
# KERNELS-SAME:    memref<?x?xf8E5M2> {tessera.dims = ["K", "N"], tessera.name = "src"}
# KERNELS-SAME:    memref<?x?xf8E5M2> {tessera.dims = ["N", "KP"], tessera.name = "dst"}
# KERNELS-SAME:    tessera.kernel_props = {fp8.pack = "cols"}
# KERNELS-LABEL: func.func private @qmm__gemm2(
# KERNELS-SAME:    memref<?x?xf8E4M3FN> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    memref<?x?xf8E5M2> {tessera.dims = ["N", "K"], tessera.name = "B"}
# KERNELS-SAME:    ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e5m2"
# KERNELS-NOT:   fp8.pack = "rows"

# PTX-LABEL: .visible .entry qmm__elementwise0(
# PTX:         cvt.rn.satfinite.e4m3x2.f32
# PTX:         st.global.b8
# PTX-LABEL: .visible .entry qmm__elementwise1(
# PTX:         cvt.rn.satfinite.e5m2x2.f32
# PTX:         st.global.b8
# PTX-LABEL: .visible .entry qmm__gemm2_pack_b(
# PTX-NOT:     cvt.{{.*}}e5m2
# PTX-LABEL: .visible .entry qmm__gemm2(
# PTX:         wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2
# PTX-NOT:   .entry qmm__gemm2_pack_a


@function
def qmmt(X: tensor[f32, "M", 64], Wt: tensor[f32, "N", 64], sx: tensor[f32], sw: tensor[f32]) -> tensor[f32, "M", "N"]:
    return op.quantize(X, fp8_e4m3, scale=sx) @ op.transpose(op.quantize(Wt, fp8_e5m2, scale=sw))

# The transpose of one-byte values folds into the GEMM, which reads the quantized Wt [N, K] in place: the two
# quantizing kernels and the GEMM, nothing else (no layout kernel, no copy).
# KERNELS-LABEL: func.func @qmmt__elementwise0(
# KERNELS-LABEL: func.func @qmmt__elementwise1(
# KERNELS-SAME:    memref<?x?xi8> {tessera.dims = ["R", "C"], tessera.dtype = "fp8_e5m2", tessera.name = "O0"}
# KERNELS-NOT:   @qmmt__layout
# KERNELS-NOT:   @qmmt__gemm{{[0-9]+}}_pack
# KERNELS-LABEL: func.func private @qmmt__gemm{{[0-9]+}}(
# KERNELS-SAME:    memref<?x?xf8E4M3FN> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    memref<?x?xf8E5M2> {tessera.dims = ["N", "K"], tessera.name = "B"}
# KERNELS-SAME:    ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e5m2"
