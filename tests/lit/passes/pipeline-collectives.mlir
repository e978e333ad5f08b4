// tessera-pipeline-collectives: an all_reduce of a matmul's result that nothing else reads is marked to run in
// `chunks` row chunks (tessera.chunks), which graph lowering launches as one GEMM kernel per chunk of rows,
// each chunk's all_reduce overlapping the next chunk's GEMM. Left whole: a deterministic or tree-ordered
// reduction, a product another op also reads, a transposed lhs (a row range of it is not contiguous), a
// batched rhs, an operand no matmul produces, and a member of a bucket of several (tessera-bucketize's: the
// bucket already runs as one). chunks=1 (the option's default) marks none; 0 is refused. An all_reduce's own
// tessera.chunks (op.all_reduce(chunks=)) is kept whatever the option (@own); asked of one that must run
// whole it is an error (pipeline-collectives-invalid.mlir). Rows back to the inputs: the ops before a marked
// all_reduce's matmul whose rows lead to its lhs (a matmul of a row-major lhs, a unary op, a cast, a binary op
// whose other operand broadcasts along the rows), each result read by the next alone, are marked
// tessera.chunk_rows (run in the same chunks, a chunk's whole MLP before its all_reduce); the walk stops at an
// argument, a value read elsewhere, a transposed lhs, a binary op of two row tensors, and marks nothing
// before a whole all_reduce (@rows, @rows_stop, @rows_ordered).
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-pipeline-collectives{chunks=4})' | FileCheck %s
// RUN: tessera-opt %s --pass-pipeline='builtin.module(tessera-pipeline-collectives)' | FileCheck %s --check-prefix=ONE
// RUN: not tessera-opt %s --pass-pipeline='builtin.module(tessera-pipeline-collectives{chunks=0})' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: tessera-pipeline-collectives: chunks must be positive, got 0
// ONE-LABEL: func.func @eligible(
// ONE-NOT:     tessera.chunks
// ONE-LABEL: func.func @own(
// ONE:         "tdist.all_reduce"({{.*}}tessera.chunks = 2 : i64}
// ONE-NEXT:    "ttensor.matmul"
// ONE-NEXT:    "tdist.all_reduce"({{.*}}tessera.chunks = 1 : i64}
// ONE-LABEL: func.func @rows(
// ONE-NOT:     tessera.chunk
// ONE:         return

