"""The staged pipeline as a user drives it: the compile cache, and restarting from any MLIR stage's dump."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tessera import compiler, executor
from tessera.options import CompileOptions

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph" / "reductions.py"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(d))
    monkeypatch.delenv("TESSERA_CACHE", raising=False)
    return d


def test_cache_hit_gives_the_same_image(cache_dir):
    src = EXAMPLE.read_text()
    first = compiler.compile_source(src, str(EXAMPLE))
    again = compiler.compile_source(src, str(EXAMPLE))
    assert not first.metadata.get("cached") and again.metadata["cached"]
    assert again.image == first.image
    assert again.metadata["plans"] == first.metadata["plans"]
    assert [s.name for s in again.metadata["signatures"]] == [s.name for s in first.metadata["signatures"]]
    assert len(list(cache_dir.rglob("*.tessera"))) == 1


def test_cache_key_covers_source_name_and_options(cache_dir):
    src = EXAMPLE.read_text()
    compiler.compile_source(src, "a.py")
    assert not compiler.compile_source(src, "b.py").metadata.get("cached")            # locations differ
    assert not compiler.compile_source(src, "a.py", CompileOptions(opt_level=1)).metadata.get("cached")
    assert not compiler.compile_source(src + "\n# edit\n", "a.py").metadata.get("cached")
    assert compiler.compile_source(src, "a.py").metadata["cached"]


def test_cache_can_be_turned_off(cache_dir, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", "0")
    compiler.compile_source(EXAMPLE.read_text(), "a.py")
    assert not cache_dir.exists()


def test_concurrent_compiles_share_the_cache_safely(cache_dir, tmp_path):
    """Four tessera-cc processes compile the same program at once into an empty cache."""
    env = dict(os.environ, TESSERA_CACHE_DIR=str(cache_dir))
    outs = [tmp_path / f"out{i}.tessera" for i in range(4)]
    procs = [subprocess.Popen([sys.executable, "-m", "tessera.tools.cc", str(EXAMPLE), "-o", str(o)],
                              env=env, cwd=os.sep, stderr=subprocess.PIPE) for o in outs]
    for p in procs:
        assert p.wait() == 0, p.stderr.read().decode()
    images = {o.read_bytes() for o in outs}
    assert len(images) == 1
    assert not list(cache_dir.rglob(".tmp-*"))   # no partial entries left behind


@pytest.mark.parametrize("stage", ["canonical", "schedule", "fusion", "kernels", "warps", "llvm"])
def test_restart_from_a_stage_dump(tmp_path, stage):
    src = EXAMPLE.read_text()
    dumps: dict = {}
    full = compiler.compile_source(src, str(EXAMPLE), on_stage=lambda n, a: dumps.setdefault(n, a))
    ir_file = tmp_path / f"{stage}.mlir"
    ir_file.write_text(dumps[stage])
    restarted = compiler.compile_ir_file(str(ir_file), start_after=stage)
    X = np.random.default_rng(3).standard_normal((5, 8, 16)).astype(np.float32)
    want = executor.load(full.image).stats(X)
    got = executor.load(restarted.image).stats(X)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_restart_refuses_non_mlir_stages(tmp_path):
    from tessera.diagnostics import CompileError
    f = tmp_path / "x.mlir"
    f.write_text("module {}\n")
    with pytest.raises(CompileError, match="cannot start after 'obj'"):
        compiler.compile_ir_file(str(f), start_after="obj")
