"""Data-parallel training through MPI on 2 and 3 CPU ranks (issue 16, "Overlap"): one @function takes the
gradients of the rank's shard of the batch, all_reduces their mean over the mesh's data axis — bucketed by
tessera-bucketize — and updates the weights. Each rank's updated weights are one process's step on the whole
batch within f32 rounding; the reduced gradients are, bit for bit, the interpreter's tree of the ranks' own
compiled gradients; buckets of 600 bytes (two buckets) give the same bits as one bucket of the default
25 MiB; and on a stream, where buckets MPI reduces run on the call's communication stream, the step gives
the bits it gives on the NULL stream."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import executor, tessera_frontend_compile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import data_parallel_worker as W  # noqa: E402
from mpi_jobs import child_env, mpiexec_or_skip  # noqa: E402
from test_collectives_mpi import GUARD  # noqa: E402

WEIGHTS = ("W1", "b1", "W2", "b2")


@pytest.fixture(scope="module", params=[2, 3])
def job(request, tmp_path_factory):
    n = request.param
    out = tmp_path_factory.mktemp(f"dp{n}")
    image = tessera.compile(W.source(n), target="cpu")
    (out / "dp.tessera").write_bytes(image)
    p = subprocess.run([mpiexec_or_skip(), "-n", str(n), sys.executable, str(HERE / "data_parallel_worker.py"),
                        str(out / "dp.tessera"), str(out)], capture_output=True, text=True, timeout=GUARD,
                       env=child_env(), cwd=out)
    ranks = [dict(np.load(out / f"rank{r}.npz")) for r in range(n) if (out / f"rank{r}.npz").exists()]
    assert p.returncode == 0 and len(ranks) == n, p.stdout + p.stderr
    for got in ranks:
        errors = [str(v) for k, v in got.items() if k.startswith("error:")]
        assert not errors, errors
    return n, ranks, image


@pytest.mark.parametrize("step", ["step", "step_stream", "step_ring", "step_ring_stream"])
def test_the_step_updates_the_weights_as_one_process_on_the_whole_batch(job, step):
    n, ranks, image = job
    whole = executor.load(image).step_whole(*W.whole(), np.float32(W.LR))
    for got in ranks:
        for i, name in enumerate(WEIGHTS, start=1):
            np.testing.assert_allclose(got[f"{step}{i}"], whole[i], rtol=2e-6, atol=2e-7, err_msg=name)
        # each rank's loss is its own shard's; their mean is the whole batch's
    np.testing.assert_allclose(np.mean([got["step0"] for got in ranks]), whole[0], rtol=1e-5)


@pytest.mark.parametrize("reduced, grads", [("reduced", "grads"), ("early", "grads_bf16")])
def test_the_reduced_gradients_are_the_interpreters_tree_of_the_ranks_gradients(job, reduced, grads):
    """`early` computes its gradients in another order than `grads_bf16` (its weight-gradient GEMM first): the
    same bits all the same."""
    n, ranks, _ = job
    module = tessera_frontend_compile(W.source(n), {"filename": "dp.py"})
    for i, name in enumerate(WEIGHTS):
        mean = "mean2" if ranks[0][f"{grads}{i}"].ndim == 2 else "mean1"
        tree = module.interpret(mean, [got[f"{grads}{i}"] for got in ranks], world=n)
        for r, got in enumerate(ranks):
            want = np.asarray(tree[r], np.float32)
            assert np.array_equal(got[f"{reduced}{i}"].view(np.uint32), want.view(np.uint32)), (name, r)


@pytest.mark.parametrize("a, b", [("step", "step_small"), ("step", "step_stream"),
                                  ("step_ring", "step_ring_stream")])
def test_buckets_and_streams_do_not_change_the_bits(job, a, b):
    _, ranks, _ = job
    for got in ranks:
        for i in range(5):
            assert np.array_equal(got[f"{a}{i}"].view(np.uint32), got[f"{b}{i}"].view(np.uint32)), i


def test_the_steps_buckets(job):
    """The default threshold puts the four gradients in one bucket; 600 bytes closes one after b2's (32),
    W2's (512) and b1's (64) gradients — the order the backward produces them — and puts W1's in a second."""
    n, _, _ = job
    from tessera.passes import bucketize
    module = tessera_frontend_compile(W.source(n), {"filename": "dp.py"})
    with module.context:
        from tessera.passes.registry import build_pass_manager
        build_pass_manager("builtin.module(tessera-autodiff,tessera-inline-functions,cse)").run(module.module.operation)
        fns = {str(op.attributes["sym_name"]).strip('"'): op for op in module.module.body.operations}
        sizes = {name: [[bucketize._size(m.operands[0]) for m in b] for b in bucketize.buckets(fns[name])]
                 for name in ("step", "step_small", "step_ring")}
    assert sizes == {"step": [[32, 512, 64, 512]], "step_small": [[32, 512, 64], [512]],
                     "step_ring": [[32, 512, 64], [512]]}


def test_a_bucket_runs_between_its_weight_gradients_gemm_and_the_input_gradients(job):
    """tessera-bucketize produces W2's gradient (the GEMM H^T dE) before the input gradient dE W2^T, which
    autodiff writes first (`grads_bf16`, which has no all_reduce, keeps that order), so that the bucket of b2's and
    W2's gradients starts one GEMM earlier, while dE W2^T runs (issue 16: each bucket waited for both GEMMs of
    its layer). The two GEMMs read the same dE; W1's gradient, the second bucket, reads what the input gradient
    gave. The bits do not change (the reduced gradients against the interpreter's tree of `grads_bf16`'s)."""
    from tessera import plan
    from tessera.image import read_image
    steps = plan.decode(read_image(job[2]).plan)["early"].steps
    collectives = [i for i, s in enumerate(steps) if isinstance(s, plan.CollectiveStep)]
    bucket = [i for k, i in enumerate(collectives) if i - collectives[0] == k]   # the first run of collectives
    assert len(bucket) == 2 and len(collectives) == 4, steps
    gemms = [i for i, s in enumerate(steps) if isinstance(s, plan.ArgsStep) and re.search(r"__gemm\d+$", s.kernel)]
    dw, dx = steps[max(i for i in gemms if i < bucket[0])], steps[min(i for i in gemms if i > bucket[-1])]
    assert set(plan.uses(dw)) & set(plan.uses(dx)), (dw, dx)   # the same dE
    later = [i for i in gemms if bucket[-1] < i < collectives[2]]
    assert len(later) == 2, later   # dx, then W1's gradient


def test_no_kernel_takes_a_gradients_slot_while_its_all_reduce_runs(job):
    """Regression (found on 4x H200: bench/data_parallel_gpu.py at T=16384 hid none of its all-reduce time): the
    memory plan gave a bucketed gradient's buffer slot to a later backward kernel, which libtessera must order
    after the whole collective (the communication stream still reads the slot). An all_reduce's input now
    keeps its slot until the first step that reads the all_reduce's result."""
    n, _, image = job
    from tessera import plan
    from tessera.image import read_image
    for name, p in plan.decode(read_image(image).plan).items():
        for i, s in enumerate(p.steps):
            if not (isinstance(s, plan.CollectiveStep) and s.collective == "all_reduce"):
                continue
            slot = p.values[s.input].buffer
            first_read = next((j for j in range(i + 1, len(p.steps)) if s.output in plan.uses(p.steps[j])), len(p.steps))
            if slot is None:
                continue
            for j in range(i + 1, first_read):
                tenants = {v for v in plan.uses(p.steps[j]) if v != s.input and p.values[v].buffer == slot}
                assert not tenants, (name, i, j, tenants)
