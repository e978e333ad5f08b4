"""Numerics profiles (portability guide §2, §12): what a compilation may do to floating-point arithmetic.

    from tessera import numerics
    with numerics.profile("strict"):
        image = tessera.compile(source, target="spirv")   # CompileOptions made here carry numerics="strict"

`default`  the backends may contract a multiply and an add into one fused multiply-add where the device's
           compiler chooses to (OpenCL drivers do, for SPIR-V).
`strict`   every floating-point operation is the one written, rounded as IEEE f32/f64: SPIR-V modules
           forbid contraction (ExecutionMode ContractionOff), so a driver cannot fuse; accumulation is f32
           (fp32 for mixed precision as in every profile).

In both profiles the generated kernels reduce in a fixed order — each reduction's tree (a subgroup's
butterfly, a GEMM's ascending K loop) is part of the kernel, never decided by scheduling, and no kernel
uses atomics (except, in `default` only, the sm_90a attention backward's dQ, added by bulk reductions at
head dimension 64, or at every one with TESSERA_ATTENTION_FUSED_DQ=1, never with =0:
backends/ptx/options.py) — so a program gives the same bits on every run on one backend. Across backends
the results of `strict` programs agree within the tolerances docs/portability.md ("Golden tests") documents.
"""

from __future__ import annotations

import contextlib
import threading

PROFILES = ("default", "strict")

_local = threading.local()


def current() -> str:
    """The profile of this thread's innermost `profile` block, else "default"."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else "default"


@contextlib.contextmanager
def profile(name: str):
    """Compilations (CompileOptions created) inside the block use profile `name`."""
    if name not in PROFILES:
        raise ValueError(f"unknown numerics profile {name!r}; the profiles are {', '.join(PROFILES)}")
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(name)
    try:
        yield name
    finally:
        stack.pop()
