"""Compiled collectives on two and on four GPUs through NCCL (issue 16): collectives_gpu's image (every tdist op
of test_collectives_mpi's program and a bf16 tensor-parallel MLP), for sm_80 and for sm_90a, run by as many
ranks as the program's mesh has devices (test_nccl_gpu's `world`: 2, and 4 where four GPUs are visible), which
tessera-run starts with --backend nccl, one GPU each. Each rank's results are compared with what
tessera.interpret gives that rank (computed where the images are built: collectives_gpu.n<world>.expected.npz)
— bit for bit where the reduction is in the interpreter's tree order, within rounding where NCCL chooses it —
and the MLP's deterministic all_reduce with the interpreter's tree ((p0 + p1) + (p2 + p3), in f32) of the
ranks' compiled partial products, bit for bit; the MLP itself with numpy's unsharded one."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import collectives_gpu as G  # noqa: E402
from test_nccl_gpu import nccl, nccl_library, world  # noqa: E402,F401  (fixtures; `world` skips without its GPUs)

GUARD = 300   # seconds the job may take before the test fails instead of hanging
EXACT = ("ar_sum", "ar_max", "ar_min", "ar_mean", "ar_prod", "ar_bf16", "ar_tree", "gather0", "gather1",
         "scatter0", "scatter1", "bcast", "grid_axes")


@pytest.fixture(scope="module")
def expected(world):  # noqa: F811
    prebuilt = os.environ.get("TESSERA_GPU_IMAGES")
    if prebuilt:
        return dict(np.load(os.path.join(prebuilt, G.expected_name(world))))
    try:
        return G.expected(world)
    except ImportError as e:
        pytest.skip(f"no compiler here ({e}) and no TESSERA_GPU_IMAGES with prebuilt images")


def tree(values: list[np.ndarray]) -> np.ndarray:
    """The interpreter's order of a deterministic sum (tessera/interpret/dist_ops.py): pairs of neighbours,
    ((v0 + v1) + (v2 + v3)) + ..., each addition rounded to the values' dtype."""
    while len(values) > 1:
        values = [values[i] + values[i + 1] if i + 1 < len(values) else values[i] for i in range(0, len(values), 2)]
    return values[0]


def job(worker, out: Path, world: int, arch: str) -> list[dict]:
    """Runs module `worker` (collectives_gpu, data_parallel_gpu: its source(world), image_name(world, arch), and
    a main(IMAGE, OUT) writing OUT/rank<r>.npz) on `world` ranks that tessera-run starts with --backend nccl, on
    its image for `world` and `arch` ($TESSERA_GPU_IMAGES's, else compiled here, else a skip); returns each
    rank's results."""
    prebuilt = os.environ.get("TESSERA_GPU_IMAGES")
    if prebuilt:
        image = Path(prebuilt) / worker.image_name(world, arch)
    else:
        image = out / worker.image_name(world, arch)
        try:
            import tessera
            image.write_bytes(tessera.compile(worker.source(world), Path(worker.__file__).name, target="ptx",
                                              arch=arch))
        except ImportError as e:
            pytest.skip(f"no compiler here ({e}) and no TESSERA_GPU_IMAGES with prebuilt images")
    # An empty PYTHONPATH entry means the working directory, which in a source checkout holds a tessera/ that
    # is not the installed package: join only the entries there are.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    env.pop("TESSERA_BACKEND", None)
    library = nccl_library()
    if library:
        env["TESSERA_NCCL_LIBRARY"] = library
    p = subprocess.run([sys.executable, "-m", "tessera.tools.run", "-n", str(world), "--backend", "nccl",
                        worker.__file__, str(image), str(out)], capture_output=True, text=True, timeout=GUARD, env=env)
    got = [dict(np.load(out / f"rank{r}.npz")) for r in range(world) if (out / f"rank{r}.npz").exists()]
    assert p.returncode == 0 and len(got) == world, p.stdout + p.stderr
    return got


@pytest.fixture(scope="module", params=G.ARCHS)
def ranks(request, world, tmp_path_factory):  # noqa: F811
    return job(G, tmp_path_factory.mktemp(f"n{world}.{request.param}"), world, request.param)


def _no_error(got, name):
    assert f"error:{name}" not in got, str(got[f"error:{name}"])


@pytest.mark.parametrize("name", EXACT)
def test_collectives_in_tree_order_match_the_interpreter_bit_for_bit(ranks, expected, name):
    for r, got in enumerate(ranks):
        _no_error(got, name)
        g, w = got[name], expected[f"{name}:{r}"]
        assert g.shape == w.shape, (name, r, g.shape, w.shape)
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32)), (name, r, np.abs(g - w).max())


@pytest.mark.parametrize("name", ["ar_ring", "scatter_ring"])
def test_collectives_in_nccls_order_match_within_rounding(ranks, expected, name):
    n = len(ranks)
    scale = np.abs(np.stack([G.args(n, r, name)[0] for r in range(n)])).sum(0)
    for r, got in enumerate(ranks):
        _no_error(got, name)
        rows = slice(r * G.W.T // n, (r + 1) * G.W.T // n) if name == "scatter_ring" else slice(None)
        assert got[name].shape == expected[f"{name}:{r}"].shape
        assert np.all(np.abs(got[name] - expected[f"{name}:{r}"]) <= n * np.finfo(np.float32).eps
                      * scale[rows]), name


def test_the_tensor_parallel_mlp_is_the_tree_of_the_ranks_partials(ranks):
    """Every rank holds the interpreter's tree of the ranks' p_r in f32 (two ranks: p0 + p1; four: (p0 + p1) +
    (p2 + p3)), p_r being rank r's compiled partial product (its column block of W1, row block of W2); and that
    is the unsharded MLP within bf16 rounding of the hidden activations (gelu's last bit may round H to a
    neighbouring bf16)."""
    from tessera.numerics.rounding import round_to
    for got in ranks:
        _no_error(got, "mlp")
        _no_error(got, "mlp_partial")
    partials = tree([got["mlp_partial"] for got in ranks])
    X, W1, W2 = G.mlp_inputs()
    Z = X.astype(np.float64) @ W1
    H = round_to((0.5 * Z * (1 + np.vectorize(math.erf)(Z / np.sqrt(2)))).astype(np.float32), "bf16")
    unsharded = H.astype(np.float64) @ W2
    bound = 2.0 ** -7 * (np.abs(H).astype(np.float64) @ np.abs(W2)) + 1e-6
    for r, got in enumerate(ranks):
        assert got["mlp"].shape == (G.TM, G.DM)
        assert np.array_equal(got["mlp"].view(np.uint32), partials.view(np.uint32)), r
        assert np.all(np.abs(got["mlp"] - unsharded) <= bound), (r, np.abs(got["mlp"] - unsharded).max())


def test_a_call_without_the_communicator_says_so(ranks):
    for got in ranks:
        assert "step 0 is a collective (all_reduce over mesh axis 'tp'), which runs only with a communicator" \
            in str(got["no_comm"])
