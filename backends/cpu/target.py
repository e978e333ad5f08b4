"""The host CPU as a compilation target: its instruction set, and the worker threads and data caches that the
CPU backend's options default to (the environment is read here only; the cost model reads the options).

LLVM loads only for the instruction set: the backend hashes its options without it (a cache hit).
"""

from __future__ import annotations

import difflib
import functools
import os
import platform
import subprocess
import sys
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


# Asks LLVM for the CPUs of this host's target: its `-mcpu=help` table, printed to stderr when a target machine
# is made for the CPU "help". In a child process, as LLVM prints it once per process and straight to fd 2.
_PROBE = """
import llvmlite.binding as llvm
llvm.initialize_native_target()
llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(cpu="help")
"""


@functools.cache
def known_cpus() -> tuple[str, ...]:
    """The CPU names LLVM knows for this host's target (besides `native`). Raises ValueError where LLVM
    cannot be asked."""
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise ValueError(f"cannot ask LLVM which CPUs it knows ({e}); use cpu 'native' or 'generic'") from None
    lines = p.stderr.splitlines()
    try:
        first = lines.index("Available CPUs for this target:") + 1
    except ValueError:
        raise ValueError(f"cannot ask LLVM which CPUs it knows (its probe exited {p.returncode}: "
                         f"{p.stderr.strip()[-300:]!r}); use cpu 'native' or 'generic'") from None
    names = []
    for line in lines[first:]:
        if line.startswith("Available features"):
            break
        if line.strip():
            names.append(line.split()[0])
    return tuple(names)


def check_cpu(cpu: object) -> None:
    """Raises TypeError or ValueError, saying which names are known, unless `cpu` is a CPU LLVM knows: an
    unknown name reaches LLVM only as warnings and then a fatal error that ends the process."""
    if not isinstance(cpu, str):
        raise TypeError(f"cpu must be a CPU name (a str), not {type(cpu).__name__}")
    if cpu in ("native", "generic"):
        return
    known = known_cpus()
    if cpu not in known:
        close = difflib.get_close_matches(cpu, known, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown cpu {cpu!r} for this {platform.machine()} host{hint} "
                         f"(known: native, {', '.join(known)})")


@functools.cache
def host(cpu: str | None = None) -> HostTarget:
    """The machine we run on; `cpu` names another CPU of the same architecture (`generic` for portable code).
    Raises ValueError for a name LLVM does not know (check_cpu)."""
    if cpu is not None:
        check_cpu(cpu)
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


def int8_gemm_path() -> str:
    """The int8 GEMM path TESSERA_CPU_INT8_GEMM pins (amx, vnni or plain; auto, the default, picks the
    fastest the CPU has: gemm_i8.py). Checked against the CPU when a kernel is built."""
    return os.environ.get("TESSERA_CPU_INT8_GEMM", "").strip().lower() or "auto"


def bf16_gemm_path() -> str:
    """The bf16 GEMM path TESSERA_CPU_BF16_GEMM pins (amx, avx512 or plain; auto, the default, picks the
    fastest the CPU has: gemm_bf16.py). Checked against the CPU when a kernel is built."""
    return os.environ.get("TESSERA_CPU_BF16_GEMM", "").strip().lower() or "auto"


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
