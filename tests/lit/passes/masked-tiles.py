# Partial tiles (a tile.range step that does not divide the extent): masked loads pad the last block, a
# block mask puts -inf on padded keys, masked stores write only the rows inside the output — Graph IR ops in
# the frontend's output, their own fusion groups, then SIMT kernels whose warps use masked vector accesses.
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s --check-prefix=TTIR
# RUN: tessera-cc %s --compile-to=fusion | FileCheck %s --check-prefix=FUSE
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: tessera-cc %s --compile-to=warps --cpu=x86-64-v3 | FileCheck %s --check-prefix=WARPS

from tessera import kernel, tile

# TTIR-LABEL: func.func @attention(
# TTIR-SAME:    tessera.same_extents = {{\[\["K_0", "Q_0"\], \["V_0", "Q_0"\], \["O_0", "Q_0"\]\]}}
# TTIR:         %[[Q:.+]] = "ttensor.load_blocks"(%arg0) {other = 0.000000e+00 : f32, step = 32 : i64} : (tensor<?x?xf32>) -> tensor<?x32x?xf32>
# TTIR:         %[[K:.+]] = "ttensor.load_blocks"(%arg1) {other = 0.000000e+00 : f32, step = 32 : i64}
# TTIR:         %[[S:.+]] = "ttensor.matmul"(%[[Q]], %{{.+}}) {accum = f32} : (tensor<?x32x?xf32>, tensor<?x?x32xf32>) -> tensor<?x32x32xf32>
# TTIR:         %[[M:.+]] = "ttensor.mask_blocks"(%[[S]], %arg0) {axis = 2 : i64, other = 0xFF800000 : f32, step = 32 : i64}
# TTIR:         "ttensor.softmax"(%[[M]]) {axis = 2 : i64}
# TTIR:         %[[O:.+]] = "ttensor.store_blocks"(%{{.+}}, %arg3) : (tensor<?x32x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
# TTIR:         return %[[O]]

# FUSE-LABEL: func.func @attention(
# FUSE:         "ttensor.load_blocks"{{.*}}tessera.group_kind = "blocks"
# FUSE:         "ttensor.matmul"{{.*}}tessera.group_kind = "gemm"
# FUSE:         "ttensor.mask_blocks"{{.*}}tessera.group_kind = "elementwise"
# FUSE:         "ttensor.softmax"{{.*}}tessera.group_kind = "row"
# FUSE:         "ttensor.store_blocks"{{.*}}tessera.group_kind = "blocks"

# The masked load: rows inside Q are copied, the rest of the last block is `other`.
# KERN-LABEL: func.func @attention__blocks0(
# KERN:         %[[N:.+]] = memref.dim %arg0
# KERN:         %[[IN:.+]] = arith.cmpi slt, %{{.+}}, %[[N]] : index
# KERN:         scf.if %[[IN]] {
# KERN:           memref.load %arg0
# KERN:         } else {
# KERN:           %[[Z:.+]] = arith.constant 0.000000e+00 : f32
# KERN:           memref.store %[[Z]], %arg1
# Padded keys: column (row // 32)·32 + col of the scores past Q's extent becomes -inf.
# KERN-LABEL: func.func @attention__elementwise3(
# KERN-SAME:    tessera.name = "m0_rows"
# KERN:         arith.floordivsi %{{[0-9]+}}, %{{[0-9]+}} : index
# KERN:         %[[KEEP:.+]] = arith.cmpi slt
# KERN:         %[[NINF:.+]] = arith.constant 0xFF800000 : f32
# KERN:         arith.select %[[KEEP]], %{{.+}}, %[[NINF]] : f32
# The masked store: a kernel over O's own rows.
# KERN-LABEL: func.func @attention__blocks7(
# KERN-SAME:    tessera.dims = ["XR", "D"]
# KERN-SAME:    tessera.dims = ["YR", "D"]

# On the CPU a warp is a vector: the tails of rows are masked vector loads and stores.
# WARPS-LABEL: func.func @attention__blocks0(
# WARPS:         vector.maskedload %arg0
# WARPS:         vector.maskedstore %arg1
# WARPS-LABEL: func.func @attention__blocks7(
# WARPS:         vector.maskedload %arg0
# WARPS:         vector.maskedstore %arg1
@kernel
def attention(Q, K, V, O):
    for block in tile.range(Q, axis=0, step=32):
        q_tile = tile.load(Q, block, mask=block.mask, other=0.0)
        k_tile = tile.load(K, block, mask=block.mask, other=0.0)
        scores = tile.where(block.mask[None, :], tile.dot(q_tile, k_tile.T), float("-inf"))
        probs = tile.softmax(scores, axis=-1)
        v_tile = tile.load(V, block, mask=block.mask, other=0.0)
        tile.store(O, block, tile.dot(probs, v_tile), mask=block.mask)
