# Each PTX lowering step of the spec's two kernels, stage by stage (no GPU needed).
# RUN: tessera-cc %s --target ptx --compile-to=gpu | FileCheck %s --check-prefix=GPU
# RUN: tessera-cc %s --target ptx --compile-to=nvvm | FileCheck %s --check-prefix=NVVM
# RUN: tessera-cc %s --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s --check-prefix=ARCH
# RUN: tessera-cc %s --target ptx --list-stages | FileCheck %s --check-prefix=STAGES

from tessera import kernel, launch, tile

# The kernel's parameters are its launch signature: a, X, Y, Out, then the three extents.
# GPU:      gpu.module @tessera_kernels
# GPU-LABEL: gpu.func @saxpy(%{{[^:]+}}: f32 {{.*}}, %{{[^:]+}}: !llvm.ptr<1> {{.*}}, %{{[^:]+}}: !llvm.ptr<1> {{.*}}, %{{[^:]+}}: !llvm.ptr<1> {{.*}}, %{{[^:]+}}: i64 {{.*}}, %{{[^:]+}}: i64 {{.*}}, %{{[^:]+}}: i64 {{.*}}) kernel
# Each tensor's memref is rebuilt from its pointer and extent.
# GPU:        builtin.unrealized_conversion_cast %{{.+}} : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<?xf32>
# thread_id = block_id * block_dim + thread_id
# GPU:        %[[B:.+]] = gpu.block_id x
# GPU:        %[[D:.+]] = gpu.block_dim x
# GPU:        %[[BD:.+]] = arith.muli %[[B]], %[[D]] : index
# GPU:        %[[T:.+]] = gpu.thread_id x
# GPU:        arith.addi %[[BD]], %[[T]] : index
# GPU-LABEL: gpu.func @warp_reduce_sum(
# GPU:        gpu.shuffle down %{{.+}}, %{{.+}}, %{{.+}} : f32
# GPU:        gpu.lane_id

# NVVM-LABEL: llvm.func @saxpy(
# NVVM-SAME:    nvvm.kernel
# NVVM:         nvvm.read.ptx.sreg.ctaid.x
# NVVM-LABEL: llvm.func @warp_reduce_sum(
# NVVM:         nvvm.shfl.sync down

# PTX:       .target sm_80
# PTX-LABEL: .visible .entry saxpy(
# PTX:         .param .f32 saxpy_param_0,
# PTX-NEXT:    .param .u64 .ptr .global .align {{[0-9]+}} saxpy_param_1,
# PTX:         .param .u64 saxpy_param_6
# PTX:         mov.u32 %r{{[0-9]+}}, %tid.x;
# PTX:         ld.global.{{[bf]}}32
# PTX:         st.global.{{[bf]}}32
# PTX-LABEL: .visible .entry warp_reduce_sum(
# Full-warp shuffles: clamp 31, member mask -1.
# PTX:         shfl.sync.down.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, 16, 31, -1;
# PTX:         shfl.sync.down.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, 1, 31, -1;
# PTX:         mov.u32 %r{{[0-9]+}}, %laneid;

# ARCH: .target sm_90a

# STAGES:      kernels
# STAGES-NEXT: gpu
# STAGES-NEXT: nvvm
# STAGES-NEXT: llir
# STAGES-NEXT: ptx
# STAGES-NEXT: image


@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]


@kernel
def warp_reduce_sum(X, Out):
    tid = launch.thread_id()
    val = X[tid]
    for offset in [16, 8, 4, 2, 1]:
        val += tile.warp_shuffle_down(val, offset)
    if tile.lane_id() == 0:
        Out[tile.warp_id()] = val
