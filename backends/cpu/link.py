"""Object file → shared object, with the system C compiler driver or, where there is none, LLD from PyPI."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile

from ..contract import tool_identity


class LinkError(RuntimeError):
    pass


def _linker() -> list[str]:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return [cc, "-shared", "-nostartfiles"]
    try:
        import ziglang  # noqa: F401
    except ImportError:
        raise LinkError("no C compiler driver (cc) and no `ziglang` package to link the CPU shared object; "
                        "install one (e.g. `pip install ziglang`)") from None
    return [sys.executable, "-m", "ziglang", "ld.lld", "-shared"]


@functools.cache
def identity() -> str:
    """Which linker writes the shared object, for the compile cache's key."""
    cmd = _linker()
    if cmd[0] == sys.executable:  # ziglang's: its release is the package's
        from importlib.metadata import version  # lazy: only when there is no cc
        return f"ziglang {version('ziglang')}"
    return tool_identity(cmd[0])


def shared_object(obj: bytes) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tessera-link-") as d:
        o, so = os.path.join(d, "k.o"), os.path.join(d, "k.so")
        with open(o, "wb") as f:
            f.write(obj)
        cmd = _linker() + [o, "-o", so]
        if cmd[0] != sys.executable:
            cmd.append("-lm")
            if b"_ZGV" in obj:  # vector math from glibc's libmvec (passes/cpu_vector_math.py)
                cmd.append("-lmvec")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise LinkError(f"linking the CPU shared object failed ({' '.join(cmd)}):\n{r.stderr}")
        with open(so, "rb") as f:
            return f.read()
