# The Graph IR phases, in the normative order, on one function: each adds what the next needs. Schedule,
# vectorize and memory state their decisions as ops right before the op they decide for.
# RUN: tessera-cc %s --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --compile-to=vectorize --cpu=x86-64-v3 | FileCheck %s --check-prefix=VEC
# RUN: tessera-cc %s --compile-to=memory | FileCheck %s --check-prefix=MEM
# RUN: tessera-cc %s --compile-to=fusion | FileCheck %s --check-prefix=FUSE
# RUN: tessera-cc %s --compile-to=quantize | FileCheck %s --check-prefix=QUANT
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import function, op, tensor

# SCHED-LABEL: func.func @block(
# SCHED:         "tsched.schedule"() {block_x = 128 : i64}
# SCHED-NEXT:    "ttensor.bias_add"
# SCHED:         "tsched.schedule"() {rows_per_block = 4 : i64}
# SCHED-NEXT:    "ttensor.layernorm"

# AVX2 (x86-64-v3): 8 f32 lanes per vector, 32-lane warps.
# VEC-LABEL: func.func @block(
# VEC:         "tsched.schedule"() {block_x = 128 : i64, lanes = 8 : i64, warp = 32 : i64}
# VEC-NEXT:    "ttensor.bias_add"

# Buffers are reused once dead: the bias_add result's slot serves the layernorm.
# MEM-LABEL: func.func @block(
# MEM:         "tmem.slot"() {slot = 0 : i64}
# MEM-NEXT:    "ttensor.bias_add"
# MEM:         "tmem.slot"() {slot = 1 : i64}
# MEM-NEXT:    "ttensor.unary"
# MEM:         "tmem.slot"() {slot = 0 : i64}
# MEM-NEXT:    "ttensor.layernorm"

# bias_add and gelu fuse into one elementwise group; the layernorm is a row group.
# FUSE-LABEL: func.func @block(
# FUSE:         "ttensor.bias_add"{{.*}}tessera.group = 0 : i32, tessera.group_kind = "elementwise"
# FUSE:         "ttensor.unary"{{.*}}tessera.group = 0 : i32, tessera.group_kind = "elementwise"
# FUSE:         "ttensor.layernorm"{{.*}}tessera.group = 1 : i32, tessera.group_kind = "row"

# bf16 has no CPU arithmetic: computed in f32, and the function records the fallback.
# QUANT-LABEL: func.func @block(
# QUANT-SAME:    tessera.fallbacks = ["bf16 computed in f32"]
# QUANT:         "ttensor.bias_add"{{.*}}tessera.compute = f32

# The function is gone; its groups are SIMT kernels.
# KERN-NOT:      tessera.function
# KERN-LABEL:    func.func @block__elementwise0(
# KERN:            "ttile.thread_id"() {dim = 0 : i64}
# KERN:            math.erf
# KERN-LABEL:    func.func @block__row1(
# KERN:            "ttile.shuffle_xor"
# KERN:            math.rsqrt
@function
def block(X: tensor[bf16, "T", 64], b: tensor[bf16, 64], g: tensor[bf16, 64]):
    return op.layernorm(op.gelu(op.bias_add(X, b)), gamma=g)


# A matmul's blocking from the target's cost model; one whose M or N is known only at run time is marked
# `at_launch` (a backend may choose again when it is known); static extents and the user's tile are final.
# SCHED-LABEL: func.func @products(
# SCHED:         "tsched.schedule"() {{{.*}}at_launch = 1 : i64
# SCHED-NEXT:    "ttensor.matmul"
# SCHED:         "tsched.schedule"() {{{.*}}at_launch = 0 : i64
# SCHED-NEXT:    "ttensor.matmul"
# SCHED-LABEL: func.func @hinted(
# SCHED:         "tsched.schedule"() {{{.*}}at_launch = 0 : i64
# SCHED-NEXT:    "ttensor.matmul"
@function
def products(A: tensor[f32, "M", 64], B: tensor[f32, 64, 64], C: tensor[f32, 64, 32]):
    return A @ B, B @ C


@function(tile=(64, 64, 32))
def hinted(A: tensor[f32, "M", 64], B: tensor[f32, 64, 64]):
    return A @ B
