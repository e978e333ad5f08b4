# The Graph IR phases, in the normative order, on one function: each adds what the next needs.
# RUN: tessera-cc %s --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --compile-to=vectorize --cpu=x86-64-v3 | FileCheck %s --check-prefix=VEC
# RUN: tessera-cc %s --compile-to=memory | FileCheck %s --check-prefix=MEM
# RUN: tessera-cc %s --compile-to=fusion | FileCheck %s --check-prefix=FUSE
# RUN: tessera-cc %s --compile-to=quantize | FileCheck %s --check-prefix=QUANT
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import function, op, tensor

# SCHED-LABEL: func.func @block(
# SCHED:         "ttensor.bias_add"{{.*}}tessera.schedule = {block_x = 128 : i64}
# SCHED:         "ttensor.layernorm"{{.*}}tessera.schedule = {rows_per_block = 4 : i64}

# AVX2 (x86-64-v3): 8 f32 lanes per vector, 32-lane warps.
# VEC-LABEL: func.func @block(
# VEC:         "ttensor.bias_add"{{.*}}tessera.vector = {lanes = 8 : i64, warp = 32 : i64}

# Buffers are reused once dead: the bias_add result's slot serves the layernorm.
# MEM-LABEL: func.func @block(
# MEM:         "ttensor.bias_add"{{.*}}tessera.buffer = 0 : i32
# MEM:         "ttensor.unary"{{.*}}tessera.buffer = 1 : i32
# MEM:         "ttensor.layernorm"{{.*}}tessera.buffer = 0 : i32

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
# SCHED:         "ttensor.matmul"{{.*}}tessera.schedule = {{{.*}}at_launch = 1 : i64
# SCHED:         "ttensor.matmul"{{.*}}tessera.schedule = {{{.*}}at_launch = 0 : i64
# SCHED-LABEL: func.func @hinted(
# SCHED:         "ttensor.matmul"{{.*}}tessera.schedule = {{{.*}}at_launch = 0 : i64
@function
def products(A: tensor[f32, "M", 64], B: tensor[f32, 64, 64], C: tensor[f32, 64, 32]):
    return A @ B, B @ C


@function(tile=(64, 64, 32))
def hinted(A: tensor[f32, "M", 64], B: tensor[f32, 64, 64]):
    return A @ B
