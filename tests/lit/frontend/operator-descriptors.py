# Operators crossing the ABI (op.descriptor, dialects/tod_abi.py): the frontend builds tod.descriptor on the
# payload tensors and tod.export for an operator result (an adjoint's descriptor carries the "adjoint" flag);
# tessera-tod-lower records each in the function's plan, which tessera-objdump shows as TessOperatorDesc
# records with the ABI spec's §5.3 contracts (decomposition, adjoint flag, frame_bytes and depth).
# RUN: rm -rf %t && tessera-cc %s --dump-ir-after-all %t -o %t.tessera
# RUN: FileCheck %s --check-prefix=IR < %t/00-ttir.mlir
# RUN: tessera-objdump --no-ir %t.tessera | FileCheck %s --check-prefix=DUMP

from tessera import f32, function, op, tensor


# IR-LABEL: func.func @spectral(
# IR:         %[[A:.+]] = "tod.descriptor"(%arg0, %arg1, %arg2) {decomposition = "svd", flags = [], name = "A", operandSegmentSizes = array<i32: 1, 1, 1>, repr = "factor", tag = "none"}
# IR:         "tod.apply"(%[[A]], %arg3)
# DUMP-LABEL: functions:
# DUMP:       - name: spectral{{$}}
# DUMP:         operators:
# DUMP-NEXT:      - {name: A, role: param, repr: factor, tag: none, flags: [], payload: [U, S, V], decomposition: svd}
@function
def spectral(U: tensor[f32, 8, 3], S: tensor[f32, 3], V: tensor[f32, 6, 3], x: tensor[f32, 6]):
    A = op.descriptor("factor", U, S, V, decomposition="svd", name="A")
    return A @ x


# IR-LABEL: func.func @adjoint_result(
# IR:         %[[M:.+]] = "ttensor.binary"
# IR:         %[[D:.+]] = "tod.descriptor"(%[[M]]) {flags = [], name = "B", {{.*}}repr = "dense", tag = "none"}
# IR:         %[[ADJ:.+]] = "tod.descriptor"(%[[M]]) {flags = ["adjoint"], name = "B", {{.*}}repr = "dense", tag = "none"}
# IR:         "tod.export"(%[[ADJ]]) {name = "B"}
# IR:         return %[[M]]
# DUMP:       - name: adjoint_result{{$}}
# DUMP:         operators:
# DUMP-NEXT:      - {name: B, role: result, repr: dense, tag: none, flags: [adjoint], payload: [result0]}
@function
def adjoint_result(M: tensor[f32, 8, 6]):
    B = op.descriptor("dense", 2.0 * M, name="B")
    return op.adjoint(B)


# DUMP:       - name: recursion{{$}}
# DUMP:         operators:
# DUMP-NEXT:      - {name: R, role: param, repr: dense, tag: none, flags: [self_adjoint, recursion], payload: [W], frame_bytes: 64, depth: 2}
# DUMP-NEXT:      - {name: d, role: param, repr: implicit, tag: diag, flags: [], payload: [g]}
@function
def recursion(W: tensor[f32, 16, 16], g: tensor[f32, 16], x: tensor[f32, 16, 4]):
    R = op.descriptor("dense", W, flags=("recursion", "self_adjoint"), frame_bytes=64, depth=2, name="R")
    G = op.descriptor("implicit", g, tag="diag", name="d")
    return R @ (G @ (R @ x))
