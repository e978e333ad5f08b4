"""Communicators over MPI on the CPU (issue 16's CI proof): 2 and 3 ranks (4 where the tree's order differs from
rank order) started by mpiexec from the mpich wheel (the test extra), each running comm_worker.py.

Every collective, reduce op and dtype (f32, f64, bf16, i32, i64) against numpy; deterministic all_reduce and
reduce_scatter bit for bit against tessera.interpret's tree; sub-communicators; statuses of bad arguments; a
rank that exits or stops makes the others return TSR_ERROR_TIMEOUT or a peer error within the limit; and
tessera-run's exit status and clean-up. Each run has its own wall-clock guard (subprocess timeout)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import comm_worker as W  # noqa: E402
from mpi_jobs import child_env, mpiexec_or_skip as _mpiexec  # noqa: E402

GUARD = 240  # seconds a whole job may take before the test fails instead of hanging


def launch(n: int, scenario: str, tmp_path: Path, *extra: str) -> list[dict]:
    start = time.monotonic()
    p = subprocess.run([_mpiexec(), *extra, "-n", str(n), sys.executable, str(HERE / "comm_worker.py"), scenario,
                        str(tmp_path)], capture_output=True, text=True, timeout=GUARD, env=child_env(), cwd=tmp_path)
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(n) if (tmp_path / f"rank{r}.npz").exists()]
    for r in ranks:
        r["_wall"] = time.monotonic() - start
        r["_output"] = p.stdout + p.stderr
        r["_rc"] = p.returncode
    return ranks


@pytest.fixture(scope="module", params=[2, 3])
def collectives(request, tmp_path_factory):
    n = request.param
    ranks = launch(n, "collectives", tmp_path_factory.mktemp(f"coll{n}"))
    assert len(ranks) == n, ranks[0]["_output"] if ranks else "no rank wrote its results"
    return n, ranks


def _float(dtype, a):
    return a.astype(np.uint32).__lshift__(16).view(np.float32) if dtype == "bf16" else a


def _numpy_reduce(dtype, op, xs):
    xs = [_float(dtype, x).astype(np.float64) if dtype in ("f32", "f64", "bf16") else x for x in xs]
    fn = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    acc = xs[0]
    for x in xs[1:]:
        acc = fn(acc, x)
    return acc / len(xs) if op == "avg" else acc


@pytest.mark.parametrize("dtype", W.DTYPES)
def test_every_reduction_matches_numpy(collectives, dtype):
    n, ranks = collectives
    xs = [W.inputs(r, dtype) for r in range(n)]
    for op in W.FLOAT_OPS if dtype not in ("i32", "i64") else W.INT_OPS:
        want = _numpy_reduce(dtype, op, xs)
        part = W.K // n
        for r, got in enumerate(ranks):
            for key, expect in ((f"ar_{dtype}_{op}", want), (f"rs_{dtype}_{op}", want[r * part:(r + 1) * part])):
                g = got[key]
                assert g.dtype == xs[0].dtype, key
                if dtype in ("i32", "i64"):
                    np.testing.assert_array_equal(g, expect.astype(g.dtype), err_msg=key)
                else:
                    rtol = {"f32": 1e-5, "f64": 1e-12, "bf16": 2e-2}[dtype]
                    np.testing.assert_allclose(_float(dtype, g), expect, rtol=rtol, atol=1e-30, err_msg=key)


@pytest.mark.parametrize("dtype", W.DTYPES)
def test_data_movement_is_exact(collectives, dtype):
    n, ranks = collectives
    xs = [W.inputs(r, dtype) for r in range(n)]
    part = W.K // n
    for r, got in enumerate(ranks):
        np.testing.assert_array_equal(got[f"ag_{dtype}"], np.stack(xs))
        np.testing.assert_array_equal(got[f"a2a_{dtype}"], np.concatenate([x[r * part:(r + 1) * part] for x in xs]))
        np.testing.assert_array_equal(got[f"bc_{dtype}"], xs[n - 1])


def test_point_to_point_streams_in_place_and_splits(collectives):
    n, ranks = collectives
    f32 = [W.inputs(r, "f32") for r in range(n)]
    for r, got in enumerate(ranks):
        np.testing.assert_array_equal(got["p2p"], W.inputs((r - 1) % n, "f64"))
        np.testing.assert_array_equal(got["inplace_max"], np.maximum.reduce(f32))
        np.testing.assert_allclose(got["stream_sum"], np.sum(np.array(f32, np.float64), axis=0), rtol=1e-5)
        members = list(range(r % 2, n, 2))
        assert int(got["half_size"]) == len(members)
        assert int(got["half_rank"]) == len(members) - 1 - members.index(r)  # keys reverse the order
        assert float(got["half_sum"][0]) == sum(members)
        assert int(got["alone"]) == (1 if r == 0 else -1)


def test_bad_arguments_return_statuses(collectives):
    _, ranks = collectives
    for got in ranks:
        assert str(got["status_rs_indivisible"]) == "TSR_ERROR_INVALID_VALUE"
        assert str(got["status_a2a_indivisible"]) == "TSR_ERROR_INVALID_VALUE"
        assert str(got["status_avg_int"]) == "TSR_ERROR_UNSUPPORTED"
        assert str(got["status_bad_root"]) == "TSR_ERROR_INVALID_VALUE"
        assert str(got["status_self_send"]) == "TSR_ERROR_INVALID_VALUE"
        assert str(got["status_bad_peer"]) == "TSR_ERROR_INVALID_VALUE"
        assert str(got["status_strided"]).startswith("ValueError: the send array must be C-contiguous")
        assert str(got["status_bf16_of_f32"]).startswith("TypeError: bf16 data is passed as uint16 arrays")
        assert str(got["status_unknown_op"]).startswith("ValueError: unknown reduction 'mean'")
        assert str(got["status_read_only_out"]) == "ValueError: the out array is read-only"
        np.testing.assert_array_equal(got["after"], np.full(3, len(ranks), np.float32))


def _interpreted(world: int, dtype: str, xs: list[np.ndarray]) -> dict:
    """tessera.interpret's deterministic all_reduce and reduce_scatter of `xs` (one per device), per op."""
    from tessera import tessera_frontend_compile
    ops = {"sum": "sum", "prod": "prod", "max": "max", "min": "min", "avg": "mean"}
    calls = ", ".join(f'op.{kind}(X, mesh=mesh, op="{red}", deterministic=True)'
                      for red in ops.values() for kind in ("all_reduce", "reduce_scatter"))
    src = (f"from tessera import dist, {dtype}, function, op, tensor\n"
           f"mesh = dist.Mesh(axes=['dp'], devices=range({world}))\n\n"
           f"@function\ndef f(X: tensor[{dtype}, {W.K}]):\n    return ({calls})\n")
    outs = tessera_frontend_compile(src, {"filename": "reference.py"}).interpret("f", [_float(dtype, x) for x in xs],
                                                                               world=world)
    res = {}
    for i, ours in enumerate(ops):
        res[f"ard_{dtype}_{ours}"] = outs[2 * i]
        res[f"rsd_{dtype}_{ours}"] = outs[2 * i + 1]
    return res


