# The generated kernels' launch grids are capped at 65535 blocks a dimension (kernelgen.GRID_LIMIT: CUDA's
# grid y and z, the least of every target's limits), and each kernel loops over its blocks of work from its
# block index by the grid's extent (grid-stride), so a tall tensor launches on every GPU: an elementwise
# kernel's row blocks (grid y) and column blocks (grid x), a row kernel's rows (grid x).
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s --check-prefix=PTX

from tessera import f32, function, op, tensor


@function
def scale(X: tensor[f32, "N", "D"], b: tensor[f32, "D"]):
    return op.relu(X * 2.0 + b)


@function
def rows(X: tensor[f32, "N", "D"]):
    return op.softmax(X, axis=-1)

# The plan: 16 rows a block of 512 threads (4 rows of threads, 4 rows each), 4 rows a block of 4 warps.
# KERN: \22kernel\22: \22scale__elementwise0\22
# KERN-SAME: \22block\22: [128, 4, 1], \22grid\22: [\22min(ceil(C/128), 65535)\22, \22min(ceil(R/16), 65535)\22, \221\22]
# KERN: \22kernel\22: \22rows__row0\22
# KERN-SAME: \22block\22: [32, 4, 1], \22grid\22: [\22min(ceil(R/4), 65535)\22, \221\22, \221\22]

# The elementwise kernel: row blocks from block_id(1) by grid_dim(1), in them column blocks by grid_dim(0).
# KERN-LABEL: func.func @scale__elementwise0(
# KERN:         %[[RB:.+]] = "ttile.block_id"() {dim = 1 : i64}
# KERN:         %[[GY:.+]] = "ttile.grid_dim"() {dim = 1 : i64}
# KERN:         scf.for %{{.+}} = %[[RB]] to %{{.+}} step %[[GY]] {
# KERN:           %[[CB:.+]] = "ttile.block_id"() {dim = 0 : i64}
# KERN:           %[[GX:.+]] = "ttile.grid_dim"() {dim = 0 : i64}
# KERN:           scf.for %{{.+}} = %[[CB]] to %{{.+}} step %[[GX]] {
# KERN:             "ttile.local_id"() {dim = 0 : i64}
# KERN:             "ttile.local_id"() {dim = 1 : i64}
# KERN:             memref.store
# The row kernel: its rows' blocks along x, the warp's shuffles inside the loop.
# KERN-LABEL: func.func @rows__row0(
# KERN:         %[[B:.+]] = "ttile.block_id"() {dim = 0 : i64}
# KERN:         %[[G:.+]] = "ttile.grid_dim"() {dim = 0 : i64}
# KERN:         scf.for %{{.+}} = %[[B]] to %{{.+}} step %[[G]] {
# KERN:           "ttile.local_id"() {dim = 1 : i64}
# KERN:           "ttile.shuffle_xor"
# KERN:           memref.store

# In PTX the loops step by the grid's extents.
# PTX-LABEL: .entry scale__elementwise0(
# PTX:         %ctaid.y
# PTX:         %nctaid.y
# PTX:         %ctaid.x
# PTX:         %nctaid.x
# PTX-LABEL: .entry rows__row0(
# PTX:         %ctaid.x
# PTX:         %nctaid.x
# PTX:         shfl.sync.bfly
