"""A search split across two machines (tessera/autotune.py export_candidates and import_records, tessera/
tune_run.py, tools/tune.py --export-candidates and --import): candidates compiled here, timed by the runtime
alone (in a process that imports no compiler), the fastest stored under the keys of the compile that made
them, records of another compiler refused; a stored ptx choice in the image's kernel metadata."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

from tessera import autotune, compiler, executor, tune_run, tuning
from tessera.image import read_image
from tessera.options import CompileOptions
from tessera.tools import objdump, tune

SOURCE = textwrap.dedent("""\
    from tessera import bf16, f32, function, op, tensor


    @function
    def mm(A: tensor[f32, 96, 80], B: tensor[f32, 80, 64]):
        return op.matmul(A, B)


    @function
    def gemm(A: tensor[bf16, 256, 128], B: tensor[bf16, 128, 256]):
        return op.matmul(A, B)


    @function
    def attn(Q: tensor[bf16, 2, 256, 128], K: tensor[bf16, 2, 256, 128], V: tensor[bf16, 2, 256, 128]):
        return op.flash_attention(Q, K, V, scale=0.125)


    @function
    def causal(Q: tensor[bf16, 2, 256, 128], K: tensor[bf16, 2, 256, 128], V: tensor[bf16, 2, 256, 128]):
        return op.flash_attention(Q, K, V, scale=0.125, causal=True)
    """)
SPACE = {"BN": [16, 32], "BK": [16]}
# the timing half as the device's machine runs it, which has no compiler: none may be imported
RUNTIME_ONLY = textwrap.dedent("""\
    import sys
    from tessera import tune_run
    code = tune_run.main(sys.argv[1:])
    loaded = sorted(m for m in sys.modules if m.split(".")[:2] in (["tessera", "compiler"], ["tessera", "mlir"],
                                                                   ["tessera", "passes"], ["tessera", "frontend"]))
    assert not loaded, loaded
    sys.exit(code)
    """)


@pytest.fixture
def program(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSERA_TUNE_DIR", raising=False)   # tests/conftest.py's: here, the cache directory's
    path = tmp_path / "prog.py"
    path.write_text(SOURCE)
    return types.SimpleNamespace(filename=str(path), name="mm", path=path, dir=tmp_path)


def time_there(candidates, out, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUNTIME_ONLY, str(candidates), "--out", str(out), *extra],
                          capture_output=True, text=True, env=os.environ.copy())


def autotune_props(image: bytes) -> set:
    return {k.props.get("autotune") for k in read_image(image).kernels}


def test_export_time_import_round_trip(program, capsys):
    cands = program.dir / "cands"
    assert tune.main([program.filename, "mm", "--param", "BN=16,32", "--param", "BK=16", "--repeat", "1",
                      "--export-candidates", str(cands)]) == 0
    assert "2 candidate(s) in" in capsys.readouterr().out
    manifest = json.loads((cands / tune_run.CANDIDATES).read_text())
    (key,) = manifest["keys"]
    assert key["target"] == "cpu" and key["bucket"] == "128x64x128" and manifest["space"] == SPACE
    assert tuning.records() == []   # exporting times and stores nothing
    done = time_there(cands, program.dir / "records.json")
    assert done.returncode == 0, done.stderr
    assert "mm on" in done.stdout and "2 candidates timed" in done.stdout
    assert "autotune mm: 2/2 configurations, best" in done.stderr and "s left" in done.stderr
    assert "the 2 fastest again, in turn, 3 rounds" in done.stderr
    records = json.loads((program.dir / "records.json").read_text())
    assert records["keys"] == manifest["keys"] and len(records["trials"]) == 2
    assert all(t["seconds"] > 0 and t["confirmed"] > 0 for t in records["trials"])
    best = min(records["trials"], key=lambda t: t["confirmed"])["config"]
    assert tune.main(["--import", str(program.dir / "records.json")]) == 0
    assert f"NC={best['BN']}" in capsys.readouterr().out
    (_, record), = tuning.records()
    assert record["config"] == {"NC": best["BN"], "KC": 16} and record["tried"] == 2
    assert record["device"] == records["device"] and record["space"] == SPACE
    image = compiler.compile_file(program.filename, CompileOptions(kernels=("mm",))).image
    assert autotune_props(image) == {f"stored: KC=16 NC={best['BN']}"}
    A = np.random.default_rng(1).standard_normal((96, 80)).astype(np.float32)
    B = np.random.default_rng(2).standard_normal((80, 64)).astype(np.float32)
    np.testing.assert_allclose(executor.load(image).mm(A, B), A @ B, rtol=1e-4, atol=1e-4)
    # a second process searching the same space reuses the imported result, timing nothing
    script = textwrap.dedent(f"""\
        import types
        from tessera import autotune

        def timed(*args):
            raise AssertionError("an imported result was timed again")
        autotune._time = timed
        kernel = types.SimpleNamespace(filename={program.filename!r}, name="mm")
        result = autotune.search(kernel, {SPACE!r}, persist=True, progress=False)
        assert result.stored and result.trials == [], result
        print(sorted(result.best.items()))
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted({"BN": best["BN"], "BK": 16}.items()))
    assert tune.main(["--list"]) == 0
    assert f"on {records['device']}, best of 2" in capsys.readouterr().out


