"""A C host of communicators (host_comm.c) over MPI on the CPU, under mpiexec with 2 and 3 ranks: every
operation through <tessera/comm.h>, a split, and the statuses of bad arguments (docs/c-api.md,
"Communicators"). MPI comes from the mpich wheel of the test extra; the test skips only where it is missing."""
import os
import shutil
import subprocess
from importlib import metadata

import pytest

from tessera.tools.errors import ToolError
from tessera.tools.run import mpiexec


def mpich_library():
    """The mpich wheel's libmpi.so.12, for a libtessera not installed beside it (built by cmake here)."""
    try:
        files = metadata.distribution("mpich").files or []
    except metadata.PackageNotFoundError:
        return None
    found = [f for f in files if f.name == "libmpi.so.12"]
    return str(found[0].locate()) if found else None


@pytest.mark.parametrize("ranks", [2, 3])
def test_every_operation_from_c(build_host, ranks):
    try:
        launcher = mpiexec()
    except ToolError as e:
        pytest.skip(f"MPI cannot be found: {e}")
    env = {}
    if mpich_library():
        env["TESSERA_MPI_LIBRARY"] = mpich_library()
    p = subprocess.run([launcher, "-n", str(ranks), str(build_host("host_comm.c"))], capture_output=True, text=True,
                       timeout=240, env=dict(os.environ, **env))
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed, p.stdout + p.stderr
    assert p.stdout.count("0 failed") == ranks
    assert p.stdout.count("ok   rank 0: all_reduce sum on a stream") == 1


def test_a_context_frees_graphs_before_the_communicators_they_hold(build_host):
    """Captured operations hold their communicator: the context destroys graphs first, or freeing them reads a
    freed communicator (valgrind's "Invalid read" in libtessera's tsr_object_unref). MPICH's own start-up has
    reads valgrind flags, so only errors whose innermost frame is in libtessera count."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        pytest.skip("valgrind is not on PATH (Debian/Ubuntu: valgrind)")
    env = dict(os.environ, **({"TESSERA_MPI_LIBRARY": mpich_library()} if mpich_library() else {}))
    p = subprocess.run([valgrind, str(build_host("host_comm_teardown.c"))], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("0 failed"), p.stdout + p.stderr[-3000:]
    lines = p.stderr.splitlines()
    ours = [f"{lines[i]}\n{lines[i + 1]}" for i in range(len(lines) - 1)
            if ("Invalid" in lines[i] or "uninitialised" in lines[i]) and "libtessera" in lines[i + 1]]
    assert not ours, "\n".join(ours)
