# The SPIR-V lowering of SIMT kernels, stage by stage (no device needed).
# RUN: tessera-cc %s --target spirv --compile-to=gpu | FileCheck %s --check-prefix=GPU
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=SPIRV
# RUN: tessera-cc %s --target spirv --list-stages | FileCheck %s --check-prefix=STAGES

from tessera import kernel, launch, tile

# A tensor is a 1-D memref (an OpenCL __global float*), indexed at its row-major offset; subgroups of 32.
# GPU-LABEL: gpu.func @scale2d(%{{[^:]+}}: memref<?xf32> {{.*}}, %{{[^:]+}}: i64 {{.*}}, %{{[^:]+}}: i64 {{.*}}) kernel
# GPU-SAME:    spirv.entry_point_abi = #spirv.entry_point_abi<subgroup_size = 32>
# GPU:         arith.index_cast %{{.+}} : i64 to index
# GPU-NEXT:    %[[C:.+]] = arith.index_cast %{{.+}} : i64 to index
# GPU:         scf.if
# GPU-NEXT:      %[[ROW:.+]] = arith.muli %{{.+}}, %[[C]] : index
# GPU:         %[[AT:.+]] = arith.addi %[[ROW]], %{{.+}} : index
# GPU:         memref.load %{{.+}}[%[[AT]]] : memref<?xf32>
# GPU:         memref.store %{{.+}}, %{{.+}}[%[[AT]]] : memref<?xf32>
# GPU-LABEL: gpu.func @warp_reduce_sum(
# GPU:         gpu.shuffle down %{{.+}}, %{{.+}}, %{{.+}} : f32

# Kernel capability, OpenCL memory model; shuffles are non-uniform subgroup shuffles (down ones by index,
# clamped to the lane itself past the subgroup), math is OpenCL.std.
# SPIRV:       spirv.module @{{.+}} Physical64 OpenCL requires #spirv.vce<v1.3, [{{.*}}Kernel{{.*}}]
# SPIRV-LABEL: spirv.func @scale2d(%{{[^:]+}}: !spirv.ptr<f32, CrossWorkgroup> {{.*}}, %{{[^:]+}}: i64 {{.*}}, %{{[^:]+}}: i64 {{.*}})
# SPIRV:         spirv.CL.exp
# SPIRV-LABEL: spirv.func @warp_reduce_sum(
# SPIRV:         %[[LANE:.+]] = spirv.Load "Input" %{{.+}} : i32
# SPIRV:         spirv.GroupNonUniformShuffle <Subgroup> %{{.+}}, %{{.+}} : f32, i32
# SPIRV-LABEL: spirv.func @xor_reduce(
# SPIRV:         spirv.GroupNonUniformShuffleXor <Subgroup> %{{.+}}, %{{.+}} : f32, i32
# SPIRV:       spirv.ExecutionMode @scale2d "SubgroupSize", 32

# STAGES:      kernels
# STAGES-NEXT: gpu
# STAGES-NEXT: spirv
# STAGES-NEXT: spv
# STAGES-NEXT: image


@kernel
def scale2d(X: tensor[float, "R", "C"]):
    r = launch.thread_id(1)
    c = launch.thread_id(0)
    if r < X.shape[0] and c < X.shape[1]:
        X[r, c] = math.exp(X[r, c]) * 2.0


@kernel
def warp_reduce_sum(X, Out):
    tid = launch.thread_id()
    val = X[tid]
    for offset in [16, 8, 4, 2, 1]:
        val += tile.warp_shuffle_down(val, offset)
    if tile.lane_id() == 0:
        Out[tile.warp_id()] = val


@kernel
def xor_reduce(X, Out):
    tid = launch.thread_id()
    val = X[tid]
    for offset in [16, 8, 4, 2, 1]:
        val += tile.warp_shuffle_xor(val, offset)
    Out[tid] = val
