# Each CPU lowering step of a SIMT kernel, stage by stage.
# RUN: tessera-cc %s --compile-to=canonical | FileCheck %s --check-prefix=CANON
# RUN: tessera-cc %s --compile-to=warps | FileCheck %s --check-prefix=WARPS
# RUN: tessera-cc %s --compile-to=llvm | FileCheck %s --check-prefix=LLVM
# RUN: tessera-cc %s --compile-to=llir --cpu=x86-64-v3 | FileCheck %s --check-prefix=LLIR
# RUN: tessera-cc %s --list-stages | FileCheck %s --check-prefix=STAGES

from tessera import kernel, launch

# CANON-LABEL: func.func @scale(
# CANON:         "ttile.thread_id"

# WARPS-LABEL: func.func @scale(
# WARPS-SAME:    tessera.warp_size = 32 : i32
# WARPS:         vector.maskedload {{.*}} vector<32xf32>
# WARPS:         vector.maskedstore

# LLVM-LABEL: llvm.func @scale(
# LLVM:         llvm.intr.masked.load {{.*}} -> vector<32xf32>
# LLVM:         llvm.intr.masked.store

# The entry unpacks `void** args` and the block context, then calls the (internal, inlined) block function.
# LLIR-LABEL: define void @tsr_cpu_scale(ptr {{.*}}%args, ptr {{.*}}%ctx)
# LLIR-NOT:     define
# LLIR:         call <32 x float> @llvm.masked.load.v32f32
# LLIR:         call void @llvm.masked.store.v32f32
# LLIR-NOT:     define

# STAGES:      ttir
# STAGES-NEXT: canonical
# STAGES-NEXT: schedule
# STAGES-NEXT: vectorize
# STAGES-NEXT: memory
# STAGES-NEXT: fusion
# STAGES-NEXT: quantize
# STAGES-NEXT: kernels
# STAGES-NEXT: warps
# STAGES-NEXT: llvm
# STAGES-NEXT: llir
# STAGES-NEXT: obj
# STAGES-NEXT: so
# STAGES-NEXT: image
@kernel
def scale(s: float, X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = s * X[i]
