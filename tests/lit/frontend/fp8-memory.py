# fp8 is a memory type of SIMT kernels (tessera/frontend/kernel.py, FP8): a tensor of e4m3 or e5m2 is bytes
# (memref of i8, the signature's tessera.dtype names the format); a load bitcasts the byte to the format and
# widens it to f32, a store narrows an f32 (or an f64, from itself) with truncf and stores the byte, and
# fp8_e4m3(x) is x rounded to the format, held in an f32. tessera-fp8-convert then spells the conversions out
# per target (tests/lit/passes/fp8-convert.mlir).
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s

from tessera import kernel, launch

# CHECK-LABEL: func.func @scale(
# CHECK-SAME:    %[[X:[^:]+]]: memref<?xi8> {tessera.dims = ["N"], tessera.dtype = "fp8_e4m3", tessera.name = "X"}
# CHECK-SAME:    %[[Y:[^:]+]]: memref<?xi8> {tessera.dims = ["N"], tessera.dtype = "fp8_e5m2", tessera.name = "Y"}
# CHECK-SAME:    %[[Z:[^:]+]]: memref<?xf32>
# CHECK:         %[[B:.+]] = memref.load %[[X]][%{{.+}}] : memref<?xi8>
# CHECK-NEXT:    %[[F8:.+]] = arith.bitcast %[[B]] : i8 to f8E4M3FN
# CHECK-NEXT:    %[[V:.+]] = arith.extf %[[F8]] : f8E4M3FN to f32
# CHECK:         %[[S:.+]] = arith.mulf %[[V]], %{{.+}} : f32
# CHECK-NEXT:    %[[N8:.+]] = arith.truncf %[[S]] : f32 to f8E5M2
# CHECK-NEXT:    %[[NB:.+]] = arith.bitcast %[[N8]] : f8E5M2 to i8
# CHECK-NEXT:    memref.store %[[NB]], %[[Y]][%{{.+}}] : memref<?xi8>
# CHECK:         %[[R8:.+]] = arith.truncf %{{.+}} : f32 to f8E4M3FN
# CHECK-NEXT:    %[[RB:.+]] = arith.bitcast %[[R8]] : f8E4M3FN to i8
# CHECK-NEXT:    %[[RF:.+]] = arith.bitcast %[[RB]] : i8 to f8E4M3FN
# CHECK-NEXT:    %[[R:.+]] = arith.extf %[[RF]] : f8E4M3FN to f32
# CHECK-NEXT:    memref.store %[[R]], %[[Z]][%{{.+}}] : memref<?xf32>


@kernel
def scale(X: tensor[fp8_e4m3, "N"], Y: tensor[fp8_e5m2, "N"], Z: tensor[f32, "N"]):
    i = launch.thread_id(0)
    if i < X.shape[0]:
        Y[i] = X[i] * 3.0
        Z[i] = fp8_e4m3(Z[i] * 0.5)
