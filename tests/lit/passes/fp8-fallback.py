# fp8 on a target that does not compute it (portability guide §5): after quantize, fp8 tensors are f16
# containers, the ops that make fp8 values round to the format (tessera.round_to), an fp8 parameter is taken
# as f32 and rounded on entry, keeping its declared dtype (tessera.declared, which the launch plan records),
# and the function records the fallbacks; kernels round in f32 before storing.
# RUN: tessera-cc %s --compile-to=quantize | FileCheck %s --check-prefix=QUANT
# RUN: tessera-cc %s --compile-to=quantize --target=spirv | FileCheck %s --check-prefix=QUANT
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import f32, fp8_e4m3, fp8_e5m2, function, op, tensor

# QUANT-LABEL: func.func @quantize(
# QUANT-SAME:    %arg1: tensor<?x?xf32> {tessera.declared = "fp8_e5m2", tessera.dims = ["N", "D"], tessera.name = "W"}
# QUANT-SAME:    tessera.fallbacks = ["fp8_e5m2 stored as f16 (exact; rounded to fp8_e5m2 and saturated at \C2\B157344)", "fp8_e4m3 stored as f16 (exact; rounded to fp8_e4m3 and saturated at \C2\B1448)", "f16 computed in f32"]
# QUANT:         "ttensor.cast"(%arg1) {{.*}}tessera.round_to = "fp8_e5m2"{{.*}} -> tensor<?x?xf16>
# QUANT:         "ttensor.cast"(%arg0) {{.*}}tessera.round_to = "fp8_e4m3"{{.*}} -> tensor<?x?xf16>
# QUANT-NOT:     f8E4M3FN
# QUANT-NOT:     f8E5M2

# The rounding: binade spacing by comparisons, floor-based ties to even, saturation at 448.
# KERN-LABEL:  func.func @quantize__elementwise{{[0-9]+}}(
# KERN:          math.floor
# KERN:          arith.constant 4.480000e+02 : f32
# KERN:          arith.truncf {{.*}} : f32 to f16
@function
def quantize(X: tensor[f32, "N", "D"], W: tensor[fp8_e5m2, "N", "D"]):
    E = op.cast(X, fp8_e4m3)   # returned too: the kernel that rounds it stores the container
    return op.cast(E, f32) * op.cast(W, f32), E
