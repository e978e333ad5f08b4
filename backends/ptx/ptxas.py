"""ptxas as a checker: assembles the PTX we emit for its arch and reads the resources of each kernel.

The image carries PTX text, which the CUDA driver compiles when it loads the module; ptxas is not needed to
run. Where it is installed (CUDA's bin/, or $TESSERA_PTXAS), every compilation assembles its PTX once, so
that PTX the driver would refuse fails at compile time, and the kernels' registers and static shared memory
go into the image metadata (`regs`, `smem_bytes`). Without ptxas both stay 0 ("unknown").
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass


class PtxasError(Exception):
    """ptxas refused the PTX we emitted: a compiler bug, reported with ptxas's own words."""


@dataclass(frozen=True)
class Resources:
    regs: int = 0          # registers per thread
    smem_bytes: int = 0    # static shared memory per block
    stack_bytes: int = 0   # stack frame per thread (register spills, local arrays)
    spill_bytes: int = 0   # spill stores + loads


def find() -> str | None:
    """The ptxas to run: $TESSERA_PTXAS if set (empty: none), else the one on PATH or in /usr/local/cuda."""
    if "TESSERA_PTXAS" in os.environ:
        return os.environ["TESSERA_PTXAS"] or None
    return shutil.which("ptxas") or shutil.which("ptxas", path="/usr/local/cuda/bin")


@functools.cache
def version() -> str:
    """The release of the ptxas `find` gives, as the first line of its `--version` that names it ("none"
    where there is no ptxas): its report goes into the image, so it is part of the compile cache's key.
    Cached: the key is computed on every compile, and a process's environment does not change."""
    tool = find()
    if tool is None:
        return "none"
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"{tool}: {type(e).__name__}"  # check() will report it when it runs the same program
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return next((line for line in lines if "release" in line), lines[0] if lines else f"{tool}: no version")


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse(log: str) -> dict[str, Resources]:
    """Per kernel, what `ptxas -v` printed about it."""
    found: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line) or _PROPS.search(line)
        if m:
            current = found.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        if m := _FRAME.search(line):
            current["stack_bytes"] = int(m.group(1))
            current["spill_bytes"] = int(m.group(2)) + int(m.group(3))
        if m := _USED.search(line):
            current["regs"] = int(m.group(1))
            s = _SMEM.search(line)
            current["smem_bytes"] = int(s.group(1)) if s else 0
    return {name: Resources(**values) for name, values in found.items()}


# ptxas compiles the entry functions of one PTX file one after another unless told to use threads
# (`--split-compile N`, CUDA 12.x and later; 0: one per CPU): a GEMM of symbolic extents has three kernels
# (two wgmma tile shapes and the SIMT fallback), whose assembly then overlaps. Each function's registers,
# shared memory and spills are what the sequential run reports (tests/unit/test_compile_concurrency.py). An older ptxas
# that does not know the option is run again without it, and not asked again in this process.
SPLIT_COMPILE = ["--split-compile", "0"]
_split_compile_known = True


def check(ptx: str, arch: str, ptxas: str) -> dict[str, Resources]:
    """Assembles `ptx` for `arch`; raises PtxasError with ptxas's messages if it refuses."""
    global _split_compile_known
    with tempfile.TemporaryDirectory(prefix="tessera-ptxas-") as d:
        src = os.path.join(d, "kernels.ptx")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        argv = [ptxas, f"-arch={arch}", "-v", src, "-o", os.path.join(d, "kernels.cubin")]
        p = subprocess.run(argv + SPLIT_COMPILE if _split_compile_known else argv, capture_output=True, text=True)
        if _split_compile_known and p.returncode != 0 and "split-compile" in p.stdout + p.stderr:
            _split_compile_known = False
            p = subprocess.run(argv, capture_output=True, text=True)
    log = p.stdout + p.stderr
    if p.returncode != 0:
        raise PtxasError(f"internal compiler error: ptxas rejected the PTX for {arch}:\n{log.strip()}")
    return parse(log)
