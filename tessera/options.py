"""Compile options: frozen dataclasses with a stable hash (part of the compile cache's key).

`CompileOptions` are the user's; each backend derives its own `Options` from them (backends/contract.py),
hashed the same way through `HashedOptions`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields

from .numerics import profiles


class HashedOptions:
    """A frozen dataclass's stable hash: every field's name and value, in declaration order."""

    def hash(self) -> str:
        key = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class CompileOptions(HashedOptions):
    target: str = "cpu"
    kernels: tuple[str, ...] = ()   # compile only these (default: every @kernel and @function of the file)
    cpu: str = "native"
    arch: str = ""                  # GPU architectures, comma-separated, each for the target its prefix
                                    # names: sm_* for ptx (default sm_80), gfx* for amdgpu (default gfx942),
                                    # xe-* for spirv (default none: no matrix extension; xe-hpc: DPAS)
    opt_level: int = 3
    warp_size: int = 32
    hints: tuple[tuple[str, int], ...] = ()   # schedule hints over every function's own (autotuning)
    numerics: str = field(default_factory=profiles.current)  # "default" or "strict" (numerics/profiles.py)

    def __post_init__(self):
        if self.numerics not in profiles.PROFILES:
            raise ValueError(f"unknown numerics profile {self.numerics!r}; the profiles are "
                             f"{', '.join(profiles.PROFILES)}")
