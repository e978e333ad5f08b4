# Bitwise and shift ops of integer tensors, logic of bool tensors (docs/language.md, "Integer tensors"): a
# shift's count is masked to the type's width (count & (bits - 1): past the width LLVM, PTX and SPIR-V shifts
# are undefined), >> is arithmetic for signed types and logical for u8 (held zero-extended in an i32, where
# the arithmetic shift is the logical one; LLVM narrows it to a logical shift of the byte), ~ of a bool is its
# logical not (xor with true).
# RUN: tessera-cc %s --compile-to=llvm | FileCheck %s --check-prefix=CPU
# RUN: tessera-cc %s --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --target amdgpu --compile-to=llir | FileCheck %s --check-prefix=AMDGPU
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=SPIRV

# CPU-LABEL: llvm.func @shifts__elementwise0(
# CPU:         %[[N:.+]] = llvm.and %{{.+}}, %{{.+}} : vector<32xi16>
# CPU:         llvm.shl %{{.+}}, %[[N]] : vector<32xi16>
# CPU:         llvm.ashr %{{.+}}, %[[N]] : vector<32xi16>
# CPU-LABEL: llvm.func @logic__elementwise0(
# CPU:         llvm.and %{{.+}}, %{{.+}} : vector<32xi1>
# CPU:         llvm.xor %{{.+}}, %{{.+}} : vector<32xi1>

# PTX-LABEL: .visible .entry shifts__elementwise0(
# PTX:         and.b32 [[N:%r[0-9]+]], %r{{[0-9]+}}, 15;
# PTX:         shl.b16 %rs{{[0-9]+}}, %rs{{[0-9]+}}, [[N]];
# PTX:         shr.s16 %rs{{[0-9]+}}, %rs{{[0-9]+}}, [[N]];
# PTX-LABEL: .visible .entry ushr__elementwise0(
# PTX:         shr.u16

# AMDGPU-LABEL: define amdgpu_kernel void @shifts__elementwise0(
# AMDGPU:         %[[N:.+]] = and i16 %{{.+}}, 15
# AMDGPU:         shl i16 %{{.+}}, %[[N]]
# AMDGPU:         ashr i16 %{{.+}}, %[[N]]
# AMDGPU-LABEL: define amdgpu_kernel void @ushr__elementwise0(
# AMDGPU:         lshr i8

# SPIRV-LABEL: spirv.func @shifts__elementwise0(
# SPIRV:         %[[N:.+]] = spirv.BitwiseAnd %{{.+}}, %cst15_i16 : i16
# SPIRV:         spirv.ShiftLeftLogical %{{.+}}, %[[N]] : i16, i16
# SPIRV:         spirv.ShiftRightArithmetic %{{.+}}, %[[N]] : i16, i16
# SPIRV-LABEL: spirv.func @ushr__elementwise0(
# SPIRV:         %[[U:.+]] = spirv.UConvert %{{.+}} : i8 to i32
# SPIRV:         spirv.ShiftRightArithmetic %[[U]], %{{.+}} : i32, i32
# SPIRV-LABEL: spirv.func @logic__elementwise0(
# SPIRV:         spirv.LogicalAnd


@function
def shifts(A: tensor[i16, "N", "D"], B: tensor[i16, "N", "D"]):
    return A << B, A >> B


@function
def ushr(A: tensor[u8, "N", "D"], B: tensor[u8, "N", "D"]):
    return A >> B


@function
def logic(A: tensor[i32, "N", "D"], B: tensor[i32, "N", "D"]):
    return (A < B) & ~(A > 0)
