"""The cooperative-group tests' kernels (tests/unit/test_groups.py on the CPU and OpenCL, tests/gpu/test_groups_gpu.py
on CUDA, tests/lit/backends/*/groups.py): block barriers, group syncs on each side of the warp's width, thread
ranks, and warp and group reductions of i32 and f64 (examples/tile/cooperative.py has the f32 ones)."""

from tessera import float64, kernel, launch, tensor, tile


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
