"""The kernels of the atomics lit tests (cpu/, ptx/, amdgpu/atomics.py): every op, order and scope."""

from tessera import int64, kernel, launch, tensor, tile


@kernel
def hist(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(H[X[i]], 1)


@kernel
def scatter(X: tensor[float, "N"], I: tensor[int, "N"], Out: tensor[float, "M"], Top: tensor[float, "M"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(Out[I[i]], X[i], order="acq_rel", scope="block")
        tile.atomic_max(Top[I[i]], X[i], order="seq_cst", scope="device")


@kernel
def orders(X: tensor[int64, "N"], M: tensor[int64, "K"], L: tensor[int, "K"]):
    i = launch.thread_id()
    tile.atomic_max(M[0], X[i], order="release", scope="system")
    tile.fence(order="acquire", scope="block")
    tile.atomic_cas(L[0], 0, 1, order="seq_cst", scope="device")
    tile.atomic_cas(L[1], 0, 1, order="acquire", scope="block")
    tile.fence(scope="system")
