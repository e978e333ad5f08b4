# Streaming stores of C (backends/cpu/gemm.py NT_STORES): the 16-lane tile stores whole tiles of C with
# !nontemporal stores, 64-byte aligned, where the run-time test (C's rows on a cache line, one K chunk, C at
# least NT_MIN_BYTES) holds; the plain stores with C's write prefetch stay for the other case. A gelu'
# epilogue reads C back (no streaming stores), and the 8-lane tile has none.
# RUN: tessera-gemm --name mm --schedule 56,64,28,32,14,32,16 --compile-to=llir | FileCheck %s
# RUN: tessera-gemm --name mmg --epilogue gelu_grad --schedule 56,64,28,32,14,32,16 --compile-to=llir \
# RUN:   | FileCheck %s --check-prefix=NONE
# RUN: tessera-gemm --name mm8 --schedule 48,64,24,32,6,16,8 --compile-to=llir | FileCheck %s --check-prefix=NONE

# CHECK:     call void @llvm.prefetch.p0(ptr %{{.+}}, i32 1, i32 3, i32 1)
# CHECK-COUNT-28: store <16 x float> %{{.+}}, ptr %{{.+}}, align 64, !nontemporal
# CHECK:     store <16 x float> %{{.+}}, ptr %{{.+}}, align 4{{$}}

# NONE-NOT:  !nontemporal
