# The global thread id on SPIR-V is the GlobalInvocationId built-in, not WorkgroupId · WorkgroupSize +
# LocalInvocationId: Intel's OpenCL CPU runtime miscompiles that sum in a module where one kernel compares it
# with OpIEqual and another with OpSLessThan (backends/spirv/compiler.py _global_ids; docs/portability.md).
# RUN: tessera-cc %s --target spirv --compile-to=gpu | FileCheck %s --check-prefix=GPU
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=SPIRV

from tessera import kernel, launch

# GPU-LABEL: gpu.func @first(
# GPU-NOT:     gpu.block_id
# GPU:         %[[T:.+]] = gpu.global_id x
# GPU-NOT:     gpu.block_id
# GPU:         arith.cmpi eq, %[[T]], %{{.+}} : index
# GPU-LABEL: gpu.func @below(
# GPU-NOT:     gpu.block_id
# GPU:         %[[I:.+]] = gpu.global_id x
# GPU:         arith.cmpi slt, %[[I]], %{{.+}} : index
# GPU-LABEL: gpu.func @blocks(
# GPU:         gpu.block_id y

# SPIRV-NOT:   LocalInvocationId
# SPIRV-NOT:   WorkgroupSize
# SPIRV-LABEL: spirv.func @first(
# SPIRV:         %[[G:.+]] = spirv.mlir.addressof @__builtin__GlobalInvocationId__
# SPIRV-NEXT:    %[[V:.+]] = spirv.Load "Input" %[[G]] : vector<3xi64>
# SPIRV-NEXT:    %[[T:.+]] = spirv.CompositeExtract %[[V]][0 : i32] : vector<3xi64>
# SPIRV:         spirv.IEqual %[[T]], %{{.+}} : i64
# SPIRV-LABEL: spirv.func @below(
# SPIRV:         spirv.mlir.addressof @__builtin__GlobalInvocationId__
# SPIRV:         spirv.SLessThan %{{.+}}, %{{.+}} : i64


@kernel
def first(F: tensor[f32, "N"]):
    t = launch.thread_id(0)
    if t == 0:
        F[0] = 7.0


@kernel
def below(Y: tensor[f32, "N"]):
    i = launch.thread_id(0)
    if i < 1:
        Y[i] = 5.0


@kernel
def blocks(Y: tensor[f32, "N"]):
    # the block id alone stays the WorkgroupId built-in (only the whole sum is rewritten)
    Y[launch.block_id(1)] = 1.0
