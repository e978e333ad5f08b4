# A bf16 MLP's backward: the cotangent dZ = dH·gelu'(Z) is reduced for the bias's gradient and rounded to bf16
# for the next GEMM. The rounding joins dZ's elementwise kernel (a cast computes in the same f32 as its
# operand), moved up before the reduction that reads dZ, so one kernel writes dZ in f32 and bf16; the
# forward's gelu and its rounding to bf16 are one kernel too. The bias gradient's sum over the rows splits
# into partials over chunks of rows and a second pass (kernelgen.strided_reduce_split).
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN

from tessera import bf16, f32, function, op, tensor, value_and_grad


@function
def loss(X: tensor[bf16, "T", 64], W1: tensor[bf16, 64, 128], b1: tensor[f32, 128], W2: tensor[bf16, 128, 64]):
    H = op.gelu(op.bias_add(op.matmul(X, W1, out_dtype=f32), b1))
    return op.mean(op.matmul(op.cast(H, bf16), W2, out_dtype=f32))


lg = value_and_grad(loss, argnums=(1, 2))


@function
def step(X: tensor[bf16, "T", 64], W1: tensor[bf16, 64, 128], b1: tensor[f32, 128], W2: tensor[bf16, 128, 64]):
    value, g1, gb = lg(X, W1, b1, W2)
    return value, g1, gb

# The forward: gelu and its bf16 rounding in one group.
# FUSE-LABEL: func.func @step(
# FUSE:         "ttensor.unary"(%{{.+}}) {fn = "gelu", tessera.group = [[H:[0-9]+]] : i32, tessera.group_kind = "elementwise"}
# FUSE:         "ttensor.cast"(%{{.+}}) {accum = f32, tessera.group = [[H]] : i32, tessera.group_kind = "elementwise"} : (tensor<?x128xf32>) -> tensor<?x128xbf16>
# The backward: dZ = dH·gelu'(Z), its bf16 rounding in dZ's group (moved before the reduction, with its
# decision ops), then the bias's sum of dZ over the rows.
# FUSE:         "ttensor.cast"(%[[DZ:[0-9]+]]) {accum = f32, tessera.group = [[D:[0-9]+]] : i32, tessera.group_kind = "elementwise"} : (tensor<?x128xf32>) -> tensor<?x128xbf16>
# FUSE-NEXT:    "tsched.schedule"
# FUSE-NEXT:    "tmem.slot"
# FUSE-NEXT:    "ttensor.reduce"(%[[DZ]]) {axes = [0], keepdims = false, kind = "sum", tessera.group = {{[0-9]+}} : i32, tessera.group_kind = "row"}
# the kernel of dZ's group writes dZ (f32, for the reduction) and its rounding (bf16, for the next GEMM)
# KERN: def step__elementwise1(I0: tensor[f32, \\\22R\\\22, \\\22C\\\22], O0: tensor[bf16, \\\22R\\\22, \\\22C\\\22])
# KERN: def step__elementwise{{[0-9]+}}(I0: tensor[bf16, \\\22R\\\22, \\\22C\\\22], I1: tensor[f32, \\\22R\\\22, \\\22C\\\22], O0: tensor[f32, \\\22R\\\22, \\\22C\\\22], O1: tensor[bf16, \\\22R\\\22, \\\22C\\\22])

# KERN: \22kernel\22: \22step__row[[N:[0-9]+]]_part\22, \22source\22: \22import math\\n\\n\\n@kernel\\ndef step__row[[N]]_part(X: tensor[f32, \\\22S0\\\22]
# KERN-SAME: \22R\22: \22128\22, \22C\22: \22max(min(ceil((T)/64), 524288 // max(128, 1)), 1)\22
# KERN-SAME: \22grid\22: [\22ceil(R/128)\22, \22min(C, 65535)\22, \22ceil((C)/65535)\22]
# KERN: \22kernel\22: \22step__row[[N]]\22

# Partials: thread (o, p) sums rows [p·L, min(p·L + L, T)) of column o into T[p·K + o].
# KERN: func.func @step__row[[N]]_part(
# KERN-SAME:    tessera.name = "K"
# KERN-SAME:    tessera.name = "P"
# KERN:         %[[HI:.+]] = arith.minsi
# KERN:         scf.for %{{.+}} = %{{.+}} to %[[HI]] step
# KERN:           memref.load %arg0
# KERN:           arith.addf
# KERN:         memref.store %{{.+}}, %arg1
# The finish: each column's P partials in order.
# KERN: func.func @step__row[[N]](
# KERN-SAME:    tessera.name = "P"
# KERN:         scf.for
# KERN:           memref.load %arg0
# KERN:           arith.addf
# KERN:         memref.store
