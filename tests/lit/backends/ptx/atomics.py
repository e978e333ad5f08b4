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
# PTX-LABEL: .visible .entry orders(
# PTX:         atom.release.sys.global.max.s64 %rd{{[0-9]+}}, [%rd{{[0-9]+}}], %rd{{[0-9]+}};
# PTX:         fence.acq_rel.cta;
# PTX-NEXT:    fence.sc.gpu;
# PTX-NEXT:    atom.acquire.gpu.global.cas.b32 {{.+}}, 0, 1;
# PTX-NEXT:    atom.acquire.cta.global.cas.b32 {{.+}}, 0, 1;
# PTX-NEXT:    fence.sc.sys;
