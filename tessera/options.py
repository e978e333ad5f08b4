"""Compile options: a frozen dataclass with a stable hash (part of the compile cache's key)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class CompileOptions:
    target: str = "cpu"
    kernels: tuple[str, ...] = ()   # compile only these (default: every @kernel and @function of the file)
    cpu: str = "native"
    arch: str = "sm_80"             # NVIDIA architecture of the ptx target (backends/ptx/compiler.py ARCHS)
    opt_level: int = 3
    warp_size: int = 32

    def hash(self) -> str:
        key = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(key.encode()).hexdigest()
