# The kernels of op.fft's FFT for a power-of-two size (passes/fft.py): one kernel a Stockham stage, here 64 = 4·4·4
# (three radix-4 stages), one thread a butterfly of one column; the twiddles computed in the kernel from their
# integer exponents (no sin/cos instruction, no table: polynomials), the last stage scaled by 1/√64; the result
# returned as the last stage's pairs (no interleaving kernel, no GEMM).
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, function, op, tensor

# FUSE-LABEL:  func.func @spectrum(
# FUSE:          "ttensor.fft_stage"({{.*}}radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.fft_stage"({{.*}}stride = 4 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.fft_stage"({{.*}}scale = 1.250000e-01 : f64, stride = 16 : i64{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.reshape"{{.*}} -> tensor<64x2xcomplex<f32>>
# FUSE-NOT:      "ttensor.matmul"
# FUSE-NOT:      "ttensor.interleave"

# KERN-LABEL:  func.func @spectrum__fourier0(%arg0: memref<?xf32> {tessera.dims = ["NX"], tessera.name = "X"}
# KERN-SAME:     %arg1: memref<?xf32> {tessera.dims = ["NY"], tessera.name = "Y"}
# KERN:          memref.load %arg0
# KERN-NOT:      math.cos
# KERN-NOT:      math.sin
# KERN:          arith.floordivsi
# KERN:          arith.sitofp
# KERN:          memref.store {{.*}}, %arg1
# KERN-LABEL:  func.func @spectrum__fourier1(
# KERN-LABEL:  func.func @spectrum__fourier2(
# KERN-NOT:      math.cos
# KERN:          arith.constant 1.250000e-01 : f32
# KERN:          memref.store {{.*}}, %arg1
# KERN-NOT:      func.func @spectrum__fourier3
@function
def spectrum(x: tensor[f32, 64, 2]):
    return op.fft(64, dtype=f32) @ x
