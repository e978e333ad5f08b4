"""Telemetry: the metrics log (JSONL and CSV, from $TESSERA_METRICS or the API; GFLOP/s, GB/s, p95 over a
window) and NVTX ranges (the no-op path without libnvToolsExt, and the ranges a stand-in library receives).
The log and the NVTX library are process-wide, so each case runs in a fresh interpreter."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from hostutil import HERE, run

pytest.importorskip("tessera._runtime", reason="libtessera's Python module is not installed")


def python(tmp_path, script, **env):
    """Runs `script` in a fresh interpreter (outside the checkout, so the installed tessera is imported)."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, **{k: str(v) for k, v in env.items()}), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


LAUNCHES = """
    import numpy as np
    from tessera import runtime, stream, telemetry
    mod = runtime.load({image!r})
    x, y = np.ones(4096, np.float32), np.zeros(4096, np.float32)
    for _ in range(5):
        mod.saxpy(2.0, x, y, grid=32, block=128, flops=2 * 4096, nbytes=12 * 4096)
    mod.fill_fixed(y, 1.0, grid=64, block=64)                  # no counts: no rates
    s = stream.new()
    d = runtime.DeviceArray((4096,), np.float32)
    stream.memcpy_async(d, x, stream=s)
    mod.saxpy(1.0, x, y, grid=32, block=128, stream=s)
    s.synchronize()
"""


def test_metrics_from_the_environment_jsonl(tmp_path, test_image):
    log = tmp_path / "run.jsonl"
    python(tmp_path, LAUNCHES.format(image=str(test_image)), TESSERA_METRICS=log, TESSERA_METRICS_WINDOW=3)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    saxpy = [r for r in rows if r["name"] == "saxpy"]
    assert len(saxpy) == 6 and all(r["kind"] == "kernel" and r["status"] == "TSR_SUCCESS" for r in saxpy)
    first = saxpy[0]
    assert first["grid"] == [32, 1, 1] and first["block"] == [128, 1, 1] and first["stream"] == 0
    assert first["time_ms"] > 0
    assert first["gflops"] == pytest.approx(2 * 4096 / (first["time_ms"] * 1e-3) / 1e9, rel=1e-6)
    assert first["gbps"] == pytest.approx(12 * 4096 / (first["time_ms"] * 1e-3) / 1e9, rel=1e-6)
    assert [r["samples"] for r in saxpy] == [1, 2, 3, 3, 3, 3]  # the window of 3
    assert saxpy[2]["p95_ms"] == max(r["time_ms"] for r in saxpy[:3])
    assert saxpy[-1]["stream"] >= 1 and saxpy[-1]["gflops"] is None  # on a stream, no counts
    fill = next(r for r in rows if r["name"] == "fill_fixed")
    assert fill["gflops"] is None and fill["gbps"] is None
    copy = next(r for r in rows if r["kind"] == "copy")
    assert copy["name"] == "memcpy HtoD" and copy["gbps"] > 0 and "grid" not in copy


def test_metrics_api_csv_and_p95(tmp_path):
    log = tmp_path / "steps.csv"
    python(tmp_path, f"""
        from tessera import telemetry
        telemetry.enable({str(log)!r}, window=100)
        for ms in range(1, 201):                     # 1..200 ms: the last 100 are 101..200
            telemetry.record("step", ms / 1000, flops=4e9 * ms / 1000, nbytes=1e9 * ms / 1000)
        telemetry.disable()
        telemetry.record("after close", 1.0)         # not written
    """)
    from tessera import telemetry
    rows = telemetry.load(log)
    assert log.read_text().splitlines()[0] == "ts,kind,name,stream,grid,block,time_ms,gflops,gbps,p95_ms,samples,status"
    assert len(rows) == 200 and {r["name"] for r in rows} == {"step"}
    last = rows[-1]
    assert last["kind"] == "host" and last["grid"] == ""
    assert last["time_ms"] == pytest.approx(200) and last["gflops"] == pytest.approx(4) and last["gbps"] == pytest.approx(1)
    assert last["p95_ms"] == pytest.approx(195) and last["samples"] == 100  # nearest rank: the 95th of 101..200
    assert rows[9]["p95_ms"] == pytest.approx(10) and rows[9]["samples"] == 10


def test_metrics_refusals(tmp_path):
    from tessera import _runtime, telemetry
    with pytest.raises(_runtime.Error, match="neither in .jsonl nor in .csv"):
        telemetry.enable(tmp_path / "metrics.txt")
    with pytest.raises(_runtime.Error, match="cannot open"):
        telemetry.enable(tmp_path / "missing" / "m.jsonl")
    with pytest.raises(_runtime.Error, match="lasted -1 seconds"):
        telemetry.record("x", -1)
    telemetry.record("nothing open", 1.0)  # no log: nothing to do, no error
    out = python(tmp_path, f"""
        from tessera import _runtime
        try:
            _runtime.Context()
        except _runtime.Error as e:
            print(e.status_name, e)
    """, TESSERA_METRICS=tmp_path / "missing" / "m.jsonl")
    assert "TSR_ERROR_INVALID_VALUE TESSERA_METRICS: tsrMetricsOpen: cannot open" in out


def test_nvtx_is_a_no_op_without_the_library(tmp_path, test_image):
    out = python(tmp_path, f"""
        import numpy as np
        from tessera import runtime, telemetry
        print("active", telemetry.nvtx_available())
        with telemetry.range("comm", "all-reduce"):
            runtime.load({str(test_image)!r}).saxpy(1.0, np.ones(8, np.float32), np.zeros(8, np.float32),
                                                    grid=1, block=32)
        print("ok")
    """, TESSERA_NVTX_LIBRARY=tmp_path / "no-such-libnvToolsExt.so")
    assert out.split() == ["active", "False", "ok"]
    from tessera import telemetry
    with pytest.raises(ValueError, match="the phases are copy, mma, reduce, comm, host"):
        with telemetry.range("compute"):
            pass


def test_nvtx_ranges_have_the_standard_names(cc, tmp_path, test_image):
    lib = tmp_path / "libfake_nvtx.so"
    run([cc, "-shared", "-fPIC", "-O1", HERE / "fake_nvtx.c", "-o", lib, "-pthread"])
    log = tmp_path / "nvtx.log"
    out = python(tmp_path, f"""
        import numpy as np
        from tessera import runtime, stream, telemetry
        print("active", telemetry.nvtx_available())
        mod = runtime.load({str(test_image)!r})
        x = np.ones(64, np.float32)
        with telemetry.range("reduce", "step 1"):
            mod.saxpy(1.0, x, x, grid=1, block=64)
        s = stream.new()
        stream.memcpy_async(runtime.DeviceArray((64,), np.float32), x, stream=s)
        s.synchronize()
    """, TESSERA_NVTX_LIBRARY=lib, FAKE_NVTX_LOG=log)
    assert out.split() == ["active", "True"]
    lines = log.read_text().splitlines()
    categories = {line.split()[1]: line.split()[2] for line in lines if line.startswith("category")}
    assert categories == {"1": "copy", "2": "mma", "3": "reduce", "4": "comm", "5": "host"}
    pushes = [line.split(" ", 2)[1:] for line in lines if line.startswith("push")]
    assert ["5", "host:load module"] in pushes
    assert ["3", "reduce:step 1"] in pushes and ["2", "mma:saxpy"] in pushes
    assert ["1", "copy:memcpy HtoD"] in pushes
    assert len(pushes) == sum(line.startswith("pop") for line in lines)
