# An int8 matmul on sm_90a (i8 x i8 -> i32): A is read as stored ([M, K], K-major already), B copied
# transposed to [N, K] (backends/ptx/fp8_pack.py's `cols`, bytes unchanged: wgmma reads 8-bit operands
# K-major only), and multiplied by wgmma's s8 kind into s32 accumulators (backends/ptx/gemm_sm90.py).
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PACK < %t.ptx
# RUN: FileCheck %s --check-prefix=GEMM < %t.ptx
# RUN: FileCheck %s --check-prefix=STORE < %t.ptx
# RUN: FileCheck %s --check-prefix=PRODUCER < %t.ptx
# The compilation assembles the PTX with ptxas for sm_90a where it is installed.

from tessera import function, tensor, i8


@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B

# B is copied to [N, K]; the GEMM reads A [M, K] and that copy through 128-byte boxes (128 elements of K), and
# writes i32. Symbolic M and N: the plan carries the 128x256 tile and the 128x128 one.
# KERNELS-LABEL: func.func private @mm__gemm0_pack_b(
# KERNELS-SAME:    memref<?x?xi8> {tessera.dims = ["K", "N"], tessera.name = "src"}
# KERNELS-SAME:    memref<?x?xi8> {tessera.dims = ["N", "KP"], tessera.name = "dst"}
# KERNELS-SAME:    tessera.kernel_props = {fp8.pack = "cols"}
# KERNELS-LABEL: func.func private @mm__gemm0(
# KERNELS-SAME:    memref<?x?xi8> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    memref<?x?xi8> {tessera.dims = ["N", "K"], tessera.name = "B"}
# KERNELS-SAME:    memref<?x?xi32> {tessera.dims = ["M", "N"], tessera.name = "C"}
# KERNELS-SAME:    ptx.mma = "wgmma m64n256k32 s8 x s8", ptx.tensor_maps = "A:0:128x128:128;B:1:128x256:128", tile.K = "128", tile.M = "128", tile.N = "256"
# KERNELS-LABEL: func.func private @mm__gemm0_n128(
# KERNELS-SAME:    ptx.mma = "wgmma m64n128k32 s8 x s8", ptx.tensor_maps = "A:0:128x128:128;B:1:128x128:128"

# The copy: each thread moves 16 bytes of a column of B, unconverted, as one 16-byte store.
# PACK-LABEL: .visible .entry mm__gemm0_pack_b(
# PACK-COUNT-16: ld.global.b8
# PACK-NOT:      cvt
# PACK:          st.global.v4.b32

# (LLVM places the blocks in any order.) A K step: a 16 KiB box of A and a 32 KiB one of B ...
# PRODUCER-LABEL: .visible .entry mm__gemm0(
# PRODUCER:         mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 49152;
# PRODUCER-COUNT-2: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# ... multiplied as four k32 slices into s32 accumulators (no scale immediates: integer kinds have none),
# one group kept in flight.
# GEMM-LABEL: .visible .entry mm__gemm0(
# GEMM:         wgmma.fence.sync.aligned;
# GEMM-COUNT-4: wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {{.*}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, 1;
# GEMM:         wgmma.commit_group.sync.aligned;
# GEMM:         wgmma.wait_group.sync.aligned 1;

# i32 results of any N: a pair in one store where N is even, each value alone where it is odd.
# STORE-LABEL: .visible .entry mm__gemm0(
# STORE:         @p st.global.v2.b32 [%rd{{[0-9]+}}], {%r{{[0-9]+}}, %r{{[0-9]+}}}; @q st.global.b32 [%rd{{[0-9]+}}], %r{{[0-9]+}}; @r st.global.b32 [%rd{{[0-9]+}}+4]
