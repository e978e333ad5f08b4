// tessera-bucketize: all_reduces taken in the order their operands are produced fill buckets of bucket-bytes
// (default 25 MiB) and move, each bucket together, to right after the producer of its last tensor
// (tessera.bucket: the bucket's index). Here the "backward" produces %g3 (32 bytes), %g2 (512), %g1 (64) and
// %g0 (512), in that order; the all_reduces were written after all of them, in the parameters' order.
// With 600 bytes the first bucket closes at 608 bytes (%g3, %g2, %g1) and runs before %g0's matmul; %g0 is
// the second. A bucket stops before a tensor whose wait would move it past a reader of a member (@interleaved:
// the update of %r3 precedes %g2); an all_reduce of a function argument stays where it is; a collective of
// another reduction never shares a bucket; a dynamic extent is a bucket of its own.
// A reduced tensor is produced as early as the backward allows (@layer): a weight gradient's GEMM, and the
// transpose feeding it, move before an input gradient's GEMM it does not depend on, so its bucket starts
// between the two; never past another reduced tensor's producer, which keeps the buckets' members and order
// (@behind_a_gradient: %g, which reads %dx, is produced first), nor past a GEMM it reads (@dependent).
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-bucketize{bucket-bytes=600})' | FileCheck %s
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-bucketize)' | FileCheck %s --check-prefix=DEFAULT
// RUN: not tessera-opt %s --pass-pipeline='builtin.module(tessera-bucketize{bucket-bytes=0})' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: tessera-bucketize: bucket-bytes must be positive, got 0

