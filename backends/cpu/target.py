"""The host CPU as a compilation target."""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass

import llvmlite.binding as llvm

# The name the image metadata and the runtime use for each architecture.
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


@dataclass(frozen=True)
class HostTarget:
    arch: str        # x86_64 | aarch64
    triple: str
    cpu: str         # e.g. skylake-avx512
    features: str    # LLVM feature string, e.g. +avx2,+fma,…


@functools.cache
def init_llvm() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.cache
def host(cpu: str | None = None) -> HostTarget:
    """The machine we run on; `cpu` names another CPU of the same architecture (`generic` for portable code)."""
    init_llvm()
    arch = _ARCH.get(platform.machine().lower(), platform.machine().lower())
    triple = llvm.get_process_triple()
    if cpu in (None, "native"):
        return HostTarget(arch, triple, llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    return HostTarget(arch, triple, cpu, "")


# Vector register width of the x86-64 micro-architecture levels, for CPUs named without a feature string.
_LEVEL_BITS = {"x86-64": 128, "x86-64-v2": 128, "x86-64-v3": 256, "x86-64-v4": 512, "generic": 128}


def vector_bits(t: HostTarget) -> int:
    """Width of the widest vector registers the target's code may use."""
    if t.features:
        feats = set(t.features.split(","))
        return 512 if "+avx512f" in feats else 256 if "+avx" in feats else 128
    return _LEVEL_BITS.get(t.cpu, 128)
