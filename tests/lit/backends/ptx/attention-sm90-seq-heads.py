# Attention over heads split from [B, S, H, D] projections by op.transpose, and merged back the same way,
# reads and writes that layout in place on sm_90a (passes/fold_transposes.attention): the flash_attention takes
# the transposes' inputs and `tessera.seq_heads`, its kernel 4-D TMA maps whose boxes take one head; no
# transpose kernel is left around it. sm_80's kernel reads the rows at their strides (grid y B·H).
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: tessera-cc %s --target ptx --arch sm_80 --compile-to=kernels | FileCheck %s --check-prefix=SM80

from tessera import function, op, tensor, bf16


@function
def heads(Q: tensor[bf16, "B", "S", 16, 128], K: tensor[bf16, "B", "T", 16, 128],
          V: tensor[bf16, "B", "T", 16, 128]) -> tensor[bf16, "B", "S", 16, 128]:
    A = op.flash_attention(op.transpose(Q, (0, 2, 1, 3)), op.transpose(K, (0, 2, 1, 3)),
                           op.transpose(V, (0, 2, 1, 3)), causal=True, scale=0.08838834764831845)
    return op.transpose(A, (0, 2, 1, 3))

# SCHED-LABEL: func.func @heads(
# SCHED-NOT:   ttensor.transpose
# SCHED:       "ttensor.flash_attention"(%arg0, %arg1, %arg2) {{.*}}tessera.seq_heads
# SCHED-SAME:    (tensor<?x?x16x128xbf16>, tensor<?x?x16x128xbf16>, tensor<?x?x16x128xbf16>) -> tensor<?x?x16x128xbf16>
# SCHED-NOT:   ttensor.transpose
# SCHED:       return

# The [B, S, H, D] tensors, LSE-free; extents B, SQ, H, SK; boxes of 64 columns of one head's rows.
# KERNELS-LABEL: func.func private @heads__attention0(
# KERNELS-SAME:    memref<?x?x?x?xbf16> {tessera.dims = ["B", "SQ", "H", 128], tessera.name = "Q"}
# KERNELS-SAME:    memref<?x?x?x?xbf16> {tessera.dims = ["B", "SK", "H", 128], tessera.name = "K"}
# KERNELS-SAME:    memref<?x?x?x?xbf16> {tessera.dims = ["B", "SQ", "H", 128], tessera.name = "O"}
# KERNELS-SAME:    ptx.tensor_maps = "Q:0:64x1x128x1:128;K:1:64x1x128x1:128;V:2:64x1x128x1:128;O:3:64x1x64x1:128"
# KERNELS-NOT:   func.func private @heads__{{.*}}transpose

# Loads and stores are 4-D bulk tensor copies (head, row, batch after the column).
# PTX-LABEL: .visible .entry heads__attention0(
# PTX-DAG:   cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
# PTX-DAG:   cp.async.bulk.tensor.4d.global.shared::cta.bulk_group
# PTX-NOT:   cp.async.bulk.tensor.3d
# PTX-NOT:   .entry

# SM80-LABEL: func.func private @heads__attention0(
# SM80-SAME:    memref<?x?x?x?xbf16> {tessera.dims = ["B", "SQ", "H", 128], tessera.name = "Q"}
# SM80-NOT:   func.func private @heads__{{.*}}transpose
