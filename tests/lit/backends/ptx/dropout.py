# Dropout on the GPU targets: the Philox-4x32-10 stream of tessera/numerics/philox.py, drawn inside the fused
# kernels (an elementwise group; a softmax's row group), no GPU needed.
# RUN: tessera-cc %s --target ptx --compile-to=gpu | FileCheck %s --check-prefix=GPU
# RUN: tessera-cc %s --target ptx --compile-to=nvvm | FileCheck %s --check-prefix=NVVM
# RUN: tessera-cc %s --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=SPIRV

from tessera import f32, function, op, tensor

# The counter is the element's row-major index plus the offset, as 64 bits: its low and high words. Ten rounds
# of two 32x32 -> 64-bit products by Philox's multipliers; the three that read the constant zero words (c2 and
# c3 of the first round) and the last round's unused halves fold away, leaving 17.
# GPU-LABEL: gpu.func @drop__elementwise0(
# GPU:         arith.addi %{{.+}}, %c7 : index
# GPU:         %[[WIDE:.+]] = arith.index_castui %{{.+}} : index to i64
# GPU:         arith.trunci %[[WIDE]] : i64 to i32
# GPU:         arith.shrui %[[WIDE]], %c32_i64 : i64
# GPU-COUNT-17: arith.mului_extended %{{.+}}, %c-{{766435501|845247145}}_i32 : i32
# The uniform: the first word's top 24 bits times 2^-24; kept where it is >= p, scaled by 1/(1-p).
# GPU:         arith.shrui %{{.+}}, %c8_i32 : i32
# GPU:         arith.uitofp %{{.+}} : i32 to f32
# GPU:         arith.cmpf oge
# GPU:         arith.divf
# GPU:         arith.select
# GPU-LABEL: gpu.func @probs__row0(
# GPU:         arith.mului_extended
# GPU:         arith.cmpf oge

# For NVVM the high words are PTX's own instruction (the upstream lowering's i64 products would become 64-bit
# multiplies once LLVM widens the rounds).
# NVVM-LABEL: llvm.func @drop__elementwise0(
# NVVM-COUNT-17: llvm.call_intrinsic "llvm.nvvm.mulhi.ui"(%{{.+}}, %{{.+}}) : (i32, i32) -> i32
# NVVM-NOT:    llvm.mul {{.*}} : i64
# NVVM:        llvm.return

# PTX-LABEL: .visible .entry drop__elementwise0(
# The first round: the key is (the seed's low word 0x89abcdef, its high word 0x01234567); with the zero words
# c2, c3 of the counter, its new c0 is c1 (the counter's high word) ^ 0x89abcdef, its new c2 hi(c0·M0) ^
# 0x01234567.
# PTX:         mul.hi.u32 %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}};
# PTX:         xor.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, -1985229329;
# PTX:         xor.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, 19088743;
# PTX-COUNT-16: mul.hi.u32 %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}};
# PTX-NOT:     mul.{{lo|hi|wide}}.{{[su]}}64
# PTX:         setp.ge.f32 %p{{[0-9]+}}, %r{{[0-9]+}}, 0f3E800000;
# PTX:         div.rn.f32 %r{{[0-9]+}}, %r{{[0-9]+}}, 0f3F400000;
# PTX:         ret;
# PTX-LABEL: .visible .entry probs__row0(
# PTX:         mul.hi.u32

# SPIR-V: each product one Int64 multiply of the zero-extended words (Intel's OpenCL CPU runtime has no
# OpUMulExtended built-in).
# SPIRV-LABEL: spirv.func @drop__elementwise0(
# SPIRV-NOT:     spirv.UMulExtended
# SPIRV-COUNT-17: spirv.IMul %{{.+}}, %{{.+}} : i64
# SPIRV-NOT:     spirv.UMulExtended
# SPIRV:         spirv.Return


@function
def drop(X: tensor[f32, "N", "D"]):
    return op.dropout(X * 2.0, 0.25, 0x0123456789ABCDEF, offset=7) + 1.0


@function
def probs(X: tensor[f32, "N", "D"]):
    return op.dropout(op.softmax(X), 0.1, 3)
