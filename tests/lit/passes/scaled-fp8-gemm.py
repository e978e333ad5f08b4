# The scaled fp8 GEMM from one-byte tensors (passes/decompose.py scaled_fp8_matmuls, fusion's scale_by2 and
# cast steps, passes/fp8_fallback.py one_byte_values). On ptx sm_90a, after quantize: the parameters keep
# their fp8 type (one byte in memory, no tessera.declared, no f16 container, no fallback recorded); the
# dequantizes are gone; the matmul multiplies the fp8 tensors, Bt read as stored (transpose_b), and the two
# scales and the cast to bf16 are one GEMM group. In the PTX, wgmma's e4m3 kind, the scales loaded once and
# multiplied into the fp32 accumulators, one rounding to bf16. Elsewhere (the CPU) the decomposition stays: the
# parameters are one byte too, read by the dequantizing elementwise kernels (the kernels' fp8 memory type), and
# no fp8 fallback is recorded.
# RUN: tessera-cc %s --target=ptx --arch=sm_90a --compile-to=quantize | FileCheck %s --check-prefix=QUANT
# RUN: tessera-cc %s --target=ptx --arch=sm_90a --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --compile-to=quantize | FileCheck %s --check-prefix=CPU

from tessera import bf16, f32, fp8_e4m3, function, op, tensor

# QUANT-LABEL: func.func @mm(%arg0: tensor<?x?xf8E4M3FN> {tessera.dims = ["M", "K"], tessera.name = "A"}{{.*}}, %arg1: tensor<?x?xf8E4M3FN> {tessera.dims = ["N", "K"], tessera.name = "Bt"}
# QUANT-NOT:     tessera.fallbacks
# QUANT-NOT:     ttensor.dequantize
# QUANT:         %[[P:.*]] = "ttensor.matmul"(%arg0, %arg1) {accum = f32, tessera.fp8_operands = ["fp8_e4m3", "fp8_e4m3"], tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "gemm", tessera.transpose_b} : (tensor<?x?xf8E4M3FN>, tensor<?x?xf8E4M3FN>) -> tensor<?x?xf32>
# QUANT:         %[[S:.*]] = "ttensor.binary"(%[[P]], %arg2) {fn = "mul", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# QUANT:         %[[T:.*]] = "ttensor.binary"(%[[S]], %arg3) {fn = "mul", tessera.group = [[G]] : i32, tessera.group_kind = "gemm"}
# QUANT:         "ttensor.cast"(%[[T]]) {accum = f32, tessera.group = [[G]] : i32, tessera.group_kind = "gemm"} : (tensor<?x?xf32>) -> tensor<?x?xbf16>
# QUANT-NOT:     xf16>

# PTX-LABEL:   .visible .entry mm__gemm0(
# PTX-NOT:     .entry
# PTX:         ld.global.b32 [[SA:%r[0-9]+]], [%rd{{[0-9]+}}];
# PTX:         ld.global.b32 [[SB:%r[0-9]+]], [%rd{{[0-9]+}}];
# PTX:         mul.rn.f32 [[X:%r[0-9]+]], [[SA]], %r{{[0-9]+}};
# PTX-NEXT:    mul.rn.f32 %r{{[0-9]+}}, [[SB]], [[X]];
# PTX:         cvt.rn.bf16x2.f32
# PTX:         wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
# PTX-NOT:     .entry

# CPU-LABEL:   func.func @mm(%arg0: tensor<?x?xf8E4M3FN> {tessera.dims = ["M", "K"], tessera.name = "A"}
# CPU-SAME:      tessera.fallbacks = ["bf16 computed in f32"]
# CPU:           "ttensor.cast"(%arg0) {{.*}}tessera.group_kind = "elementwise"} : (tensor<?x?xf8E4M3FN>) -> tensor<?x?xf32>
# CPU:           "ttensor.binary"({{.*}}, %arg2) {fn = "mul"
# CPU:           "ttensor.matmul"({{.*}}) {accum = f32, tessera.group = {{[0-9]+}} : i32, tessera.group_kind = "gemm", tessera.transpose_b} : (tensor<?x?xf32>, tensor<?x?xf32>)
@function
def mm(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32], sb: tensor[f32]):
    return op.cast(op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb)), bf16)
