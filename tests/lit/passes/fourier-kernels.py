# The kernels of op.fft's DFT for a size not a power of two (passes/fourier.py; powers of two: fft-kernels.py):
# each twiddle matrix a kernel of its own, one thread an entry, from j·k mod n reduced in integers to the nearest
# quarter turn (no sin/cos instruction: polynomials), scaled by 1/√n; the complex result's interleaving a kernel
# of its own, even threads the real part; the GEMMs between them the target's.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, function, op, tensor

# FUSE-LABEL:  func.func @spectrum(
# FUSE:          "ttensor.twiddle"() {part = "cos"{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.twiddle"() {part = "sin"{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group_kind = "gemm"
# FUSE:          "ttensor.interleave"{{.*}}tessera.group_kind = "fourier"
# FUSE:          "ttensor.reshape"{{.*}} -> tensor<12xcomplex<f32>>

# KERN-LABEL:  func.func @spectrum__fourier1(%arg0: memref<?x?xf32> {tessera.dims = ["YR", "YC"]
# KERN:          arith.muli
# KERN:          arith.floordivsi
# KERN:          arith.sitofp
# KERN-NOT:      math.cos
# KERN:          arith.constant 0.288675129 : f32
# KERN:          memref.store {{.*}}, %arg0
# KERN-LABEL:  func.func @spectrum__fourier2(
# KERN-NOT:      math.sin
# KERN:          memref.store {{.*}}, %arg0
# KERN-LABEL:  func.func @spectrum__fourier{{[0-9]+}}(%arg0: memref<?xf32> {tessera.dims = ["N"], tessera.name = "R"}
# KERN:          memref.load %arg0
# KERN:          memref.store {{.*}}, %arg2
# KERN:        } else {
# KERN:          memref.load %arg1
# KERN:          memref.store {{.*}}, %arg2
@function
def spectrum(x: tensor[f32, 12]):
    return op.fft(12, dtype=f32) @ x