def _bits(dtype, a):
    a = np.asarray(a)
    if dtype == "bf16":
        return W.bf16_bits(a) if a.dtype == np.float32 else a
    return a.view(np.uint32 if dtype == "f32" else np.uint64)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    ranks = launch(4, "collectives", tmp_path_factory.mktemp("coll4"))
    assert len(ranks) == 4, ranks[0]["_output"] if ranks else "no rank wrote its results"
    return ranks


@pytest.mark.parametrize("dtype", ["f32", "f64", "bf16"])
def test_deterministic_reductions_are_the_interpreters_bit_for_bit(collectives, four_ranks, dtype):
    for n, ranks in (collectives, (4, four_ranks)):
        xs = [W.inputs(r, dtype) for r in range(n)]
        want = _interpreted(n, dtype, xs)
        for r, got in enumerate(ranks):
            for key, per_device in want.items():
                np.testing.assert_array_equal(_bits(dtype, got[key]), _bits(dtype, per_device[r]),
                                              err_msg=f"{key} on rank {r} of {n}")
    # the check can fail: these values give another sum in another order (rank order, for 4 ranks)
    if dtype != "bf16":
        xs = [W.inputs(r, dtype) for r in range(4)]
        linear = ((xs[0] + xs[1]) + xs[2]) + xs[3]
        assert np.any(_bits(dtype, linear) != _bits(dtype, four_ranks[0][f"ard_{dtype}_sum"]))


