# A layernorm over rows of a static length that is a multiple of the warp (passes/kernelgen._register_row):
# behind `if n == 256` the row is read once, lane + 32·i for i < 8, into registers; the mean and the variance
# come from the registers (two butterflies, no loop); each column is stored once. The generic kernel (loops
# over the row) is the else branch. The same source on every target.
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s
# RUN: tessera-cc %s --target ptx --compile-to=kernels | FileCheck %s

from tessera import bf16, function, op, tensor

# CHECK-LABEL: func.func @ln__row0(
# CHECK:         %[[C:.+]] = arith.constant 256 : index
# CHECK:         %[[FIT:.+]] = arith.cmpi eq, %{{.+}}, %[[C]] : index
# CHECK:         scf.if %[[FIT]] {
# CHECK-NOT:       scf.for
# CHECK-COUNT-8:   memref.load %arg0[
# CHECK-NOT:       memref.load %arg0[
# CHECK-COUNT-5:   "ttile.shuffle_xor"
# CHECK-NOT:       memref.load %arg0[
# CHECK-COUNT-5:   "ttile.shuffle_xor"
# CHECK-NOT:       memref.load %arg0[
# CHECK-COUNT-8:   memref.store {{.+}}, %arg3[
# CHECK-NOT:       memref.load %arg0[
# CHECK:         } else {
# CHECK:           scf.for
# CHECK:           memref.load %arg0[


@function
def ln(x: tensor[bf16, "M", 256], g: tensor[bf16, 256], b: tensor[bf16, 256]):
    return op.layernorm(x, gamma=g, beta=b)
