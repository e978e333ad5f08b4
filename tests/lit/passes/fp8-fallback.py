# fp8 after quantize (portability guide §5). What only generated elementwise kernels read, the function's
# results, and what a GEMM that loads bytes and widens them reads (the CPU's packing, the SIMT GEMM of SPIR-V
# and AMDGPU; sm_90a's wgmma reads them as they are: tests/lit/backends/ptx/gemm-fp8-bytes-sm90.py) stay fp8 —
# one byte in memory: the kernels load and store it through the fp8 memory type (tessera/frontend/kernel.py,
# passes/fp8_convert.py) and round to it (tessera.round_to); no fallback is recorded. What another kernel reads
# (ptx sm_80's mma.sync GEMM here) is an f16 container instead: the ops that make fp8 values round to the
# format, an fp8 parameter is taken as f32 and rounded on entry, keeping its declared dtype (tessera.declared,
# which the launch plan records), and the function records the fallbacks.
# RUN: tessera-cc %s --compile-to=quantize | FileCheck %s --check-prefix=QUANT
# RUN: tessera-cc %s --compile-to=quantize --target=spirv | FileCheck %s --check-prefix=QUANT
# RUN: tessera-cc %s --compile-to=quantize --target=ptx --arch=sm_80 | FileCheck %s --check-prefix=CONT
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s --check-prefix=KERN
# RUN: tessera-cc %s --compile-to=kernels --target=ptx --arch=sm_80 | FileCheck %s --check-prefix=KCONT

from tessera import f32, fp8_e4m3, fp8_e5m2, function, op, tensor

# QUANT-LABEL: func.func @quantize(
# QUANT-SAME:    %arg1: tensor<?x?xf8E5M2> {tessera.dims = ["N", "D"], tessera.name = "W"}
# QUANT-SAME:    -> (tensor<?x?xf32>, tensor<?x?xf8E4M3FN>)
# QUANT-NOT:     tessera.fallbacks
# QUANT:         "ttensor.cast"(%arg0) {{.*}}tessera.round_to = "fp8_e4m3"{{.*}} -> tensor<?x?xf8E4M3FN>
# The GEMM's operands: the quantize's bytes and the parameter's, as they are.
# QUANT-LABEL: func.func @gemm(
# QUANT-SAME:    %arg1: tensor<?x?xf8E5M2> {tessera.dims = ["K", "D"], tessera.name = "W"}
# QUANT-NOT:     tessera.fallbacks
# QUANT:         "ttensor.cast"(%arg0) {{.*}}tessera.round_to = "fp8_e4m3"{{.*}} -> tensor<?x?xf8E4M3FN>
# QUANT:         "ttensor.matmul"{{.*}}tessera.fp8_operands = ["fp8_e4m3", "fp8_e5m2"]{{.*}}(tensor<?x?xf8E4M3FN>, tensor<?x?xf8E5M2>) -> tensor<?x?xf32>
# QUANT-NOT:     f16

# mma.sync reads the f16 containers.
# CONT-LABEL: func.func @gemm(
# CONT-SAME:    %arg1: tensor<?x?xf32> {tessera.declared = "fp8_e5m2", tessera.dims = ["K", "D"], tessera.name = "W"}
# CONT-SAME:    tessera.fallbacks = ["fp8_e5m2 stored as f16 (exact; rounded to fp8_e5m2 and saturated at \C2\B157344)", "fp8_e4m3 stored as f16 (exact; rounded to fp8_e4m3 and saturated at \C2\B1448)"]
# CONT:         "ttensor.cast"(%arg1) {{.*}}tessera.round_to = "fp8_e5m2"{{.*}} -> tensor<?x?xf16>
# CONT:         "ttensor.cast"(%arg0) {{.*}}tessera.round_to = "fp8_e4m3"{{.*}} -> tensor<?x?xf16>
# CONT:         "ttensor.matmul"{{.*}}tessera.fp8_operands = ["fp8_e4m3", "fp8_e5m2"]
# CONT-NOT:     f8E4M3FN
# CONT-NOT:     f8E5M2

# The one-byte kernel: W and E are bytes; the rounding is the kernel language's conversion, once per element.
# KERN-LABEL:  func.func @quantize__elementwise{{[0-9]+}}(
# KERN-SAME:     memref<?x?xi8> {tessera.dims = ["R", "C"], tessera.dtype = "fp8_e5m2", tessera.name = "I1"}
# KERN-SAME:     memref<?x?xi8> {tessera.dims = ["R", "C"], tessera.dtype = "fp8_e4m3", tessera.name = "O0"}
# KERN:          arith.extf {{.*}} : f8E5M2 to f32
# KERN:          arith.truncf {{.*}} : f32 to f8E4M3FN
# KERN:          memref.store {{.*}} : memref<?x?xi8>
# KERN-NOT:      math.floor
# The quantizing kernel stores E's bytes; the CPU GEMM takes both operands as bytes and widens them while
# packing, a vector at a time (passes/fp8_convert.py spells the extension out in the backend).
# KERN-LABEL:  func.func @gemm__elementwise{{[0-9]+}}(
# KERN-SAME:     memref<?x?xi8> {tessera.dims = ["R", "C"], tessera.dtype = "fp8_e4m3", tessera.name = "O0"}
# KERN:          arith.truncf {{.*}} : f32 to f8E4M3FN
# KERN-NOT:      f16
# KERN-LABEL:  func.func @gemm__gemm{{[0-9]+}}(
# KERN-SAME:     memref<?x?xi8> {tessera.dims = ["M", "K"], tessera.dtype = "fp8_e4m3", tessera.name = "A"}
# KERN-SAME:     memref<?x?xi8> {tessera.dims = ["K", "N"], tessera.dtype = "fp8_e5m2", tessera.name = "B"}
# KERN:          vector.load %arg1{{.*}} : memref<?x?xi8>, vector<{{[0-9]+}}xi8>
# KERN-NEXT:     arith.bitcast {{.*}} : vector<{{[0-9]+}}xi8> to vector<{{[0-9]+}}xf8E5M2>
# KERN-NEXT:     arith.extf {{.*}} : vector<{{[0-9]+}}xf8E5M2> to vector<{{[0-9]+}}xf32>

# The container kernel on sm_80: rounded to e4m3, stored in f16.
# KCONT-LABEL:  func.func @gemm__elementwise{{[0-9]+}}(
# KCONT:          arith.truncf {{.*}} : f32 to f8E4M3FN
# KCONT:          arith.truncf {{.*}} : f32 to f16


@function
def quantize(X: tensor[f32, "N", "D"], W: tensor[fp8_e5m2, "N", "D"]):
    E = op.cast(X, fp8_e4m3)   # returned too: one byte at the call
    return op.cast(E, f32) * op.cast(W, f32), E


@function
def gemm(X: tensor[f32, "N", "K"], W: tensor[fp8_e5m2, "K", "D"]):
    E = op.cast(X, fp8_e4m3)   # read by the GEMM: bytes on the CPU, the container on sm_80
    return op.matmul(E, W)
