# i8 x i8 -> i32 on ptx before sm_90a (no s8 wgmma): the SIMT GEMM (backends/simt_gemm.py), bytes loaded
# sign-extended and accumulated exactly in i32, no tensor-core instruction.
# RUN: tessera-cc %s --target ptx --arch sm_80 --compile-to=ptx | FileCheck %s
# RUN: tessera-cc %s --target ptx --arch sm_89 --compile-to=ptx | FileCheck %s

from tessera import function, i8, tensor

# CHECK-LABEL: .visible .entry int8__gemm0(
# CHECK:         ld.global.s8
# CHECK:         add.s32
# CHECK:         st.global.b32
# CHECK-NOT:     wgmma
# CHECK-NOT:     mma.sync


@function
def int8(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
