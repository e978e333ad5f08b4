# Atomics and fences for AMDGPU: LLVM atomics on the global address space (1) with the syncscope of their
# scope (block "workgroup", device "agent", system: none, LLVM's default).
# RUN: tessera-cc %S/../Inputs/atomics.py --target amdgpu --arch gfx90a --compile-to=llir | FileCheck %s
# RUN: tessera-cc %S/../Inputs/atomics.py --target amdgpu --arch gfx1100 --compile-to=llir | FileCheck %s

# CHECK-LABEL: define amdgpu_kernel void @hist(
# CHECK:         atomicrmw add ptr addrspace(1) %{{.+}}, i32 1 syncscope("agent") monotonic, align 4
# CHECK-LABEL: define amdgpu_kernel void @scatter(
# CHECK:         atomicrmw fadd ptr addrspace(1) %{{.+}}, float %{{.+}} syncscope("workgroup") acq_rel, align 4
# CHECK:         atomicrmw fmaximum ptr addrspace(1) %{{.+}}, float %{{.+}} syncscope("agent") seq_cst, align 4
# CHECK-LABEL: define amdgpu_kernel void @orders(
# CHECK:         atomicrmw max ptr addrspace(1) %{{.+}}, i64 %{{.+}} release, align 8
# CHECK-NEXT:    fence syncscope("workgroup") acquire
# CHECK-NEXT:    cmpxchg ptr addrspace(1) %{{.+}}, i32 0, i32 1 syncscope("agent") seq_cst seq_cst, align 4
# CHECK:         cmpxchg ptr addrspace(1) %{{.+}}, i32 0, i32 1 syncscope("workgroup") acquire acquire, align 4
# CHECK-NEXT:    fence seq_cst
