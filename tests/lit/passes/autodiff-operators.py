# The derivative of a small operator program as Graph IR (passes/autodiff_operators.py): an operator's
# cotangent is its dense matrix, a tensor. apply's is the outer product of the result's cotangent and x, expm's
# the Fréchet derivative at the adjoint (tod.expm_derivative), compose's reaches dense(A) through an apply of
# the adjoint of the other operand, and diag's is the diagonal of its matrix cotangent (a mask by the matrix
# of diag(1), summed). Canonicalization has rewritten the adjoint of the composition, as it does any.
# The forward's own operator (expm of the composition) is not computed: nothing reads it.
# RUN: tessera-cc %s --compile-to canonical -o %t.mlir
# RUN: FileCheck %s < %t.mlir

from tessera import f64, function, grad, op, tensor


@function
def loss(A: tensor[f64, 3, 3], d: tensor[f64, 3], x: tensor[f64, 3]):
    return op.sum(op.expm(op.dense(A) @ op.diag(d)) @ x)


g = grad(loss, argnums=(0, 1))

# CHECK-LABEL: func.func @g(
# CHECK-SAME:    %[[A:[a-z0-9]+]]: tensor<3x3xf64>
# CHECK-SAME:    %[[D:[a-z0-9]+]]: tensor<3xf64>
# CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<3xf64>
# CHECK:         %[[DA:.+]] = "tod.dense"(%[[A]])
# CHECK:         %[[DD:.+]] = "tod.diag"(%[[D]])
# grad reads no forward value past dense and diag: the loss's cotangent is a broadcast 1, so the forward
# compose, expm and apply are dead and erased
# CHECK-NOT:     "tod.expm"(
# the apply's cotangent for the operator: ȳ xᵀ
# CHECK:         %[[COL:.+]] = "ttensor.reshape"(%{{.+}}) : (tensor<3xf64>) -> tensor<3x1xf64>
# CHECK:         %[[ROW:.+]] = "ttensor.reshape"(%[[X]]) : (tensor<3xf64>) -> tensor<1x3xf64>
# CHECK:         %[[CE:.+]] = "ttensor.binary"(%[[COL]], %[[ROW]]) {fn = "mul"} : (tensor<3x1xf64>, tensor<1x3xf64>) -> tensor<3x3xf64>
# CHECK:         %[[AT:.+]] = "tod.adjoint"(%[[DA]])
# CHECK:         %[[CT:.+]] = "tod.compose"(%[[DD]], %[[AT]])
# CHECK:         %[[CC:.+]] = "tod.expm_derivative"(%[[CT]], %[[CE]]) : (!tod.operator<3 : i64, 3 : i64, f64, f64>, tensor<3x3xf64>) -> tensor<3x3xf64>
# compose's: C̄ diag(d)ᵀ for dense(A) (as (diag(d) C̄ᵀ)ᵀ), dense(A)ᵀ C̄ for diag(d)
# CHECK:         "tod.apply"(%[[DD]], %{{.+}})
# CHECK:         %[[GA:.+]] = "ttensor.transpose"
# CHECK:         %[[CD:.+]] = "tod.apply"(%[[AT]], %[[CC]])
# CHECK:         %[[I:.+]] = "tod.matrix"(%{{.+}}) : (!tod.operator<3 : i64, 3 : i64, f64, f64>) -> tensor<3x3xf64>
# CHECK:         %[[M:.+]] = "ttensor.binary"(%[[CD]], %[[I]]) {fn = "mul"}
# CHECK:         %[[GD:.+]] = "ttensor.reduce"(%[[M]]) {axes = [1], keepdims = false, kind = "sum"} : (tensor<3x3xf64>) -> tensor<3xf64>
# CHECK:         return %[[GA]], %[[GD]] : tensor<3x3xf64>, tensor<3xf64>
