"""Compile options: a frozen dataclass with a stable hash (part of the compile cache's key)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class CompileOptions:
    target: str = "cpu"
    kernels: tuple[str, ...] = ()   # compile only these (default: every @kernel and @function of the file)
    cpu: str = "native"
    arch: str = ""                  # GPU architectures, comma-separated, each for the target its prefix
                                    # names: sm_* for ptx (default sm_80), gfx* for amdgpu (default gfx942)
    opt_level: int = 3
    warp_size: int = 32
    hints: tuple[tuple[str, int], ...] = ()   # schedule hints over every function's own (autotuning)

    def hash(self) -> str:
        key = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(key.encode()).hexdigest()
