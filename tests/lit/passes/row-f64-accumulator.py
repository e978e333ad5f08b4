# The row kernels of layernorm and rmsnorm (passes/kernelgen.row) accumulate an f64 row's sum and sum of
# squares in f64 on every target (they share the kernel source): each accumulator starts from f64(0.0). It
# started from a bare 0.0, an f32 variable, so the loop carried f32 and a row of mean 1e6 lost its low digits.
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s
# RUN: tessera-cc %s --target spirv --compile-to=kernels | FileCheck %s
# RUN: tessera-cc %s --target ptx --compile-to=kernels | FileCheck %s

from tessera import f64, function, op, tensor

# CHECK-LABEL: func.func @ln__row0(
# CHECK-NOT:     arith.truncf
# CHECK:         %[[Z:.+]] = arith.constant 0.000000e+00 : f64
# CHECK:         scf.for {{.+}} iter_args(%{{.+}} = %[[Z]]) -> (f64)
# CHECK:         arith.addf {{.+}} : f64
# CHECK:         "ttile.shuffle_xor"({{.+}}) : (f64, index) -> f64
# CHECK:         %[[Q:.+]] = arith.constant 0.000000e+00 : f64
# CHECK:         scf.for {{.+}} iter_args(%{{.+}} = %[[Q]]) -> (f64)
# CHECK:         arith.addf {{.+}} : f64
# CHECK:         "ttile.shuffle_xor"({{.+}}) : (f64, index) -> f64
# CHECK-NOT:     arith.truncf
# CHECK-LABEL: func.func @rms__row0(
# CHECK-NOT:     arith.truncf
# CHECK:         %[[R:.+]] = arith.constant 0.000000e+00 : f64
# CHECK:         scf.for {{.+}} iter_args(%{{.+}} = %[[R]]) -> (f64)
# CHECK:         arith.addf {{.+}} : f64
# CHECK:         "ttile.shuffle_xor"({{.+}}) : (f64, index) -> f64
# CHECK-NOT:     arith.truncf


@function
def ln(x: tensor[f64, "M", "N"]):
    return op.layernorm(x)


@function
def rms(x: tensor[f64, "M", "N"]):
    return op.rmsnorm(x)