module {
  // CHECK-LABEL: func.func @eligible(
  // CHECK:         %[[P:.*]] = "ttensor.matmul"(%arg0, %arg1)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[P]]) {{.*}}tessera.chunks = 4 : i64
  // CHECK:         %[[Q:.*]] = "ttensor.matmul"(%arg2, %arg1)
  // CHECK-NEXT:    "tdist.all_reduce"(%[[Q]]) {{.*}}tessera.chunks = 4 : i64
  func.func @eligible(%arg0: tensor<?x16xbf16> {tessera.dims = ["T", 16], tessera.name = "H"},
                      %arg1: tensor<16x8xbf16> {tessera.dims = [16, 8], tessera.name = "W2"},
                      %arg2: tensor<2x?x16xbf16> {tessera.dims = [2, "T", 16], tessera.name = "Hb"})
      -> (tensor<?x8xbf16>, tensor<2x?x8xbf16>) attributes {tessera.function} {
    %p = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xbf16>, tensor<16x8xbf16>) -> tensor<?x8xbf16>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
    %q = "ttensor.matmul"(%arg2, %arg1) {accum = f32} : (tensor<2x?x16xbf16>, tensor<16x8xbf16>) -> tensor<2x?x8xbf16>
    %z = "tdist.all_reduce"(%q) {algo = "ring", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<2x?x8xbf16>) -> tensor<2x?x8xbf16>
    return %y, %z : tensor<?x8xbf16>, tensor<2x?x8xbf16>
  }

  // CHECK-LABEL: func.func @ordered(
  // CHECK-NOT:     tessera.chunks
  // CHECK:         return
  func.func @ordered(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "H"},
                     %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "W2"})
      -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %p = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %q = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %z = "tdist.all_reduce"(%q) {algo = "tree", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %r = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %w = "tdist.all_reduce"(%r) {algo = "binary_tree", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y, %z, %w : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @read_twice(
  // CHECK-NOT:     tessera.chunks
  // CHECK:         return
  func.func @read_twice(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "H"},
                        %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "W2"})
      -> (tensor<?x8xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %p = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y, %p : tensor<?x8xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @transposed_lhs(
  // CHECK-NOT:     tessera.chunks
  // CHECK:         return
  func.func @transposed_lhs(%arg0: tensor<16x?xf32> {tessera.dims = [16, "T"], tessera.name = "Ht"},
                            %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "W2"})
      -> tensor<?x8xf32> attributes {tessera.function} {
    %h = "ttensor.transpose"(%arg0) {perm = [1, 0]} : (tensor<16x?xf32>) -> tensor<?x16xf32>
    %p = "ttensor.matmul"(%h, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y : tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @batched_rhs(
  // CHECK-NOT:     tessera.chunks
  // CHECK:         return
  func.func @batched_rhs(%arg0: tensor<2x?x16xf32> {tessera.dims = [2, "T", 16], tessera.name = "H"},
                         %arg1: tensor<2x16x8xf32> {tessera.dims = [2, 16, 8], tessera.name = "W2"})
      -> tensor<2x?x8xf32> attributes {tessera.function} {
    %p = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<2x?x16xf32>, tensor<2x16x8xf32>) -> tensor<2x?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
    return %y : tensor<2x?x8xf32>
  }

  // CHECK-LABEL: func.func @not_a_product(
  // CHECK-NOT:     tessera.chunks
  // CHECK:         return
  func.func @not_a_product(%arg0: tensor<?x8xf32> {tessera.dims = ["T", 8], tessera.name = "X"})
      -> (tensor<?x8xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %y = "tdist.all_reduce"(%arg0) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %e = "ttensor.unary"(%arg0) {fn = "exp"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %z = "tdist.all_reduce"(%e) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y, %z : tensor<?x8xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @shared_bucket(
  // CHECK:         "tdist.all_reduce"({{.*}}tessera.bucket = 0 : i64}
  // CHECK-NEXT:    "tdist.all_reduce"({{.*}}tessera.bucket = 0 : i64}
  // CHECK-NEXT:    %[[Q:.*]] = "ttensor.matmul"
  // CHECK-NEXT:    "tdist.all_reduce"(%[[Q]]) {{.*}}tessera.bucket = 1 : i64, tessera.chunks = 4 : i64}
  func.func @shared_bucket(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "H"},
                           %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "W2"})
      -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %p = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %r = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum", tessera.bucket = 0 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %w = "tdist.all_reduce"(%r) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum", tessera.bucket = 0 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %q = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %z = "tdist.all_reduce"(%q) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum", tessera.bucket = 1 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y, %w, %z : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @own(
  // CHECK:         "tdist.all_reduce"({{.*}}tessera.chunks = 2 : i64}
  // CHECK-NEXT:    "ttensor.matmul"
  // CHECK-NEXT:    "tdist.all_reduce"({{.*}}tessera.chunks = 1 : i64}
  func.func @own(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "H"},
                 %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "W2"})
      -> (tensor<?x8xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %p = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum", tessera.chunks = 2 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %q = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %z = "tdist.all_reduce"(%q) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum", tessera.chunks = 1 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y, %z : tensor<?x8xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @rows(
  // CHECK:         %[[H:.*]] = "ttensor.matmul"(%arg0, %arg1) {accum = f32, tessera.chunk_rows = 4 : i64}
  // CHECK-NEXT:    %[[G:.*]] = "ttensor.unary"(%[[H]]) {fn = "gelu", tessera.chunk_rows = 4 : i64}
  // CHECK-NEXT:    %[[C:.*]] = "ttensor.cast"(%[[G]]) {accum = f32, tessera.chunk_rows = 4 : i64}
  // CHECK-NEXT:    %[[B:.*]] = "ttensor.binary"(%[[C]], %arg2) {fn = "add", tessera.chunk_rows = 4 : i64}
  // CHECK-NEXT:    %[[P:.*]] = "ttensor.matmul"(%[[B]], %arg3) {accum = f32} :
  // CHECK-NEXT:    "tdist.all_reduce"(%[[P]]) {{.*}}tessera.chunks = 4 : i64}
  func.func @rows(%arg0: tensor<?x16xbf16> {tessera.dims = ["T", 16], tessera.name = "X"},
                  %arg1: tensor<16x32xbf16> {tessera.dims = [16, 32], tessera.name = "W1"},
                  %arg2: tensor<32xbf16> {tessera.dims = [32], tessera.name = "b"},
                  %arg3: tensor<32x8xbf16> {tessera.dims = [32, 8], tessera.name = "W2"})
      -> tensor<?x8xbf16> attributes {tessera.function} {
    %h = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xbf16>, tensor<16x32xbf16>) -> tensor<?x32xf32>
    %g = "ttensor.unary"(%h) {fn = "gelu"} : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %c = "ttensor.cast"(%g) {accum = f32} : (tensor<?x32xf32>) -> tensor<?x32xbf16>
    %b = "ttensor.binary"(%c, %arg2) {fn = "add"} : (tensor<?x32xbf16>, tensor<32xbf16>) -> tensor<?x32xbf16>
    %p = "ttensor.matmul"(%b, %arg3) {accum = f32} : (tensor<?x32xbf16>, tensor<32x8xbf16>) -> tensor<?x8xbf16>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
    return %y : tensor<?x8xbf16>
  }

  // A binary op of two row tensors (a residual) stops the walk; so does a value another op reads (%g2, also
  // returned), and a transposed lhs (the matmul %h3 stays whole, its gelu runs in chunks).
  // CHECK-LABEL: func.func @rows_stop(
  // CHECK:         "ttensor.matmul"(%arg0, %arg1) {accum = f32} :
  // CHECK-NEXT:    "ttensor.unary"({{.*}}) {fn = "gelu"} :
  // CHECK-NEXT:    "ttensor.binary"({{.*}}) {fn = "add"} :
  // CHECK-NEXT:    "ttensor.matmul"
  // CHECK-NEXT:    "tdist.all_reduce"({{.*}}tessera.chunks = 4 : i64}
  // CHECK-NEXT:    "ttensor.matmul"(%arg0, %arg1) {accum = f32} :
  // CHECK-NEXT:    "ttensor.unary"({{.*}}) {fn = "gelu"} :
  // CHECK-NEXT:    "ttensor.matmul"
  // CHECK-NEXT:    "tdist.all_reduce"({{.*}}tessera.chunks = 4 : i64}
  // CHECK-NEXT:    "ttensor.transpose"(%arg4) {perm = [1, 0]} :
  // CHECK-NEXT:    "ttensor.matmul"({{.*}}) {accum = f32} :
  // CHECK-NEXT:    "ttensor.unary"({{.*}}) {fn = "gelu", tessera.chunk_rows = 4 : i64} :
  // CHECK-NEXT:    "ttensor.matmul"
  // CHECK-NEXT:    "tdist.all_reduce"({{.*}}tessera.chunks = 4 : i64}
  func.func @rows_stop(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "X"},
                       %arg1: tensor<16x32xf32> {tessera.dims = [16, 32], tessera.name = "W1"},
                       %arg2: tensor<?x32xf32> {tessera.dims = ["T", 32], tessera.name = "R"},
                       %arg3: tensor<32x8xf32> {tessera.dims = [32, 8], tessera.name = "W2"},
                       %arg4: tensor<16x?xf32> {tessera.dims = [16, "T"], tessera.name = "Xt"})
      -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x32xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %h = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32>
    %g = "ttensor.unary"(%h) {fn = "gelu"} : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %r = "ttensor.binary"(%g, %arg2) {fn = "add"} : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
    %p = "ttensor.matmul"(%r, %arg3) {accum = f32} : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %h2 = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32>
    %g2 = "ttensor.unary"(%h2) {fn = "gelu"} : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %p2 = "ttensor.matmul"(%g2, %arg3) {accum = f32} : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    %y2 = "tdist.all_reduce"(%p2) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %t = "ttensor.transpose"(%arg4) {perm = [1, 0]} : (tensor<16x?xf32>) -> tensor<?x16xf32>
    %h3 = "ttensor.matmul"(%t, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32>
    %g3 = "ttensor.unary"(%h3) {fn = "gelu"} : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %p3 = "ttensor.matmul"(%g3, %arg3) {accum = f32} : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    %y3 = "tdist.all_reduce"(%p3) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y, %y2, %g2, %y3 : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x32xf32>, tensor<?x8xf32>
  }

  // CHECK-LABEL: func.func @rows_ordered(
  // CHECK-NOT:     tessera.chunk
  // CHECK:         return
  func.func @rows_ordered(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "X"},
                          %arg1: tensor<16x32xf32> {tessera.dims = [16, 32], tessera.name = "W1"},
                          %arg3: tensor<32x8xf32> {tessera.dims = [32, 8], tessera.name = "W2"})
      -> tensor<?x8xf32> attributes {tessera.function} {
    %h = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32>
    %g = "ttensor.unary"(%h) {fn = "gelu"} : (tensor<?x32xf32>) -> tensor<?x32xf32>
    %p = "ttensor.matmul"(%g, %arg3) {accum = f32} : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = true, mesh_axes = ["tp"], mesh_shape = [2], op = "sum"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y : tensor<?x8xf32>
  }
}
