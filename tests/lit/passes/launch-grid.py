# The generated kernels' row blocks are numbered across two grid dimensions of at most 65535 blocks each
# (kernelgen.GRID_LIMIT: CUDA's grid y and z, the least of every target's limits; split_grid and
# folded_block), so a tall tensor launches on every GPU: an elementwise kernel's row blocks along y and z
# (its column blocks along x), numbered z * 65535 + y; a row kernel's along x, y and z, numbered
# (z * 65535 + y) * 65535 + x.
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
# KERN-SAME: \22block\22: [128, 4, 1], \22grid\22: [\22ceil(C/128)\22, \22min(ceil(R/16), 65535)\22, \22ceil((ceil(R/16))/65535)\22]
# KERN: \22kernel\22: \22rows__row0\22
# KERN-SAME: \22block\22: [32, 4, 1], \22grid\22: [\22min(ceil(R/4), 65535)\22, \22min(ceil((ceil(R/4))/65535), 65535)\22, \22ceil((ceil((ceil(R/4))/65535))/65535)\22]

# The elementwise kernel: its column from thread_id(0), its row block block_id(2) * 65535 + block_id(1).
# KERN-LABEL: func.func @scale__elementwise0(
# KERN:         "ttile.thread_id"() {dim = 0 : i64}
# KERN-NEXT:    %[[HI:.+]] = "ttile.block_id"() {dim = 2 : i64}
# KERN-NEXT:    %[[L:.+]] = arith.constant 65535 : index
# KERN-NEXT:    %[[M:.+]] = arith.muli %[[HI]], %[[L]] : index
# KERN-NEXT:    %[[LO:.+]] = "ttile.block_id"() {dim = 1 : i64}
# KERN-NEXT:    arith.addi %[[M]], %[[LO]] : index
# KERN-NOT:     scf.for
# KERN:         memref.store
# The row kernel: row block (block_id(2) * 65535 + block_id(1)) * 65535 + block_id(0), a warp a row.
# KERN-LABEL: func.func @rows__row0(
# KERN:         %[[Z:.+]] = "ttile.block_id"() {dim = 2 : i64}
# KERN-NEXT:    %[[L:.+]] = arith.constant 65535 : index
# KERN-NEXT:    %[[ZL:.+]] = arith.muli %[[Z]], %[[L]] : index
# KERN-NEXT:    %[[Y:.+]] = "ttile.block_id"() {dim = 1 : i64}
# KERN-NEXT:    %[[ZY:.+]] = arith.addi %[[ZL]], %[[Y]] : index
# KERN-NEXT:    %[[L2:.+]] = arith.constant 65535 : index
# KERN-NEXT:    %[[ZYL:.+]] = arith.muli %[[ZY]], %[[L2]] : index
# KERN-NEXT:    %[[X:.+]] = "ttile.block_id"() {dim = 0 : i64}
# KERN-NEXT:    arith.addi %[[ZYL]], %[[X]] : index
# KERN:         "ttile.shuffle_xor"

# In PTX the row blocks come from %ctaid.z and %ctaid.y (elementwise), and %ctaid.x too (rows).
# PTX-LABEL: .entry scale__elementwise0(
# PTX-DAG:     %ctaid.z
# PTX-DAG:     %ctaid.y
# PTX-LABEL: .entry rows__row0(
# PTX-DAG:     %ctaid.z
# PTX-DAG:     %ctaid.y
# PTX-DAG:     %ctaid.x
# PTX:         shfl.sync.bfly
