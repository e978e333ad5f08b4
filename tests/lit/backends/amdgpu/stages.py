# The AMDGPU lowering of SIMT kernels, stage by stage (no GPU and no linker needed).
# RUN: tessera-cc %s --target amdgpu --compile-to=gpu | FileCheck %s --check-prefix=GPU
# RUN: tessera-cc %s --target amdgpu --compile-to=rocdl | FileCheck %s --check-prefix=ROCDL
# RUN: tessera-cc %s --target amdgpu --arch gfx1100 --compile-to=gpu | FileCheck %s --check-prefix=WAVE32
# RUN: tessera-cc %s --target amdgpu --arch gfx90a --compile-to=llir | FileCheck %s --check-prefix=LLIR
# RUN: tessera-cc %s --target amdgpu --list-stages | FileCheck %s --check-prefix=STAGES

from tessera import kernel, launch, tile

# The kernel's parameters are its launch signature, as for PTX: a, X, Y, Out, then the three extents.
# GPU-LABEL: gpu.func @saxpy(%{{[^:]+}}: f32 {{.*}}, %{{[^:]+}}: !llvm.ptr<1> {{.*}}, %{{[^:]+}}: !llvm.ptr<1> {{.*}}, %{{[^:]+}}: !llvm.ptr<1> {{.*}}, %{{[^:]+}}: i64 {{.*}}, %{{[^:]+}}: i64 {{.*}}, %{{[^:]+}}: i64 {{.*}}) kernel
# CDNA's wavefront has 64 lanes: warp ids divide by 64, shuffles span 64 lanes.
# GPU-LABEL: gpu.func @warp_ids(
# GPU:        %[[W:.+]] = arith.constant 64 : index
# GPU:        arith.ceildivui %{{.+}}, %[[W]] : index
# GPU:        arith.divui %{{.+}}, %[[W]] : index
# GPU-LABEL: gpu.func @warp_reduce_sum(
# GPU:        %[[WIDTH:.+]] = arith.constant 64 : i32
# GPU:        gpu.shuffle xor %{{.+}}, %{{.+}}, %[[WIDTH]] : f32

# Kernels take blocks of up to 1024 threads; block extents come from the dispatch packet, not ROCm's
# device library; lanes are mbcnt, xor shuffles inside 32 lanes ds_swizzle (ds_bpermute beyond).
# ROCDL-LABEL: llvm.func @saxpy(
# ROCDL-SAME:    rocdl.flat_work_group_size = "1,1024", rocdl.kernel
# ROCDL:         rocdl.workgroup.id.x
# ROCDL:         %[[P:.+]] = llvm.call_intrinsic "llvm.amdgcn.dispatch.ptr"() : () -> !llvm.ptr<4>
# ROCDL:         llvm.getelementptr %[[P]][4] : (!llvm.ptr<4>) -> !llvm.ptr<4>, i8
# ROCDL:         rocdl.workitem.id.x
# ROCDL-LABEL: llvm.func @warp_reduce_sum(
# ROCDL:         rocdl.ds_swizzle
# ROCDL:         rocdl.mbcnt.lo
# ROCDL:         rocdl.mbcnt.hi
# ROCDL-NOT:   __ockl
# ROCDL-NOT:   __ocml

# RDNA runs waves of 32.
# WAVE32-LABEL: gpu.func @warp_ids(
# WAVE32:        arith.constant 32 : index
# WAVE32-LABEL: gpu.func @warp_reduce_sum(
# WAVE32:        %[[WIDTH:.+]] = arith.constant 32 : i32
# WAVE32:        gpu.shuffle xor %{{.+}}, %{{.+}}, %[[WIDTH]] : f32

# LLIR: target triple = "amdgcn-amd-amdhsa"
# LLIR: define amdgpu_kernel void @saxpy(float {{.*}}, ptr addrspace(1) {{.*}}, i64 {{.*}}) {{.*}}#[[A:[0-9]+]]
# LLIR: attributes #[[A]] = {{.*}}"amdgpu-flat-work-group-size"="1,1024"

# STAGES:      kernels
# STAGES-NEXT: gpu
# STAGES-NEXT: rocdl
# STAGES-NEXT: llir
# STAGES-NEXT: obj
# STAGES-NEXT: hsaco
# STAGES-NEXT: image


@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]


@kernel
def warp_ids(Out):
    Out[launch.thread_id()] = tile.warp_id()


@kernel
def warp_reduce_sum(X, Out):
    tid = launch.thread_id()
    val = X[tid]
    for offset in [16, 8, 4, 2, 1]:
        val += tile.warp_shuffle_xor(val, offset)
    if tile.lane_id() == 0:
        Out[tile.warp_id()] = val
