"""The SPIR-V target's options and the devices they may declare."""

from __future__ import annotations

from dataclasses import dataclass

from ...options import HashedOptions

SUBGROUP = 32

# Declared devices (`--arch`) -> the matrix kind tile_mma lowers for (its Target.matrix). xe-hpc: Intel Data
# Center GPU Max (Ponte Vecchio), whose driver takes cooperative matrices of 8x16x16 on subgroups of 32.
MATRIX_ARCHS = {"xe-hpc": "coopmat"}


@dataclass(frozen=True)
class SPIRVOptions(HashedOptions):
    opt_level: int = 3   # kept for the common interface; the SPIR-V consumer (the driver) optimizes
    contraction: bool = True  # False (numerics profile "strict"): the driver may not fuse a*b+c
    exact_math: bool = False  # numerics profile "strict": f32 math in f64 rounded once (passes/strict_math.py)
    arch: str = ""       # a declared device (MATRIX_ARCHS) whose matrix hardware may be used; "": any device
    bounds_checks: bool = False  # guard the accesses not proven in bounds (passes/gpu_bounds_checks.py)

    def __post_init__(self):
        if self.arch and self.arch not in MATRIX_ARCHS:
            raise ValueError(f"unknown spirv architecture '{self.arch}' (known: {', '.join(MATRIX_ARCHS)}; "
                             f"none: any OpenCL or Level Zero device, no matrix extension)")
