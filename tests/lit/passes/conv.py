# op.conv2d / op.conv1d (issue 18 item 2; passes/convolution.py): the schedule stage rewrites ttensor.conv as
# im2col (a gather of windows, [N*P, C*K]), a GEMM with the reshaped weight read transposed in place, and a
# transpose of [N, P, O] to [N, O, P]. The bias over the channels and the relu after it move onto the GEMM's
# [N*P, O] result, where the fusion phase makes them its epilogue: three kernels, im2col, GEMM, transpose.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=SCHED < %t/02-schedule.mlir
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: FileCheck %s --check-prefix=KERN < %t/07-kernels.mlir

from tessera import f32, function, grad, op, tensor

# SCHED-LABEL: func.func @block(
# SCHED-NOT:     ttensor.conv
# SCHED:         %[[COLS:.+]] = "ttensor.im2col"(%arg0) {circular = false, dilation = [1, 1], flip = false, kernel = [3, 3], padding = [1, 1, 1, 1], stride = [1, 1]} : (tensor<?x3x8x8xf32>) -> tensor<?x27xf32>
# SCHED:         %[[W:.+]] = "ttensor.reshape"(%arg1) {tessera.result_dims = ["8", "27"]} : (tensor<8x3x3x3xf32>) -> tensor<8x27xf32>
# SCHED:         %[[Y:.+]] = "ttensor.matmul"(%[[COLS]], %[[W]]) {accum = f32, tessera.transpose_b} : (tensor<?x27xf32>, tensor<8x27xf32>) -> tensor<?x8xf32>
# SCHED:         %[[B:.+]] = "ttensor.bias_add"(%[[Y]], %arg2) {axis = 1 : i64} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
# SCHED:         %[[R:.+]] = "ttensor.unary"(%[[B]]) {fn = "relu"}
# SCHED:         %[[V:.+]] = "ttensor.reshape"(%[[R]]) {tessera.result_dims = ["N", "64", "8"]} : (tensor<?x8xf32>) -> tensor<?x64x8xf32>
# SCHED:         %[[T:.+]] = "ttensor.transpose"(%[[V]]) {perm = [0, 2, 1]} : (tensor<?x64x8xf32>) -> tensor<?x8x64xf32>
# SCHED:         "ttensor.reshape"(%[[T]]) {tessera.result_dims = ["N", "8", "8", "8"]} : (tensor<?x8x64xf32>) -> tensor<?x8x8x8xf32>

# FUSE-LABEL:  func.func @block(
# FUSE:          "ttensor.im2col"{{.*}}tessera.group_kind = "im2col"
# FUSE:          "ttensor.matmul"{{.*}}tessera.group = [[G:[0-9]+]] : i32, tessera.group_kind = "gemm"
# FUSE:          "ttensor.bias_add"{{.*}}tessera.group = [[G]] : i32, tessera.group_kind = "gemm"
# FUSE:          "ttensor.unary"{{.*}}tessera.group = [[G]] : i32, tessera.group_kind = "gemm"
# FUSE:          "ttensor.transpose"{{.*}}tessera.group_kind = "layout"

# The gather: row (n, position), column (channel, tap); outside the input a zero.
# KERN-LABEL:  func.func @block__im2col0(%arg0: memref<?x?xf32> {tessera.dims = ["XN", "XE"]
# KERN:          arith.cmpi slt
# KERN:          scf.if
# KERN:          memref.load %arg0
# KERN:          memref.store {{.*}}, %arg1
# KERN:        } else {
# KERN:          memref.store {{.*}}, %arg1
@function
def block(X: tensor[f32, "N", 3, 8, 8], W: tensor[f32, 8, 3, 3, 3], b: tensor[f32, 8]):
    return op.relu(op.bias_add(op.conv2d(X, W, padding=1), b, axis=1))


