# f32 Graph IR matmuls on ptx: on FMA units by default (backends/ptx/gemm_fma.py), on tf32 tensor cores with
# --input-precision tf32 or a function's input_precision= hint (gemm_sm80.py's mma.sync kernel).
# RUN: tessera-cc %s --target ptx --arch sm_80 --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_80 --kernel linear_relu --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: FileCheck %s --check-prefix=FMA < %t.ptx
# RUN: tessera-cc %s --target ptx --arch sm_90a --kernel linear_relu --input-precision tf32 --compile-to=kernels \
# RUN:   | FileCheck %s --check-prefix=OPTION
# RUN: tessera-cc %s --target ptx --arch sm_90a --kernel linear_relu --input-precision tf32 --compile-to=ptx \
# RUN:   | FileCheck %s --check-prefix=WGMMA

from tessera import function, op, tensor, f32


@function
def linear_relu(X: tensor[f32, "T", 64], W: tensor[f32, 64, 96], b: tensor[f32, 96]) -> tensor[f32, "T", 96]:
    return op.relu(op.bias_add(op.matmul(X, W), b))


@function(input_precision="tf32")
def gemm_tf32(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)

# KERNELS-LABEL: func.func private @linear_relu__gemm0(
# KERNELS-SAME:    memref<?x?xf32> {tessera.dims = ["M", "K"], tessera.name = "A"}
# KERNELS-SAME:    epilogue = "bias,relu", input_precision = "ieee", pipeline.stages = "4", ptx.fma = "fma.rn.f32 8x8 a thread", tile.K = "8", tile.M = "128", tile.N = "128"
# The hint: tf32 tensor cores where K and N are multiples of 4 (a launch-time choice), FMA units otherwise.
# KERNELS-LABEL: func.func private @gemm_tf32__gemm0(
# KERNELS-SAME:    input_precision = "ieee"
# KERNELS-LABEL: func.func private @gemm_tf32__gemm0_tf32(
# KERNELS-SAME:    input_precision = "tf32", pipeline.stages = "4", ptx.mma = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
# KERNELS-LABEL: func.func private @gemm_tf32__gemm0_v4(
# KERNELS-SAME:    input_precision = "ieee"

# The option, on sm_90a with K static (64) and N a multiple of 4: wgmma's tf32 kind on Cᵀ = Bᵀ·Aᵀ
# (gemm_sm90_tf32.py: wgmma reads tf32 K-major only), A and B read as stored by TMA, B into registers; no copy.
# OPTION-LABEL: func.func private @linear_relu__gemm0(
# OPTION-SAME:    memref<?x?xf32> {tessera.dims = ["K", "N"], tessera.name = "B"}
# OPTION-SAME:    input_precision = "tf32"
# OPTION-SAME:    ptx.mma = "wgmma m64n{{(128|256)}}k8 tf32 x tf32, A from registers (C^T = B^T A^T)", ptx.tensor_maps = "A:0:32x{{(128|256)}}:128;B:1:32x32:128"
# OPTION-NOT:     pack_b
# WGMMA-LABEL: .visible .entry linear_relu__gemm0(
# WGMMA:       ld.shared.v2.b32
# WGMMA:       wgmma.mma_async.sync.aligned.m64n{{(128|256)}}k8.f32.tf32.tf32

# 256 threads, two CTAs an SM (128 registers a thread).
# PTX-LABEL: .visible .entry linear_relu__gemm0(
# PTX:       .maxntid 256
# PTX-NEXT:  .minnctapersm 2
# The prologue fills three stages: per K tile, four 4-byte copies of A (landing transposed) and one 16-byte
# chunk of B (N = 96 is a multiple of 4), a commit group each.
# PTX-COUNT-4: @p cp.async.ca.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 4, %r{{[0-9]+}}; }
# PTX:         @p cp.async.cg.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}}; }
# PTX:         cp.async.commit_group;
# PTX-COUNT-4: @p cp.async.ca.shared.global
# PTX:         @p cp.async.cg.shared.global
# PTX:         cp.async.commit_group;
# PTX-COUNT-4: @p cp.async.ca.shared.global
# PTX:         @p cp.async.cg.shared.global
# PTX:         cp.async.commit_group;
# The K loop: wait for the oldest stage, one barrier, refill the stage read last time, then eight k of four
# ld.shared.v4 (A's column, B's row: 8 + 8 values) and 64 fma.rn.f32.
# PTX:         [[LOOP:\$L__BB[0-9_]+]]:
# PTX:         cp.async.wait_group 2;
# PTX:         bar.sync 0;
# PTX-COUNT-4: @p cp.async.ca.shared.global
# PTX:         cp.async.commit_group;
# PTX-COUNT-32: ld.shared.v4.f32
# PTX:         bra{{.*}} [[LOOP]];
# The epilogue: nothing left in flight, bias, ReLU, one predicated store an element.
# PTX:         cp.async.wait_group 0;
# PTX:         ld.global.{{(b|f)}}32
# PTX:         max.{{(NaN.)?}}f32
# PTX:         @p st.global.f32
# PTX-NOT:     mma.sync
# PTX-NOT:     wgmma

# 512 products a K tile (8 k of an 8x8 block), inside the loop only: none in the epilogue.
# FMA:         bar.sync 0;
# FMA-COUNT-512: fma.rn.f32
# FMA-NOT:     fma.rn.f32
# FMA:         cp.async.wait_group 0;
