# Tile programs become Graph IR: staging (cp_async, shared buffers, barriers) disappears into dataflow, the
# program's blocking becomes hints, and written parameters become results (`tessera.outputs`).
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s

from tessera import kernel, tile


# CHECK-LABEL: func.func @gemm_tc(
# CHECK-SAME:    tensor<?x?xbf16>
# CHECK-SAME:    tessera.outputs = [2]
# CHECK:         %[[P:.+]] = "ttensor.matmul"(%{{.+}}, %{{.+}}) {accum = f32, tessera.hints = {KC = 32 : i64, MB = 128 : i64, NC = 128 : i64}} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xf32>
# CHECK:         %[[C:.+]] = "ttensor.binary"(%[[P]], %{{.+}}) {fn = "add"}
# CHECK:         return %[[C]]
@kernel
def gemm_tc(A: tensor[bfloat16], B: tensor[bfloat16], C: tensor[float]):
    for m, n, k in tile.mma(A, B, C, BM=128, BN=128, BK=32):
        tile.mma_sync(m, n, k)


# A k-loop over 128-wide chunks double-buffered in shared memory is the whole contraction.
# CHECK-LABEL: func.func @pipeline(
# CHECK:         "ttensor.matmul"(%{{.+}}, %{{.+}}) {accum = f32, tessera.hints = {KC = 128 : i64, stages = 2 : i64}}
# CHECK-NOT:     "ttensor.matmul"
@kernel
def pipeline(A, B, C):
    buf0, buf1 = tile.alloc_shared(), tile.alloc_shared()
    toggle = 0
    for k in range(0, A.shape[1], 128):
        buf = buf0 if toggle == 0 else buf1
        tile.cp_async(buf, A[:, k:k+128])
        tile.barrier()
        C += tile.dot(buf, B[k:k+128, :])
        toggle ^= 1


# tile.range blocks are stacked: the body's ops run batched over them.
# CHECK-LABEL: func.func @flash_attention(
# CHECK:         %[[Q:.+]] = "ttensor.reshape"(%{{.+}}) {tessera.result_dims = ["?", "128", "Q_1"]} : (tensor<?x?xf32>) -> tensor<?x128x?xf32>
# CHECK:         "ttensor.transpose"(%{{.+}}) {perm = [0, 2, 1]}
# CHECK:         "ttensor.matmul"(%[[Q]], %{{.+}}) {accum = f32} : (tensor<?x128x?xf32>, tensor<?x?x128xf32>) -> tensor<?x128x128xf32>
# CHECK:         "ttensor.softmax"(%{{.+}}) {axis = 2 : i64}
@kernel
def flash_attention(Q, K, V, O):
    for block in tile.range(Q, axis=0, step=128):
        q_tile = tile.cp_async(Q, block)
        k_tile = tile.cp_async(K, block)
        tile.barrier()
        scores = tile.dot(q_tile, k_tile.T)
        probs = tile.softmax(scores, axis=-1)
        v_tile = tile.cp_async(V, block)
        O[block] = tile.dot(probs, v_tile)
