# A layernorm over rows of a static length that is a multiple of the warp (passes/kernelgen._register_row),
# compiled for ptx: behind `if n == 256` the row is read once into registers, lane l holding the 8 consecutive
# columns 8l … 8l + 7 (16 bytes of bf16); the mean and the variance come from the registers (two butterflies,
# no loop); each column is stored once. The generic kernel (loops over the row) is the else branch, and the
# CPU's only kernel (its loops ran faster there).
# RUN: tessera-cc %s --target ptx --compile-to=kernels | FileCheck %s
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=CPU

from tessera import bf16, function, op, tensor

# CHECK-LABEL: func.func @ln__row0(
# CHECK:         %[[C:.+]] = arith.constant 256 : index
# CHECK:         %[[FIT:.+]] = arith.cmpi eq, %{{.+}}, %[[C]] : index
# CHECK:         scf.if %[[FIT]] {
# CHECK-NOT:       scf.for
# CHECK:           %[[EIGHT:.+]] = arith.constant 8 : index
# CHECK:           %[[LE:.+]] = arith.muli %{{.+}}, %[[EIGHT]] : index
# CHECK:           memref.load %arg0[%{{.+}}, %[[LE]]]
# CHECK-COUNT-7:   memref.load %arg0[
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

# CPU-LABEL: func.func @ln__row0(
# CPU-NOT:     arith.constant 256 : index
# CPU:         scf.for


@function
def ln(x: tensor[bf16, "M", 256], g: tensor[bf16, 256], b: tensor[bf16, 256]):
    return op.layernorm(x, gamma=g, beta=b)
