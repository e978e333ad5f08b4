"""Tile programs over extents that are not a multiple of the tile: masked loads pad the last block, masked
stores write only the rows inside the output, and padded keys are masked out of a softmax with -inf."""

from tessera import bfloat16, kernel, tensor, tile


@kernel
def flash_attention(Q, K, V, O):
    # spec/execution-model.md §2's kernel for any sequence length: the last block is partial
    for block in tile.range(Q, axis=0, step=32):
        q_tile = tile.load(Q, block, mask=block.mask, other=0.0)
        k_tile = tile.load(K, block, mask=block.mask, other=0.0)
        tile.barrier()
        scores = tile.where(block.mask[None, :], tile.dot(q_tile, k_tile.T), float("-inf"))
        probs = tile.softmax(scores, axis=-1)
        v_tile = tile.load(V, block, mask=block.mask, other=0.0)
        tile.store(O, block, tile.dot(probs, v_tile), mask=block.mask)


@kernel
def gemm_rows(A: tensor[bfloat16], B: tensor[bfloat16], C: tensor[float]):
    # 32-row tiles of A; the M tail is zero-padded on the way in and dropped on the way out
    for m in tile.range(A, axis=0, step=32):
        a = tile.load(A, m, mask=m.mask, other=0.0)
        tile.store(C, m, tile.dot(a, B), mask=m.mask)


@kernel
def gemm_k_tail(A, B, C):
    # 16-wide K chunks; the last chunk's elements past K read 0 and add nothing
    for k in range(0, A.shape[1], 16):
        a = tile.load(A[:, k:k+16], mask=k.mask, other=0.0)
        b = tile.load(B[k:k+16, :], mask=k.mask, other=0.0)
        C += tile.dot(a, b)


@kernel
def gemm_mma(A, B, C):
    # 32x32x16 blocking: the GEMM masks its own edge tiles
    for m, n, k in tile.mma(A, B, C, BM=32, BN=32, BK=16):
        tile.mma_sync(m, n, k)
