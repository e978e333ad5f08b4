# op.quantize to i4 and op.dequantize of i4 (passes/decompose.py): an i4 tensor [..., N] is stored as its bytes
# [..., N/2], element 2j in the low nibble of byte j. Quantize saturates to [-8, 7], rounds, converts to i8,
# then packs: (q & 15) viewed as pairs [..., N/2, 2], shifted left by [0, 4] (a 2-element vector made by
# ttensor.push: Graph IR constants are splats) and summed over the pair. Dequantize unpacks: bytes viewed as
# [..., N/2, 1], shifted left by [4, 0] and arithmetically right by 4 (sign-extending each nibble). An i4
# parameter is taken as u8 bytes (declared i4 for the plan, which tessera-objdump shows), unpacked in place.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=SCHED < %t/02-schedule.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir
# RUN: tessera-objdump --no-ir %t.tessera | FileCheck %s --check-prefix=PLAN

from tessera import f32, function, int4, op, tensor

# SCHED-LABEL: func.func @round_trip(
# SCHED-NOT:     ttensor.quantize
# SCHED:         "ttensor.constant"() {value = -8.000000e+00 : f32}
# SCHED:         "ttensor.constant"() {value = 7.000000e+00 : f32}
# SCHED:         "ttensor.unary"({{.*}}) {fn = "round"}
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x64xf32>) -> tensor<?x64xi8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "and"} : (tensor<?x64xi8>, tensor<i8>) -> tensor<?x64xi8>
# SCHED:         "ttensor.reshape"({{.*}}) {tessera.result_dims = ["M", "32", "2"]} : (tensor<?x64xi8>) -> tensor<?x32x2xi8>
# SCHED:         %[[LO:.+]] = "ttensor.constant"() {value = 0 : i8} : () -> tensor<i8>
# SCHED:         %[[HI:.+]] = "ttensor.constant"() {value = 4 : i8} : () -> tensor<2xi8>
# SCHED:         %[[SHIFTS:.+]] = "ttensor.push"(%[[LO]], %[[HI]]) : (tensor<i8>, tensor<2xi8>) -> tensor<2xi8>
# SCHED:         "ttensor.binary"({{.*}}, %[[SHIFTS]]) {fn = "shl"} : (tensor<?x32x2xi8>, tensor<2xi8>) -> tensor<?x32x2xi8>
# SCHED:         %[[BYTES:.+]] = "ttensor.reduce"({{.*}}) {axes = [2], keepdims = false, kind = "sum"} : (tensor<?x32x2xi8>) -> tensor<?x32xi8>
# SCHED-NOT:     ttensor.dequantize
# SCHED:         "ttensor.reshape"(%[[BYTES]]) {tessera.result_dims = ["M", "32", "1"]} : (tensor<?x32xi8>) -> tensor<?x32x1xi8>
# SCHED:         "ttensor.push"
# SCHED:         "ttensor.binary"({{.*}}) {fn = "shl"} : (tensor<?x32x1xi8>, tensor<2xi8>) -> tensor<?x32x2xi8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "shr"} : (tensor<?x32x2xi8>, tensor<i8>) -> tensor<?x32x2xi8>
# SCHED:         "ttensor.reshape"({{.*}}) {tessera.result_dims = ["M", "64"]} : (tensor<?x32x2xi8>) -> tensor<?x64xi8>
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x64xi8>) -> tensor<?x64xf32>

# The packing kernel (a row sum over each pair) writes one byte for two elements.
# KERN-LABEL:  func.func @round_trip__row6(%arg0: memref<?x?xi8>
# KERN-SAME:     %arg1: memref<?xi8>
@function
def round_trip(X: tensor[f32, "M", 64], s: tensor[f32]):
    return op.dequantize(op.quantize(X, int4, scale=s), s)


# SCHED-LABEL: func.func @weights(%arg0: tensor<16x32xui8> {tessera.declared = "i4", tessera.dims = [16, "32"]
# SCHED:         "ttensor.reshape"(%arg0) {tessera.result_dims = ["16", "32", "1"]} : (tensor<16x32xui8>) -> tensor<16x32x1xui8>
# SCHED:         "ttensor.push"({{.*}}) : (tensor<ui8>, tensor<2xui8>) -> tensor<2xui8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "shl"} : (tensor<16x32x1xui8>, tensor<2xui8>) -> tensor<16x32x2xui8>
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<16x32x2xui8>) -> tensor<16x32x2xi8>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "shr"} : (tensor<16x32x2xi8>, tensor<i8>) -> tensor<16x32x2xi8>

# The parameter's bytes are read where they lie: the shifts and the u8 -> i8 conversion are one kernel.
# KERN-LABEL:  func.func @weights__elementwise{{[0-9]+}}(%arg0: memref<?xi8> {tessera.dims = ["R"]
# KERN:          arith.shli
# KERN:          arith.trunci
# KERN-NOT:    func.func
# KERN:          arith.shrsi

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
