# A comparison of f64 values in a generated elementwise kernel compares in f64 on every target (they share
# passes/kernelgen.elementwise's source): the group computes in f64 where any of its values is f64. It
# compared in f32 (the compute type came from the bool result), so 1e100 was inf and 1 + 1e-12 was 1.
# A cast of an f64 result to f32 likewise computes its operand in f64 and rounds once at the cast.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir
# RUN: FileCheck %s --check-prefix=LLIR < %t/10-llir.ll
# RUN: tessera-cc %s --target spirv --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: tessera-cc %s --target ptx --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: tessera-cc %s --target amdgpu --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import f32, f64, function, op, tensor

# KERN-LABEL: func.func @gt__elementwise0(
# KERN-NOT:     arith.truncf
# KERN:         %[[A:.+]] = memref.load %arg0[{{.+}}] : memref<?x?xf64>
# KERN:         %[[B:.+]] = memref.load %arg1[{{.+}}] : memref<?x?xf64>
# KERN-NOT:     arith.truncf
# KERN:         arith.cmpf ogt, %[[A]], %[[B]] : f64
# KERN-NOT:     arith.truncf
# KERN-LABEL: func.func @max_cast__elementwise0(
# KERN-NOT:     arith.truncf
# KERN:         %[[M:.+]] = arith.maximumf %{{.+}}, %{{.+}} : f64
# KERN:         %[[D:.+]] = arith.subf %[[M]], %{{.+}} : f64
# KERN:         arith.truncf %[[D]] : f64 to f32

# LLIR-LABEL: define void @tsr_cpu_gt__elementwise0(
# LLIR-NOT:     fptrunc
# LLIR:         fcmp ogt <{{[0-9]+}} x double>
# LLIR-NOT:     fptrunc
# LLIR-LABEL: define void @tsr_cpu_max_cast__elementwise0(


@function
def gt(a: tensor[f64, "M", "N"], b: tensor[f64, "M", "N"]):
    return a > b


@function
def max_cast(a: tensor[f64, "M", "N"], b: tensor[f64, "M", "N"]):
    return op.cast(op.maximum(a, b) - 1.0, f32)
