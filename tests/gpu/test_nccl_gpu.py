"""Communicators over NCCL on two and on four GPUs (runtime/src/comm_nccl.c): one process per GPU
(CUDA_VISIBLE_DEVICES), every collective with every dtype and op it takes, on a Tessera stream and on the NULL
stream, checked against numpy; and a rank that dies: the survivor gets a status within the communicator's
timeout, never a hang. Each test runs at every world of WORLDS that the visible GPUs allow (the `world`
fixture, which test_collectives_gpu and test_data_parallel_gpu share). The workers call libtessera's C API
through ctypes (<tessera/comm.h>), so this tests the C API itself. Needs two (four) GPUs and NCCL
($TESSERA_NCCL_LIBRARY, else an nvidia-nccl-cu12/cu13 wheel's nvidia/nccl/lib/libnccl.so.2 on sys.path, e.g.
the one PyTorch depends on, else the system's); skips otherwise.
tests/c/test_comm_nccl_fake.py checks the calls NCCL gets without GPUs."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("nccl_worker.py")
WORLDS = (2, 4)   # ranks, one GPU each: a pair, and a ring whose collectives are more than one exchange


def visible_gpus():
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them: the variable's list (those that exist)
    if set, else every GPU nvidia-smi lists, by index."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    count = sum(line.startswith("GPU ") for line in out.splitlines())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(i) for i in range(count)]
    return [d.strip() for d in visible.split(",") if d.strip()][:count]


def nccl_library():
    """$TESSERA_NCCL_LIBRARY, else a wheel's libnccl.so.2 on sys.path where libtessera's own lookup (the wheel
    beside the installed tessera package, then the system's) could miss it: tessera installed apart from the
    packages PyTorch brought; None: leave it to libtessera."""
    if os.environ.get("TESSERA_NCCL_LIBRARY"):
        return os.environ["TESSERA_NCCL_LIBRARY"]
    wheel = Path("nvidia", "nccl", "lib", "libnccl.so.2")
    package = Path(importlib.util.find_spec("tessera._runtime").origin).parent  # where lib/libtessera.so is
    if (package.parent / wheel).exists():
        return None
    found = [Path(p) / wheel for p in sys.path if p and (Path(p) / wheel).exists()]
    return str(found[0]) if found else None


def run_ranks(tmp_path, scenario, world=2, timeout=300):
    """Starts `world` workers, rank r on the r-th visible GPU; returns each one's (return code, results)."""
    procs = []
    library = nccl_library()
    for rank, gpu in enumerate(visible_gpus()[:world]):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
        env.pop("TESSERA_BACKEND", None)
        if library:
            env["TESSERA_NCCL_LIBRARY"] = library
        procs.append(subprocess.Popen([sys.executable, str(WORKER), scenario, str(world), str(rank), str(tmp_path)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        results.append((p.returncode, lines, err))
    return results


@pytest.fixture(scope="module")
def nccl(cuda, tmp_path_factory):
    """Skips without NCCL (a one-rank probe: a CUDA context and a unique id)."""
    probe = run_ranks(tmp_path_factory.mktemp("probe"), "probe", world=1, timeout=120)[0]
    assert probe[0] == 0 and probe[1], probe[2]
    if not probe[1][0]["ok"]:
        pytest.skip(f"NCCL is not usable here: {probe[1][0]['why']}")


@pytest.fixture(scope="module", params=WORLDS, ids=[f"{n}gpus" for n in WORLDS])
def world(request, nccl):
    """The number of ranks, one GPU each; skips where fewer GPUs are visible."""
    if len(visible_gpus()) < request.param:
        pytest.skip(f"needs {request.param} GPUs")
    return request.param


def test_every_collective_matches_numpy(world, tmp_path):
    results = run_ranks(tmp_path, "collectives", world)
    for rank, (code, lines, err) in enumerate(results):
        assert code == 0, f"rank {rank}: {err}"
        bad = [line for line in lines if not line["ok"]]
        assert lines and not bad, f"rank {rank}: {bad}"
    assert len(results[0][1]) > 40  # every dtype and op ran


def test_a_dead_rank_is_a_status_not_a_hang(world, tmp_path):
    """Every rank but 0 exits after the communicator is made; rank 0's all_reduce is queued, and within the 3 s
    timeout the communicator's monitor aborts NCCL: the stream finishes and the communicator reports
    TSR_ERROR_TIMEOUT."""
    (code0, lines0, err0), *others = run_ranks(tmp_path, "dead-peer", world, timeout=120)
    assert code0 == 0, err0
    assert len(others) == world - 1 and all(code == 0 for code, _, _ in others)
    report = {line["what"]: line for line in lines0}
    assert report["stream"]["status"] in ("TSR_SUCCESS", "TSR_ERROR_LAUNCH_FAILED"), report
    assert report["async_error"]["status"] in ("TSR_ERROR_TIMEOUT", "TSR_ERROR_LAUNCH_FAILED"), report
    assert report["async_error"]["seconds"] < 30, report
