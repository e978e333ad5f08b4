# Atomics and fences on the CPU: one LLVM atomic per active lane of a warp, in lane order; every scope is the
# system's (a block's threads share one OS thread, and x86 atomics cost no more at system scope).
# RUN: tessera-cc %S/../Inputs/atomics.py --compile-to=warps | FileCheck %s --check-prefix=WARPS
# RUN: tessera-cc %S/../Inputs/atomics.py --compile-to=llir | FileCheck %s --check-prefix=LLIR

# WARPS-LABEL: func.func @hist(
# The lanes' loop: active lanes (the mask's bit) update their own element through its pointer.
# WARPS:         scf.for %[[LANE:.+]] = %c0 to %c32 step %c1 iter_args(%{{.+}} = %{{.+}}) -> (vector<32xi32>)
# WARPS-NEXT:      vector.extract %{{.+}}[%[[LANE]]] : i1 from vector<32xi1>
# WARPS:           memref.extract_aligned_pointer_as_index
# WARPS:           llvm.inttoptr
# WARPS:           %[[P:.+]] = llvm.getelementptr %{{.+}}[%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, i32
# WARPS-NEXT:      llvm.atomicrmw add %[[P]], %c1_i32 monotonic : !llvm.ptr, i32
# WARPS-LABEL: func.func @scatter(
# WARPS:           llvm.atomicrmw fadd %{{.+}}, %{{.+}} acq_rel : !llvm.ptr, f32
# f32 max is IEEE maximum (a NaN wins, -0 < +0): LLVM's fmaximum, which x86 expands to a cmpxchg loop.
# WARPS:           llvm.atomicrmw fmaximum %{{.+}}, %{{.+}} seq_cst : !llvm.ptr, f32
# WARPS-LABEL: func.func @orders(
# WARPS:           llvm.atomicrmw max %{{.+}}, %{{.+}} release : !llvm.ptr, i64
# WARPS:         llvm.fence acquire
# WARPS:           llvm.cmpxchg %{{.+}}, %{{.+}}, %{{.+}} seq_cst seq_cst : !llvm.ptr, i32
# WARPS:           llvm.cmpxchg %{{.+}}, %{{.+}}, %{{.+}} acquire acquire : !llvm.ptr, i32
# WARPS:         llvm.fence seq_cst

# LLIR-LABEL: define void @tsr_cpu_hist(
# LLIR:         atomicrmw add ptr %{{.+}}, i32 1 monotonic, align 4
# LLIR-NOT:     syncscope
# LLIR-LABEL: define void @tsr_cpu_scatter(
# LLIR-DAG:     atomicrmw fadd ptr %{{.+}}, float %{{.+}} acq_rel, align 4
# LLIR-DAG:     atomicrmw fmaximum ptr %{{.+}}, float %{{.+}} seq_cst, align 4
# LLIR-LABEL: define void @tsr_cpu_orders(
# LLIR-DAG:     cmpxchg ptr %{{.+}}, i32 0, i32 1 acquire acquire, align 4
# LLIR-DAG:     cmpxchg ptr %{{.+}}, i32 0, i32 1 seq_cst seq_cst, align 4
# LLIR-DAG:     atomicrmw max ptr %{{.+}}, i64 %{{.+}} release, align 8
# LLIR-DAG:     fence acquire
# LLIR-DAG:     fence seq_cst
