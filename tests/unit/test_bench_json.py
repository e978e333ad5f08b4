"""The benchmarks' JSON results (bench/common.py's --json helper, the schema bench/README.md documents) and
bench/charts.py's reading of them; the drawing itself only where matplotlib is installed (an optional extra)."""

import argparse
import json
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import charts  # noqa: E402  (bench/charts.py)
import common  # noqa: E402  (bench/common.py)

ROW_KEYS = {"workload", "shape", "dtype", "unit", "flops", "bytes", "ours", "peers", "ratio", "note"}


@pytest.fixture
def results(monkeypatch, tmp_path):
    """A fresh recorder writing to tmp_path/out.json, as `bench/x.py --json out.json` starts one."""
    monkeypatch.setattr(common, "RESULTS", common._Results())
    monkeypatch.setattr(sys, "argv", ["bench/gemm_cpu.py"])
    path = tmp_path / "out.json"
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="512")
    args = common.parse_args(parser, ["--sizes", "64", "--json", str(path)])
    assert args.sizes == "64" and args.json == str(path)
    return path


def test_a_run_with_json_writes_the_header_before_any_row(results):
    doc = json.loads(results.read_text())
    assert doc["schema"] == "tessera-bench/1" and doc["bench"] == "gemm_cpu"
    assert doc["argv"] == ["--sizes", "64", "--json", str(results)]
    assert doc["rows"] == []
    m = doc["machine"]
    assert m["kind"] == "cpu" and m["cores"] >= 1 and isinstance(m["cpu"], str) and m["load_average"] >= 0
    assert doc["commit"] is None or len(doc["commit"]) >= 7
    assert doc["time"].endswith("Z")


def test_report_records_ratio_throughput_and_both_counts(results, capsys):
    row = common.report("gemm 64", 0.5, 1.0, "numpy", "GFLOP/s", 2.0, shape=(64, 64, 64), dtype="f32",
                        bytes=3 * 4 * 64 * 64)
    line = capsys.readouterr().out
    assert "tessera      4.00 GFLOP/s" in line and "numpy      2.00 GFLOP/s" in line and "ratio  2.00x" in line
    [written] = json.loads(results.read_text())["rows"]
    assert written == row and set(row) == ROW_KEYS
    assert row["flops"] == 2e9 and row["bytes"] == 49152 and row["shape"] == [64, 64, 64]
    assert row["ours"] == {"name": "tessera", "time_s": 0.5, "throughput": 4.0}
    assert row["peers"] == [{"name": "numpy", "time_s": 1.0, "throughput": 2.0, "ratio": 2.0}]
    assert row["ratio"] == 2.0


def test_rows_of_several_peers_and_bandwidth_rows(results, capsys):
    common.report_row("bf16 gemm 64", {"tessera": 2.0, "XLA": 1.0, "numpy f32": 4.0}, "TFLOP/s", 8.0,
                      shape=(64, 64, 64), dtype="bf16", note="exact")
    common.report("saxpy n=16", 1e-6, 3e-6, "numpy", "GB/s", 192 / 1e9, shape=(16,), dtype="f32", flops=32)
    assert "ratio vs XLA 0.500  vs numpy f32 2.000   (exact)" in capsys.readouterr().out
    many, bandwidth = json.loads(results.read_text())["rows"]
    assert [p["ratio"] for p in many["peers"]] == [0.5, 2.0] and many["ratio"] == 0.5
    assert many["flops"] == 8e12 and many["bytes"] is None and many["note"] == "exact"
    assert bandwidth["bytes"] == pytest.approx(192) and bandwidth["flops"] == 32
    assert bandwidth["ours"]["throughput"] == pytest.approx(192 / 1e9 / 1e-6)


def test_time_only_rows_and_the_checks_rows(results, capsys):
    row = common.record_row("one call, n=1", {"tessera": 2e-6, "torch": 5e-6}, note="time per call")
    assert row["unit"] is None and row["ours"]["throughput"] is None and row["ratio"] == pytest.approx(2.5)
    ratio = common.report_checks("saxpy", lambda: None, lambda: None, rounds=2)
    [_, checks] = json.loads(results.read_text())["rows"]
    assert checks["ours"]["name"] == "checked" and checks["peers"][0]["name"] == "unchecked"
    assert ratio == pytest.approx(checks["ours"]["time_s"] / checks["peers"][0]["time_s"])
    assert "checked/unchecked" in capsys.readouterr().out


