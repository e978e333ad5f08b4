"""What a compile does concurrently gives what it did sequentially: ptxas's threads (`--split-compile`,
backends/ptx/ptxas.py) report each kernel's registers, shared memory and spills as the one-thread run does,
an older ptxas without the option is run without it, and PTX that ptxas refuses is reported as before."""

import os
import pathlib
import stat
import sys

import pytest

from tessera import compiler, image
from tessera.backends.ptx import ptxas
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

needs_ptxas = pytest.mark.skipif(ptxas.find() is None,
                                 reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")

GEMM = '''
from tessera import function, op, tensor, bf16

@function
def gemm_bf16(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B)
'''


def _ptx(source: str = GEMM) -> str:
    stages = {}
    compiler.compile_source(source, "gemm.py", CompileOptions(target="ptx", arch="sm_90a"), stop_after="ptx",
                            on_stage=lambda name, artifact: stages.__setitem__(name, artifact))
    return stages["ptx"]


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    """Every compile here runs ptxas: none is served from the compile cache."""
    monkeypatch.setenv("TESSERA_CACHE", "0")


@needs_ptxas
def test_split_compile_reports_what_one_thread_does(monkeypatch):
    """The symbolic GEMM's four kernels (three wgmma tile shapes, the SIMT fallback) assembled with threads and
    without: the same resources, and the image the same bytes."""
    ptx = _ptx()
    monkeypatch.setattr(ptxas, "_split_compile_known", True)
    threads = ptxas.check(ptx, "sm_90a", ptxas.find())
    img_threads = compiler.compile_source(GEMM, "gemm.py", CompileOptions(target="ptx", arch="sm_90a")).image
    monkeypatch.setattr(ptxas, "SPLIT_COMPILE", [])
    one = ptxas.check(ptx, "sm_90a", ptxas.find())
    img_one = compiler.compile_source(GEMM, "gemm.py", CompileOptions(target="ptx", arch="sm_90a")).image
    assert len(threads) == 4 and all(r.regs > 0 for r in threads.values())
    assert threads == one
    assert img_threads == img_one
    assert sorted(k.regs for k in image.read_image(img_one).kernels) == sorted(r.regs for r in one.values())


@pytest.fixture
def old_ptxas(tmp_path, monkeypatch):
    """A ptxas that refuses --split-compile as an unknown option (as one before CUDA 12.x would) and otherwise
    runs the real one; it logs each invocation's arguments."""
    real = ptxas.find()
    if real is None:
        pytest.skip("ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
    log = tmp_path / "calls"
    tool = tmp_path / "ptxas"
    tool.write_text(f"""#!{sys.executable}
import os, sys
with open({str(log)!r}, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if "--split-compile" in sys.argv:
    print("ptxas fatal   : Unknown option '--split-compile'", file=sys.stderr)
    sys.exit(255)
os.execv({real!r}, [{real!r}] + sys.argv[1:])
""")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("TESSERA_PTXAS", str(tool))
    monkeypatch.setattr(ptxas, "_split_compile_known", True)
    return tool, log


def test_older_ptxas_runs_without_split_compile(old_ptxas):
    tool, log = old_ptxas
    ptx = _ptx()   # the whole compile through the older ptxas
    assert ptxas._split_compile_known is False
    log.write_text("")
    ptxas._split_compile_known = True   # (monkeypatched: restored after the test)
    first = ptxas.check(ptx, "sm_90a", str(tool))
    assert first and all(r.regs > 0 for r in first.values())
    assert ptxas._split_compile_known is False
    second = ptxas.check(ptx, "sm_90a", str(tool))   # not asked again
    calls = log.read_text().splitlines()
    assert len(calls) == 3 and "--split-compile" in calls[0] and not any("--split-compile" in c for c in calls[1:])
    assert second == first


BROKEN = ".visible .entry broken()\n{\n\tthis is not ptx;\n}\n"


@needs_ptxas
@pytest.mark.parametrize("threads", [True, False], ids=["split-compile", "one-thread"])
def test_refused_kernel_is_reported(threads, monkeypatch):
    """A kernel ptxas refuses among good ones: the compile fails with ptxas's words and the file's line, with
    threads as without (an error in one kernel is not lost in the others' reports)."""
    if not threads:
        monkeypatch.setattr(ptxas, "SPLIT_COMPILE", [])
    monkeypatch.setattr(ptxas, "_split_compile_known", True)
    ptx = _ptx() + BROKEN
    with pytest.raises(ptxas.PtxasError) as e:
        ptxas.check(ptx, "sm_90a", ptxas.find())
    msg = str(e.value)
    assert msg.startswith("internal compiler error: ptxas rejected the PTX for sm_90a:")
    line = ptx.count("\n", 0, ptx.index("this is not ptx")) + 1
    assert f"line {line}" in msg and "syntax error" in msg
    assert ptxas._split_compile_known is True   # a refusal of the PTX is not a refusal of the option


@needs_ptxas
def test_refused_ptx_fails_the_compile(monkeypatch):
    """Through the driver: ptxas's refusal is a CompileError at <ptxas>, as it was before the threads."""
    from tessera.backends.ptx import compiler as ptx_compiler
    emit = ptx_compiler._target_machine

    class Broken:
        def __init__(self, tm):
            self.tm = tm

        def __getattr__(self, name):
            return getattr(self.tm, name)

        def emit_assembly(self, lmod):
            return self.tm.emit_assembly(lmod) + BROKEN

    monkeypatch.setattr(ptx_compiler, "_target_machine", lambda options: Broken(emit(options)))
    with pytest.raises(CompileError) as e:
        compiler.compile_source(GEMM, "gemm.py", CompileOptions(target="ptx", arch="sm_90a"))
    assert e.value.filename == "<ptxas>" and "ptxas rejected the PTX for sm_90a" in str(e.value)
