"""The tile kernels of spec/execution-model.md §2, §3 and §5, exactly as written there."""

from tessera import bfloat16, kernel, tensor, tile


@kernel
def gemm_tc(A: tensor[bfloat16], B: tensor[bfloat16], C: tensor[float]):
    # Each tile = 128x128, decomposed into 16x16 warp fragments
    for m, n, k in tile.mma(A, B, C, BM=128, BN=128, BK=32):
        # Use tensor core intrinsic (mma.sync equivalent)
        tile.mma_sync(m, n, k)


@kernel
def flash_attention(Q, K, V, O):
    # Prefetch tiles of Q and K using cp.async equivalent
    for block in tile.range(Q, axis=0, step=128):
        q_tile = tile.cp_async(Q, block)
        k_tile = tile.cp_async(K, block)
        tile.barrier()
        scores = tile.dot(q_tile, k_tile.T)
        probs = tile.softmax(scores, axis=-1)
        v_tile = tile.cp_async(V, block)
        O[block] = tile.dot(probs, v_tile)


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


@kernel
def fused_mlp(X, W1, b1, W2, b2, Out):
    H = tile.dot(X, W1) + b1
    H = tile.relu(H)
    Out[:] = tile.dot(H, W2) + b2