def export(program, name="mm", space=None, **options) -> dict:
    return autotune.export_candidates(types.SimpleNamespace(filename=program.filename, name=name),
                                      space or SPACE, program.dir / f"{name}-cands", repeat=1, **options)


def fake_records(manifest: dict, **change) -> dict:
    """A records document for `manifest`'s candidates as tune_run writes it (times invented: what is tested
    is what the import does with them)."""
    trials = [{"config": c["config"], "seconds": 1e-3 * (i + 1), "image": c["image"], "sha256": c["sha256"]}
              for i, c in enumerate(manifest["candidates"])]
    return {"format": tune_run.RECORDS_FORMAT, "version": tune_run.VERSION, "function": manifest["function"],
            "target": manifest["target"], "keys": manifest["keys"], "space": manifest["space"],
            "device": "a test device (sm_90)", "repeat": 1, "shapes": None, "trials": trials, **change}


@pytest.mark.parametrize("wrong", ["compiler", "arch", "target"])
def test_records_of_another_compile_are_refused(program, wrong, capsys):
    manifest = export(program)
    (key,) = manifest["keys"]
    other = {"compiler": "0" * 64, "arch": "skylake", "target": "ptx"}[wrong]
    records = fake_records(manifest, keys=[{**key, wrong: other}])
    with pytest.raises(ValueError, match="another compile made|nothing imported") as e:
        autotune.import_records(records)
    if wrong == "compiler":
        assert "compiler 0000000000000000 (this compiler: " in str(e.value)
        assert "export the candidates again with this compiler" in str(e.value)
    assert tuning.records() == []
    path = program.dir / "records.json"
    path.write_text(json.dumps(records))
    assert tune.main(["--import", str(path)]) == 1
    assert "another compile made" in capsys.readouterr().err and tuning.records() == []


def test_the_confirmed_times_choose(program):
    """The pass's fastest is not kept when the candidates timed again in turn say otherwise."""
    trials = [{"config": {"BN": 16}, "seconds": 1.0, "confirmed": 3.0}, {"config": {"BN": 32}, "seconds": 2.0,
                                                                            "confirmed": 2.5},
              {"config": {"BN": 48}, "seconds": 0.5}]
    assert tune_run.fastest(trials)["config"] == {"BN": 32}
    assert tune_run.fastest([{k: v for k, v in t.items() if k != "confirmed"} for t in trials])["seconds"] == 0.5
    manifest = export(program)
    records = fake_records(manifest)
    records["trials"][0]["confirmed"], records["trials"][1]["confirmed"] = 5e-3, 4e-3
    ((_, config),) = autotune.import_records(records)
    assert config == {"NC": 32, "KC": 16}   # the second: its confirmed time is the shorter
    (_, record), = tuning.records()
    assert record["seconds"] == 4e-3
    bad = fake_records(manifest)
    bad["trials"][0]["confirmed"] = -1.0
    with pytest.raises(ValueError, match="with a time; nothing imported"):
        autotune.import_records(bad)


def test_malformed_records_are_refused(program):
    manifest = export(program)
    with pytest.raises(ValueError, match="not a version 1 records file"):
        autotune.import_records({"format": "something else"})
    with pytest.raises(ValueError, match="names no key"):
        autotune.import_records(fake_records(manifest, trials=[]))
    outside = fake_records(manifest)
    outside["trials"][0]["config"] = {"BN": 48, "BK": 16}   # not in the space searched
    with pytest.raises(ValueError, match="not a schedule of its search space"):
        autotune.import_records(outside)
    unmeasured = fake_records(manifest)
    unmeasured["trials"][1]["seconds"] = float("nan")
    with pytest.raises(ValueError, match="not a schedule of its search space .* with a time"):
        autotune.import_records(unmeasured)
    assert tuning.records() == []