def test_an_unknown_unit_is_refused(results):
    with pytest.raises(ValueError, match="unit 'GFLOPS'"):
        common.record_row("x", {"tessera": 1.0}, "GFLOPS", 1.0)


def test_a_gpu_run_names_the_gpu_and_keeps_the_host(results, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    common.set_gpu_machine("NVIDIA H200", "sm_90", 132)
    m = json.loads(results.read_text())["machine"]
    assert m == {"kind": "gpu", "gpu": "NVIDIA H200", "arch": "sm_90", "units": 132, "count": 4,
                 "host_cpu": m["host_cpu"]} and m["host_cpu"]


def test_without_json_nothing_is_written(monkeypatch, tmp_path):
    monkeypatch.setattr(common, "RESULTS", common._Results())
    monkeypatch.chdir(tmp_path)
    common.parse_args(argparse.ArgumentParser(), [])
    common.record_row("x", {"tessera": 1.0, "numpy": 2.0})
    assert list(tmp_path.iterdir()) == []


def test_only_rank_0_writes(monkeypatch, tmp_path):
    monkeypatch.setattr(common, "RESULTS", common._Results())
    monkeypatch.setenv("RANK", "1")
    common.parse_args(argparse.ArgumentParser(), ["--json", str(tmp_path / "r1.json")])
    common.record_row("x", {"tessera": 1.0, "numpy": 2.0})
    assert not (tmp_path / "r1.json").exists()


def test_commit_from_the_environment(monkeypatch):
    monkeypatch.setenv("TESSERA_BENCH_COMMIT", "abc1234")
    assert common.commit() == "abc1234"


def fixture_files(tmp_path) -> list[str]:
    """A CPU and a GPU result, written through the helper as the benchmarks write them."""
    paths = []
    for bench, gpu in (("graph_cpu", False), ("attention_gpu", True)):
        common.RESULTS = common._Results()
        path = tmp_path / f"{bench}.json"
        sys.argv = [f"bench/{bench}.py"]
        common.parse_args(argparse.ArgumentParser(), ["--json", str(path)])
        if gpu:
            common.set_gpu_machine("NVIDIA H200", "sm_90", 132, 1)
            common.record_row("attention_d64 S=4096", {"tessera": 1.0, "sdpa": 0.9}, "TFLOP/s", 500.0,
                              shape=(4, 16, 4096, 64), dtype="bf16", bytes=2e12)
            common.record_row("fp8_d128 S=4096", {"tessera fp8": 1.0, "sdpa bf16": 1.5}, "TFLOP/s", 900.0,
                              dtype="fp8", bytes=4e12)
            common.record_row("one call, n=1", {"tessera": 1e-5, "torch": 1e-5})
        else:
            common.record_row("attention 8x512x512x64", {"tessera": 1.0, "XLA": 1.3, "numpy": 3.0}, "GFLOP/s", 1.0)
            common.record_row("softmax rows 8192x1024", {"tessera": 1.0, "XLA": 0.9}, "GB/s", 0.067)
        paths.append(str(path))
    return paths


@pytest.fixture
def fixtures(monkeypatch, tmp_path):
    monkeypatch.setattr(common, "RESULTS", common._Results())
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    return fixture_files(tmp_path)


def test_ratio_bars_carry_the_issue_targets(fixtures):
    cpu = charts.load(fixtures[0])
    assert charts.ratio_bars(cpu) == [("attention 8x512x512x64", "XLA", 1.3, 1.2),
                                      ("attention 8x512x512x64", "numpy", 3.0, None),
                                      ("softmax rows 8192x1024", "XLA", 0.9, 1.0)]
    gpu = charts.load(fixtures[1])
    assert [t for *_, t in charts.ratio_bars(gpu)] == [1.0, None, None]


def test_targets_of_issues_17_and_18_too():
    assert charts.target("gemm_gpu", "f32 gemm 4096 tf32 kernel", "torch allow_tf32=True") == 0.9
    assert charts.target("gemm_gpu", "f32 gemm 4096 fma kernel", "torch allow_tf32=False") == 0.8
    assert charts.target("gemm_gpu", "fp8 e4m3 scaled 8192 function", "torch._scaled_mm") == 1.0
    assert charts.target("gemm_gpu", "fp8 e4m3 scaled 8192 kernel", "torch._scaled_mm") is None
    assert charts.target("graph_cpu", "softmax+dropout+V 8x512x512x64", "XLA") == 1.2
    assert charts.target("graph_cpu", "layernorm rows 8192x1024", "XLA") == 1.0
    assert charts.target("graph_cpu", "layernorm rows 8192x1024", "numpy") is None


def test_roofline_points_are_gpu_rows_with_both_counts(fixtures):
    points = charts.roofline_points([charts.load(p) for p in fixtures])
    assert points == [{"label": "attention_d64 S=4096 (tessera)", "dtype": "bf16", "intensity": 250.0,
                       "tflop_s": 500.0, "peak": 989.0, "roof": 989.0},
                      {"label": "fp8_d128 S=4096 (tessera fp8)", "dtype": "fp8", "intensity": 225.0,
                       "tflop_s": 900.0, "peak": 1979.0, "roof": 225.0 * 4.8}]   # under the memory roof


def test_describe_names_machine_and_commit(fixtures):
    gpu = charts.load(fixtures[1])
    assert charts.command(dict(gpu, argv=["--fp8", "--json", "x.json", "--image", "a.tessera"])) == \
        "bench/attention_gpu.py --fp8 --image a.tessera"
    assert charts.describe(gpu).startswith("1x NVIDIA H200 (sm_90); commit ")
    assert "cores, load average" in charts.describe(charts.load(fixtures[0]))


def test_a_file_of_another_schema_is_refused(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": []}')
    with pytest.raises(charts.Error, match="bad.json: not a benchmark result"):
        charts.load(str(bad))
    monkeypatch.setitem(sys.modules, "matplotlib", sys.modules.get("matplotlib") or object())
    assert charts.main([str(bad), "--out", str(tmp_path)]) == 1
    assert "bad.json: not a benchmark result" in capsys.readouterr().err


def test_without_matplotlib_it_says_so_and_fails(fixtures, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib raises ImportError
    assert charts.main([*fixtures, "--out", str(tmp_path / "figures")]) == 2
    assert "needs matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "figures").exists()


def test_draws_the_ratio_bars_and_the_roofline(fixtures, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "figures"
    assert charts.main([*fixtures, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["attention_gpu_ratios.png", "graph_cpu_ratios.png",
                                                     "nvidia_h200_roofline.png"]
    for png in out.iterdir():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in ("common.py", "charts.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_takes_json(script):
    """Each benchmark imports (GPU ones too, without a GPU: their torch and CUDA imports wait for main) and
    offers --json; what it records is the helper's, tested above."""
    import subprocess  # lazy: only this test starts processes
    run = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "--json PATH" in run.stdout


def test_without_jax_the_xla_side_is_left_out_and_the_row_says_so(results, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax", None)   # import jax raises ImportError, as in CI's venv
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    jax = common.optional_jax(2)
    assert jax is None and common.XLA_ABSENT in capsys.readouterr().out
    assert common.xla_call(jax, lambda jnp, a: a, 1.0) is None
    row = common.report_sides("gemm 64", {"tessera": lambda: None, "XLA": None, "numpy": lambda: None}, 1,
                              "GFLOP/s", 1.0, shape=(64, 64, 64), dtype="f32")
    assert [p["name"] for p in row["peers"]] == ["numpy"] and row["note"] == "no XLA: jax not installed"
    assert json.loads(results.read_text())["rows"] == [row]
    assert "(no XLA: jax not installed)" in capsys.readouterr().out


def test_one_thread_of_ours_gets_a_one_thread_xla(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    common.optional_jax(1)
    assert common.os.environ["XLA_FLAGS"] == \
        "--xla_dump_to=/tmp/x --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    monkeypatch.setenv("XLA_FLAGS", "")
    common.optional_jax(2)
    assert common.os.environ["XLA_FLAGS"] == ""


def test_a_jitted_formula_gets_jax_numpy_and_the_placed_arrays():
    jax = pytest.importorskip("jax")
    import numpy as np
    call = common.xla_call(jax, lambda jnp, a, b, k: jnp.tanh(a @ b) * k, np.eye(2, dtype=np.float32),
                           np.full((2, 2), 0.5, np.float32), k=2.0)
    np.testing.assert_allclose(np.asarray(call()), 2 * np.tanh(np.full((2, 2), 0.5)), rtol=1e-6)


def test_interleaved_best_times_every_side_in_every_position():
    """Regression (session 33): a fixed order gave the side timed first in each round an advantage that an
    H200's clocks made worth up to 15% (fp8 GEMM 8192^3); the order now rotates, one round per side at least."""
    order = []
    sides = {n: (lambda n=n: order.append(n), lambda: None) for n in "abc"}
    common.interleaved_best(sides, rounds=2, calls=1, warmup=0, span=0)
    order = order[3:]   # the warm-up's turn
    turns = [order[i:i + 6:2] for i in range(0, len(order), 6)]   # each side once warm, once timed, in turn
    assert turns == [list("abc"), list("bca"), list("cab")]
    assert {t[0] for t in turns} == set("abc")


def test_interleaved_best_warms_up_for_the_time_asked_and_fills_the_span():
    """Each side runs in turn for `warmup` seconds before timing (an H200's clocks settle under load), then each
    timed block holds at least `calls` calls and enough to fill `span`."""
    counts = {"slow": 0, "fast": 0}

    def side(n, cost):
        def fn():
            counts[n] += 1
            t = time.perf_counter() + cost
            while time.perf_counter() < t:
                pass
        return fn, lambda: None
    t0 = time.perf_counter()
    common.interleaved_best({"slow": side("slow", 2e-3), "fast": side("fast", 1e-4)}, rounds=1, calls=2,
                            warmup=0.05, span=0.01)
    assert time.perf_counter() - t0 >= 0.05
    assert counts["fast"] > counts["slow"] > 0
    # the fast side's timed blocks hold about 100 calls (0.01 s / 1e-4), the slow side's at least `calls`
    assert counts["fast"] >= 2 * 100


class ScriptedSides:
    """Sides whose timed calls take scripted times on a fake clock: side n's timed block in round r takes
    script[n][r] (calls=1, span=0, no warm-up). The untimed call before each block and the warm-up take nothing."""

    def __init__(self, script):
        self.now, self.script, self.calls = 0.0, script, {n: 0 for n in script}
        self.order = []

    def clock(self):
        return self.now

    def sides(self):
        def call(n):
            i = self.calls[n]
            self.calls[n] += 1
            if i >= 2 and i % 2 == 0:   # call 0: the warm-up's; then per round an untimed call, then the timed one
                self.now += self.script[n][(i - 2) // 2]
                self.order.append(n)
        return {n: (lambda n=n: call(n), lambda: None) for n in self.script}

    def run(self, rounds, rounds_out=None):
        return common.interleaved_best(self.sides(), rounds=rounds, calls=1, warmup=0, span=0,
                                       rounds_out=rounds_out, clock=self.clock)


def test_interleaved_rounds_keep_every_round_and_the_best_is_unchanged():
    """Session 34: the rounds of every side are kept (rounds_out) beside the best of each, which stays what it
    was: the minimum of the side's rounds, per side."""
    script = {"ours": [1.0, 0.75, 1.0, 1.0, 1.0, 1.0], "peer": [1.125] * 6}   # exact in binary: the fake clock adds
    rounds = {}
    best = ScriptedSides(script).run(6, rounds)
    assert rounds == script and best == {"ours": 0.75, "peer": 1.125}
    assert ScriptedSides(script).run(6) == best   # without rounds_out, the same


def test_rounds_are_a_multiple_of_the_sides_so_each_takes_each_position_equally():
    s = ScriptedSides({n: [1.0] * 12 for n in "abc"})
    rounds = {}
    s.run(7, rounds)
    assert [len(v) for v in rounds.values()] == [9, 9, 9]
    firsts = [s.order[i] for i in range(0, len(s.order), 3)]
    assert sorted(firsts) == sorted("abc" * 3)
    two = {}
    ScriptedSides({"a": [1.0] * 10, "b": [1.0] * 10}).run(common.PAIRED_ROUNDS, two)
    assert [len(v) for v in two.values()] == [10, 10]   # 9 rounded up: each side first 5 times


def test_the_paired_ratio_is_the_median_of_the_ratios_round_by_round():
    # per-round ratios 3, 1, 0.5: median 1.0 (the ratio of the medians would be 3 / 2 = 1.5)
    assert common.paired_ratio([3.0, 4.0, 1.0], [1.0, 4.0, 2.0]) == (1.0, 0.5, 3.0)
    # a clock drift that slows both sides of a round alike cancels: 1.1 in every round
    assert common.paired_ratio([1.1, 2.2, 1.65], [1.0, 2.0, 1.5]) == pytest.approx((1.1, 1.1, 1.1))
    with pytest.raises(ValueError, match="paired rounds: 2 against 3"):
        common.paired_ratio([1.0, 1.0], [1.0, 1.0, 1.0])


def test_one_lucky_round_moves_the_best_of_ratio_but_not_the_paired_median(results, capsys):
    """One round where only our side hit a fast clock window: best-of gives 1.125 / 0.75 = 1.5, the paired median
    stays 1.125 and the range shows the outlier."""
    script = {"ours": [1.0, 0.75] + [1.0] * 8, "peer": [1.125] * 10}
    rounds = {}
    best = ScriptedSides(script).run(common.PAIRED_ROUNDS, rounds)
    row = common.report_row("attention_d128 S=4096", best, "TFLOP/s", 1.0, shape=(4, 16, 4096, 128),
                            dtype="bf16", rounds=rounds)
    [peer] = row["peers"]
    assert peer["ratio"] == 1.5 and row["ratio"] == 1.5
    assert peer["paired_ratio"] == 1.125 and peer["paired_range"] == [1.125, 1.5]
    assert row["ours"]["rounds_s"] == script["ours"] and peer["rounds_s"] == script["peer"]
    assert "ratio  1.50x paired 1.125 (1.125-1.500)" in capsys.readouterr().out
    [written] = json.loads(results.read_text())["rows"]
    assert written == row and set(written) == ROW_KEYS


def test_paired_rows_of_several_peers_renamed_and_their_charts(results, capsys):
    rounds = {"kernel": [1.0, 1.0, 2.0], "variant kernel": [1.0, 0.5, 2.0], "torch": [1.2, 1.0, 2.2]}
    best = {n: min(v) for n, v in rounds.items()}
    times, picked = common.pick(best, rounds, {"variant": "variant kernel", "tessera kernel": "kernel",
                                               "torch._scaled_mm": "torch"})
    assert times == {"variant": 0.5, "tessera kernel": 1.0, "torch._scaled_mm": 1.0}
    row = common.report_row("fp8 4096 variant", times, "TFLOP/s", 1.0, rounds=picked)
    ours, torch_ = row["peers"]
    assert ours["paired_ratio"] == 1.0 and ours["paired_range"] == [1.0, 2.0]   # ratios 1, 2, 1
    # torch against the variant: 1.2, 2.0, 1.1
    assert torch_["paired_ratio"] == pytest.approx(1.2) and torch_["paired_range"] == pytest.approx([1.1, 2.0])
    out = capsys.readouterr().out
    assert "vs tessera kernel 2.000 paired 1.000 (1.000-2.000)  vs torch._scaled_mm 2.000 paired 1.200 (1.100-2.000)" in out
    # a peer without rounds keeps the old fields only; charts read the best-of ratio as before
    plain = common.record_row("x", {"a": 1.0, "b": 2.0, "c": 3.0}, rounds={"a": [1.0], "b": [2.0]})
    assert set(plain["peers"][0]) == {"name", "time_s", "throughput", "ratio", "rounds_s", "paired_ratio",
                                      "paired_range"}
    assert set(plain["peers"][1]) == {"name", "time_s", "throughput", "ratio"}
    doc = charts.load(str(results))
    assert [(w, p, r) for w, p, r, _ in charts.ratio_bars(doc)] == [("fp8 4096 variant", "tessera kernel", 2.0),
                                                                    ("fp8 4096 variant", "torch._scaled_mm", 2.0),
                                                                    ("x", "b", 2.0), ("x", "c", 3.0)]
