"""No tool overwrites its input: every output path that is an input (by any name: the same spelling, another
spelling, a symlink, a hard link) or another output is refused with one line, before any work, and nothing
is written."""

import hashlib
import os
import subprocess
import sys

import pytest

from tessera.tools import cc, opt, overwrite, pack_repro

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
SOURCE = open(os.path.join(ROOT, "examples", "saxpy.py")).read()


def snapshot(directory):
    """Every file under `directory` with its digest: what a refused command must leave as it was."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text(SOURCE)
    os.symlink("s.py", tmp_path / "link.py")
    os.link(tmp_path / "s.py", tmp_path / "hard.py")
    return tmp_path


def refused(main, argv, capsys, work, fragment):
    before = snapshot(work)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and fragment in err, err
    assert snapshot(work) == before


@pytest.mark.parametrize("argv, fragment", [
    (["s.py", "-o", "s.py"], "-o s.py is the source (s.py)"),
    (["s.py", "-o", "./s.py"], "-o ./s.py is the source"),
    (["s.py", "-o", "link.py"], "-o link.py is the source"),
    (["s.py", "-o", "hard.py"], "-o hard.py is the source"),
    (["link.py", "-o", "s.py"], "-o s.py is the source (link.py)"),
    (["s.py", "--emit-header", "s.py"], "--emit-header s.py is the source"),
    (["s.py", "--emit-header", "hard.py"], "--emit-header hard.py is the source"),
    (["s.py", "--compile-to", "canonical", "-o", "s.py"], "-o s.py is the source"),
    (["s.py", "--compile-to", "so", "-o", "link.py"], "-o link.py is the source"),
    (["s.py", "-o", "x.tessera", "--emit-header", "x.tessera"], "each output needs its own file"),
])
def test_cc_refuses_to_overwrite_its_source(work, capsys, argv, fragment):
    refused(cc.main, argv, capsys, work, fragment)


def test_cc_default_outputs_that_are_the_source(work, capsys):
    (work / "k.tessera").write_text(SOURCE)  # the default image of k.tessera is k.tessera
    refused(cc.main, ["k.tessera"], capsys, work, "the default output k.tessera is the source")
    (work / "k.so").write_text(SOURCE)       # --compile-to so without -o writes k.so
    refused(cc.main, ["k.so", "--compile-to", "so"], capsys, work, "the default output k.so is the source")


def test_cc_refuses_a_dump_that_would_overwrite_the_source(work, capsys):
    (work / "dump").mkdir()
    os.link(work / "s.py", work / "dump" / "03-memory.mlir")
    refused(cc.main, ["s.py", "--dump-ir-after-all", "dump"], capsys, work, "would overwrite dump/03-memory.mlir")
    os.unlink(work / "dump" / "03-memory.mlir")
    os.symlink("../s.py", work / "dump" / "12-so.so")
    refused(cc.main, ["s.py", "--dump-ir-after-all", "dump"], capsys, work, "would overwrite dump/12-so.so")


def test_cc_still_writes_beside_its_source(work):
    # A dump directory holding other files (here the source itself, under a name no stage writes) is fine.
    (work / "dump").mkdir()
    os.link(work / "s.py", work / "dump" / "notes.mlir")
    r = subprocess.run([sys.executable, "-m", "tessera.tools.cc", str(work / "s.py"), "-o", str(work / "s.tessera"),
                        "--emit-header", str(work / "s.h"), "--dump-ir-after-all", str(work / "dump")],
                       capture_output=True, text=True, cwd=os.sep)
    assert r.returncode == 0, r.stderr
    assert (work / "s.py").read_text() == SOURCE and (work / "s.tessera").read_bytes()[:4] == b"\x7fELF"


def test_opt_refuses_to_overwrite_its_input(work, capsys):
    (work / "a.mlir").write_text("module {}\n")
    os.symlink("a.mlir", work / "b.mlir")
    refused(opt.main, ["a.mlir", "-o", "a.mlir"], capsys, work, "-o a.mlir is the input (a.mlir)")
    refused(opt.main, ["b.mlir", "-o", "a.mlir"], capsys, work, "-o a.mlir is the input (b.mlir)")


def test_pack_repro_refuses_to_overwrite_what_it_bundles(work, capsys):
    capture = work / "crash"
    capture.mkdir()
    for name in pack_repro.CAPTURE_FILES:
        (capture / name).write_text("{}")
    (work / "run.log").write_text("log")
    refused(pack_repro.main, ["crash", "-o", "crash/launch.json"], capsys, work,
            "-o crash/launch.json is launch.json of the capture")
    refused(pack_repro.main, ["crash", "--log", "run.log", "-o", "run.log"], capsys, work,
            "-o run.log is --log run.log")
    refused(pack_repro.main, ["crash", "-o", "crash/bundle.tar.gz"], capsys, work, "lies inside the capture directory")


def test_same_file():
    assert overwrite.same_file("/no/such/a", "/no/such/./a")
    assert not overwrite.same_file("/no/such/a", "/no/such/b")
    assert overwrite.clash({"in": "x"}, {"-o": "-", "h": None}) is None


def test_replay_refuses_to_dump_over_its_bundle(tmp_path):
    (tmp_path / "replay.py").write_text(pack_repro.replay_script())
    (tmp_path / "region0.bin").write_bytes(b"captured")
    before = snapshot(tmp_path)
    for dump in (".", str(tmp_path)):
        r = subprocess.run([sys.executable, "replay.py", "--dump", dump], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 2 and "--dump would overwrite the captured memory" in r.stdout, r.stdout + r.stderr
    assert snapshot(tmp_path) == before
