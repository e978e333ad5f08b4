# op.quantize / op.dequantize (issue 17 item 1; passes/decompose.py): the schedule stage rewrites them as the
# elementwise ops of their definition — i8: cast(round(min(max(f32(x) / s, -128), 127))), fp8: a cast of
# f32(x) / s; back: f32(q) * s — with the scale broadcast per channel by a reshape to [1, C] and per block by
# views [N, D/B, B] against [N, D/B, 1]. Fusion then joins a requantizing epilogue (i32 accumulator -> f32,
# scaled, biased, relu, quantized to i8) into one kernel that reads i32 and writes one byte an element.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=SCHED < %t/02-schedule.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, fp8_e4m3, i8, i32, function, op, tensor

# SCHED-LABEL: func.func @requantize(
# SCHED-NOT:     ttensor.quantize
# SCHED:         "ttensor.binary"({{.*}}) {fn = "div"}
# SCHED:         "ttensor.binary"({{.*}}) {fn = "max"}
# SCHED:         "ttensor.binary"({{.*}}) {fn = "min"}
# SCHED:         "ttensor.unary"({{.*}}) {fn = "round"}
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x64xf32>) -> tensor<?x64xi8>

# One kernel: the accumulator read as i32, the result stored as i8.
# KERN-LABEL:  func.func @requantize__elementwise0(%arg0: memref<?x?xi32>
# KERN-SAME:     %arg4: memref<?x?xi8>
# KERN:          math.floor
# KERN:          arith.fptosi {{.*}} : f32 to i8
# KERN-NOT:    func.func @requantize__elementwise1
@function
def requantize(acc: tensor[i32, "M", 64], w: tensor[f32, 64], bias: tensor[f32, 64], s: tensor[f32]):
    return op.quantize(op.relu(op.bias_add(op.cast(acc, f32) * w, bias)), i8, scale=s)


# SCHED-LABEL: func.func @per_channel_block(
# SCHED:         "ttensor.reshape"(%arg1) : (tensor<?xf32>) -> tensor<?x1xf32>
# SCHED:         "ttensor.cast"({{.*}}) {accum = f32} : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
# SCHED:         "ttensor.reshape"(%arg0) {tessera.result_dims = ["M", "8", "8"]} : {{.*}} -> tensor<?x8x8xf32>
# SCHED:         "ttensor.reshape"(%arg2) {tessera.result_dims = ["M", "8", "1"]} : {{.*}} -> tensor<?x8x1xf32>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "div"} : (tensor<?x8x8xf32>, tensor<?x8x1xf32>) -> tensor<?x8x8xf32>
# SCHED:         "ttensor.reshape"({{.*}}) {tessera.result_dims = ["M", "64"]} : (tensor<?x8x8xi8>) -> tensor<?x64xi8>
@function
def per_channel_block(X: tensor[f32, "M", 64], r: tensor[f32, "M"], b: tensor[f32, "M", 8]):
    return op.quantize(X, fp8_e4m3, scale=r, axis=0), op.quantize(X, i8, scale=b, block=8)
