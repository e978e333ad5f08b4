"""The atomics tests' kernels (tests/unit/test_atomics.py on the CPU, test_opencl_atomics.py on OpenCL,
tests/gpu/test_atomics_gpu.py on CUDA): every op, the orders and scopes, i32, i64 and f32. A kernel takes the
element types an op has side by side (one launch updates each type's tensors), so the checks cover every type
with one kernel each."""

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
def scatter(V: tensor[int64, "N"], R: tensor[int, "N"], C: tensor[int, "N"], Out: tensor[int64, "P", "Q"],
            F: tensor[float, "N"], OutF: tensor[float, "P"]):
    i = launch.thread_id()
    if i < V.shape[0]:
        tile.atomic_add(Out[R[i], C[i]], V[i], order="relaxed", scope="block")
        tile.atomic_add(OutF[R[i]], F[i])

@kernel
def segmax(I: tensor[int, "N"], X: tensor[int, "N"], Out: tensor[int, "M"], Old: tensor[int, "N"],
           XL: tensor[int64, "N"], OutL: tensor[int64, "M"], OldL: tensor[int64, "N"],
           XF: tensor[float, "N"], OutF: tensor[float, "M"], OldF: tensor[float, "N"]):
    i = launch.thread_id()
    if i < I.shape[0]:
        Old[i] = tile.atomic_max(Out[I[i]], X[i], order="release")
        OldL[i] = tile.atomic_max(OutL[I[i]], XL[i], order="acq_rel", scope="block")
        OldF[i] = tile.atomic_max(OutF[I[i]], XF[i], order="seq_cst", scope="system")

@kernel
def claim(I: tensor[int, "N"], Slots: tensor[int, "M"], Old: tensor[int, "N"], SlotsL: tensor[int64, "M"],
          OldL: tensor[int64, "N"]):
    i = launch.thread_id()
    if i < I.shape[0]:
        Old[i] = tile.atomic_cas(Slots[I[i]], 0, i + 1, order="acq_rel", scope="device")
        OldL[i] = tile.atomic_cas(SlotsL[I[i]], 0, i + 1, order="seq_cst", scope="block")
