# Atomics and fences for NVIDIA: atom with its order (.relaxed, .acquire, .release, .acq_rel; seq_cst as fence.sc
# then acq_rel) and scope (block .cta, device .gpu, system .sys) on the global space; fences as fence.acq_rel
# or fence.sc at the scope. The compilation assembles the PTX with ptxas where it is installed.
# RUN: tessera-cc %S/../Inputs/atomics.py --target ptx --compile-to=nvvm | FileCheck %s --check-prefix=NVVM
# RUN: tessera-cc %S/../Inputs/atomics.py --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %S/../Inputs/atomics.py --target ptx --arch sm_90 --compile-to=ptx | FileCheck %s --check-prefix=PTX

# The element's pointer is cast to the global space (1), so the atom is a global one.
# NVVM-LABEL: llvm.func @hist(
# NVVM:         %[[G:.+]] = llvm.addrspacecast %{{.+}} : !llvm.ptr to !llvm.ptr<1>
# NVVM:         %[[P:.+]] = llvm.getelementptr %[[G]][%{{.+}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
# NVVM:         llvm.inline_asm has_side_effects "atom.relaxed.gpu.global.add.u32 $0, [$1], $2;", "=r,l,r,~{memory}" %[[P]], %{{.+}} : (!llvm.ptr<1>, i32) -> i32
# NVVM-LABEL: llvm.func @orders(
# NVVM:         llvm.cmpxchg %{{.+}}, %{{.+}}, %{{.+}} syncscope("device") seq_cst seq_cst : !llvm.ptr<1>, i32
# NVVM:         llvm.cmpxchg %{{.+}}, %{{.+}}, %{{.+}} syncscope("block") acquire acquire : !llvm.ptr<1>, i32
# NVVM:         llvm.fence seq_cst

# PTX-LABEL: .visible .entry hist(
# PTX:         atom.relaxed.gpu.global.add.u32 %r{{[0-9]+}}, [%rd{{[0-9]+}}], %r{{[0-9]+}};
# PTX-LABEL: .visible .entry scatter(
# PTX:         atom.acq_rel.cta.global.add.f32 %r{{[0-9]+}}, [%rd{{[0-9]+}}], %r{{[0-9]+}};
# f32 max (PTX has no atom.max.f32): a NaN made the canonical 0x7fc00000 (2143289344), then the bits by
# atom.max.s32 where the sign bit is clear, by atom.min.u32 where it is set.
# PTX:         setp.nan.f32 [[NAN:%p[0-9]+]], [[X:%r[0-9]+]], [[X]];
# PTX:         selp.b32 [[B:%r[0-9]+]], 2143289344, [[X]], [[NAN]];
# PTX:         setp.ge.s32 p, [[B]], 0;
# PTX-NEXT:    fence.sc.gpu;
# PTX-NEXT:    @p atom.acq_rel.gpu.global.max.s32 %r{{[0-9]+}}, [%rd{{[0-9]+}}], [[B]];
# PTX-NEXT:    @!p atom.acq_rel.gpu.global.min.u32 %r{{[0-9]+}}, [%rd{{[0-9]+}}], [[B]];
# PTX-LABEL: .visible .entry orders(
# PTX:         atom.release.sys.global.max.s64 %rd{{[0-9]+}}, [%rd{{[0-9]+}}], %rd{{[0-9]+}};
# PTX:         fence.acq_rel.cta;
# PTX-NEXT:    fence.sc.gpu;
# PTX-NEXT:    atom.acquire.gpu.global.cas.b32 {{.+}}, 0, 1;
# PTX-NEXT:    atom.acquire.cta.global.cas.b32 {{.+}}, 0, 1;
# PTX-NEXT:    fence.sc.sys;
