"""The CPU target's options."""

from __future__ import annotations

from dataclasses import dataclass

from ...options import HashedOptions


@dataclass(frozen=True)
class CPUOptions(HashedOptions):
    cpu: str = "native"       # an LLVM CPU name, "native" for the build machine, "generic" for any
    opt_level: int = 3
    warp_size: int = 32
