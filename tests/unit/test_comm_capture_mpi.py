"""Communicator operations inside graph capture over MPI on the CPU (issue 16): 2 and 3 ranks started by
mpiexec (the mpich wheel, the test extra), each running comm_capture_worker.py.

A graph holding a kernel launch, all_reduce, an event record, all_gather, broadcast, reduce_scatter,
all_to_all, a send/recv pair and a second launch that reads the all_reduce's result is replayed twice with new
data written into the same arrays: every result exact against numpy, nothing run at capture. A compiled
function's all_reduce step is captured and replayed likewise, and one with a gradient bucket and an all_gather
along dim 1 (their temporaries kept by the graph) equals a direct call; one reducing in tree order is refused
up front (TSR_ERROR_UNSUPPORTED). A deterministic captured all_reduce gives a
direct call's bits. A replay whose peer died returns a status within the communicator's timeout, not a
hang."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tessera import compiler
from tessera.image import read_image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import comm_capture_worker as W  # noqa: E402
from mpi_jobs import child_env, mpiexec_or_skip  # noqa: E402
from test_runtime import SRC  # noqa: E402  (its kernel `scale`: Out = s * X)

GUARD = 240  # seconds a whole job may take before the test fails instead of hanging


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("image") / "scale.tsr"
    path.write_bytes(compiler.compile_source(SRC, "kernels.py").image)
    return path


FUNCTION = """
from tessera import dist, f32, function, op, tensor
mesh = dist.Mesh(axes=["tp"], devices=range({n}))

@function
def scaled_sum(X: tensor[f32, 8, 4]):
    return op.all_reduce(X * 2.0, mesh=mesh, algo="ring")
"""


def launch(n: int, scenario: str, folder: Path, image: Path, *extra: str) -> list[dict]:
    exe = mpiexec_or_skip()
    start = time.monotonic()
    p = subprocess.run([exe, *extra, "-n", str(n), sys.executable, str(HERE / "comm_capture_worker.py"), scenario,
                        str(folder), str(image)], capture_output=True, text=True, timeout=GUARD, env=child_env(),
                       cwd=folder)
    ranks = [dict(np.load(folder / f"rank{r}.npz")) for r in range(n) if (folder / f"rank{r}.npz").exists()]
    for r in ranks:
        r["_wall"] = time.monotonic() - start
        r["_output"] = p.stdout + p.stderr
    return ranks


@pytest.mark.parametrize("n", [2, 3])
def test_captured_collectives_replay_exactly(n, tmp_path, image):
    ranks = launch(n, "capture", tmp_path, image)
    assert len(ranks) == n, ranks[0]["_output"] if ranks else "no rank wrote its results"
    root = n - 1
    for r, got in enumerate(ranks):
        assert int(got["nodes"]) == (10 if r < 2 else 8), r  # 2 launches, 6 collectives, a record, send + recv
        assert not got["before"].any(), "a captured operation ran at capture"
        assert bool(got["event_done"])
        for replay in range(W.REPLAYS):
            xs = [2 * W.data(q, replay) for q in range(n)]       # A = 2X on every rank
            total = np.sum(xs, axis=0, dtype=np.float32)
            np.testing.assert_array_equal(got[f"S{replay}"], total, err_msg=f"rank {r} replay {replay}")
            np.testing.assert_array_equal(got[f"Y{replay}"], 3 * total)
            np.testing.assert_array_equal(got[f"G{replay}"], np.stack(xs))
            np.testing.assert_array_equal(got[f"B{replay}"], -W.data(root, replay))
            part = W.K // n
            np.testing.assert_array_equal(got[f"R{replay}"], total[r * part:(r + 1) * part])
            np.testing.assert_array_equal(got[f"T{replay}"], np.concatenate([x[r * part:(r + 1) * part] for x in xs]))
            if r < 2:
                np.testing.assert_array_equal(got[f"P{replay}"], xs[1 - r])


@pytest.mark.parametrize("n", [2, 3])
def test_a_compiled_functions_collective_step_is_captured(n, tmp_path):
    """tsrFunctionCall on the capturing stream records the function's launch and its all_reduce step (the
    communicator's own order: algo ring); each replay reduces the data the input holds then."""
    image = tmp_path / "fn.tsr"
    image.write_bytes(compiler.compile_source(FUNCTION.format(n=n), "fn.py").image)
    ranks = launch(n, "function", tmp_path, image)
    assert len(ranks) == n, ranks[0]["_output"] if ranks else "no rank wrote its results"
    for got in ranks:
        for replay in range(W.REPLAYS):
            want = np.sum([2 * W.data(q, replay)[:32] for q in range(n)], axis=0, dtype=np.float32).reshape(8, 4)
            np.testing.assert_array_equal(got[f"Y{replay}"], want)


