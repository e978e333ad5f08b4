# One @function calls another: the frontend writes a func.call of the callee's func.func, with tensor.cast
# where the caller knows extents statically that the callee names; the canonical stage's first pass
# (tessera-inline-functions) replaces the call by the callee's body at the caller's types, so fusion sees one
# body; the callee keeps its own function and launch plan.
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=TTIR < %t/00-ttir.mlir
# RUN: FileCheck %s --check-prefix=CANON < %t/01-canonical.mlir
# RUN: FileCheck %s --check-prefix=FUSE < %t/05-fusion.mlir
# RUN: tessera-objdump %t.tessera | FileCheck %s --check-prefix=PLANS

from tessera import f32, function, op, tensor


@function
def act(X: tensor[f32, "M", "N"]):
    return op.gelu(X) * 0.5


@function
def block(X: tensor[f32, 4, 8], b: tensor[f32, 8]):
    return act(op.bias_add(X, b)) + 1.0

# TTIR-LABEL: func.func @act(
# TTIR-SAME:    tensor<?x?xf32>
# TTIR-LABEL: func.func @block(
# TTIR:         %[[IN:.+]] = tensor.cast %{{.+}} : tensor<4x8xf32> to tensor<?x?xf32>
# TTIR-NEXT:    %[[R:.+]] = call @act(%[[IN]]) : (tensor<?x?xf32>) -> tensor<?x?xf32>
# TTIR-NEXT:    tensor.cast %[[R]] : tensor<?x?xf32> to tensor<4x8xf32>

# CANON-LABEL: func.func @act(
# CANON:         "ttensor.unary"(%arg0) {fn = "gelu"} : (tensor<?x?xf32>) -> tensor<?x?xf32>
# CANON-LABEL: func.func @block(
# CANON-NOT:     call @
# CANON-NOT:     tensor.cast
# CANON:         "ttensor.bias_add"
# CANON-NEXT:    "ttensor.unary"({{.+}}) {fn = "gelu"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
# CANON:         "ttensor.binary"({{.+}}) {fn = "mul"} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
# CANON:         "ttensor.binary"({{.+}}) {fn = "add"} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
# CANON-NOT:     call @

# The callee's ops and the caller's fuse into one elementwise group.
# FUSE-LABEL: func.func @block(
# FUSE:         "ttensor.bias_add"
# FUSE-SAME:    tessera.group = [[G:[0-9]+]]
# FUSE:         "ttensor.unary"
# FUSE-SAME:    tessera.group = [[G]]

# Each function has its own kernels: the callee's for its own plan, the caller's one fused kernel.
# PLANS:     - name: act__elementwise0
# PLANS:     - name: block__elementwise0
# PLANS-NOT: - name: block__elementwise1
