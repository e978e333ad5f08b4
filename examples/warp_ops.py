"""Warp operations at the warp's edge: shuffles that reach past it keep their own value, butterflies over
all 32 lanes, and the ids a thread sees (spec/execution-model.md §3). The GPU tests (tests/gpu/kernels.py)
and the OpenCL ones (tests/unit/test_opencl.py) run these kernels and check each lane.

    tessera-cc examples/warp_ops.py --target ptx -o warp_ops.tessera
"""

from tessera import f64, kernel, launch, tensor, tile


@kernel
def shift_down(X: tensor[int, "N"], Out: tensor[int, "N"]):
    i = launch.thread_id()
    Out[i] = tile.warp_shuffle_down(X[i], 3)


@kernel
def butterfly_f64(X: tensor[f64, "N"], Out: tensor[f64, "N"]):
    i = launch.thread_id()
    v = X[i]
    for m in [16, 8, 4, 2, 1]:
        v += tile.warp_shuffle_xor(v, m)
    Out[i] = v


@kernel
def ids(Out: tensor[int, "N", 4]):
    i = launch.thread_id()
    Out[i, 0] = tile.lane_id()
    Out[i, 1] = tile.warp_id()
    Out[i, 2] = launch.block_id()
    Out[i, 3] = tile.warp_size()