@pytest.mark.parametrize("mode", ["exit", "stop"])
def test_a_dead_or_stopped_rank_yields_a_status_not_a_hang(mode, tmp_path):
    # mpiexec must not take the survivors down with the dead rank: they have to see it themselves
    ranks = launch(3, f"dead_{mode}", tmp_path, "-disable-auto-cleanup")
    assert len(ranks) == 2, ranks[0]["_output"] if ranks else "no survivor wrote its results"
    for got in ranks:
        assert str(got["status"]) in ("TSR_ERROR_TIMEOUT", "TSR_ERROR_LAUNCH_FAILED"), got["_output"]
        assert float(got["seconds"]) < 3 + 10, "the survivors waited far past the communicator's 3 s timeout"
        assert str(got["again"]) == str(got["status"])  # broken: the next operation fails at once
        assert float(got["again_seconds"]) < 1
        assert str(got["async"]) == str(got["status"])  # tsrCommGetAsyncError keeps it
    if mode == "stop":
        assert "within the communicator's timeout" in str(ranks[0]["message"])


def test_an_abort_ends_a_waiting_collective_at_once(tmp_path):
    ranks = launch(2, "dead_abort", tmp_path, "-disable-auto-cleanup")
    assert len(ranks) == 1, ranks[0]["_output"] if ranks else "rank 0 wrote no results"
    (got,) = ranks
    assert str(got["status"]) == "TSR_ERROR_LAUNCH_FAILED" and "aborted" in str(got["message"]), got["_output"]
    assert float(got["seconds"]) < 2.5  # the abort after 0.5 s, well before the 3 s timeout
    assert str(got["again"]) == str(got["async"]) == "TSR_ERROR_LAUNCH_FAILED"


def test_a_missing_mpi_library_is_named():
    p = subprocess.run([sys.executable, "-c", "from tessera import comm, runtime\ntry:\n    comm.unique_id('mpi')\n"
                        "except runtime.Error as e:\n    print(e.status_name, e)\n"],
                       capture_output=True, text=True, timeout=120, cwd=HERE,
                       env=child_env(TESSERA_MPI_LIBRARY="/nonexistent/libmpi.so.12"))
    assert p.stdout.startswith("TSR_ERROR_UNSUPPORTED"), p.stdout + p.stderr
    assert "TESSERA_MPI_LIBRARY=/nonexistent/libmpi.so.12" in p.stdout and "pip install mpich" in p.stdout


def _tessera_run(*args, timeout=120):
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tessera.tools.run", *args], capture_output=True, text=True,
                       timeout=timeout, env=child_env(), cwd=HERE)
    return p, time.monotonic() - start


