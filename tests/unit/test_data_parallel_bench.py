"""bench/data_parallel_gpu.py's torch peer (issue 16): its model is the program's (the gradients of the torch
model equal Tessera's `grads` of the bench's own program, compiled for the CPU), DDP's buckets as the peer's
`reduce` mirrors them, and the peer's checks on two CPU ranks (gloo): DDP's reduced gradients equal the model's
over the whole batch, and a wrong reference is caught."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "bench"))
import data_parallel_gpu as B  # noqa: E402

LAYERS, D, F, T = 3, 16, 32, 8


def arrays(seed: int) -> list:
    """X, Y and the weights, as the bench makes them (f32)."""
    dims = [D] + [F] * (LAYERS - 1) + [D]
    rng = np.random.default_rng(seed)
    host = [rng.standard_normal((T, D)), rng.standard_normal((T, D))]
    for i in range(LAYERS):
        host += [rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i]), rng.standard_normal(dims[i + 1]) / 8]
    return [a.astype(np.float32) for a in host]


def test_the_torch_model_has_the_programs_gradients():
    import tessera
    from tessera import executor
    src = B.program(1, LAYERS, D, F).split("@function\ndef reduce")[0]   # the loss and grads, not the collectives
    prog = executor.load(tessera.compile(src, "data_parallel_gpu.py"))
    host = arrays(0)
    ours = [np.asarray(g) for g in prog.grads(*host)]
    X, Y, *weights = (torch.from_numpy(a) for a in host)
    theirs = B.torch_gradients(torch, B.torch_model(torch, weights), X, Y)
    assert [tuple(t.shape) for t in theirs] == [g.shape for g in ours]
    err = B.worst(torch, theirs, [torch.from_numpy(g) for g in ours])
    assert err <= B.TOLERANCE, err
    # the check can fail: gradients of the wrong sign are caught
    assert B.worst(torch, theirs, [torch.from_numpy(-g) for g in ours]) > B.TOLERANCE


def test_buckets_as_ddp_makes_them():
    params = [torch.zeros(n) for n in (2 ** 18, 10, 2 ** 20, 5, 3 * 2 ** 20, 7)]   # 1 MiB, 4 MiB, 12 MiB of f32
    sizes = [b.numel() for b in B.buckets(torch, params, 8 * 2 ** 20, 2 ** 20)]
    # reversed: 7 then 12 MiB pass the first 1 MiB; 5, 4 MiB, 10 and 1 MiB pass 8 MiB only with the last
    assert sizes == [7 + 3 * 2 ** 20, 5 + 2 ** 20 + 10 + 2 ** 18]
    assert [b.numel() for b in B.buckets(torch, params, 4 * 2 ** 20, 2 ** 20)] == \
        [7 + 3 * 2 ** 20, 5 + 2 ** 20, 10 + 2 ** 18]
    assert sum(sizes) == sum(p.numel() for p in params)


def _rank(rank: int, store: str, bad: bool, out: str):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    torch.manual_seed(0)

    class Args:
        rounds, iters, warmup = 1, 1, 0
    host = arrays(rank)
    X, Y, *weights = (torch.from_numpy(a) for a in host)
    want = B.torch_gradients(torch, B.torch_model(torch, weights), X, Y)
    theirs = [(-w if bad else w).numpy() for w in want]
    best, failed = B.torch_peer(torch, dist, Args, host, "cpu", theirs)
    dist.destroy_process_group()
    np.save(os.path.join(out, f"rank{rank}.npy"), np.array([best["local"], best["reduce"], best["step"],
                                                             len(failed)]))


@pytest.mark.parametrize("bad", [False, True])
def test_the_peers_checks_on_two_cpu_ranks(tmp_path, bad, monkeypatch):
    import torch.multiprocessing as mp
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")   # the ranks' pairs on loopback; the store a file: no ports
    mp.spawn(_rank, args=(str(tmp_path / "store"), bad, str(tmp_path)), nprocs=2, join=True)
    for rank in range(2):
        got = np.load(tmp_path / f"rank{rank}.npy")
        assert np.all(np.isfinite(got[:3])) and np.all(got[:3] > 0)
        # DDP's gradients equal the whole batch's on both; the Tessera-side reference, negated, fails its check
        assert got[3] == (1 if bad else 0)
