"""Relocatable AMDGPU object → HSACO (the shared ELF code object HIP loads), with ld.lld.

llvmlite emits objects but does not link. LLD 16 or newer links AMDGPU code objects (LLD 14 does not know
the code object v5 relocations); we look for it as PyPI's `ziglang` (LLD 22, `python -m ziglang ld.lld`),
then as `ld.lld` / `ld.lld-<N>` on PATH ($TESSERA_LD_LLD names another).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile


class LinkError(RuntimeError):
    pass


def _version(cmd: list[str]) -> int:
    r = subprocess.run(cmd + ["--version"], capture_output=True, text=True)
    m = re.search(r"LLD (\d+)", r.stdout)
    return int(m.group(1)) if r.returncode == 0 and m else 0


def find() -> list[str] | None:
    """The ld.lld command to run, or None where no LLD ≥ 16 is installed."""
    if os.environ.get("TESSERA_LD_LLD"):
        return [os.environ["TESSERA_LD_LLD"]]
    try:
        import ziglang  # noqa: F401
        return [sys.executable, "-m", "ziglang", "ld.lld"]
    except ImportError:
        pass
    for name in ["ld.lld", *(f"ld.lld-{v}" for v in range(22, 15, -1))]:
        path = shutil.which(name)
        if path and _version([path]) >= 16:
            return [path]
    return None


@functools.cache
def identity() -> str:
    """Which linker writes the code objects, for the compile cache's key."""
    cmd = find()
    if cmd is None:
        return "ld.lld=none"
    if cmd[1:2] == ["-m"]:  # ziglang's: its release is the package's
        from importlib.metadata import version  # lazy: only for the cache key of an amdgpu compile
        return f"ziglang {version('ziglang')}"
    return f"{cmd[0]} LLD {_version(cmd)}"


def hsaco(obj: bytes) -> bytes:
    cmd = find()
    if cmd is None:
        raise LinkError("linking the AMDGPU code object needs ld.lld 16 or newer: `pip install ziglang` "
                        "(or install LLD ≥ 16 and put ld.lld on PATH, or set TESSERA_LD_LLD)")
    with tempfile.TemporaryDirectory(prefix="tessera-hsaco-") as d:
        o, out = os.path.join(d, "k.o"), os.path.join(d, "k.hsaco")
        with open(o, "wb") as f:
            f.write(obj)
        r = subprocess.run(cmd + ["-shared", o, "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            raise LinkError(f"linking the AMDGPU code object failed ({' '.join(cmd)}):\n{r.stderr}")
        with open(out, "rb") as f:
            return f.read()