# A conv whose result has another user keeps its bias outside the GEMM; 1-D is 2-D's rule on one axis.
# SCHED-LABEL: func.func @shared(
# SCHED:         "ttensor.im2col"(%arg0) {circular = false, dilation = [2], flip = false, kernel = [3], padding = [0, 1], stride = [2]} : (tensor<4x6x16xf32>) -> tensor<28x18xf32>
# SCHED:         "ttensor.matmul"
# SCHED:         "ttensor.transpose"
# SCHED:         %[[C:.+]] = "ttensor.reshape"({{.*}}) -> tensor<4x5x7xf32>
# SCHED:         "ttensor.bias_add"(%[[C]], %arg2) {axis = 1 : i64}
@function
def shared(X: tensor[f32, 4, 6, 16], W: tensor[f32, 5, 6, 3], b: tensor[f32, 5]):
    Y = op.conv1d(X, W, stride=2, padding=((0, 1),), dilation=2)
    return op.bias_add(Y, b, axis=1), Y


# The gradient (passes/autodiff_conv.py): the cotangent viewed [N*P, O], times the weight [O, C*K] and added
# back into the image by col2im (a gather over the taps, reading the patches and writing X's extents); the
# weight's: the cotangent read transposed times im2col(X), a GEMM over the N*P positions.
# FUSE-LABEL:  func.func @dloss(
# FUSE:          %[[CT:.+]] = "ttensor.reshape"({{.*}}) {{{.*}}tessera.result_dims = ["N*16", "8"]} : (tensor<?x16x8xf32>) -> tensor<?x8xf32>
# FUSE:          %[[W:.+]] = "ttensor.reshape"(%arg1) {{.*}} -> tensor<8x27xf32>
# FUSE:          %[[P:.+]] = "ttensor.matmul"(%[[CT]], %[[W]]) {{.*}} -> tensor<?x27xf32>
# FUSE:          "ttensor.col2im"(%[[P]], %arg0) {dilation = [1, 1], kernel = [3, 3], padding = [1, 1, 1, 1], stride = [2, 2], {{.*}}tessera.group_kind = "col2im"} : (tensor<?x27xf32>, tensor<?x3x8x8xf32>) -> tensor<?x3x8x8xf32>
# FUSE:          %[[COLS:.+]] = "ttensor.im2col"(%arg0)
# FUSE:          "ttensor.matmul"(%[[CT]], %[[COLS]]) {{{.*}}tessera.transpose_a} : (tensor<?x8xf32>, tensor<?x27xf32>) -> tensor<8x27xf32>
# KERN-LABEL:  func.func @dloss__col2im{{[0-9]+}}(%arg0: memref<?x?xf32> {tessera.dims = ["YR", "YC"]
# KERN:          scf.for
# KERN:          memref.load %arg0
# KERN:          memref.store {{.*}}, %arg1
@function
def loss(X: tensor[f32, "N", 3, 8, 8], W: tensor[f32, 8, 3, 3, 3]):
    return op.sum(op.conv2d(X, W, stride=2, padding=1))


dloss = grad(loss, argnums=(0, 1))


# The operator algebra's circulant (passes/tod_lower.py): x's columns as one-channel signals, their windows
# wrapped around and flipped (column j = x[(i - j) mod n]), times h, summed over the taps; the adjoint's
# windows run forward (x[(i + j) mod n]).
# SCHED-LABEL: func.func @circulant(
# SCHED-NOT:     tod.
# SCHED:         "ttensor.im2col"({{.*}}) {circular = true, dilation = [1], flip = true, kernel = [5], padding = [4, 0], stride = [1]} : (tensor<1x1x12xf32>) -> tensor<12x5xf32>
# SCHED:         "ttensor.binary"({{.*}}) {fn = "mul"} : (tensor<12x5xf32>, tensor<5xf32>) -> tensor<12x5xf32>
# SCHED:         "ttensor.reduce"({{.*}}) {axes = [1], keepdims = false, kind = "sum"}
# SCHED:         "ttensor.im2col"({{.*}}) {circular = true, dilation = [1], flip = false, kernel = [5], padding = [0, 4], stride = [1]}
@function
def circulant(h: tensor[f32, 5], x: tensor[f32, 12]):
    C = op.conv1d(h, 12)
    return C @ x, op.adjoint(C) @ x
