"""The AMDGPU target's options and the architectures they may name."""

from __future__ import annotations

from dataclasses import dataclass

from ...options import HashedOptions

# Architectures we emit for, with their wavefront width. CDNA (gfx9: MI200 = gfx90a, MI300 = gfx942) runs
# waves of 64 lanes only; RDNA (gfx1100, RX 7900) runs 32 or 64 and we pick 32, its native width.
ARCHS = {"gfx90a": 64, "gfx942": 64, "gfx1100": 32}


@dataclass(frozen=True)
class AMDGPUOptions(HashedOptions):
    arch: str = "gfx942"
    opt_level: int = 3
    bounds_checks: bool = False  # guard the accesses not proven in bounds (passes/gpu_bounds_checks.py)
    exact_math: bool = False   # the strict numerics profile: exp, erf … in f64, rounded once (passes/strict_math.py)

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"unknown AMD GPU architecture '{self.arch}' (known: {', '.join(ARCHS)})")

    @property
    def warp_size(self) -> int:
        return ARCHS[self.arch]
