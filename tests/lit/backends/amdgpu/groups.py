# Barriers, cooperative groups, lane reductions and shared arrays for AMDGPU (tests/unit/group_kernels.py):
# tile.barrier() and
# the sync of a group of whole wavefronts are s_barrier between workgroup-scope release and acquire fences; a
# group within a wavefront (whose lanes run in lock step) needs only a wavefront-scope fence; reductions are xor
# butterflies of ds_bpermute, which LLVM makes ds_swizzle where the xor stays within 32 lanes (CDNA's wave64).
# Shared arrays are LDS (address space 3 globals); tile.cp_async is a load and a store.
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target amdgpu --arch gfx942 --compile-to=llir | FileCheck %s --check-prefixes=CHECK,GFX942
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target amdgpu --arch gfx1100 --compile-to=llir | FileCheck %s --check-prefixes=CHECK,GFX1100

# CHECK:       @__wg_reverse_blocks_0 = internal unnamed_addr addrspace(3) global [128 x float] undef
# CHECK:       @__wg_transpose_tiles_0 = internal unnamed_addr addrspace(3) global [272 x float] undef
# CHECK-LABEL: define amdgpu_kernel void @neighbours(
# CHECK:         fence syncscope("workgroup") release
# CHECK-NEXT:    tail call void @llvm.amdgcn.s.barrier()
# CHECK-NEXT:    fence syncscope("workgroup") acquire
# CHECK-LABEL: define amdgpu_kernel void @quads(
# CHECK-NOT:     s.barrier
# CHECK:         fence syncscope("wavefront") acq_rel
# CHECK-LABEL: define amdgpu_kernel void @halves(
# CHECK:         fence syncscope("workgroup") release
# CHECK-NEXT:    tail call void @llvm.amdgcn.s.barrier()
# CHECK-NEXT:    fence syncscope("workgroup") acquire
# warp_reduce over 64 lanes: xor 32 by ds_bpermute, then 16 … 1 by ds_swizzle's xor masks (0x401f | 16 << 10 …)
# CHECK-LABEL: define amdgpu_kernel void @reductions(
# GFX942:        call i32 @llvm.amdgcn.ds.bpermute(
# GFX942-NEXT:   add i32
# GFX942:        call i32 @llvm.amdgcn.ds.swizzle(i32 %{{.+}}, i32 16415)
# GFX942:        call i32 @llvm.amdgcn.ds.swizzle(i32 %{{.+}}, i32 1055)
# GFX942:        call double @llvm.minimum.f64(
# GFX1100-COUNT-5: call i32 @llvm.amdgcn.ds.bpermute(
# GFX1100:       call double @llvm.minimum.f64(
# CHECK-LABEL: define amdgpu_kernel void @reverse_blocks(
# CHECK:         store float %{{.+}}, ptr addrspace(3) %{{.+}}
# CHECK:         tail call void @llvm.amdgcn.s.barrier()
# CHECK:         load float, ptr addrspace(3)
