# The kernels of op.fft's FFT for a power-of-two size (passes/fft.py): one kernel a Stockham stage, here
# 1024 = 4⁵ (five radix-4 stages, strides 1, 4, 16, 64, 256), one thread a butterfly; the twiddles computed in
# the kernel from their integer exponents (no sin/cos instruction, no table: polynomials), the last stage scaled
# by 1/√1024; the result returned as the last stage's pairs (no interleaving kernel, no GEMM). On the CPU's
# warps every load is contiguous (the signal's axis is the launch's first); a stage of stride >= 32 writing
# planes stores contiguously too, the others scatter (their outputs are strided, or interleaved pairs).
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir
# RUN: FileCheck %s --check-prefix=WARP < %t/08-warps.mlir

from tessera import f32, function, op, tensor

# FUSE-LABEL:  func.func @spectrum(
# FUSE:          "ttensor.fft_stage"({{.*}}input_layout = "parts"{{.*}}output_layout = "planes", radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.fft_stage"({{.*}}stride = 4 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.fft_stage"({{.*}}stride = 16 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.fft_stage"({{.*}}stride = 64 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.fft_stage"({{.*}}output_layout = "pairs", radix = 4 : i64, scale = 3.125000e-02 : f64, stride = 256 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.reshape"{{.*}} -> tensor<1024xcomplex<f32>>
# FUSE-NOT:      "ttensor.matmul"
# FUSE-NOT:      "ttensor.interleave"

# KERN-LABEL:  func.func @spectrum__fourier1(%arg0: memref<?xf32> {tessera.dims = ["NX"], tessera.name = "X"}
# KERN-SAME:     %arg1: memref<?xf32> {tessera.dims = ["NY"], tessera.name = "Y"}
# KERN-NOT:      math.cos
# KERN-NOT:      math.sin
# KERN:          arith.floordivsi
# KERN:          arith.sitofp
# KERN:          memref.store {{.*}}, %arg1
# KERN-LABEL:  func.func @spectrum__fourier5(
# KERN-NOT:      math.cos
# KERN:          arith.constant 3.125000e-02 : f32
# KERN:          memref.store {{.*}}, %arg1
# KERN-NOT:      func.func @spectrum__fourier6

# WARP-LABEL:  func.func @spectrum__fourier1(
# WARP-NOT:      vector.gather
# WARP:          vector.load
# WARP:          vector.scatter
# WARP-LABEL:  func.func @spectrum__fourier4(
# WARP-NOT:      vector.gather
# WARP-NOT:      vector.scatter
# WARP:          vector.store
# WARP-NOT:      vector.gather
# WARP-NOT:      vector.scatter
# WARP-LABEL:  func.func @spectrum__fourier5(
# WARP-NOT:      vector.gather
# WARP:          vector.scatter
@function
def spectrum(x: tensor[f32, 1024]):
    return op.fft(1024, dtype=f32) @ x
