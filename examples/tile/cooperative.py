"""Cooperative groups and warp-size-agnostic reductions (spec/execution-model.md §5, portability guide §6)."""

from tessera import kernel, launch, tensor, tile


@kernel
def coop_example(X):
    g = tile.cooperative_group(size=64)
    g.sync()
    X[g.thread_rank()] += 1


@kernel
def row_max(X: tensor[float, "R", "C"], Out: tensor[float, "R"]):
    # one warp per row, whatever the target's warp size
    r = launch.thread_id(1)
    lane = tile.lane_id()
    m = -3.0e38
    for c0 in range(0, X.shape[1], tile.warp_size()):
        c = c0 + lane
        if c < X.shape[1]:
            m = max(m, X[r, c])
    best = tile.warp_reduce(m, "max")
    if lane == 0:
        Out[r] = best


@kernel
def group_sums(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    Out[i] = tile.group_reduce(X[i], "sum", size=8)
