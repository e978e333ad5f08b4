# The SIMT kernels of spec/execution-model.md §1 and §3, as the frontend emits them.
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s

from tessera import kernel, launch, tile

# CHECK-LABEL: func.func @saxpy(
# CHECK-SAME:    %[[A:.+]]: f32 {tessera.name = "a"}
# CHECK-SAME:    %[[X:[^:]+]]: memref<?xf32> {tessera.dims = ["X.shape[0]"], tessera.name = "X"}
# CHECK-SAME:    attributes {tessera.kernel}
# CHECK:         %[[I:.+]] = "ttile.thread_id"() {dim = 0 : i64} : () -> index
# CHECK:         %[[N:.+]] = memref.dim %[[X]], %{{.+}} : memref<?xf32>
# CHECK:         %[[IN:.+]] = arith.cmpi slt, %[[I]], %[[N]] : index
# CHECK:         scf.if %[[IN]] {
# CHECK:           %[[XI:.+]] = memref.load %[[X]][%[[I]]]
# CHECK:           %[[AX:.+]] = arith.mulf %[[A]], %[[XI]] : f32
# CHECK:           arith.addf %[[AX]]
# CHECK:           memref.store
@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]


# The literal offset list is unrolled: five shuffles with constant offsets.
# CHECK-LABEL: func.func @warp_reduce_sum(
# CHECK:         %[[V:.+]] = memref.load
# CHECK:         %[[S16:.+]] = "ttile.shuffle_down"(%[[V]], %{{.+}}) : (f32, index) -> f32
# CHECK:         %[[V1:.+]] = arith.addf %[[V]], %[[S16]] : f32
# CHECK-COUNT-4: "ttile.shuffle_down"
# CHECK:         %[[LANE:.+]] = "ttile.lane_id"() : () -> index
# CHECK:         arith.cmpi eq, %[[LANE]]
# CHECK:         "ttile.warp_id"()
# CHECK:         memref.store
@kernel
def warp_reduce_sum(X, Out):
    tid = launch.thread_id()
    val = X[tid]
    for offset in [16,8,4,2,1]:
        val += tile.warp_shuffle_down(val, offset)
    if tile.lane_id() == 0:
        Out[tile.warp_id()] = val
