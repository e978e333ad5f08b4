"""The atomics tests' kernels (tests/unit/test_atomics.py on the CPU, test_opencl_atomics.py on OpenCL,
tests/gpu/test_atomics_gpu.py on CUDA): every op, the orders and scopes, i32, i64 and f32."""

from tessera import int64, kernel, launch, tensor, tile

@kernel
def atomic_hist(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(H[X[i]], 1)

@kernel
def plain_hist(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        H[X[i]] = H[X[i]] + 1

@kernel
def tickets(Counter: tensor[int64, "K"], T: tensor[int64, "N"]):
    i = launch.thread_id()
    if i < T.shape[0]:
        T[i] = tile.atomic_add(Counter[0], 1, order="acq_rel", scope="device")
        tile.fence(order="seq_cst", scope="system")

@kernel
def scatter2(V: tensor[int64, "N"], R: tensor[int, "N"], C: tensor[int, "N"], Out: tensor[int64, "P", "Q"]):
    i = launch.thread_id()
    if i < V.shape[0]:
        tile.atomic_add(Out[R[i], C[i]], V[i], order="relaxed", scope="block")

@kernel
def scatter_f(V: tensor[float, "N"], I: tensor[int, "N"], Out: tensor[float, "M"]):
    i = launch.thread_id()
    if i < V.shape[0]:
        tile.atomic_add(Out[I[i]], V[i])

@kernel
def segmax_i32(X: tensor[int, "N"], I: tensor[int, "N"], Out: tensor[int, "M"], Old: tensor[int, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Old[i] = tile.atomic_max(Out[I[i]], X[i], order="release")

@kernel
def claim_i32(I: tensor[int, "N"], Slots: tensor[int, "M"], Old: tensor[int, "N"]):
    i = launch.thread_id()
    if i < I.shape[0]:
        Old[i] = tile.atomic_cas(Slots[I[i]], 0, i + 1, order="acq_rel", scope="device")

@kernel
def segmax_i64(X: tensor[int64, "N"], I: tensor[int, "N"], Out: tensor[int64, "M"], Old: tensor[int64, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Old[i] = tile.atomic_max(Out[I[i]], X[i], order="release")

@kernel
def claim_i64(I: tensor[int, "N"], Slots: tensor[int64, "M"], Old: tensor[int64, "N"]):
    i = launch.thread_id()
    if i < I.shape[0]:
        Old[i] = tile.atomic_cas(Slots[I[i]], 0, i + 1, order="acq_rel", scope="device")
