# op.quantize to i4 and op.dequantize of i4 (passes/decompose.py): an i4 tensor [..., N] is stored as its bytes,
# u8 [..., N/2], element 2j in the low nibble of byte j. Quantize saturates to [-8, 7], rounds, converts to i8,
# then packs: (q & 15) as u8 viewed as pairs [..., N/2, 2], shifted left by [0, 4] and summed over the pair.
# Dequantize unpacks: bytes viewed as [..., N/2, 1], shifted right by [0, 4] (logical, u8), converted to i8,
# then << 4 and >> 4 (arithmetic: it sign-extends the nibble). [0, 4] is made once per function, at its entry,
# by ttensor.push (Graph IR constants are splats). An i4 parameter or result is those u8 bytes, declared i4
# in the plan (tessera-objdump shows it); a parameter's are unpacked where they lie.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=SCHED < %t/02-schedule.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir
# RUN: tessera-objdump --no-ir %t.tessera | FileCheck %s --check-prefix=PLAN

from tessera import f32, function, int4, op, tensor

# SCHED-LABEL: func.func @round_trip(
# SCHED-NOT:     ttensor.quantize
# SCHED:         %[[ZERO:.+]] = "ttensor.constant"() {value = 0 : ui8} : () -> tensor<ui8>
# SCHED:         %[[FOUR:.+]] = "ttensor.constant"() {value = 4 : ui8} : () -> tensor<2xui8>
# SCHED:         %[[SHIFTS:.+]] = "ttensor.push"(%[[ZERO]], %[[FOUR]]) : (tensor<ui8>, tensor<2xui8>) -> tensor<2xui8>
# SCHED:         "ttensor.constant"() {value = -8.000000e+00 : f32}
# SCHED:         "ttensor.constant"() {value = 7.000000e+00 : f32}
# SCHED:         "ttensor.unary"({{.*}}) {fn = "round"}
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x64xf32>) -> tensor<?x64xi8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "and"} : (tensor<?x64xi8>, tensor<i8>) -> tensor<?x64xi8>
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x64xi8>) -> tensor<?x64xui8>
# SCHED:         "ttensor.reshape"({{.*}}) {tessera.result_dims = ["M", "32", "2"]} : (tensor<?x64xui8>) -> tensor<?x32x2xui8>
# SCHED:         "ttensor.binary"({{.*}}, %[[SHIFTS]]) {fn = "shl"} : (tensor<?x32x2xui8>, tensor<2xui8>) -> tensor<?x32x2xui8>
# SCHED:         %[[BYTES:.+]] = "ttensor.reduce"({{.*}}) {axes = [2], keepdims = false, kind = "sum"} : (tensor<?x32x2xui8>) -> tensor<?x32xui8>
# SCHED-NOT:     ttensor.dequantize
# SCHED-NOT:     ttensor.push
# SCHED:         %[[PAIRS:.+]] = "ttensor.reshape"(%[[BYTES]]) {tessera.result_dims = ["M", "32", "1"]} : (tensor<?x32xui8>) -> tensor<?x32x1xui8>
# SCHED:         "ttensor.binary"(%[[PAIRS]], %[[SHIFTS]]) {fn = "shr"} : (tensor<?x32x1xui8>, tensor<2xui8>) -> tensor<?x32x2xui8>
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x32x2xui8>) -> tensor<?x32x2xi8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "shl"} : (tensor<?x32x2xi8>, tensor<i8>) -> tensor<?x32x2xi8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "shr"} : (tensor<?x32x2xi8>, tensor<i8>) -> tensor<?x32x2xi8>
# SCHED:         "ttensor.reshape"({{.*}}) {tessera.result_dims = ["M", "64"]} : (tensor<?x32x2xi8>) -> tensor<?x64xi8>
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x64xi8>) -> tensor<?x64xf32>

# The packing kernel (a row sum over each pair) writes one byte for two elements.
# KERN-LABEL:  func.func @round_trip__row6(%arg0: memref<?x?xi8>
# KERN-SAME:     %arg1: memref<?xi8> {tessera.dims = ["R"], tessera.dtype = "u8"
@function
def round_trip(X: tensor[f32, "M", 64], s: tensor[f32]):
    return op.dequantize(op.quantize(X, int4, scale=s), s)


# SCHED-LABEL: func.func @weights(%arg0: tensor<16x32xui8> {tessera.declared = "i4", tessera.dims = [16, "32"]
# SCHED:         "ttensor.push"
# SCHED:         "ttensor.reshape"(%arg0) {tessera.result_dims = ["16", "32", "1"]} : (tensor<16x32xui8>) -> tensor<16x32x1xui8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "shr"} : (tensor<16x32x1xui8>, tensor<2xui8>) -> tensor<16x32x2xui8>
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<16x32x2xui8>) -> tensor<16x32x2xi8>

# The parameter's bytes are read where they lie: the shifts and the u8 -> i8 conversion are one kernel.
# KERN-LABEL:  func.func @weights__elementwise{{[0-9]+}}(%arg0: memref<?xi8> {tessera.dims = ["R"]
# KERN:          arith.shrsi
# KERN:          arith.trunci
# KERN-NOT:    func.func
# KERN:          arith.shli
# KERN-NOT:    func.func
# KERN:          arith.shrsi

# SCHED-LABEL: func.func @quantized(
# SCHED-SAME:    -> (tensor<16x32xui8> {tessera.declared = "i4"})
# SCHED:         "ttensor.reduce"
# SCHED-NEXT:    return

# PLAN-LABEL:  functions:
# PLAN:        - name: weights{{$}}
# PLAN:          - {name: W4, dtype: u8, dims: [16, 32], declared: i4}
# PLAN:        - name: quantized{{$}}
# PLAN:        results:
# PLAN-NEXT:     - {name: result0, dtype: u8, dims: [16, 32], declared: i4}
@function
def weights(W4: tensor[int4, 16, 64], s: tensor[f32, 16, 2]):
    return op.dequantize(W4, s, block=32)


@function
def quantized(W: tensor[f32, 16, 64]):
    return op.quantize(W, int4, scale=0.25)
