# Barriers, cooperative groups, lane reductions and shared arrays as SPIR-V for OpenCL
# (tests/unit/group_kernels.py):
# tile.barrier() and the sync of a group of whole subgroups are OpControlBarrier at Workgroup scope, a group
# within a subgroup at Subgroup scope, both ordering shared (Workgroup) and global (CrossWorkgroup) memory as
# bar.sync does; reductions are xor butterflies of OpGroupNonUniformShuffleXor over the 32-lane subgroup. The
# spv stage validates the module with spirv-val where it is installed.
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target spirv --compile-to=spirv | FileCheck %s
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target spirv --compile-to=spv -o %t.spv

# Shared arrays are module-scope Workgroup variables (OpenCL __local); tile.cp_async is a load and a store.
# CHECK-DAG:   spirv.GlobalVariable @{{.+}} : !spirv.ptr<!spirv.array<128 x f32>, Workgroup>
# CHECK-DAG:   spirv.GlobalVariable @{{.+}} : !spirv.ptr<!spirv.array<272 x f32>, Workgroup>
# CHECK-DAG:   spirv.GlobalVariable @{{.+}} : !spirv.ptr<!spirv.array<64 x f16>, Workgroup>
# CHECK-LABEL: spirv.func @neighbours(
# CHECK:         spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory|CrossWorkgroupMemory>
# CHECK-LABEL: spirv.func @quads(
# CHECK:         spirv.ControlBarrier <Subgroup>, <Subgroup>, <AcquireRelease|WorkgroupMemory|CrossWorkgroupMemory>
# CHECK-LABEL: spirv.func @halves(
# CHECK:         spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory|CrossWorkgroupMemory>
# CHECK-LABEL: spirv.func @reductions(
# CHECK:         %[[A:.+]] = spirv.GroupNonUniformShuffleXor <Subgroup> %[[X:.+]], %cst16_i32 : i32, i32
# CHECK:         spirv.IAdd %[[X]], %[[A]] : i32
# CHECK-COUNT-4: spirv.GroupNonUniformShuffleXor <Subgroup> %{{.+}}, %{{.+}} : i32, i32
# CHECK:         %[[B:.+]] = spirv.GroupNonUniformShuffleXor <Subgroup> %[[Y:.+]], %cst8_i32 : f64, i32
# CHECK:         spirv.CL.fmin %[[Y]], %[[B]] : f64
# CHECK-LABEL: spirv.func @reverse_blocks(
# CHECK:         spirv.Store "Workgroup"
# CHECK:         spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory|CrossWorkgroupMemory>
# CHECK:         spirv.Load "Workgroup"