def test_tessera_run_starts_mpi_ranks(tmp_path):
    _mpiexec()
    script = tmp_path / "hello.py"
    script.write_text("import sys\nimport numpy as np\nfrom tessera import comm\n"
                      "c = comm.Communicator.from_env(timeout=60)\n"
                      "total = int(c.all_reduce(np.ones(1, np.int64))[0])\n"
                      f"open(f'{tmp_path}/out{{c.rank}}', 'w').write(f'{{c.rank}} {{c.size}} {{total}} {{sys.argv[1:]}}')\n")
    p, _ = _tessera_run("-n", "2", str(script), "a", "--b")
    assert p.returncode == 0, p.stdout + p.stderr
    assert [(tmp_path / f"out{r}").read_text() for r in range(2)] == [f"{r} 2 2 ['a', '--b']" for r in range(2)]


@pytest.mark.parametrize("backend", ["mpi", "nccl"])
def test_tessera_run_propagates_a_failure_and_stops_the_others(backend, tmp_path):
    if backend == "mpi":
        _mpiexec()
    script = tmp_path / "fail.py"
    # rank 1 fails at once; rank 0 would run for 10 minutes
    script.write_text("import os, sys, time\nif os.environ.get('RANK', os.environ.get('PMI_RANK')) == '1':\n"
                      "    sys.exit(3)\ntime.sleep(600)\n")
    p, seconds = _tessera_run("-n", "2", "--backend", backend, "--grace", "1", str(script))
    assert p.returncode == 3, p.stdout + p.stderr
    assert seconds < 60


def test_tessera_run_spawns_ranks_with_the_rendezvous_in_their_environment(tmp_path):
    script = tmp_path / "env.py"
    script.write_text("import os\nseen = [os.environ[k] for k in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', "
                      "'TESSERA_COMM_BACKEND', 'TESSERA_RENDEZVOUS')]\n"
                      f"open(f'{tmp_path}/out{{seen[0]}}', 'w').write(' '.join(seen[:4]) + ' ' + "
                      "str(seen[4].startswith('127.0.0.1:')))\n")
    p, _ = _tessera_run("-n", "3", "--backend", "nccl", str(script))
    assert p.returncode == 0, p.stdout + p.stderr
    assert [(tmp_path / f"out{r}").read_text() for r in range(3)] == [f"{r} 3 {r} nccl True" for r in range(3)]


