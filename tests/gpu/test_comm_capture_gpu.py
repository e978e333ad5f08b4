"""Communicator operations in graph capture over NCCL on two and four GPUs (runtime/src/comm.c, comm_nccl.c,
graph.c): all_reduce and all_gather recorded on a capturing Tessera stream, tsrGraphInstantiate issuing them
into the CUDA graph, two launches with new data in the same buffers, exact against numpy; and a replay whose
peer died returns a status within the communicator's timeout. The ranks are tests/gpu/nccl_worker.py's
(libtessera's C API through ctypes). Needs two (four) GPUs and NCCL; skips otherwise. tests/c/test_comm_nccl_fake.py
checks without GPUs which NCCL calls capture and replay make; tests/unit/test_comm_capture_mpi.py the MPI side."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_nccl_gpu import run_ranks, visible_gpus  # noqa: E402


@pytest.fixture(scope="module", params=(2, 4), ids=("2gpus", "4gpus"))
def world(request, cuda, tmp_path_factory):
    """Ranks, one GPU each; skips where fewer GPUs are visible or NCCL cannot start (a one-rank probe)."""
    if len(visible_gpus()) < request.param:
        pytest.skip(f"needs {request.param} GPUs")
    code, lines, err = run_ranks(tmp_path_factory.mktemp("probe"), "probe", world=1, timeout=120)[0]
    assert code == 0 and lines, err
    if not lines[0]["ok"]:
        pytest.skip(f"NCCL is not usable here: {lines[0]['why']}")
    return request.param


def test_captured_collectives_replay_exactly(world, tmp_path):
    for rank, (code, lines, err) in enumerate(run_ranks(tmp_path, "captured", world)):
        assert code == 0, f"rank {rank}: {err}"
        assert [line["what"] for line in lines] == ["all_reduce, replay 0", "all_gather, replay 0",
                                                    "all_reduce, replay 1", "all_gather, replay 1"], err
        assert all(line["ok"] for line in lines), f"rank {rank}: {lines}"


def test_a_replay_whose_peer_died_returns_a_status(world, tmp_path):
    (code, lines, err), *_ = run_ranks(tmp_path, "captured-dead-peer", world, timeout=120)
    assert code == 0 and len(lines) == 1, err
    (replay,) = lines
    assert replay["status"] in ("TSR_ERROR_TIMEOUT", "TSR_ERROR_LAUNCH_FAILED"), replay
    assert replay["seconds"] < 3 + 10, replay  # the communicator's 3 s timeout, then the abort
