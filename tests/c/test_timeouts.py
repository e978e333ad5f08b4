"""Waits with a limit (docs/c-api.md, "Timeouts"): a kernel that spins until the host sets a flag
(kernels_cpu.c's spin_until; on the fake CUDA driver, tests/c/fake_cuda.c's stream that never completes) makes
tsrStreamSynchronizeTimeout, tsrEventSynchronizeTimeout and tsrSynchronizeTimeout return TSR_ERROR_TIMEOUT in
about their limit, the host and the context live on, and the context's watchdog limits waits that name none.
On CUDA the limited waits poll cuStreamQuery / cuEventQuery and never block in the driver."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from test_c_hosts import run_checks
from hostutil import without_allocation_waits
from test_cuda_fake import split_log


def test_timeouts_on_the_cpu(build_host, test_image):
    p = run_checks(build_host("host_timeouts.c"), test_image, "cpu", env={"TESSERA_WAIT_TIMEOUT_MS": ""})
    assert "returned after" in p.stdout


def test_timeouts_on_cuda_poll_the_driver(build_host, test_image, fake_driver, tmp_path):
    log = tmp_path / "cuda.log"
    env = {"LD_LIBRARY_PATH": str(fake_driver()), "FAKE_CUDA_LOG": str(log), "TESSERA_WAIT_TIMEOUT_MS": ""}
    run_checks(build_host("host_timeouts.c"), test_image, "cuda", env=env)
    every = log.read_text().splitlines()
    phases = split_log(every)
    for name in ("spinning", "watchdog"):
        lines = without_allocation_waits(phases[name], every)  # an allocation's wait holds no kernel
        # while the kernel spins, nothing blocks in the driver: the limited waits poll its queries
        assert not [line for line in lines if "blocked" in line or "Synchronize" in line], lines
        stream = next(line.split()[1] for line in lines if line.startswith("cuLaunchKernel"))
        assert lines.count(f"cuStreamQuery {stream}") > 5, lines  # polled, not asked once
    # under the watchdog, NULL-stream work is polled too: the spinning kernel there times out
    assert phases["watchdog"].count("cuStreamQuery ptds") > 5
    # once the flag is set, the same waits succeed (the plain ones block in the driver again)
    assert "cuStreamSynchronize blocked" not in "\n".join(phases["watchdog released"])


HOST = """
import sys, time
import numpy as np
from tessera import _runtime, runtime, stream
ctx = _runtime.Context(threads=2)
mod = runtime.load(sys.argv[1], ctx)
s = stream.Stream(context=ctx)
flag, seen = np.zeros(1, np.int32), np.zeros(1, np.int32)
mod.spin_until(flag, seen, grid=1, block=1, stream=s)
for wait in (s.synchronize, s.record().synchronize, lambda: stream.synchronize(ctx)):
    start = time.monotonic()
    try:
        wait()
        print("no timeout")
    except runtime.Error as e:
        print(e.status_name, round(time.monotonic() - start, 1), "watchdog" in str(e))
flag[0] = 1
s.synchronize(timeout=10)
print("seen", seen[0])
"""


def test_the_watchdog_from_the_environment(test_image, tmp_path):
    """$TESSERA_WAIT_TIMEOUT_MS limits a Python program's waits that name no limit."""
    pytest.importorskip("tessera._runtime")
    p = subprocess.run([sys.executable, "-c", HOST, str(test_image)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, TESSERA_WAIT_TIMEOUT_MS="300", TESSERA_BACKEND="cpu"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == ["TSR_ERROR_TIMEOUT 0.3 True"] * 3 + ["seen 1"], p.stdout


def test_a_malformed_watchdog_variable_is_refused(monkeypatch):
    _runtime = pytest.importorskip("tessera._runtime")
    monkeypatch.setenv("TESSERA_WAIT_TIMEOUT_MS", "soon")
    with pytest.raises(_runtime.Error, match="TESSERA_WAIT_TIMEOUT_MS=soon is not a number of milliseconds") as e:
        _runtime.Context("cpu")
    assert e.value.status_name == "TSR_ERROR_INVALID_VALUE"


def test_python_waits_take_a_limit_and_keep_the_running_work_s_arrays(test_image, monkeypatch):
    _runtime = pytest.importorskip("tessera._runtime")
    from tessera import runtime, stream
    monkeypatch.delenv("TESSERA_WAIT_TIMEOUT_MS", raising=False)
    with _runtime.Context("cpu", threads=2) as ctx:
        mod = runtime.load(test_image, ctx)
        s = stream.Stream(context=ctx)
        flag, seen = np.zeros(1, np.int32), np.zeros(1, np.int32)
        mod.spin_until(flag, seen, grid=1, block=1, stream=s)
        done = s.record()
        start = time.monotonic()
        with pytest.raises(runtime.Error, match="did not finish within 100 ms") as e:
            s.synchronize(timeout=0.1)
        assert e.value.status_name == "TSR_ERROR_TIMEOUT" and 0.09 < time.monotonic() - start < 5
        assert any(a is flag for a in s._kept)  # the kernel still runs on them
        for wait in (lambda: done.synchronize(timeout=0.05), lambda: stream.synchronize(ctx, timeout=0)):
            with pytest.raises(runtime.Error) as e:
                wait()
            assert e.value.status_name == "TSR_ERROR_TIMEOUT"
        assert not s.query() and any(a is flag for a in s._kept)
        with pytest.raises(ValueError, match="seconds >= 0"):
            s.synchronize(timeout=-1)
        flag[0] = 1
        done.synchronize(timeout=10)
        s.synchronize(timeout=10)
        assert seen[0] == 1 and not s._kept
        with _runtime.Context("cpu", wait_timeout_ms=50) as watched:
            w = stream.Stream(context=watched)
            flag[0] = 0
            watched_mod = runtime.load(test_image, watched)  # kept: unloading waits for its running kernels
            watched_mod.spin_until(flag, seen, grid=1, block=1, stream=w)
            with pytest.raises(runtime.Error, match="the context's watchdog"):
                w.synchronize()
            flag[0] = 1
            w.synchronize(timeout=10)
