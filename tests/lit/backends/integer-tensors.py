# Integer tensors in Graph IR on every target (docs/language.md, "Integer tensors"): Python's // and % guard
# their divisor (0 and -1 become 1, then the result is selected: numpy's 0 for a zero divisor, the minimum
# // -1 wrapping), a float -> integer cast converts after the saturating selects, and an i8 sum accumulates in
# i32 across the warp's shuffles. A bool tensor (a comparison's result) is stored as one byte an element (0 or
# 1): the kernel declares it i8, since a vector of i1 stored to memory packs eight lanes into a byte on the CPU.
# RUN: tessera-cc %s --compile-to=llvm | FileCheck %s --check-prefix=CPU
# RUN: tessera-cc %s --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --target amdgpu --compile-to=llir | FileCheck %s --check-prefix=AMDGPU
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=SPIRV

# CPU-LABEL: llvm.func @floordiv_mod__elementwise0(
# CPU:         %[[D:.+]] = llvm.select %{{.+}}, %{{.+}}, %{{.+}} : vector<32xi1>, vector<32xi32>
# CPU:         llvm.sdiv %{{.+}}, %[[D]] : vector<32xi32>
# CPU-LABEL: llvm.func @to_int__elementwise0(
# CPU:         llvm.fptosi %{{.+}} : vector<32xf32> to vector<32xi16>
# CPU-LABEL: llvm.func @row_sum__row0(
# CPU:         llvm.sext %{{.+}} : vector<32xi8> to vector<32xi32>
# CPU-LABEL: llvm.func @where_less__elementwise0(
# CPU:         llvm.select %{{.+}}, %{{.+}}, %{{.+}} : vector<32xi1>, vector<32xi8>
# CPU:         llvm.intr.masked.store %{{.+}}, %{{.+}}, %{{.+}} {{.*}} : vector<32xi8>, vector<32xi1> into !llvm.ptr

# PTX-LABEL: .visible .entry floordiv_mod__elementwise0(
# PTX:         div.s32
# PTX-LABEL: .visible .entry to_int__elementwise0(
# PTX:         cvt.rzi.s16.f32
# PTX-LABEL: .visible .entry row_sum__row0(
# PTX:         shfl.sync.bfly.b32
# PTX-LABEL: .visible .entry where_less__elementwise0(
# PTX:         ld.global.b32
# PTX:         setp.lt.s64 [[P:%p[0-9]+]]
# PTX-NEXT:    selp.b16 [[B:%rs[0-9]+]], 1, 0, [[P]];
# PTX:         st.global.b8 [{{.+}}], [[B]];

# AMDGPU-LABEL: define amdgpu_kernel void @floordiv_mod__elementwise0(
# AMDGPU:         %[[D:.+]] = select i1 %{{.+}}, i32 %{{.+}}, i32 1
# AMDGPU:         sdiv i32 %{{.+}}, %[[D]]
# AMDGPU-LABEL: define amdgpu_kernel void @to_int__elementwise0(
# AMDGPU:         fptosi float %{{.+}} to i16
# AMDGPU-LABEL: define amdgpu_kernel void @row_sum__row0(
# AMDGPU:         sext i8 %{{.+}} to i32
# AMDGPU:         @llvm.amdgcn.ds.bpermute(
# AMDGPU-LABEL: define amdgpu_kernel void @where_less__elementwise0(
# AMDGPU:         %[[B:.+]] = zext i1 %{{.+}} to i8
# AMDGPU:         store i8 %[[B]]

# SPIRV-LABEL: spirv.func @floordiv_mod__elementwise0(
# SPIRV:         %[[D:.+]] = spirv.Select %{{.+}}, %{{.+}}, %cst1_i32 : i1, i32
# SPIRV:         spirv.SDiv %{{.+}}, %[[D]] : i32
# SPIRV-LABEL: spirv.func @to_int__elementwise0(
# SPIRV:         spirv.ConvertFToS %{{.+}} : f32 to i16
# SPIRV-LABEL: spirv.func @row_sum__row0(
# SPIRV:         spirv.GroupNonUniformShuffle{{.*}} : i32
# SPIRV-LABEL: spirv.func @where_less__elementwise0(
# SPIRV:         spirv.Select %{{.+}}, %cst1_i8, %cst0_i8 : i1, i8


@function
def floordiv_mod(A: tensor[i32, "N", "D"], B: tensor[i32, "N", "D"]):
    return A // B, A % B


@function
def to_int(X: tensor[f32, "N", "D"]):
    return op.cast(X, i16)


@function
def row_sum(A: tensor[i8, "N", "D"]):
    return op.sum(A, -1)


@function
def where_less(A: tensor[i64, "N", "D"], B: tensor[i64, "N", "D"]):
    return A < B
