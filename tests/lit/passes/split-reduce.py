# A reduction whose rows are few and long (a loss's mean over a whole tensor: one row) splits into two
# kernels: `_part` reduces chunk q % P of row q // P with one warp into partials[q], the finish reduces each
# row's P partials with one warp and divides a mean by the row's element count. P, the chunk count, is an
# extent expression of the plan (kernelgen.split_chunks), chosen when the extents are known.
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s --check-prefix=PTX

from tessera import f32, function, op, tensor

# The plan: the square, then the two steps over a temporary [1, P] of f32 partials.
# KERN: \22v2_f32_partials\22: {\22dtype\22: \22f32\22, \22dims\22: [\221\22, \22min(ceil((T*D)/4096), max(8192 // (1), 1))\22]}
# KERN: \22kernel\22: \22loss__row1_part\22
# KERN-SAME: \22tensors\22: [{\22value\22: \22v1\22, \22view\22: \22matrix\22}, {\22value\22: \22v2_f32_partials\22, \22view\22: \22scalar\22}], \22R\22: \221\22, \22C\22: \22T*D\22
# KERN-SAME: \22grid\22: [\22min(ceil((R*min(ceil((C)/4096), max(8192 // (R), 1)))/4), 65535)\22, \22min(ceil((ceil((R*min(ceil((C)/4096), max(8192 // (R), 1)))/4))/65535), 65535)\22, \22ceil((ceil((ceil((R*min(ceil((C)/4096), max(8192 // (R), 1)))/4))/65535))/65535)\22]
# KERN: \22kernel\22: \22loss__row1\22
# KERN-SAME: \22tensors\22: [{\22value\22: \22v2_f32_partials\22, \22view\22: \22matrix\22}, {\22value\22: \22v2\22, \22view\22: \22rows\22}]
# KERN-SAME: \22C\22: \22min(ceil((T*D)/4096), max(8192 // (1), 1))\22
# KERN-SAME: \22scalars\22: [\22T*D\22]

# Stage one: a warp per (row, chunk), its columns [lo, min(lo + L, n)), a butterfly, lane 0 stores.
# KERN-LABEL: func.func @loss__row1_part(
# KERN-SAME:    tessera.name = "X"
# KERN-SAME:    tessera.name = "T"
# KERN-SAME:    %arg2: i64 {tessera.name = "P"}
# KERN:         arith.floordivsi
# KERN:         %[[HI:.+]] = arith.minsi
# KERN:         scf.for %{{.+}} = %{{.+}} to %[[HI]] step
# KERN:           memref.load %arg0
# KERN:           arith.addf
# KERN-COUNT-5:  "ttile.shuffle_xor"
# KERN:         memref.store %{{.+}}, %arg1
# Stage two: each row of partials, divided by the element count (not by P).
# KERN-LABEL: func.func @loss__row1(
# KERN-SAME:    %arg2: i64 {tessera.name = "count"}
# KERN:         scf.for
# KERN:           memref.load %arg0
# KERN-COUNT-5:  "ttile.shuffle_xor"
# KERN:         %[[N:.+]] = arith.sitofp %arg2 : i64 to f32
# KERN:         arith.divf %{{.+}}, %[[N]] : f32

# PTX: .entry loss__row1_part(
# PTX: shfl.sync.bfly.b32
# PTX: .entry loss__row1(
# PTX: div.rn.f32


@function
def loss(E: tensor[f32, "T", "D"]):
    return op.mean(E * E)