@pytest.mark.parametrize("backend", ["mpi", "nccl"])
def test_tessera_run_refuses_a_missing_script_before_starting_ranks(backend, tmp_path):
    for script, said in [(tmp_path / "missing.py", "no such script"),
                         (tmp_path, "is a directory without __main__.py, not a script")]:
        p, _ = _tessera_run("-n", "3", "--backend", backend, str(script))
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr == f"tessera-run: error: {script}: {said}\n"  # one line, not a traceback per rank
        assert p.stdout == ""
    (tmp_path / "__main__.py").write_text("")  # what Python runs as a directory: no refusal
    p, _ = _tessera_run("-n", "1", "--backend", "nccl", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr


def test_from_env_without_a_launcher_says_what_is_missing(monkeypatch):
    _mpiexec()
    from tessera import comm, runtime
    for var in ("RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(runtime.Error) as e:
        comm.Communicator.from_env(backend="mpi")
    assert e.value.status_name == "TSR_ERROR_INVALID_VALUE"
    assert "WORLD_SIZE is not set" in str(e.value)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "5")
    with pytest.raises(runtime.Error) as e:
        comm.Communicator.from_env(backend="mpi")
    assert "RANK=5 is not an integer in [0, 1]" in str(e.value)
    with pytest.raises(ValueError, match="unknown communicator backend"):
        comm.Communicator.from_env(backend="gloo")


def test_the_rendezvous_reaches_every_rank_and_mpi_then_asks_for_its_launcher(tmp_path):
    _mpiexec()
    script = tmp_path / "rendezvous.py"
    # spawned ranks (no MPI launcher): rank 0 serves the id over TCP, rank 1 reads it; MPI's world is 1 rank
    script.write_text("import os\nfrom tessera import comm, runtime\ntry:\n"
                      "    comm.Communicator.from_env(backend='mpi', timeout=30)\n    said = 'created'\n"
                      "except runtime.Error as e:\n    said = f'{e.status_name} {e}'\n"
                      f"open(f'{tmp_path}/out{{os.environ[\"RANK\"]}}', 'w').write(said)\n")
    p, _ = _tessera_run("-n", "2", "--backend", "nccl", str(script))
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(2):
        said = (tmp_path / f"out{r}").read_text()
        assert said.startswith("TSR_ERROR_INVALID_VALUE"), said
        assert f"asked for rank {r} of 2, but MPI_COMM_WORLD makes this process rank 0 of 1" in said
        assert "start the job with an MPI launcher" in said


def _rank_1_finds_no_rank_0(monkeypatch, port: int) -> None:
    """Rank 1 of 2, started without an MPI launcher, fetching the id from 127.0.0.1:port: TSR_ERROR_TIMEOUT
    about its 1 s timeout later."""
    _mpiexec()
    from tessera import comm, runtime
    for var in ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("TESSERA_RENDEZVOUS", f"127.0.0.1:{port}")
    start = time.monotonic()
    with pytest.raises(runtime.Error) as e:
        comm.Communicator.from_env(backend="mpi", timeout=1)
    assert e.value.status_name == "TSR_ERROR_TIMEOUT" and "no rank 0 answered" in str(e.value)
    assert time.monotonic() - start < 10


def test_a_rendezvous_nobody_serves_times_out(monkeypatch):
    from tessera.tools.run import _free_port
    _rank_1_finds_no_rank_0(monkeypatch, _free_port())


def test_a_rendezvous_whose_connect_goes_unanswered_times_out(monkeypatch):
    # rank 0's listen queue is full (backlog 0, one connection queued): the kernel drops further SYNs, so a
    # blocking connect would wait out its retries (about two minutes) whatever the timeout
    with socket.socket() as server, socket.socket() as queued:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        queued.connect(server.getsockname())
        _rank_1_finds_no_rank_0(monkeypatch, server.getsockname()[1])


def test_mpi_counts_the_timeout_from_when_every_rank_has_started(tmp_path):
    _mpiexec()
    script = tmp_path / "late.py"
    # rank 1 starts MPI 8 s after rank 0, whose MPI_Init_thread waits for it; the 3 s timeout counts from then
    script.write_text("import os, time\nimport numpy as np\nfrom tessera import comm\n"
                      "if os.environ['PMI_RANK'] == '1':\n    time.sleep(8)\n"
                      "c = comm.Communicator.from_env(backend='mpi', timeout=3)\n"
                      "total = int(c.all_reduce(np.ones(1, np.int64))[0])\n"
                      f"open(f'{tmp_path}/out{{c.rank}}', 'w').write(str(total))\n")
    p, _ = _tessera_run("-n", "2", str(script))
    assert p.returncode == 0, p.stdout + p.stderr
    assert [(tmp_path / f"out{r}").read_text() for r in range(2)] == ["2", "2"]


@pytest.mark.parametrize("value", ["abc", "0", "-3", "99999999999"])
def test_a_bad_tessera_comm_units_is_refused(value, monkeypatch):
    """$TESSERA_COMM_UNITS (comm.h, units) must be a positive count; any other value is a status naming it,
    before a transport is asked for anything. A negative `units` argument is refused in Python."""
    from tessera import comm
    _mpiexec()   # the MPI library must load for the options to reach the transport's check
    monkeypatch.setenv("TESSERA_COMM_UNITS", value)
    with pytest.raises(Exception, match=f"TESSERA_COMM_UNITS={value} is not a positive number of compute units"):
        comm.unique_id("mpi")
    monkeypatch.delenv("TESSERA_COMM_UNITS")
    with pytest.raises(ValueError, match="units must be a number of compute units >= 0"):
        comm.Communicator.create(1, 0, comm.unique_id("mpi"), backend="mpi", units=-1)