module {
  // CHECK-LABEL: func.func @step(
  // CHECK:         %[[G3:.*]] = "ttensor.reduce"(%arg0)
  // CHECK:         %[[G2:.*]] = "ttensor.matmul"(%{{.*}}, %arg0)
  // CHECK:         %[[G1:.*]] = "ttensor.reduce"(%arg1)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[G3]]) {{.*}}tessera.bucket = 0 : i64
  // CHECK-NEXT:    "tdist.all_reduce"(%[[G2]]) {{.*}}tessera.bucket = 0 : i64
  // CHECK-NEXT:    "tdist.all_reduce"(%[[G1]]) {{.*}}tessera.bucket = 0 : i64
  // CHECK-NEXT:    %[[G0:.*]] = "ttensor.matmul"(%arg2, %arg1)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[G0]]) {{.*}}tessera.bucket = 1 : i64
  // CHECK-NEXT:    "tdist.all_reduce"(%arg3) {{.*}}op = "sum"}
  // CHECK-NEXT:    return
  // DEFAULT-LABEL: func.func @step(
  // DEFAULT:         %[[G0:.*]] = "ttensor.matmul"(%arg2, %arg1)
  // DEFAULT-NEXT:    "tdist.all_reduce"({{.*}}tessera.bucket = 0 : i64
  // DEFAULT-NEXT:    "tdist.all_reduce"({{.*}}tessera.bucket = 0 : i64
  // DEFAULT-NEXT:    "tdist.all_reduce"({{.*}}tessera.bucket = 0 : i64
  // DEFAULT-NEXT:    "tdist.all_reduce"(%[[G0]]) {{.*}}tessera.bucket = 0 : i64
  func.func @step(%arg0: tensor<?x8xf32> {tessera.dims = ["T", 8], tessera.name = "E"},
                  %arg1: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "H"},
                  %arg2: tensor<8x?xf32> {tessera.dims = [8, "T"], tessera.name = "Xt"},
                  %arg3: tensor<4xf32> {tessera.dims = [4], tessera.name = "c"})
      -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<4xf32>) attributes {tessera.function} {
    %g3 = "ttensor.reduce"(%arg0) {axes = [0], keepdims = false, kind = "sum"} : (tensor<?x8xf32>) -> tensor<8xf32>
    %h1t = "ttensor.transpose"(%arg1) {perm = [1, 0]} : (tensor<?x16xf32>) -> tensor<16x?xf32>
    %g2 = "ttensor.matmul"(%h1t, %arg0) {accum = f32} : (tensor<16x?xf32>, tensor<?x8xf32>) -> tensor<16x8xf32>
    %g1 = "ttensor.reduce"(%arg1) {axes = [0], keepdims = false, kind = "sum"} : (tensor<?x16xf32>) -> tensor<16xf32>
    %g0 = "ttensor.matmul"(%arg2, %arg1) {accum = f32} : (tensor<8x?xf32>, tensor<?x16xf32>) -> tensor<8x16xf32>
    %r0 = "tdist.all_reduce"(%g0) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %r1 = "tdist.all_reduce"(%g1) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<16xf32>) -> tensor<16xf32>
    %r2 = "tdist.all_reduce"(%g2) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %r3 = "tdist.all_reduce"(%g3) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<8xf32>) -> tensor<8xf32>
    %r4 = "tdist.all_reduce"(%arg3) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
    return %r0, %r1, %r2, %r3, %r4 : tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<4xf32>
  }

  // CHECK-LABEL: func.func @interleaved(
  // CHECK:         %[[A:.*]] = "ttensor.reduce"(%arg0)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[A]]) {{.*}}op = "sum"{{.*}}tessera.bucket = 0 : i64
  // CHECK-NEXT:    "tdist.all_reduce"(%[[A]]) {{.*}}op = "max"{{.*}}tessera.bucket = 1 : i64
  // CHECK-NEXT:    "ttensor.unary"
  // CHECK:         %[[B:.*]] = "ttensor.reduce"(%arg1)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[B]]) {{.*}}op = "sum"{{.*}}tessera.bucket = 2 : i64
  // CHECK-NEXT:    %[[C:.*]] = "ttensor.unary"(%arg1)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[C]]) {{.*}}tessera.bucket = 3 : i64
  func.func @interleaved(%arg0: tensor<?x8xf32> {tessera.dims = ["T", 8], tessera.name = "E"},
                         %arg1: tensor<?x8xf32> {tessera.dims = ["T", 8], tessera.name = "F"})
      -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %a = "ttensor.reduce"(%arg0) {axes = [0], keepdims = false, kind = "sum"} : (tensor<?x8xf32>) -> tensor<8xf32>
    %ra = "tdist.all_reduce"(%a) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["dp"], mesh_shape = [2], op = "sum"} : (tensor<8xf32>) -> tensor<8xf32>
    %ma = "tdist.all_reduce"(%a) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["dp"], mesh_shape = [2], op = "max"} : (tensor<8xf32>) -> tensor<8xf32>
    %u = "ttensor.unary"(%ra) {fn = "neg"} : (tensor<8xf32>) -> tensor<8xf32>
    %b = "ttensor.reduce"(%arg1) {axes = [0], keepdims = false, kind = "sum"} : (tensor<?x8xf32>) -> tensor<8xf32>
    %c = "ttensor.unary"(%arg1) {fn = "neg"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %rb = "tdist.all_reduce"(%b) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["dp"], mesh_shape = [2], op = "sum"} : (tensor<8xf32>) -> tensor<8xf32>
    %rc = "tdist.all_reduce"(%c) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["dp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %u, %ma, %rb, %rc : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @layer(
  // CHECK:         %[[WT:.*]] = "ttensor.transpose"(%arg1)
  // CHECK-NEXT:    %[[AT:.*]] = "ttensor.transpose"(%arg2)
  // CHECK-NEXT:    %[[DW:.*]] = "ttensor.matmul"(%[[AT]], %arg0)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[DW]]) {{.*}}tessera.bucket = 0 : i64
  // CHECK-NEXT:    %[[DX:.*]] = "ttensor.matmul"(%arg0, %[[WT]])
  // CHECK-NEXT:    return
  func.func @layer(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "dY"},
                   %arg1: tensor<8x16xf32> {tessera.dims = [8, 16], tessera.name = "W"},
                   %arg2: tensor<?x8xf32> {tessera.dims = ["T", 8], tessera.name = "X"})
      -> (tensor<8x16xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %wt = "ttensor.transpose"(%arg1) {perm = [1, 0]} : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %dx = "ttensor.matmul"(%arg0, %wt) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %xt = "ttensor.transpose"(%arg2) {perm = [1, 0]} : (tensor<?x8xf32>) -> tensor<8x?xf32>
    %dw = "ttensor.matmul"(%xt, %arg0) {accum = f32} : (tensor<8x?xf32>, tensor<?x16xf32>) -> tensor<8x16xf32>
    %r = "tdist.all_reduce"(%dw) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    return %r, %dx : tensor<8x16xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @behind_a_gradient(
  // CHECK:         %[[DX:.*]] = "ttensor.matmul"(%arg0, %arg1)
  // CHECK-NEXT:    %[[G:.*]] = "ttensor.reduce"(%[[DX]])
  // CHECK-NEXT:    %[[DW:.*]] = "ttensor.matmul"(%arg2, %arg0)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[G]])
  // CHECK-NEXT:    "tdist.all_reduce"(%[[DW]])
  func.func @behind_a_gradient(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "dY"},
                               %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "Wt"},
                               %arg2: tensor<8x?xf32> {tessera.dims = [8, "T"], tessera.name = "Xt"})
      -> (tensor<8xf32>, tensor<8x16xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %dx = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %g = "ttensor.reduce"(%dx) {axes = [0], keepdims = false, kind = "sum"} : (tensor<?x8xf32>) -> tensor<8xf32>
    %dw = "ttensor.matmul"(%arg2, %arg0) {accum = f32} : (tensor<8x?xf32>, tensor<?x16xf32>) -> tensor<8x16xf32>
    %rg = "tdist.all_reduce"(%g) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<8xf32>) -> tensor<8xf32>
    %rw = "tdist.all_reduce"(%dw) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    return %rg, %rw, %dx : tensor<8xf32>, tensor<8x16xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @dependent(
  // CHECK:         %[[DX:.*]] = "ttensor.matmul"(%arg0, %arg1)
  // CHECK-NEXT:    %[[U:.*]] = "ttensor.unary"(%[[DX]])
  // CHECK-NEXT:    %[[DW:.*]] = "ttensor.matmul"(%arg2, %[[U]])
  // CHECK-NEXT:    "tdist.all_reduce"(%[[DW]])
  func.func @dependent(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "dY"},
                       %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "Wt"},
                       %arg2: tensor<8x?xf32> {tessera.dims = [8, "T"], tessera.name = "Xt"})
      -> (tensor<8x8xf32>) attributes {tessera.function} {
    %dx = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %u = "ttensor.unary"(%dx) {fn = "neg"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %dw = "ttensor.matmul"(%arg2, %u) {accum = f32} : (tensor<8x?xf32>, tensor<?x8xf32>) -> tensor<8x8xf32>
    %r = "tdist.all_reduce"(%dw) {algo = "auto", axis = "dp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["dp"], mesh_shape = [2], op = "mean"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    return %r : tensor<8x8xf32>
  }
}