def test_the_timer_refuses_what_it_was_not_given(program):
    manifest = export(program)
    cands = program.dir / "mm-cands"
    image = cands / manifest["candidates"][0]["image"]
    image.write_bytes(image.read_bytes() + b"\0")
    done = time_there(cands, program.dir / "r.json", "--quiet")
    assert done.returncode == 1 and "not the image the candidates file names" in done.stderr
    done = time_there(program.dir, program.dir / "r.json")
    assert done.returncode == 1 and "not a candidates file of tessera-tune --export-candidates" in done.stderr
    assert not (program.dir / "r.json").exists()


def test_gpu_candidates_export_here_and_refuse_a_machine_without_their_device(program):
    from tessera import runtime
    if "cuda" in runtime.backends():
        pytest.skip("this machine has a CUDA device")
    manifest = export(program, "gemm", {"BM": [64, 128], "BN": [128, 256], "stages": [4, 6]}, target="ptx",
                      arch="sm_90a")
    (key,) = manifest["keys"]
    assert (key["target"], key["arch"], key["dtype"]) == ("ptx", "sm_90a", "bf16xbf16->bf16")
    # 6 stages of 256 columns of B (and 64 or 128 rows of A) need more than sm_90's 227 KiB of shared
    # memory: refused, with why
    assert [r["config"] for r in manifest["refused"]] == [{"BM": bm, "BN": 256, "stages": 6} for bm in (64, 128)]
    assert all("shared memory" in r["why"] for r in manifest["refused"]) and len(manifest["candidates"]) == 6
    done = time_there(program.dir / "gemm-cands", program.dir / "r.json")
    assert done.returncode == 1 and "times them on a cuda device, and this machine has none" in done.stderr


def test_a_stored_ptx_gemm_choice_is_in_the_kernel_metadata(program, capsys):
    """sm_90a's GEMM (tile and ring): the imported choice compiles into the kernel, whose record says it came
    from the store (tessera-objdump shows it)."""
    gemm = export(program, "gemm", {"BM": [64, 128], "BN": [64, 128], "stages": [3]}, target="ptx", arch="sm_90a")
    autotune.import_records(fake_records(gemm))   # the first candidate is the "fastest"
    image = compiler.compile_file(program.filename, CompileOptions(kernels=("gemm",), target="ptx",
                                                                   arch="sm_90a")).image
    (k,) = read_image(image).kernels
    assert k.props["autotune"] == "stored: MB=64 NC=64 stages=3"
    assert (k.props["tile.M"], k.props["tile.N"], k.props["pipeline.stages"]) == ("64", "64", "3")
    out = program.dir / "gemm.tessera"
    out.write_bytes(image)
    capsys.readouterr()
    assert objdump.main([str(out)]) == 0
    assert 'autotune: "stored: MB=64 NC=64 stages=3"' in capsys.readouterr().out
    # the cost model's where no result is asked for, and on another arch (its own key)
    image = compiler.compile_file(program.filename, CompileOptions(kernels=("gemm",), target="ptx", arch="sm_90a",
                                                                   tuned=False)).image
    (k,) = read_image(image).kernels
    assert "autotune" not in k.props and (k.props["tile.M"], k.props["tile.N"], k.props["pipeline.stages"]) == \
        ("128", "128", "6")   # the cost model's for 4 tiles of 132 SMs (gemm_lowering.matmul_schedule)
    image = compiler.compile_file(program.filename, CompileOptions(kernels=("gemm",), target="ptx",
                                                                   arch="sm_80")).image
    assert autotune_props(image) == {None}


