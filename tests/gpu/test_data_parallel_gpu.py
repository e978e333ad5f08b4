"""A data-parallel training step on two and on four GPUs through NCCL (issue 16, "Overlap"): data_parallel_gpu's
image, for sm_80 and for sm_90a, run by as many ranks as its mesh has devices (test_nccl_gpu's `world`: 2, and
4 where four GPUs are visible), which tessera-run starts with --backend nccl, one GPU each, each on its share of
the batch. Checks: each rank's updated weights are one GPU's step on the whole batch within the bf16 rounding of
the backward's cotangents — with NCCL's reduction on a stream, where the buckets run on the call's communication
stream while the backward goes on, and on the NULL stream, and with the deterministic tree; every rank ends with
the same bits; the stream does not change a bit; the deterministic step's gradients are the interpreter's tree
of the ranks' compiled gradients in f32. bench/data_parallel_gpu.py times the overlap."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data_parallel_gpu as G  # noqa: E402
from test_collectives_gpu import job, tree  # noqa: E402
from test_nccl_gpu import nccl, world  # noqa: E402,F401  (fixtures; `world` skips without its GPUs)
WEIGHTS = ("W1", "b1", "W2", "b2")
VARIANTS = ("step_stream", "step", "step_det_stream", "step_det")


@pytest.fixture(scope="module", params=G.ARCHS)
def ranks(request, world, tmp_path_factory):  # noqa: F811
    got = job(G, tmp_path_factory.mktemp(f"n{world}.{request.param}"), world, request.param)
    for results in got:
        errors = [str(v) for k, v in results.items() if k.startswith("error:")]
        assert not errors, errors
    return got


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_step_updates_the_weights_as_one_gpu_on_the_whole_batch(ranks, variant):
    """Within bf16 rounding of the gradients: the backward GEMMs round their cotangents to bf16 (docs/language.md,
    "Derivatives"), on a shard as on the whole batch, and their sums cancel; 2^-6 of the largest update, where
    the CPU image of this program through MPI differs from its whole-batch step by 0.0047 of it."""
    X, Y, *weights = G.whole()
    for r, got in enumerate(ranks):
        for i, name in enumerate(WEIGHTS, start=1):
            update = np.abs(weights[i - 1] - got[f"whole{i}"]).max()
            np.testing.assert_allclose(got[f"{variant}{i}"], got[f"whole{i}"], rtol=0, atol=2.0 ** -6 * update,
                                       err_msg=f"rank {r}: {name}")
    np.testing.assert_allclose(np.mean([got[f"{variant}0"] for got in ranks]), ranks[0]["whole0"], rtol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rank_ends_with_the_same_weights(ranks, variant):
    for got in ranks[1:]:
        for i in range(1, 5):
            assert np.array_equal(ranks[0][f"{variant}{i}"].view(np.uint32), got[f"{variant}{i}"].view(np.uint32))


@pytest.mark.parametrize("a, b", [("step", "step_stream"), ("step_det", "step_det_stream")])
def test_the_communication_stream_does_not_change_a_bit(ranks, a, b):
    for got in ranks:
        for i in range(5):
            assert np.array_equal(got[f"{a}{i}"].view(np.uint32), got[f"{b}{i}"].view(np.uint32)), (a, i)


def test_the_deterministic_step_reduces_the_ranks_gradients_in_f32(ranks):
    """The ranks' tree in f32 (two: one addition; four: (g0 + g1) + (g2 + g3)), then the division by the
    number of ranks (a power of two: exact): W - lr * mean, computed in f32 by the step's update kernel, within
    one rounding of numpy's f32 update of that mean."""
    X, Y, *weights = G.whole()
    lr = np.float32(G.LR)
    for i, w in enumerate(weights):
        mean = tree([got[f"grads{i}"] for got in ranks]) / np.float32(len(ranks))
        want = w - lr * mean
        for got in ranks:
            np.testing.assert_allclose(got[f"step_det{i + 1}"], want, rtol=0, atol=4 * np.finfo(np.float32).eps
                                       * (np.abs(w) + np.abs(lr * mean)).max(), err_msg=WEIGHTS[i])
