"""Compiled collectives on 2 and 3 CPU ranks through MPI (issue 16's CI proof), and 4 for a 2×2 mesh whose axes
are sub-communicators: the CPU image of collectives_worker.source runs under mpiexec (the mpich wheel of the
test extra), each rank calling every function with the job's communicator, and every result is compared with
tessera.interpret's SPMD simulation of the same mesh — bit for bit where the reduction order is the
interpreter's tree (deterministic=True, or algo="tree"/"binary_tree"), within rounding where MPI chooses it
(algo="ring", "auto")."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import tessera_frontend_compile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import collectives_worker as W  # noqa: E402
from mpi_jobs import child_env, mpiexec_or_skip  # noqa: E402

GUARD = 300  # seconds the job may take before the test fails instead of hanging
EXACT = ("ar_sum", "ar_max", "ar_min", "ar_mean", "ar_prod", "ar_bf16", "ar_tree", "gather0", "gather1",
         "scatter0", "scatter1", "bcast", "grid_axes")


@pytest.fixture(scope="module", params=[2, 3, 4])
def job(request, tmp_path_factory):
    n = request.param
    out = tmp_path_factory.mktemp(f"ranks{n}")
    image = out / "collectives.tessera"
    image.write_bytes(tessera.compile(W.source(n), target="cpu"))
    p = subprocess.run([mpiexec_or_skip(), "-n", str(n), sys.executable, str(HERE / "collectives_worker.py"),
                        str(image), str(out)], capture_output=True, text=True, timeout=GUARD, env=child_env(), cwd=out)
    ranks = [dict(np.load(out / f"rank{r}.npz")) for r in range(n) if (out / f"rank{r}.npz").exists()]
    assert p.returncode == 0 and len(ranks) == n, p.stdout + p.stderr
    return n, ranks, tessera_frontend_compile(W.source(n), {"filename": "collectives.py"})


def _interpreted(module, n: int, name: str) -> list[np.ndarray]:
    args = [W.inputs(r, name) for r in range(n)]
    if name == "mlp":   # the whole weights: the interpreter gives each device its shard
        return module.interpret(name, [a[0] for a in args], args[0][1], args[0][2], world=n)
    return module.interpret(name, [a[0] for a in args], world=n)


@pytest.mark.parametrize("name", EXACT)
def test_collectives_in_tree_order_match_the_interpreter_bit_for_bit(job, name):
    n, ranks, module = job
    want = _interpreted(module, n, name)
    for r, got in enumerate(ranks):
        assert f"error:{name}" not in got, got[f"error:{name}"]
        g, w = got[name], np.asarray(want[r], np.float32)
        assert g.shape == w.shape and g.dtype == np.float32, (name, r, g.shape, w.shape)
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32)), (name, r, np.abs(g - w).max())


@pytest.mark.parametrize("name", ["ar_ring", "scatter_ring"])
def test_collectives_in_mpis_order_match_within_rounding(job, name):
    n, ranks, module = job
    want = _interpreted(module, n, name)
    scale = np.abs(np.stack([W.inputs(r, name)[0] for r in range(n)])).sum(0)
    for r, got in enumerate(ranks):
        assert f"error:{name}" not in got, got[f"error:{name}"]
        rows = slice(r * W.T // n, (r + 1) * W.T // n) if name == "scatter_ring" else slice(None)
        assert np.all(np.abs(got[name] - want[r]) <= n * np.finfo(np.float32).eps * scale[rows]), name


def test_the_tensor_parallel_mlp_reduces_in_the_interpreters_order(job):
    """Each rank's partial product (its column block of W1, row block of W2) is a compiled GEMM, which rounds
    otherwise than the interpreter's float64 product; its all_reduce is bit for bit the interpreter's tree of
    those partials, and the result is the unsharded MLP's within f32 rounding."""
    n, ranks, module = job
    partials = [got["mlp_partial"] for got in ranks]
    tree = module.interpret("ar_sum", partials, world=n)
    X, W1, W2 = W.inputs(0, "mlp")
    interpreted = _interpreted(module, n, "mlp")
    for r, got in enumerate(ranks):
        assert "error:mlp" not in got, got["error:mlp"]
        assert np.array_equal(got["mlp"].view(np.uint32), np.asarray(tree[r], np.float32).view(np.uint32))
        H = X.astype(np.float64) @ W1
        unsharded = (0.5 * H * (1 + np.vectorize(math.erf)(H / np.sqrt(2)))) @ W2
        np.testing.assert_allclose(got["mlp"], unsharded, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got["mlp"], interpreted[r], rtol=1e-5, atol=1e-7)


def test_a_call_without_the_communicator_says_so(job):
    _, ranks, _ = job
    for got in ranks:
        assert "step 0 is a collective (all_reduce over mesh axis 'tp'), which runs only with a communicator" \
            in str(got["no_comm"])
