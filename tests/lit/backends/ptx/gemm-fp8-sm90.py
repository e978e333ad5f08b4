# An fp8 matmul on sm_90a of fp8 values kernels make, K symbolic: its operands, held as f16 (passes/fp8_fallback.py;
# fp8 parameters stay one byte instead, tests/lit/passes/scaled-fp8-gemm.py, and so do kernel-made values where
# K is a multiple of 16, tests/lit/backends/ptx/gemm-fp8-bytes-sm90.py), are packed to one-byte K-major
# rows (backends/ptx/fp8_pack.py: A as it is, B transposed, K padded to 16) and multiplied by the wgmma
# kernel's fp8 kind, each K step's product summed in fp32 registers (backends/ptx/gemm_sm90.py).
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PACK < %t.ptx
# RUN: FileCheck %s --check-prefix=GEMM < %t.ptx
# RUN: FileCheck %s --check-prefix=STORE < %t.ptx
# RUN: FileCheck %s --check-prefix=PRODUCER < %t.ptx

from tessera import function, op, tensor, f32, fp8_e4m3, fp8_e5m2


@function
def mixed(X: tensor[f32, "M", "K"], Y: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(op.cast(X, fp8_e4m3), op.cast(Y, fp8_e5m2))

# The packing kernels write fp8 elements; the GEMM reads A [M, KP] and B [N, KP] through 128-byte boxes.
# KERNELS-LABEL: func.func private @mixed__gemm2_pack_a(
# KERNELS-SAME:    memref<?x?xf16> {tessera.dims = ["R", "K"], tessera.name = "src"}
# KERNELS-SAME:    memref<?x?xf8E4M3FN> {tessera.dims = ["R", "KP"], tessera.name = "dst"}
# KERNELS-SAME:    tessera.kernel_props = {fp8.pack = "rows"}
# KERNELS-LABEL: func.func private @mixed__gemm2_pack_b(
# KERNELS-SAME:    memref<?x?xf16> {tessera.dims = ["K", "N"], tessera.name = "src"}
# KERNELS-SAME:    memref<?x?xf8E5M2> {tessera.dims = ["N", "KP"], tessera.name = "dst"}
# KERNELS-SAME:    tessera.kernel_props = {fp8.pack = "cols"}
# KERNELS-LABEL: func.func private @mixed__gemm2(
# KERNELS-SAME:    memref<?x?xf8E4M3FN> {tessera.dims = ["M", "KP"], tessera.name = "A"}
# KERNELS-SAME:    memref<?x?xf8E5M2> {tessera.dims = ["N", "KP"], tessera.name = "B"}
# KERNELS-SAME:    memref<?x?xf32> {tessera.dims = ["M", "N"], tessera.name = "C"}
# KERNELS-SAME:    ptx.mma = "wgmma m64n128k32 fp8_e4m3 x fp8_e5m2", ptx.tensor_maps = "A:0:128x128:128;B:1:128x128:128", tile.K = "128", tile.M = "128", tile.N = "128"

# Each thread converts 16 values, two at a time, and stores them as one 16-byte vector.
# PACK-LABEL: .visible .entry mixed__gemm2_pack_a(
# PACK-COUNT-8: cvt.rn.satfinite.e4m3x2.f16x2
# PACK:         st.global.v4.b32
# PACK-LABEL: .visible .entry mixed__gemm2_pack_b(
# PACK-COUNT-8: cvt.rn.satfinite.e5m2x2.f16x2
# PACK:         st.global.v4.b32

# f32 results of any N: a pair in one store where N is even, each value alone where it is odd.
# STORE-LABEL: .visible .entry mixed__gemm2(
# STORE:         @p st.global.v2.f32 [%rd{{[0-9]+}}], {%r{{[0-9]+}}, %r{{[0-9]+}}}; @q st.global.f32 [%rd{{[0-9]+}}], %r{{[0-9]+}}; @r st.global.f32 [%rd{{[0-9]+}}+4]
# (LLVM places the blocks in any order.) A step: one 16 KiB box of A and one of B ([N, K], K-major as
# wgmma reads 8-bit types) ...
# PRODUCER-LABEL: .visible .entry mixed__gemm2(
# PRODUCER:         setmaxnreg.dec.sync.aligned.u32 40;
# PRODUCER:         mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 32768;
# PRODUCER-COUNT-2: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# ... multiplied as four k32 slices into fresh accumulators (scale-d false first), waited for, and added to
# the fp32 sums.
# GEMM-LABEL: .visible .entry mixed__gemm2(
# GEMM:         wgmma.fence.sync.aligned;
# GEMM:         setp.ne.b32 p, %r{{[0-9]+}}, 0; wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2 {{.*}}, p, 1, 1; }
# GEMM-COUNT-3: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2 {{.*}}, 1, 1, 1;
# GEMM:         wgmma.commit_group.sync.aligned;
# GEMM:         wgmma.wait_group.sync.aligned 0;
# GEMM-COUNT-64: add.rn.f32
