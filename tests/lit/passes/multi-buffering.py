# Multi-buffering: the schedule phase records `stages` (a tile program's shared buffers, a function's hint,
# else the cost model's 1 on the CPU); the memory phase turns it into `stages` rotating copies of the GEMM's
# packed B panel (`tmem.stage` ops before the matmul), and the CPU GEMM allocates exactly those, computing from one
# panel while the bursts before its micro-kernels pack (and prefetch) the next chunk's into another.
# Block sizes come from the host's caches: only the program's own choices are checked literally.
# RUN: tessera-cc %s --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --compile-to=memory | FileCheck %s --check-prefix=MEM
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import function, kernel, op, tensor, tile

# SCHED-LABEL: func.func @pipeline(
# SCHED:         "tsched.schedule"() {KC = 128 : i64, {{.*}}stages = 2 : i64}
# SCHED-NEXT:    "ttensor.matmul"
# MEM-LABEL:   func.func @pipeline(
# MEM:           "tmem.stage"() {buffer = "a_block", copies = 1 : i64, shape = [{{[0-9]+}}, 128]}
# MEM-NEXT:      "tmem.stage"() {buffer = "b_panel", copies = 2 : i64, shape = [128, {{[0-9]+}}]}
# MEM-NEXT:      "tmem.slot"
# MEM-NEXT:      "ttensor.matmul"
# The kernel: one A block, two B panels in one allocation (strips padded by a cache line), the panel of
# chunk k at (k mod 2), the next chunk's source and panel lines prefetched by the bursts.
# KERN-LABEL:  func.func @pipeline__gemm0(
# KERN-SAME:     cache_blocks = array<i64: [[MC2:[0-9]+]], 128>
# KERN-SAME:     stages = 2 : i64
# KERN:          memref.alloc() {alignment = 64 : i64} : memref<{{[0-9]+}}xf32>
# KERN:          %[[PANELS:.+]] = memref.alloc() {alignment = 64 : i64} : memref<{{[0-9]+}}xf32>
# KERN:          arith.remsi %{{.+}}, %c2
# KERN:          memref.prefetch %arg1[{{.+}}], read, locality<3>, data
# KERN:          memref.prefetch %[[PANELS]][{{.+}}], write, locality<3>, data
@kernel
def pipeline(A, B, C):
    buf0, buf1 = tile.alloc_shared(), tile.alloc_shared()
    toggle = 0
    for k in range(0, A.shape[1], 128):
        buf = buf0 if toggle == 0 else buf1
        tile.cp_async(buf, A[:, k:k+128])
        tile.barrier()
        C += tile.dot(buf, B[k:k+128, :])
        toggle ^= 1


# A function's hint: three panels, two packed ahead.
# MEM-LABEL:   func.func @three(
# MEM:           "tmem.stage"() {buffer = "a_block", copies = 1 : i64
# MEM-NEXT:      "tmem.stage"() {buffer = "b_panel", copies = 3 : i64
@function(stages=3)
def three(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return X @ W


# The cost model: one panel, packed between chunks.
# MEM-LABEL:   func.func @single(
# MEM:           "tmem.stage"() {buffer = "a_block", copies = 1 : i64
# MEM-NEXT:      "tmem.stage"() {buffer = "b_panel", copies = 1 : i64
# KERN-LABEL:  func.func @single__gemm0(
# KERN-SAME:     stages = 1 : i64
# KERN-NOT:      memref.prefetch %arg1
# KERN:          return
@function
def single(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return X @ W
