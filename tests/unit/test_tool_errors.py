"""What the environment does to a tool reads as one line, `tessera-X: error: …`, with exit status 1 (issue 13,
item 13): never a traceback, and an output that cannot be written is said before any compiling."""

import os

import pytest

from test_tools import EXAMPLE, tool


def one_error_line(r, prog: str, *words: str) -> str:
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), r.stderr
    assert all(w.lower() in lines[0].lower() for w in words), lines[0]
    return lines[0]


@pytest.fixture
def sources(tmp_path):
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\n@kernel\ndef k(X):\n    pass\n")
    (tmp_path / "deep.py").write_text("x = " + "+".join(["1"] * 400_000) + "\n")
    (tmp_path / "afile").write_text("")
    return tmp_path


@pytest.mark.parametrize("source, words", [
    (".", ["is a directory"]),
    ("loop1", ["symbolic links"]),
    ("latin1.py", ["latin1.py:1:", "not UTF-8"]),
    ("missing.py", ["missing.py", "No such file"]),
])
def test_cc_unreadable_sources(sources, source, words):
    one_error_line(tool("cc", str(sources / source), "-o", str(sources / "out.tessera")), "tessera-cc", *words)


def test_cc_too_deep_a_source_is_an_error_at_the_file(sources):
    """The compiler itself refuses it (as tessera.compile does), so the error is located at the file."""
    r = tool("cc", str(sources / "deep.py"), "-o", str(sources / "out.tessera"))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{sources / 'deep.py'}:1:1: error: ") and "nested too deeply" in lines[0]


@pytest.mark.parametrize("args, words", [
    (["-o", "{d}/nodir/x.tessera"], ["nodir", "does not exist"]),
    (["-o", "{d}"], ["is a directory"]),
    (["-o", "{d}/x.tessera", "--emit-header", "{d}/nodir/x.h"], ["--emit-header", "does not exist"]),
    (["-o", "{d}/x.tessera", "--dump-ir-after-all", "{d}/afile"], ["afile is not a directory"]),
    (["--target", "cuda"], ["unknown target 'cuda'"]),
    (["--from", "bogus"], ["--from bogus: no such stage", "ttir"]),
    (["--compile-to", "bogus"], ["--compile-to bogus: no such stage"]),
])
def test_cc_unwritable_outputs_and_bad_names(sources, args, words):
    r = tool("cc", EXAMPLE, *(a.format(d=sources) for a in args))
    assert "<unknown>" not in r.stderr and ":0:0:" not in r.stderr
    one_error_line(r, "tessera-cc", *words)
    assert not (sources / "x.tessera").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_cc_read_only_output_directory(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    one_error_line(tool("cc", EXAMPLE, "-o", str(tmp_path / "ro" / "x.tessera")), "tessera-cc", "not writable")


def test_other_tools_on_bad_files(sources):
    one_error_line(tool("opt", str(sources / "missing.mlir")), "tessera-opt", "No such file")
    one_error_line(tool("opt", str(sources)), "tessera-opt", "is a directory")
    one_error_line(tool("opt", str(sources / "latin1.py")), "tessera-opt", "not UTF-8")
    one_error_line(tool("opt", str(sources / "afile"), "-o", str(sources / "nodir" / "x.mlir")), "tessera-opt",
                   "does not exist")
    one_error_line(tool("opt", str(sources / "afile"), "--pass-pipeline", "bogus(("), "tessera-opt")
    one_error_line(tool("objdump", str(sources)), "tessera-objdump", "is a directory")
    one_error_line(tool("objdump", str(sources / "loop1")), "tessera-objdump", "symbolic links")
    one_error_line(tool("pack_repro", str(sources / "missing")), "tessera-pack-repro", "not a crash capture")
    one_error_line(tool("gemm", "-o", str(sources / "nodir" / "g.tessera")), "tessera-gemm", "does not exist")
