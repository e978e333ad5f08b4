"""A C host of compiled collectives (host_collective_steps.c) over MPI on the CPU, under mpiexec with 2 and 3
ranks: a plan's collective steps run through tsrFunctionCallWithOptions with the job's communicator, on the
NULL stream and on a stream, and the statuses of a call without one and of one of another size (docs/c-api.md,
"Collective steps: attaching a communicator"). MPI comes from the mpich wheel of the test extra."""
import os
import subprocess

import pytest

import tessera
from test_comm_hosts import mpich_library
from tessera.tools.errors import ToolError
from tessera.tools.run import mpiexec

SOURCE = """
from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range({n}))


@function
def ar(X: tensor[f32, 6]):
    return op.all_reduce(X, mesh=mesh, deterministic=True)


@function
def gather(X: tensor[f32, 6]):
    return op.all_gather(X, mesh=mesh)
"""


@pytest.mark.parametrize("ranks", [2, 3])
def test_collective_steps_from_c(build_host, tmp_path, ranks):
    try:
        launcher = mpiexec()
    except ToolError as e:
        pytest.skip(f"MPI cannot be found: {e}")
    image = tmp_path / "collectives.tessera"
    image.write_bytes(tessera.compile(SOURCE.format(n=ranks), target="cpu"))
    env = {"TESSERA_MPI_LIBRARY": mpich_library()} if mpich_library() else {}
    p = subprocess.run([launcher, "-n", str(ranks), str(build_host("host_collective_steps.c")), str(image)],
                       capture_output=True, text=True, timeout=240, env=dict(os.environ, **env))
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert p.returncode == 0 and not failed, p.stdout + p.stderr
    assert p.stdout.count("0 failed") == ranks
    assert p.stdout.count("all_gather on a stream") == 2 * ranks
