"""The host CPU as a compilation target: its instruction set, and the worker threads and data caches that the
CPU backend's options default to (the environment is read here only; the cost model reads the options).

LLVM loads only for the instruction set: the backend hashes its options without it (a cache hit).
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

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
    import llvmlite.binding as llvm  # lazy: see the module docstring
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.cache
def host(cpu: str | None = None) -> HostTarget:
    """The machine we run on; `cpu` names another CPU of the same architecture (`generic` for portable code)."""
    import llvmlite.binding as llvm  # lazy: see the module docstring
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


def worker_threads() -> int:
    """Worker threads of the runtime's pool (runtime/src/cpu_pool.c reads the same variable)."""
    try:
        return max(1, int(os.environ.get("TESSERA_NUM_THREADS", "")))
    except ValueError:
        return os.cpu_count() or 1


def cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict[int, int]:
    """Data cache bytes per level as Linux reports them for cpu0, with common sizes where it does not."""
    sizes = {1: 32 << 10, 2: 512 << 10, 3: 8 << 20}
    try:
        entries = [os.path.join(root, e) for e in os.listdir(root) if e.startswith("index")]
    except OSError:
        return sizes
    for e in entries:
        try:
            with open(os.path.join(e, "type")) as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(e, "level")) as f:
                level = int(f.read())
            with open(os.path.join(e, "size")) as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            sizes[level] = int(text.rstrip("KMG")) * unit
        except ValueError:
            continue
    return sizes


@functools.cache
def host_identity() -> str:
    """The build machine as its code depends on it, for the compile cache's key: the machine and its CPU's
    model and feature flags (read from /proc, as a cache hit cannot afford to load LLVM)."""
    parts = [platform.machine()]
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    parts.append(line.strip())
                if len(parts) >= 3:
                    break
    except OSError:
        parts.append(platform.processor())
    return "\n".join(parts)
