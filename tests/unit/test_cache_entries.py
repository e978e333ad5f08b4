"""The compile cache serves only whole entries of their own key from directories no one else can write, and
leaves nothing behind when a write fails (issue 13, item 17)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tessera import cache, compiler

SOURCE = """
from tessera import kernel, launch, tensor

@kernel
def copy(X: tensor[float], Y: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Y[i] = X[i]
"""
OTHER = SOURCE.replace("Y[i] = X[i]", "Y[i] = X[i] + 1.0")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(d))
    monkeypatch.setenv("TESSERA_CACHE", "1")
    return d


def compile_(source=SOURCE):
    return compiler.compile_source(source, "copy.py")


def entry_of(cache_dir) -> pathlib.Path:
    (path,) = cache_dir.rglob("*.tessera")
    return path


def image_without_cache(source=SOURCE) -> bytes:
    os.environ["TESSERA_CACHE"] = "0"
    try:
        return compile_(source).image
    finally:
        os.environ["TESSERA_CACHE"] = "1"


@pytest.mark.parametrize("damage", [
    lambda e, other: b"",                                       # zero-length
    lambda e, other: e[:len(e) // 2],                           # truncated
    lambda e, other: e[:40],                                    # truncated in the header
    lambda e, other: e[:-1] + bytes([e[-1] ^ 1]),              # one bit of the image
    lambda e, other: e[:20] + bytes([e[20] ^ 1]) + e[21:],      # one bit of the key
    lambda e, other: other,                                     # a valid image planted without a header
    lambda e, other: e[:cache._HEADER] + other,                 # a valid image under another's header
    lambda e, other: cache._entry("0" * 64, other),             # a whole entry of another key
], ids=["empty", "truncated", "header", "image-bit", "key-bit", "planted", "swapped", "other-key"])
def test_a_bad_entry_is_a_miss_and_is_replaced(cache_dir, damage):
    want = compile_().image
    path = entry_of(cache_dir)
    good = path.read_bytes()
    path.write_bytes(damage(good, image_without_cache(OTHER)))
    again = compile_()
    assert not again.metadata.get("cached") and again.image == want
    assert path.read_bytes() == good                            # recompiled and replaced
    assert compile_().metadata["cached"]


def test_directories_are_created_private_whatever_the_umask(tmp_path, monkeypatch):
    root = tmp_path / "a" / "b" / "cache"
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(root))
    old = os.umask(0)
    try:
        compile_()
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", root, entry_of(root).parent):
        assert d.stat().st_mode & 0o777 == 0o700, d
    assert entry_of(root).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("which", ["root", "subdirectory"])
def test_a_directory_others_can_write_is_not_used(cache_dir, which):
    compile_()
    d = cache_dir if which == "root" else entry_of(cache_dir).parent
    d.chmod(0o777)
    with pytest.warns(cache.CacheWarning, match=f"directory {d} is writable by group or others"):
        result = compile_()
    assert not result.metadata.get("cached")


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a directory's owner needs root")
@pytest.mark.parametrize("which", ["root", "entry"])
def test_a_directory_or_entry_of_another_user_is_not_used(cache_dir, which):
    compile_()
    path = cache_dir if which == "root" else entry_of(cache_dir)
    os.chown(path, 65534, 65534)
    with pytest.warns(cache.CacheWarning, match="is owned by another user"):
        result = compile_()
    assert not result.metadata.get("cached")


def test_an_unsafe_cache_directory_is_a_warning_from_the_command_line(cache_dir, tmp_path):
    cache_dir.mkdir(mode=0o700)
    cache_dir.chmod(0o777)
    src = tmp_path / "copy.py"
    src.write_text(SOURCE)
    r = subprocess.run([sys.executable, "-m", "tessera.tools.cc", str(src), "-o", str(tmp_path / "o.tessera")],
                       capture_output=True, text=True, env=dict(os.environ, TESSERA_CACHE_DIR=str(cache_dir)))
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "CacheWarning: compile cache not used" in r.stderr
    assert not list(cache_dir.iterdir())


def test_a_failed_write_leaves_no_temporary_file(cache_dir):
    """A file-size limit makes the write fail as a full disk does (EFBIG instead of ENOSPC)."""
    script = textwrap.dedent(f"""
        import resource, signal
        from tessera import cache
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        cache.store("ab" + "0" * 62, bytes(100000))
        assert cache.lookup("ab" + "0" * 62) is None
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ, TESSERA_CACHE_DIR=str(cache_dir)))
    assert [p.name for p in cache_dir.rglob("*")] == ["ab"]


def test_a_cache_hit_loads_no_mlir(cache_dir, tmp_path):
    src = tmp_path / "copy.py"
    src.write_text(SOURCE)
    cc = [sys.executable, "-c", "import sys; from tessera.tools import cc; rc = cc.main(sys.argv[1:]); "
          "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch_mlir', 'llvmlite')) or 'none'); "
          "sys.exit(rc)", str(src), "-o", str(tmp_path / "o.tessera")]
    env = dict(os.environ, TESSERA_CACHE_DIR=str(cache_dir))
    subprocess.run(cc, check=True, env=env, capture_output=True)
    hit = subprocess.run(cc, check=True, env=env, capture_output=True, text=True)
    assert hit.stdout.strip() == "none"
