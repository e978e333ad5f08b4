# A transpose that swaps two adjacent runs of axes and keeps the last ones in place (the split of a projection
# into heads, [B, S, H, 128] -> [B, H, S, 128]) copies whole rows of them (kernelgen._transpose_rows): X and Y
# flat, the extents as scalars (M = S, N = H, I = 128, Q = B*H), 128 of a row's elements along grid x, blocks of
# 32 rows of S along y (8 bf16 rows a thread), (b, h) pairs along z, each at least one block. A swap of the last
# two axes keeps the tiled kernel over [B, R, C] views.
# RUN: tessera-cc %s --compile-to=kernels -o - | FileCheck %s

from tessera import bf16, f32, function, op, tensor


# CHECK: \22kernel\22: \22heads__layout0\22
# CHECK-SAME: def heads__layout0(X: tensor[bf16, \\\22S0\\\22], Y: tensor[bf16, \\\22S1\\\22], M: int64, N: int64, I: int64, Q: int64)
# CHECK-SAME: for q in range(launch.block_id(2), Q, launch.grid_dim(2))
# CHECK-SAME: src = (b * M + r0) * N + c
# CHECK-SAME: \22view\22: \22scalar\22}, {\22value\22: \22v1\22, \22view\22: \22scalar\22}]
# CHECK-SAME: \22grid\22: [\22max(ceil((128)/128), 1)\22, \22min(max(ceil((S)/32), 1), 65535)\22, \22min(max(B*H, 1), 65535)\22]
# CHECK-SAME: \22scalars\22: [\22S\22, \22H\22, \22128\22, \22B*H\22]
@function
def heads(X: tensor[bf16, "B", "S", "H", 128]):
    return op.transpose(X, (0, 2, 1, 3))


# CHECK: \22kernel\22: \22swap__layout0\22
# CHECK-SAME: \22view\22: \22bmn\22}, {\22value\22: \22v1\22, \22view\22: \22bnm\22}], \22R\22: \22A\22, \22C\22: \22C\22
@function
def swap(X: tensor[f32, "A", "C"]):
    return op.transpose(X)


# CHECK-LABEL: func.func @heads__layout0(
# CHECK-SAME:    %arg2: i64 {tessera.name = "M"}
# CHECK-SAME:    %arg3: i64 {tessera.name = "N"}
# CHECK-SAME:    %arg4: i64 {tessera.name = "I"}
# CHECK-SAME:    %arg5: i64 {tessera.name = "Q"}
# CHECK-LABEL: func.func @swap__layout0(
