# Atomics and fences as SPIR-V for OpenCL: OpPtrAccessChain on the tensor's CrossWorkgroup pointer, then the
# atomic with its scope (block Workgroup, device Device, system CrossDevice) and semantics (the order, with
# CrossWorkgroupMemory; relaxed is None); f32 add and max are compare-and-swap loops on the bits; 64-bit atomics
# declare Int64Atomics. The spv stage validates the module with spirv-val where it is installed.
# RUN: tessera-cc %S/../Inputs/atomics.py --target spirv --compile-to=spirv | FileCheck %s
# RUN: tessera-cc %S/../Inputs/atomics.py --target spirv --compile-to=spv -o %t.spv

# CHECK:       spirv.module @__spv__tessera_kernels Physical64 OpenCL requires #spirv.vce<{{.+}}[Int64Atomics,
# CHECK-LABEL: spirv.func @hist(
# CHECK:         %[[A:.+]] = spirv.ConvertUToPtr %{{.+}} : i64 to !spirv.ptr<i32, CrossWorkgroup>
# CHECK-NEXT:    %[[P:.+]] = spirv.PtrAccessChain %[[A]][%{{.+}}] : !spirv.ptr<i32, CrossWorkgroup>, i64
# CHECK-NEXT:    spirv.AtomicIAdd <Device> <None> %[[P]], %{{.+}} : !spirv.ptr<i32, CrossWorkgroup>
# CHECK-LABEL: spirv.func @scatter(
# CHECK:         %[[BITS:.+]] = spirv.Bitcast %{{.+}} : !spirv.ptr<f32, CrossWorkgroup> to !spirv.ptr<i32, CrossWorkgroup>
# CHECK-NEXT:    spirv.AtomicLoad <Workgroup> <Acquire|CrossWorkgroupMemory> %[[BITS]]
# CHECK:         spirv.mlir.loop {
# CHECK:           spirv.FAdd
# CHECK:           spirv.AtomicCompareExchange <Workgroup> <AcquireRelease|CrossWorkgroupMemory> <Acquire|CrossWorkgroupMemory> %[[BITS]]
# f32 max: the same loop around IEEE maximum (fmax, a NaN operand selected)
# CHECK:         %[[TOP:.+]] = spirv.Bitcast %{{.+}} : !spirv.ptr<f32, CrossWorkgroup> to !spirv.ptr<i32, CrossWorkgroup>
# CHECK:         spirv.mlir.loop {
# CHECK:           spirv.CL.fmax
# CHECK:           spirv.IsNan
# CHECK:           spirv.AtomicCompareExchange <Device> <SequentiallyConsistent|CrossWorkgroupMemory> <SequentiallyConsistent|CrossWorkgroupMemory> %[[TOP]]
# CHECK-LABEL: spirv.func @orders(
# CHECK:         spirv.AtomicSMax <CrossDevice> <Release|CrossWorkgroupMemory> %{{.+}}, %{{.+}} : !spirv.ptr<i64, CrossWorkgroup>
# CHECK-NEXT:    spirv.MemoryBarrier <Workgroup>, <Acquire|WorkgroupMemory|CrossWorkgroupMemory>
# CHECK:         spirv.AtomicCompareExchange <Device> <SequentiallyConsistent|CrossWorkgroupMemory> <SequentiallyConsistent|CrossWorkgroupMemory>
# CHECK:         spirv.AtomicCompareExchange <Workgroup> <Acquire|CrossWorkgroupMemory> <Acquire|CrossWorkgroupMemory>
# CHECK-NEXT:    spirv.MemoryBarrier <CrossDevice>, <SequentiallyConsistent|WorkgroupMemory|CrossWorkgroupMemory>