def test_a_stored_ptx_attention_choice_is_in_the_kernel_metadata(program, capsys):
    """sm_90a's fused attention (keys per block and ring), keyed apart from matmuls and causal attentions:
    BM, not the attention's to choose, is left out of the space; blockings the kernel refuses are listed."""
    attn = export(program, "attn", {"BM": [64, 128], "BN": [64, 192], "stages": [2, 3]}, target="ptx",
                  arch="sm_90a")
    (key,) = attn["keys"]
    assert key["dtype"] == "flash_attention:bf16" and key["bucket"] == "256x256x128"
    assert attn["space"] == {"BN": [64, 192], "stages": [2, 3]} and len(attn["candidates"]) == 3
    assert [r["config"] for r in attn["refused"]] == [{"BN": 192, "stages": 3}]   # 3 stages of 192 rows: too big
    assert "do not fit sm_90's shared memory" in attn["refused"][0]["why"]
    (causal,) = export(program, "causal", {"BN": [64]}, target="ptx", arch="sm_90a")["keys"]
    assert causal["dtype"] == "flash_attention_causal:bf16"
    autotune.import_records(fake_records(attn))   # the first candidate (BN=64, stages=2) is the "fastest"
    options = dict(target="ptx", arch="sm_90a")
    image = compiler.compile_file(program.filename, CompileOptions(kernels=("attn",), **options)).image
    (k,) = read_image(image).kernels
    assert k.props["autotune"] == "stored: NC=64 stages=2"
    assert (k.props["tile.N"], k.props["pipeline.stages"]) == ("64", "2")
    out = program.dir / "attn.tessera"
    out.write_bytes(image)
    capsys.readouterr()
    assert objdump.main([str(out)]) == 0
    assert 'autotune: "stored: NC=64 stages=2"' in capsys.readouterr().out
    # the causal attention's key has no record: the cost model's blocking (attention_sm90.TUNED)
    image = compiler.compile_file(program.filename, CompileOptions(kernels=("causal",), **options)).image
    (k,) = read_image(image).kernels
    assert "autotune" not in k.props and (k.props["tile.N"], k.props["pipeline.stages"]) == ("128", "3")
    image = compiler.compile_file(program.filename, CompileOptions(kernels=("attn",), tuned=False, **options)).image
    assert autotune_props(image) == {None}


def test_records_of_an_older_compiler_are_vouched_for_by_identical_images(program, capsys):
    """The compiler changed between the export and the import (another key): a new export of the same search
    whose images are byte for byte those timed carries the times over; one whose images differ does not."""
    before = export(program)
    key = before["keys"][0]
    records = fake_records(before, keys=[{**key, "compiler": "0" * 64}])
    path = program.dir / "records.json"
    path.write_text(json.dumps(records))
    again = autotune.export_candidates(types.SimpleNamespace(filename=program.filename, name="mm"), SPACE,
                                       program.dir / "again", repeat=1)
    other = autotune.export_candidates(types.SimpleNamespace(filename=program.filename, name="mm"),
                                       {"BN": [16, 32], "BK": [32]}, program.dir / "other", repeat=1)
    with pytest.raises(ValueError, match="the images of the candidates given are not those timed"):
        autotune.import_records(records, other)
    assert tuning.records() == []
    assert tune.main(["--import", str(path), "--candidates", str(program.dir / "again")]) == 0
    assert "NC=16" in capsys.readouterr().out
    (_, record), = tuning.records()
    assert record["key"] == again["keys"][0] and record["config"] == {"NC": 16, "KC": 16}


def test_device_timing_passes_bf16_as_bit_patterns(program):
    """On a device the timer's arrays are DeviceArrays of the plan's storage (bf16: uint16 bit patterns),
    converted once: here the CPU's function called as a device one."""
    from tessera import runtime
    ctx = runtime.default_context()
    fn = executor.load(compiler.compile_file(program.filename, CompileOptions(kernels=("gemm",))).image,
                       ctx).gemm
    seen = []

    class OnDevice:
        device, plan = True, fn.plan

        def __call__(self, *arrays):
            seen.append([(type(a).__name__, a.dtype) for a in arrays])
            return fn(*arrays)
    arrays = tune_run.inputs(fn.plan, 0, 0)
    assert [a.dtype for a in arrays] == [np.float32, np.float32]   # bf16 values, as a numpy call takes them
    stored = tune_run.stored(OnDevice(), arrays)
    assert [a.dtype for a in stored] == [np.uint16, np.uint16] and tune_run.stored(fn, arrays) is arrays
    assert tune_run.time_function(OnDevice(), stored, 2, ctx) > 0
    assert tune_run.time_function(OnDevice(), arrays, 1, ctx) > 0   # converted there when not stored yet
    assert {tuple(s) for s in seen} == {(("DeviceArray", np.dtype(np.uint16)),) * 2}
