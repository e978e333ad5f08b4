"""``tessera-cpu-to-llvm``: the upstream conversions that take warp-vectorized kernels to the LLVM dialect.

Order matters: math ops with no LLVM intrinsic (erf, …) become per-lane libm calls through vector ops, so
the math conversions run before the vector conversion.
"""

CPU_TO_LLVM = ",".join([
    "canonicalize", "cse", "expand-strided-metadata", "lower-affine", "convert-scf-to-cf",
    "convert-math-to-llvm", "convert-math-to-libm", "convert-vector-to-llvm{enable-x86}", "convert-ub-to-llvm",
    # bf16 conversions as integer arithmetic: libgcc has no __truncsfbf2 before GCC 13
    "arith-expand{include-bf16=true}",
    "finalize-memref-to-llvm", "convert-arith-to-llvm", "convert-index-to-llvm", "convert-cf-to-llvm",
    "convert-func-to-llvm", "reconcile-unrealized-casts",
])
