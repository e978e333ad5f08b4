# u8 tensors in Graph IR on every target (docs/language.md, "Integer tensors"): a kernel stores u8 as bytes
# and reads them zero-extended into an i32 (tessera/frontend/kernel.py), where the signed division and
# comparison are the unsigned ones (LLVM, knowing the zero extension, narrows them to unsigned i8/i16 ops on
# PTX and AMDGPU); // guards a zero divisor only (no -1 in u8); a float -> u8 cast converts after the
# saturating selects and keeps the low byte (& 255, then the store's truncation).
# RUN: tessera-cc %s --compile-to=llvm | FileCheck %s --check-prefix=CPU
# RUN: tessera-cc %s --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --target amdgpu --compile-to=llir | FileCheck %s --check-prefix=AMDGPU
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=SPIRV

# CPU-LABEL: llvm.func @udiv__elementwise0(
# CPU:         %[[A:.+]] = llvm.zext %{{.+}} : vector<32xi8> to vector<32xi32>
# CPU:         llvm.sdiv %[[A]], %{{.+}} : vector<32xi32>
# CPU-LABEL: llvm.func @udiv__elementwise1(
# CPU:         llvm.icmp "sgt" %{{.+}}, %{{.+}} : vector<32xi32>
# CPU-LABEL: llvm.func @to_u8__elementwise0(
# CPU:         llvm.fptosi %{{.+}} : vector<32xf32> to vector<32xi32>
# CPU:         llvm.and %{{.+}}, %{{.+}} : vector<32xi32>
# CPU:         llvm.trunc %{{.+}} : vector<32xi32> to vector<32xi8>

# PTX-LABEL: .visible .entry udiv__elementwise0(
# PTX:         setp.eq.b16 [[Z:%p[0-9]+]], %rs{{[0-9]+}}, 0;
# PTX:         div.u16
# PTX-LABEL: .visible .entry udiv__elementwise1(
# PTX:         setp.gt.u16
# PTX-LABEL: .visible .entry to_u8__elementwise0(
# PTX:         cvt.rzi.s32.f32

# AMDGPU-LABEL: define amdgpu_kernel void @udiv__elementwise0(
# AMDGPU:         icmp eq i8 %{{.+}}, 0
# AMDGPU:         udiv i8
# AMDGPU-LABEL: define amdgpu_kernel void @udiv__elementwise1(
# AMDGPU:         icmp ugt i8
# AMDGPU-LABEL: define amdgpu_kernel void @to_u8__elementwise0(
# AMDGPU:         fptosi float %{{.+}} to i32

# SPIRV-LABEL: spirv.func @udiv__elementwise0(
# SPIRV:         %[[A:.+]] = spirv.UConvert %{{.+}} : i8 to i32
# SPIRV:         spirv.SDiv %[[A]], %{{.+}} : i32
# SPIRV-LABEL: spirv.func @to_u8__elementwise0(
# SPIRV:         %[[C:.+]] = spirv.ConvertFToS %{{.+}} : f32 to i32
# SPIRV:         spirv.BitwiseAnd %[[C]], %cst255_i32 : i32


@function
def udiv(A: tensor[u8, "N", "D"], B: tensor[u8, "N", "D"]):
    return A // B, A > B


@function
def to_u8(X: tensor[f32, "N", "D"]):
    return op.cast(X, u8)
