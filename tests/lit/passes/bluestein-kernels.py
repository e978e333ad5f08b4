# The kernels of op.fft's Bluestein chirp-z for a size that is not a power of two (passes/fft.py), n = 100, m = 256:
# the chirp filter (ttensor.chirp), its FFT's four stages, the chirp multiply padding the signal
# (ttensor.chirp_mul), its FFT, the spectrum product (ttensor.spectrum_mul), the inverse FFT and the chirp
# multiply taking the first 100 outputs: each a kernel of its own in the "fourier" group. The chirps are computed
# in the kernels from the integer j² mod 2n in 64-bit index arithmetic (no sin/cos instruction, no table).
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, function, op, tensor

# FUSE-LABEL:  func.func @spectrum(
# FUSE:          "ttensor.chirp"() {inverse = false, n = 100 : i64, tessera.group = {{[0-9]+}} : i32, tessera.group_kind = "fourier"} : () -> tensor<2x256x1xf32>
# FUSE-COUNT-4:  "ttensor.fft_stage"({{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.chirp_mul"({{.*}}output_layout = "planes"{{.*}}tessera.group_kind = "fourier"} : (tensor<100x1xf32>) -> tensor<2x256x1xf32>
# FUSE-COUNT-4:  "ttensor.fft_stage"({{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.spectrum_mul"({{.*}}tessera.group_kind = "fourier"} : (tensor<256x1x2xf32>, tensor<256x1x2xf32>) -> tensor<2x256x1xf32>
# FUSE-COUNT-4:  "ttensor.fft_stage"({{.*}}inverse = true{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.chirp_mul"({{.*}}output_layout = "pairs", scale = 1.000000e-01 : f64{{.*}}tessera.group_kind = "fourier"} : (tensor<256x1x2xf32>) -> tensor<100x1x2xf32>
# FUSE-NOT:      "ttensor.matmul"
# FUSE-NOT:      "ttensor.twiddle"

# The filter: one thread an entry j of m, its chirp index min(j, m − j) squared.
# KERN-LABEL:  func.func @spectrum__fourier1(%arg0: memref<?xf32> {tessera.dims = ["NY"], tessera.name = "Y"}
# KERN-NOT:      math.cos
# KERN-NOT:      math.sin
# KERN:          arith.muli [[JJ:%.+]], [[JJ]] : index
# KERN:          memref.store
# KERN:          memref.store
# The padding chirp multiply: one load of the real signal, j² in index arithmetic, two stores (the planes).
# KERN-LABEL:  func.func @spectrum__fourier6(%arg0: memref<?xf32> {tessera.dims = ["NX"], tessera.name = "X"}
# KERN-SAME:     %arg1: memref<?xf32> {tessera.dims = ["NY"], tessera.name = "Y"}
# KERN-NOT:      math.cos
# KERN:          memref.load %arg0
# KERN:          arith.muli [[J:%.+]], [[J]] : index
# KERN:          memref.store {{.*}}, %arg1
# KERN:          memref.store {{.*}}, %arg1
# The spectrum product: the columns' pairs and the filter's spectrum read, the planes written.
# KERN-LABEL:  func.func @spectrum__fourier11(%arg0: memref<?xf32> {tessera.dims = ["NX"], tessera.name = "X"}
# KERN-SAME:     %arg1: memref<?xf32> {tessera.dims = ["NH"], tessera.name = "H"}
# KERN-SAME:     %arg2: memref<?xf32> {tessera.dims = ["NY"], tessera.name = "Y"}
# KERN-COUNT-2:  memref.load %arg0
# KERN-COUNT-2:  memref.load %arg1
# KERN:          memref.store {{.*}}, %arg2
# KERN:          memref.store {{.*}}, %arg2
# The last chirp multiply, scaled by 1/sqrt(100).
# KERN-LABEL:  func.func @spectrum__fourier16(
# KERN:          arith.constant 1.000000e-01 : f32
# KERN-NOT:      func.func @spectrum__fourier17
@function
def spectrum(x: tensor[f32, 100]):
    return op.fft(100, dtype=f32) @ x
