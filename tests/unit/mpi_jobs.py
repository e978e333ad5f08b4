"""Starting the Python processes of the MPI tests: mpiexec from the mpich wheel (the test extra), or a skip
that says why MPI is unusable here.

A child's sys.path must not begin with the working directory: where the tests run from a checkout (CI runs
`pytest` at its root), that directory's `tessera/` is the source tree, not the installed package, and its
import fails. An empty PYTHONPATH entry and `python -m` both put the working directory first, so children
get the test folder alone on PYTHONPATH and start in their own temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def child_env(**extra: str) -> dict[str, str]:
    paths = [str(HERE), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), **extra)


def mpiexec_or_skip() -> str:
    from tessera.tools.errors import ToolError
    from tessera.tools.run import mpiexec
    try:
        exe = mpiexec()
        from tessera import comm, runtime
        runtime.default_context()
        comm.unique_id("mpi")  # loads libmpi.so.12 (tsrCommGetUniqueId asks the transport)
    except (ToolError, Exception) as e:  # noqa: BLE001 — whatever stops MPI from loading is the skip's reason
        pytest.skip(f"MPI cannot be used here: {e}")
    return exe
