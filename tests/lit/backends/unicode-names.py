# A kernel named by a non-ASCII Python identifier: LLVM IR quotes its symbols (CPU, AMDGPU), PTX gets a mangled
# ASCII .entry (backends/symbol_names.py). (SPIR-V's OpEntryPoint carries the name as its string:
# tests/unit/test_unicode_names.py.)
# RUN: tessera-cc %s --compile-to=llir --cpu=x86-64-v3 -O0 | FileCheck %s --check-prefix=CPU
# RUN: tessera-cc %s --target ptx --compile-to=llir | FileCheck %s --check-prefix=PTXLL
# RUN: tessera-cc %s --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --target amdgpu --compile-to=llir | FileCheck %s --check-prefix=AMD

from tessera import kernel, launch, tensor

# At -O0 the body stays a function of its own, named as the kernel; the entry the loader looks up by the
# record's `entry` is tsr_cpu_ and the name's UTF-8 bytes.
# CPU-LABEL: define internal void @"caf\C3\A9"(
# CPU-LABEL: define void @"tsr_cpu_caf\C3\A9"(ptr
# CPU:         call void @"caf\C3\A9"(

# PTXLL: define ptx_kernel void @"caf$e9$"(

# PTX-LABEL: .visible .entry caf$e9$(
# PTX-NEXT:    .param .f32 caf$e9$_param_0,

# AMD: define amdgpu_kernel void @"caf\C3\A9"(


@kernel
def café(a: float, X: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i]
