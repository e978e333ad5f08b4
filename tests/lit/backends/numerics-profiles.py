# tessera-cc --profile: under strict every backend computes f32 exp in f64 and rounds once
# (passes/strict_math.py), where fast takes the f32 function; ptx and amdgpu by passes/f64_math.py's f64
# arithmetic (gpu_math.py), with no approximate instruction, division and sqrt correctly rounded in f32
# (div.rn.f32, sqrt.rn.f32; AMDGPU's flagless fdiv and llvm.sqrt, which it expands exactly) and nothing
# contracted (a*b + c stays mul.rn and add.rn; no fast-math flag). (LLVM folds the CPU's widened f32
# division back to an f32 fdiv: exact, since f64 holds 2·24 + 2 bits.)
# RUN: tessera-cc %s --profile strict --compile-to=llir --cpu=x86-64-v3 -O1 | FileCheck %s --check-prefix=STRICT
# RUN: tessera-cc %s --profile fast --compile-to=llir --cpu=x86-64-v3 -O1 | FileCheck %s --check-prefix=FAST
# RUN: tessera-cc %s --target spirv --profile strict --compile-to=spirv | FileCheck %s --check-prefix=SPIRV
# RUN: tessera-cc %s --target ptx --arch sm_90a --profile strict --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: not grep -E "approx|fma\.rn\.f32|div\.full|\.ftz|ex2|lg2" %t.ptx
# RUN: tessera-cc %s --target ptx --arch sm_90a --profile fast --compile-to=ptx | FileCheck %s --check-prefix=PTXFAST
# RUN: tessera-cc %s --target amdgpu --profile strict --compile-to=llir > %t.ll
# RUN: FileCheck %s --check-prefix=AMD < %t.ll
# RUN: not grep -E " (fast|contract|afn|arcp|reassoc|nnan|ninf|nsz) |llvm\.exp2\.f32|llvm\.amdgcn\.(exp|log|rcp|rsq|sqrt)|fpmath" %t.ll
# RUN: tessera-cc %s --target amdgpu --profile strict -o %t.tessera

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

# exp(x): x widened, reduced by k·ln 2 in two parts, the Taylor polynomial in f64, one rounding to f32
# PTX:      cvt.f64.f32 [[X:%rd[0-9]+]], [[X32:%r[0-9]+]];
# PTX:      mul.rn.f64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 0d3FF71547652B82FE;
# PTX:      add.rn.f64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 0d3FF0000000000000;
# PTX:      cvt.rn.f32.f64 [[E:%r[0-9]+]], {{%rd[0-9]+}};
# PTX:      div.rn.f32
# X * Y + Y: a product and a sum, each rounded; sqrt correctly rounded
# PTX:      mul.rn.f32 [[P:%r[0-9]+]],
# PTX:      add.rn.f32 {{%r[0-9]+}}, {{.*}}[[P]]
# PTX:      sqrt.rn.f32

# fast: passes/vmath.py's f32 polynomial, its steps contracted
# PTXFAST:      fma.rn.f32
# PTXFAST-NOT:  cvt.f64.f32

# AMD:      fpext float %{{.+}} to double
# AMD:      fmul double
# AMD:      fptrunc double %{{.+}} to float
# AMD:      fdiv float
# (the 1-D kernel is coarsened to 4 elements a thread, passes/simt_coarsen.py: 4 products, then 4 sums)
# AMD:      [[P:%.+]] = fmul float
# AMD:      fadd float %{{.+}}, [[P]]
# AMD:      call float @llvm.sqrt.f32(


@function
def f(X: tensor[f32, "N"], Y: tensor[f32, "N"]):
    return op.exp(X) / Y


@function
def g(X: tensor[f32, "N"], Y: tensor[f32, "N"]):
    return X * Y + Y, op.sqrt(X)