BUCKET = """
from tessera import dist, f32, function, op, tensor
mesh = dist.Mesh(axes=["dp"], devices=range({n}))

@function
def step(X: tensor[f32, 8, 4], W: tensor[f32, 4, 6]):
    a = op.all_reduce(X * 2.0, mesh=mesh)
    b = op.all_reduce(X + 1.0, mesh=mesh)
    c = op.all_reduce(W * 3.0, mesh=mesh)
    return a, b, c, op.all_gather(W, mesh=mesh, dim=1)
"""


@pytest.mark.parametrize("n", [2, 3])
def test_a_compiled_functions_bucket_and_gather_along_a_later_dim_are_captured(n, tmp_path):
    """The plan reduces a bucket of three all_reduces (packed into a temporary) and gathers along dim 1 (into
    a temporary regrouped by copies): under capture both temporaries are the graph's and no host wait runs;
    each replay equals a direct call on the same data, and numpy."""
    image = tmp_path / "fn.tsr"
    image.write_bytes(compiler.compile_source(BUCKET.format(n=n), "fn.py").image)
    steps = json.loads(read_image(image.read_bytes()).plan)["functions"]["step"]["steps"]
    assert [s.get("collective") for s in steps][-4:] == ["all_reduce"] * 3 + ["all_gather"]
    ranks = launch(n, "bucket", tmp_path, image)
    assert len(ranks) == n, ranks[0]["_output"] if ranks else "no rank wrote its results"
    for got in ranks:
        for replay in range(W.REPLAYS):
            xs = [W.data(q, replay)[:32].reshape(8, 4) for q in range(n)]
            ws = [W.data(q, replay)[24:].reshape(4, 6) for q in range(n)]
            want = {"A": np.sum([2 * x for x in xs], axis=0, dtype=np.float32),
                    "B": np.sum([x + 1 for x in xs], axis=0, dtype=np.float32),
                    "C": np.sum([3 * w for w in ws], axis=0, dtype=np.float32), "G": np.concatenate(ws, axis=1)}
            for name in "ABCG":
                np.testing.assert_array_equal(got[f"{name}{replay}"], got[f"direct_{name}{replay}"])
                np.testing.assert_array_equal(got[f"{name}{replay}"], want[name], err_msg=f"{name} {replay}")


@pytest.mark.parametrize("n", [2, 3])
def test_a_tree_order_step_is_refused_under_capture(n, tmp_path):
    image = tmp_path / "fn.tsr"
    source = FUNCTION.format(n=n).replace('algo="ring"', "deterministic=True")
    image.write_bytes(compiler.compile_source(source, "fn.py").image)
    ranks = launch(n, "tree", tmp_path, image)
    assert len(ranks) == n, ranks[0]["_output"] if ranks else "no rank wrote its results"
    for got in ranks:
        assert str(got["status"]) == "TSR_ERROR_UNSUPPORTED", got.get("message")
        assert ("function 'scaled_sum': step 1 (all_reduce over mesh axis 'tp', deterministic) reduces in the "
                "interpreter's tree order, which combines on the host between waits of the stream: a graph "
                "capture cannot record it") in str(got["message"]), str(got["message"])
        assert int(got["nodes"]) == 0, "the refused call recorded work"


def test_captured_deterministic_all_reduce_has_a_direct_calls_bits(tmp_path, image):
    ranks = launch(3, "deterministic", tmp_path, image)
    assert len(ranks) == 3, ranks[0]["_output"] if ranks else "no rank wrote its results"
    for got in ranks:
        np.testing.assert_array_equal(got["replayed"], got["direct"])
        np.testing.assert_array_equal(got["replayed"], ranks[0]["direct"])


@pytest.mark.parametrize("n", [2, 3])
def test_replay_with_a_dead_peer_returns_a_status(n, tmp_path, image):
    # mpiexec must not take the survivors down with the dead rank: they have to see it themselves
    ranks = launch(n, "dead", tmp_path, image, "-disable-auto-cleanup")
    assert len(ranks) == n - 1, ranks[0]["_output"] if ranks else "no survivor wrote its results"
    for got in ranks:
        assert str(got["status"]) in ("TSR_ERROR_TIMEOUT", "TSR_ERROR_LAUNCH_FAILED"), got.get("message")
        assert "tsrCommAllReduce" in str(got["message"])
        assert float(got["seconds"]) < 3 + 10, float(got["seconds"])  # the 3 s timeout, not the guard
        assert str(got["again"]) == str(got["status"])
