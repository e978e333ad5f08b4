"""The cooperative-group and shared-memory tests' kernels (tests/unit/test_groups.py on the CPU and OpenCL,
tests/gpu/test_groups_gpu.py on CUDA, tests/lit/backends/*/groups.py): block barriers, group syncs on each side
of the warp's width, thread ranks, warp and group reductions of i32 and f64 (examples/tile/cooperative.py has
the f32 ones), and shared arrays filled by stores and by cp.async of 4-, 8- and 2-byte elements."""

from tessera import f16, float64, kernel, launch, tensor, tile


@kernel
def neighbours(X: tensor[float, "N"], Out: tensor[float, "N"]):
    # every thread doubles its element; after the barrier it reads the next thread's (cyclically in its block)
    i = launch.thread_id()
    X[i] = X[i] * 2.0
    tile.barrier()
    k = launch.thread_id()
    m = launch.local_id()
    Out[k] = X[k - m + (m + 1) % launch.block_dim()]


@kernel
def quads(X: tensor[float, "N"], Out: tensor[float, "N"]):
    # a group of 4 lanes, within a warp: its sync orders the group's writes for the group's reads
    i = launch.thread_id()
    g = tile.cooperative_group(size=4)
    X[i] = X[i] + 1.0
    g.sync()
    r = g.thread_rank()
    Out[i] = X[i - r + (r + 1) % 4]


@kernel
def halves(X: tensor[float, "N"], Out: tensor[float, "N"]):
    # a group of 128 threads, whole warps on every target: its sync is the block's barrier
    g = tile.cooperative_group(size=128)
    i = launch.thread_id()
    X[i] = X[i] + 1.0
    g.sync()
    k = launch.thread_id()
    r = g.thread_rank()
    Out[k] = X[k - r + 127 - r]


@kernel
def reductions(I: tensor[int, "N"], F: tensor[float64, "N"], Isum: tensor[int, "N"], Fmin: tensor[float64, "N"],
               Imax: tensor[int, "N"]):
    i = launch.thread_id()
    Isum[i] = tile.warp_reduce(I[i], "sum")
    Fmin[i] = tile.group_reduce(F[i], "min", size=16)
    Imax[i] = tile.group_reduce(I[i], "max", size=2)


@kernel
def reverse_blocks(X: tensor[float, "N"], Out: tensor[float, "N"]):
    # each block of 128 threads reverses its elements through shared memory, staged by cp.async
    S = tile.alloc_shared((128,), float)
    i = launch.thread_id()
    tile.cp_async(S[launch.local_id()], X[i])
    tile.barrier()
    k = launch.thread_id()
    Out[k] = S[127 - launch.local_id()]


@kernel
def transpose_tiles(X: tensor[float, "R", "C"], Out: tensor[float, "C", "R"]):
    # 16x16 tiles through a shared array padded to 17 columns (no bank conflicts on the transposed reads)
    T = tile.alloc_shared((16, 17), float)
    T[launch.local_id(1), launch.local_id(0)] = X[launch.thread_id(1), launch.thread_id(0)]
    tile.barrier()
    r = launch.block_id(0) * 16 + launch.local_id(1)
    c = launch.block_id(1) * 16 + launch.local_id(0)
    Out[r, c] = T[launch.local_id(0), launch.local_id(1)]


@kernel
def rotate_wide_and_narrow(D: tensor[float64, "N"], H: tensor[f16, "N"], OutD: tensor[float64, "N"],
                           OutH: tensor[f16, "N"]):
    # cp.async of 8-byte elements, and of 2-byte ones (below cp.async's 4: a load and a store)
    SD = tile.alloc_shared((64,), float64)
    SH = tile.alloc_shared((64,), f16)
    i = launch.thread_id()
    tile.cp_async(SD[launch.local_id()], D[i])
    tile.cp_async(SH[launch.local_id()], H[i])
    tile.barrier()
    k = launch.thread_id()
    j = (launch.local_id() + 1) % 64
    OutD[k] = SD[j]
    OutH[k] = SH[j]
