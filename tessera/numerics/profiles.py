"""Numerics profiles (portability guide §2, §12): what a compilation may do to floating-point arithmetic.

    from tessera import numerics
    with numerics.profile("deterministic"):
        image = tessera.compile(source, target="cpu")   # CompileOptions made here carry numerics="deterministic"

or `tessera-cc --profile strict`, or a hint in the source, `@function(numerics="strict")` (the compilation
takes the strictest of its options' profile and its functions' hints). The image records the profile in every
kernel's properties (`numerics: strict`), which `tessera-objdump` shows; it is part of the compile cache's key.

`fast`           (the default; "default" is its old name and still accepted) the backends may contract a
                 multiply and an add into one fused multiply-add, and drivers may (OpenCL's, for SPIR-V); the
                 sm_90a attention backward may add dQ with float atomics (backends/ptx/options.py); autotuning
                 searches every schedule.
`deterministic`  a program gives the same bits on every run and at every worker-thread count of one machine:
                 float atomics (tile.atomic_add on f32) are refused at the user's line, the sm_90a attention
                 backward adds dQ in its separate kernel (no atomics), and autotuning searches only schedules
                 that keep every reduction's order (tessera/autotune.py: not the K chunk, BK).
`strict`         deterministic, and every floating-point operation is the one written, rounded once: no FMA
                 contraction (SPIR-V modules carry ExecutionMode ContractionOff, so a driver cannot fuse;
                 LLVM's CPU, NVPTX and AMDGPU code carries no fast-math flags, and NVPTX writes mul.rn/add.rn,
                 which ptxas does not fuse) and no approximate math: f32 exp, erf, tanh, log, pow (and on the
                 CPU and SPIR-V sqrt and division, which ptx and amdgpu round correctly in f32) are computed
                 in f64 and rounded once (passes/strict_math.py; on ptx and amdgpu by passes/f64_math.py),
                 the CPU and ptx run the SPIR-V backend's one-product-one-sum GEMM kernel and decompose
                 attention, so the CPU, SPIR-V and ptx agree bit for bit.

In every profile the generated kernels reduce in a fixed order — each reduction's tree (a subgroup's
butterfly, a GEMM's ascending K loop) is part of the kernel, never decided by scheduling or by the number of
worker threads: the CPU runtime splits work by output blocks only, never a reduction across threads.
"""

from __future__ import annotations

import contextlib
import threading

# strictest last; "default" is the old name of "fast" (images and code made before the profiles had names)
PROFILES = ("fast", "deterministic", "strict")
ALIASES = {"default": "fast"}

_local = threading.local()


def canonical(name: str) -> str:
    """The profile `name` names (an alias resolved); ValueError naming the profiles for any other name."""
    name = ALIASES.get(name, name)
    if name not in PROFILES:
        raise ValueError(f"unknown numerics profile {name!r}; the profiles are {', '.join(PROFILES)} "
                         f"(\"default\" is \"fast\")")
    return name


def strictest(*names: str) -> str:
    """The strictest of the profiles `names`."""
    return max((canonical(n) for n in names), key=PROFILES.index)


def deterministic(name: str) -> bool:
    """Whether profile `name` fixes every result's bits (deterministic and strict): no float atomics, no
    order-changing autotuning."""
    return PROFILES.index(canonical(name)) >= PROFILES.index("deterministic")


def current() -> str:
    """The profile of this thread's innermost `profile` block, else "fast"."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else "fast"


@contextlib.contextmanager
def profile(name: str):
    """Compilations (CompileOptions created) inside the block use profile `name`."""
    name = canonical(name)
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(name)
    try:
        yield name
    finally:
        stack.pop()
