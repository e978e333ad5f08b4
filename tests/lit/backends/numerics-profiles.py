# tessera-cc --profile: under strict the CPU and SPIR-V compute f32 exp in f64 and round once
# (passes/strict_math.py), where fast takes the f32 function; ptx and amdgpu, whose exp is an approximation,
# refuse it at the user's line. (LLVM folds the widened f32 division back to an f32 fdiv: exact, since f64
# holds 2·24 + 2 bits.)
# RUN: tessera-cc %s --profile strict --compile-to=llir --cpu=x86-64-v3 -O1 | FileCheck %s --check-prefix=STRICT
# RUN: tessera-cc %s --profile fast --compile-to=llir --cpu=x86-64-v3 -O1 | FileCheck %s --check-prefix=FAST
# RUN: tessera-cc %s --target spirv --profile strict --compile-to=spirv | FileCheck %s --check-prefix=SPIRV
# RUN: not tessera-cc %s --target ptx --profile strict -o %t.tessera 2>&1 | FileCheck %s --check-prefix=PTX
# RUN: not tessera-cc %s --target amdgpu --profile strict -o %t.tessera 2>&1 | FileCheck %s --check-prefix=AMD
# RUN: tessera-cc %s --target ptx --profile deterministic -o %t.tessera

from tessera import function, op, tensor

# STRICT:     fpext <32 x float> %{{.+}} to <32 x double>
# STRICT:     call <32 x double> @llvm.exp.v32f64(
# STRICT:     fptrunc <32 x double> %{{.+}} to <32 x float>
# STRICT-NOT: @llvm.exp.v32f32

# FAST:       call <32 x float> @llvm.exp.v32f32(
# FAST-NOT:   fpext

# SPIRV:      %[[X:.+]] = spirv.FConvert %{{.+}} : f32 to f64
# SPIRV-NEXT: %[[E:.+]] = spirv.CL.exp %[[X]] : f64
# SPIRV-NEXT: spirv.FConvert %[[E]] : f64 to f32
# SPIRV:      spirv.FDiv %{{.+}}, %{{.+}} : f64

# PTX: numerics-profiles.py:[[# @LINE + 6]]:12: error: the 'strict' numerics profile asks for exact exp, and ptx computes it only by approximation
# AMD: numerics-profiles.py:[[# @LINE + 5]]:12: error: the 'strict' numerics profile asks for exact exp, and amdgpu computes it only by approximation


@function
def f(X: tensor[f32, "N"], Y: tensor[f32, "N"]):
    return op.exp(X) / Y
