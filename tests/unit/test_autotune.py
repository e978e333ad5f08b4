"""Autotuning that is remembered (tessera/autotune.py, tessera/tuning.py, tools/tune.py): results stored per
key in the cache directory, read by the schedule phase of later compiles in any process, shown in the kernel
records, and a damaged store ignored with a warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
import warnings

import numpy as np
import pytest

from tessera import autotune, compiler, executor, runtime, tuning
from tessera.image import read_image
from tessera.numerics import profiles
from tessera.options import CompileOptions
from tessera.tools import objdump, tune

SOURCE = textwrap.dedent("""\
    from tessera import f32, function, op, tensor


    @function
    def mm(A: tensor[f32, 96, 80], B: tensor[f32, 80, 64]):
        return op.matmul(A, B)


    @function
    def dyn(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
        return op.matmul(A, B)


    @function(tile=(32, 32, 16))
    def hinted(A: tensor[f32, 96, 80], B: tensor[f32, 80, 64]):
        return op.matmul(A, B)
    """)
SPACE = {"BN": [16, 32]}


@pytest.fixture
def program(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSERA_TUNE_DIR", raising=False)   # tests/conftest.py's: here, the cache directory's
    path = tmp_path / "prog.py"
    path.write_text(SOURCE)
    return types.SimpleNamespace(filename=str(path), name="mm", path=path)


def autotune_props(image: bytes) -> set:
    return {k.props.get("autotune") for k in read_image(image).kernels}


def compiled(program, **options) -> bytes:
    """`mm` (or options' kernels) compiled as a later program would be."""
    return compiler.compile_file(program.filename, CompileOptions(**{"kernels": ("mm",), **options})).image


def test_a_stored_result_is_used_by_later_compiles_and_shown(program, capsys):
    before = compiled(program)    # cached without any stored result
    assert autotune_props(before) == {None}
    result = autotune.search(program, SPACE, repeat=1, persist=True, progress=False)
    assert len(result.trials) == 2 and not result.stored
    (path, record), = tuning.records()
    assert record["config"] == {"NC": result["BN"]} and record["space"] == SPACE and record["tried"] == 2
    assert record["key"]["bucket"] == "128x64x128" and record["key"]["dtype"] == "f32xf32->f32"
    # the compile cache's key covers the store: the same program now compiles again, taking the result
    image = compiled(program)
    assert autotune_props(image) == {f"stored: NC={result['BN']}"}
    A, B = np.random.default_rng(1).standard_normal((2, 96, 80)).astype(np.float32)[0], \
        np.random.default_rng(2).standard_normal((80, 64)).astype(np.float32)
    np.testing.assert_allclose(executor.load(image).mm(A, B), A @ B, rtol=1e-4, atol=1e-4)
    # explicit hints win: the function's own, a compile's, and a compile that asks for no stored result
    assert autotune_props(compiled(program, kernels=("hinted",))) == {None}
    assert autotune_props(compiled(program, hints=(("NC", 48),))) == {None}
    assert autotune_props(compiled(program, tuned=False)) == {None}
    out = program.path.with_suffix(".tessera")
    out.write_bytes(image)
    capsys.readouterr()
    assert objdump.main([str(out)]) == 0
    assert f'autotune: "stored: NC={result["BN"]}"' in capsys.readouterr().out
    # a changed record recompiles
    tuning.store(record["key"], {"NC": 48, "KC": 64}, 1.0, 1)
    assert autotune_props(compiled(program)) == {"stored: KC=64 NC=48"}


def test_a_second_process_reuses_the_result_without_timing(program):
    first = autotune.search(program, SPACE, repeat=1, persist=True, progress=False)
    script = textwrap.dedent(f"""\
        import types
        from tessera import autotune, compiler
        from tessera.image import read_image
        from tessera.options import CompileOptions

        def timed(*args):
            raise AssertionError("a stored result was timed again")
        autotune._time = timed
        kernel = types.SimpleNamespace(filename={program.filename!r}, name="mm")
        result = autotune.search(kernel, {SPACE!r}, repeat=1, persist=True, progress=False)
        assert result.stored and result.trials == [], result
        print(result.best["BN"])
        image = compiler.compile_file({program.filename!r}, CompileOptions(kernels=("mm",))).image
        print(sorted({{k.props.get("autotune") for k in read_image(image).kernels}}))
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [str(first["BN"]), f"['stored: NC={first['BN']}']"]
    # another search space is searched again
    assert not autotune.search(program, {"BN": [16]}, repeat=1, persist=True, progress=False).stored


def test_keys_do_not_collide(program):
    grp = tuning.group("cpu", "native", "fast", "backend")
    base = tuning.record_key(grp, (96, 64, 80), "f32xf32->f32")
    assert base == tuning.record_key(grp, (100, 63, 128), "f32xf32->f32")    # one bucket
    others = [tuning.record_key(grp, (96, 64, 300), "f32xf32->f32"),          # another bucket
              tuning.record_key(grp, (None, 64, 80), "f32xf32->f32"),         # known only at run time
              tuning.record_key(grp, (96, 64, 80), "bf16xbf16->f32"),
              tuning.record_key(tuning.group("cpu", "skylake", "fast", "backend"), (96, 64, 80), "f32xf32->f32"),
              tuning.record_key(tuning.group("ptx", "sm_90a", "fast", "backend"), (96, 64, 80), "f32xf32->f32"),
              tuning.record_key(tuning.group("cpu", "native", "deterministic", "backend"), (96, 64, 80),
                                "f32xf32->f32"),
              tuning.record_key(tuning.group("cpu", "native", "fast", "another"), (96, 64, 80), "f32xf32->f32")]
    tuning.store(base, {"NC": 16}, 1.0, 2)
    assert tuning.lookup(base) == {"NC": 16}
    assert [tuning.lookup(k) for k in others] == [None] * len(others)
    # a compile under another profile does not take the fast profile's result
    autotune.search(program, SPACE, repeat=1, persist=True, progress=False)
    with profiles.profile("deterministic"):
        assert autotune_props(compiled(program)) == {None}


def test_extents_known_at_run_time_key_as_any(program):
    """A matmul over symbolic extents is keyed "?": its result, timed at the shapes given, serves every shape."""
    kernel = types.SimpleNamespace(filename=program.filename, name="dyn")
    result = autotune.search(kernel, SPACE, repeat=1, shapes=[(70, 40), (40, 50)], persist=True, progress=False)
    (_, record), = tuning.records()
    assert record["key"]["bucket"] == "?x?x?" and record["shapes"] == [[70, 40], [40, 50]]
    image = compiled(program, kernels=("dyn",))
    assert autotune_props(image) == {f"stored: NC={result['BN']}"}
    A, B = np.ones((33, 17), np.float32), np.ones((17, 65), np.float32)
    np.testing.assert_array_equal(executor.load(image).dyn(A, B), A @ B)


@pytest.mark.parametrize("damage", ["garbage", "version", "renamed", "config"])
def test_a_damaged_store_is_ignored_with_a_warning(program, damage):
    autotune.search(program, SPACE, repeat=1, persist=True, progress=False)
    (path, record), = tuning.records()
    if damage == "garbage":
        path.write_bytes(b"\x00{not json")
    elif damage == "version":
        path.write_text(json.dumps({**record, "version": tuning.VERSION + 1}))
    elif damage == "renamed":   # another key's record under this key's name
        path.write_text(json.dumps({**record, "key": {**record["key"], "dtype": "f64xf64->f64"}}))
    else:
        path.write_text(json.dumps({**record, "config": {"NC": "sixteen"}}))
    with pytest.warns(tuning.TuningWarning, match="ignored"):
        image = compiled(program)
    assert autotune_props(image) == {None}
    with pytest.warns(tuning.TuningWarning):
        assert tuning.records() == []


def test_progress_and_the_device_path(program, capsys):
    autotune.search(program, SPACE, repeat=1, progress=True)
    err = capsys.readouterr().err
    assert "autotune mm: 1/2 configurations, best" in err and "2/2 configurations" in err and "s left" in err
    autotune.search(program, SPACE, repeat=1, progress=False)
    assert capsys.readouterr().err == ""
    # the device branch of the timing (DeviceArrays, waits on the context), run in the CPU's context
    ctx = runtime.default_context()
    fn = executor.load(compiled(program), ctx).mm

    class OnDevice:
        device, plan = True, fn.plan

        def __call__(self, *arrays):
            assert all(isinstance(a, runtime.DeviceArray) for a in arrays)
            return fn(*arrays)
    assert autotune._time(OnDevice(), [np.ones((96, 80), np.float32), np.ones((80, 64), np.float32)], 2, ctx) > 0


def test_gpu_targets_need_their_device(program):
    if "cuda" in runtime.backends():
        pytest.skip("this machine has a CUDA device: tests/gpu/test_autotune_gpu.py searches on it")
    with pytest.raises(ValueError, match="times them on a cuda device, and this machine has none"):
        autotune.search(program, SPACE, target="ptx", arch="sm_90a")
    with pytest.raises(ValueError, match="not 'spirv'"):
        autotune.search(program, SPACE, target="spirv")


def test_persist_refusals(program):
    with pytest.raises(ValueError, match="'vector' is the vectorize phase's"):
        autotune.search(program, {"vector": [4, 8]}, persist=True)
    with profiles.profile("deterministic"), pytest.raises(ValueError, match="give one BK value"):
        autotune.search(program, {"BK": [16, 32]}, persist=True)


def test_the_cli(program, capsys):
    assert tune.main([program.filename, "mm", "--param", "BN=16,32", "--shape", "96x80", "--shape", "80x64",
                      "--repeat", "1", "--quiet"]) == 0
    out = capsys.readouterr()
    assert "mm: BN=" in out.out and "best of 2, stored" in out.out and out.err == ""
    assert tune.main([program.filename, "mm", "--param", "BN=16,32", "--quiet"]) == 0
    assert "stored before, nothing timed" in capsys.readouterr().out
    (_, record), = tuning.records()
    tuning.store({**record["key"], "compiler": "0" * 64}, {"NC": 16}, 1.0, 1)   # an older compiler's
    assert tune.main(["--list"]) == 0
    current, old = sorted(capsys.readouterr().out.splitlines(), key=lambda line: "not used" in line)
    assert "cpu native fast 128x64x128 f32xf32->f32: NC=" in current and "best of 2" in current
    assert "not used" not in current and "compiler 000000000000, another compiler's: not used" in old
    assert tune.main([program.filename, "mm", "--shape", "96x"]) == 1
    assert "--shape '96x': give the extents" in capsys.readouterr().err
    assert tune.main([program.filename, "mm", "--param", "BN=16", "--shape", "96x80", "--quiet"]) == 1
    assert "shapes gives 1 shapes for 2 arguments" in capsys.readouterr().err
    assert tune.main(["--clear"]) == 0
    assert "removed 2 stored autotuning result" in capsys.readouterr().out
    assert tuning.records() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tune.main(["--list"]) == 0
    assert "no stored autotuning results" in capsys.readouterr().out
