// tessera-pipeline-collectives: an all_reduce's own tessera.chunks (op.all_reduce(chunks=)) asked of one that
// must run whole is an error at the op saying why (here: its matmul's result is also returned).
// RUN: not tessera-opt %s --pass-pipeline='builtin.module(tessera-pipeline-collectives)' 2>&1 | FileCheck %s

// CHECK: error: op.all_reduce(chunks=4) cannot run in row chunks: another op also reads the matmul's result

module {
  func.func @read_twice(%arg0: tensor<?x16xf32> {tessera.dims = ["T", 16], tessera.name = "H"},
                        %arg1: tensor<16x8xf32> {tessera.dims = [16, 8], tessera.name = "W2"})
      -> (tensor<?x8xf32>, tensor<?x8xf32>) attributes {tessera.function} {
    %p = "ttensor.matmul"(%arg0, %arg1) {accum = f32} : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %y = "tdist.all_reduce"(%p) {algo = "auto", axis = "tp", bucket_bytes = 0 : i64, deterministic = false, mesh_axes = ["tp"], mesh_shape = [2], op = "sum", tessera.chunks = 4 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y, %p : tensor<?x8xf32>, tensor<?x8xf32>
  }
}
