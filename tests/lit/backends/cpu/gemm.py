# The fast CPU GEMM (backends/cpu/gemm.py): packing loops, the register-blocked micro-kernel with vector FMAs,
# the fused bias+gelu epilogue, at the IR stages of `tessera-gemm`. A hand-picked schedule keeps the IR
# independent of this machine's caches: MB=48 NC=64 MC=24 KC=32, micro-tile 6x16 as 2 x vector<8xf32>.
# RUN: tessera-gemm --name mlp_up --epilogue bias,gelu --schedule 48,64,24,32,6,16,8 --compile-to=canonical \
# RUN:   | FileCheck %s --check-prefix=IR
# RUN: tessera-gemm --name mlp_up --epilogue bias,gelu --schedule 48,64,24,32,6,16,8 --compile-to=llir \
# RUN:   | FileCheck %s --check-prefix=LLIR
# RUN: tessera-gemm --name mlp_up --epilogue bias,gelu --schedule 48,64,24,32,6,16,8 --compile-to=llir \
# RUN:   | FileCheck %s --check-prefix=NOCALL
# RUN: not tessera-gemm --epilogue softmax 2>&1 | FileCheck %s --check-prefix=ERR

# The per-block signature: tensors with their extents, then the nine launch indices.
# IR-LABEL: func.func @mlp_up(
# IR-SAME:    %arg0: memref<?x?xf32> {tessera.dims = ["M", "K"], tessera.name = "A"}
# IR-SAME:    %arg1: memref<?x?xf32> {tessera.dims = ["K", "N"], tessera.name = "B"}
# IR-SAME:    %arg2: memref<?x?xf32> {tessera.dims = ["M", "N"], tessera.name = "C"}
# IR-SAME:    %arg3: memref<?xf32> {tessera.dims = ["N"], tessera.name = "bias"}
# IR-SAME:    %arg12: index{{.*}}) attributes
# IR-SAME:    tessera.kernel, tessera.tile_kernel

# Heap scratch, 64-byte aligned: the A block (MC*KC floats) and the B panel (NC*KC).
# IR:         %[[PA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<768xf32>
# IR:         %[[PB:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2048xf32>

# Per K chunk, the B panel is packed row by row into 16-column strips (vector copies, masked at the edge)...
# IR:         scf.for
# IR:           scf.for
# IR:             scf.for
# IR:               vector.load %arg1{{.*}} : memref<?x?xf32>, vector<8xf32>
# IR:               vector.store {{.*}}, %[[PB]]{{.*}} {alignment = 32 : i64} : memref<2048xf32>, vector<8xf32>
# IR:             vector.maskedload %arg1
# ...then each A block into 6-row strips (a transpose, one element at a time).
# IR:           scf.for
# IR:             scf.for
# IR:               memref.load %arg0
# IR:               memref.store {{.*}}, %[[PA]]
# For each micro-tile: prefetch C, then 12 accumulators through the k loop, 4 steps per trip.
# IR:             scf.for
# IR:               scf.for
# IR:                 memref.prefetch %arg2{{.*}} write, locality<3>, data
# IR:                 %{{.*}}:12 = scf.for {{.*}} step %c4 iter_args(
# IR:                   vector.load %[[PB]]{{.*}} : memref<2048xf32>, vector<8xf32>
# IR:                   vector.load %[[PB]]{{.*}} : memref<2048xf32>, vector<8xf32>
# IR:                   %[[A0:.*]] = memref.load %[[PA]]
# IR-NEXT:              %[[A0V:.*]] = vector.broadcast %[[A0]] : f32 to vector<8xf32>
# IR-NEXT:              vector.fma %[[A0V]]
# IR-NEXT:              vector.fma %[[A0V]]
# IR-COUNT-46:          vector.fma
# IR:                   scf.yield
# The remainder of the chunk, one k at a time.
# IR:                 scf.for
# IR-COUNT-12:          vector.fma
# IR:                   scf.yield
# The epilogue of the last chunk on a whole tile: plain loads of bias, erf as a rational function
# (no libm call), 12 plain vector stores.
# IR:                 scf.if
# IR:                   scf.if
# IR:                     vector.load %arg2
# IR:                   vector.load %arg3{{.*}} : memref<?xf32>, vector<8xf32>
# IR:                   arith.divf
# IR-NOT:               math.erf
# IR-COUNT-12:          vector.store {{.*}}, %arg2
# At the matrix edge, masked accesses.
# IR:                 } else {
# IR:                   vector.create_mask
# IR:                   vector.maskedload %arg3
# IR:                   vector.maskedstore %arg2

# After LLVM's optimizations the entry holds the whole kernel, with vector FMAs (vector.fma becomes
# llvm.fmuladd, a fused multiply-add where the target has one)...
# LLIR-LABEL: define void @tsr_cpu_mlp_up(
# LLIR:         call <8 x float> @llvm.fmuladd.v8f32
# ...and no call to a math library: the gelu is inline.
# NOCALL-NOT:   call {{.*}}@{{(erff|expf|tanhf|_ZGV)}}

# ERR: tessera-gemm: error: unknown epilogue step ('softmax',)
