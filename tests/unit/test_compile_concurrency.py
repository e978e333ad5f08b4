"""What a compile does concurrently gives what it did sequentially: ptxas's threads (`--split-compile`,
backends/ptx/ptxas.py) report each kernel's registers, shared memory and spills as the one-thread run does,
an older ptxas without the option is run without it, and PTX that ptxas refuses is reported as before; the
kernels' LLVM modules optimized and code-generated apart on threads (backends/llvm_threads.py,
backends/ptx/modules.py) give the PTX of the linked module, byte for byte."""

import locale
import os
import pathlib
import stat
import sys

import pytest

from tessera import compiler, image
from tessera.backends import llvm_threads
from tessera.backends.ptx import modules, ptxas
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
    check = ptxas.check
    monkeypatch.setattr(ptxas, "check", lambda ptx, arch, tool: check(ptx + BROKEN, arch, tool))
    with pytest.raises(CompileError) as e:
        compiler.compile_source(GEMM, "gemm.py", CompileOptions(target="ptx", arch="sm_90a"))
    assert e.value.filename == "<ptxas>" and "ptxas rejected the PTX for sm_90a" in str(e.value)


# --- LLVM's work on threads: the kernels' modules apart (backends/ptx/modules.py) ---

EXAMPLES = pathlib.Path(__file__).parents[2] / "examples" / "gpu"


def _stages(source: str, filename: str, arch: str) -> dict:
    """The compile's stages' artifacts, the image among them (ptxas's reports in its kernel records)."""
    stages = {}
    compiler.compile_source(source, filename, CompileOptions(target="ptx", arch=arch),
                            on_stage=lambda name, artifact: stages.__setitem__(name, artifact))
    return stages


def _source(name: str) -> tuple[str, str]:
    path = EXAMPLES / f"{name}.py"
    return (GEMM, "gemm.py") if name == "gemm" else (path.read_text(encoding="utf-8"), str(path))


@pytest.mark.parametrize("case", ["gemm-sm_90a", "gemm-sm_80", "attention_backward-sm_90a"])
def test_modules_apart_give_the_linked_modules_ptx(case, monkeypatch):
    """The symbolic GEMM (on sm_90a three wgmma kernels and the SIMT fallback: four modules; on sm_80 the mma
    kernel and the fallback) and the attention backward example (tsr_smem declared by several modules, kernels
    translated from MLIR in the first): the PTX of the modules optimized and code-generated apart, on two
    threads and on one, is that of the linked module."""
    name, arch = case.split("-")
    source, filename = _source(name)
    before = locale.setlocale(locale.LC_ALL)
    apart = _stages(source, filename, arch)
    assert locale.setlocale(locale.LC_ALL) == before   # llvmlite's printing sets it for a while (llvm_threads)
    assert apart["llir"].startswith("; tessera: LLVM module 1 of ") and len(modules.pieces(apart["llir"])) > 1
    monkeypatch.setattr(llvm_threads, "workers", lambda jobs: 1)
    one = _stages(source, filename, arch)
    assert one["ptx"] == apart["ptx"] and one["image"] == apart["image"]
    monkeypatch.setattr(modules, "split", lambda texts, renames: None)   # the linked module, as before
    linked = _stages(source, filename, arch)
    assert not linked["llir"].startswith("; tessera:")
    assert linked["llir"].count("\ndefine ") == apart["llir"].count("\ndefine ")
    assert linked["ptx"] == apart["ptx"]
    # the kernels' records, ptxas's reports among them
    assert linked["image"] == apart["image"]
    if ptxas.find() is not None:
        assert all(k.regs > 0 for k in image.read_image(apart["image"]).kernels)


def test_modules_that_define_the_same_internal_global_are_linked():
    """The attention example's fp8 kernels each define an internal tsr_red, which the linker renames: those
    modules are linked and optimized as one (split declines them)."""
    source, filename = _source("attention")
    assert not _stages(source, filename, "sm_90a")["llir"].startswith("; tessera:")


def test_threads_run_at_once(monkeypatch):
    """The jobs overlap in time: llvmlite's process-wide lock is not taken around them (each runs while the
    other is still in LLVM), and the results come back in the jobs' order whatever the finishing order."""
    import threading
    both = threading.Barrier(2, timeout=60)
    monkeypatch.setattr(llvm_threads, "workers", lambda jobs: 2)

    def job(i):
        def run():
            llvm_threads._raw("LLVMPY_GetVersionInfo")()   # a call into LLVM without the lock
            both.wait()   # would time out if the jobs ran one after the other
            return f"job {i}"
        return run
    assert llvm_threads._run([job(0), job(1)], [1, 2]) == ["job 0", "job 1"]


def test_llvm_errors_on_threads():
    """Invalid IR fails on the threads as llvmlite's own calls fail: a parsing error, a verifier error (code
    generation is never reached with IR the verifier refuses)."""
    from tessera.backends.ptx import compiler as ptx_compiler
    from tessera.backends.ptx.options import PTXOptions

    def tm():
        return ptx_compiler._target_machine(PTXOptions(arch="sm_80"))
    good = "define void @k() {\n  ret void\n}\n"
    assert ".entry" not in llvm_threads.emit_assembly([good], tm)[0] and "// .globl\tk" in \
        llvm_threads.emit_assembly([good], tm)[0]
    with pytest.raises(RuntimeError, match="LLVM IR parsing error"):
        llvm_threads.emit_assembly([good, "define void @k( {"], tm)
    with pytest.raises(RuntimeError, match="Only PHI nodes may reference their own value"):
        llvm_threads.emit_assembly([good, "define void @k() {\n  %x = add i32 %x, 1\n  ret void\n}\n"], tm)


def test_split_refuses_modules_that_share_definitions():
    k = "define void @{0}() {{\n  ret void\n}}\n"
    pieces = modules.split([k.format("a"), k.format("b")], {})
    assert pieces == [k.format("a"), k.format("b")] and pieces.order == {}
    assert modules.split([k.format("a")], {}) is None                       # one module: nothing to split
    assert modules.split([k.format("a"), k.format("a")], {}) is None        # a function defined twice
    calls = "declare void @a()\ndefine void @b() {\n  call void @a()\n  ret void\n}\n"
    assert modules.split([k.format("a"), calls], {}) is None                # a call across modules
    g = "@g = global i32 0\n"
    assert modules.split([g + k.format("a"), g + k.format("b")], {}) is None   # a global defined twice
    ext = "; m\n@s = external addrspace(3) global [0 x i8], align {0}\n"
    got = modules.split([ext.format(16) + k.format("a"), ext.format(1024) + k.format("b")], {})
    assert got == [ext.format(16) + k.format("a"), ext.format(16) + k.format("b")]   # the linker keeps the first
    assert got.order == {"s": 0}


def test_stitch_ptx_declines_what_it_does_not_know():
    """PTX with calls or labels other than basic blocks is not put together (the ptx stage links the modules)."""
    head = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n.target sm_80\n.address_size 64\n\n"
    a = head + "\t// .globl\ta\n\n.visible .entry a()\n{\n$L__BB0_1:\n\tret;\n\n}\n"
    b = head + "\t// .globl\tb\n.extern .shared .align 16 .b8 s[];\n\n.visible .entry b()\n{\n$L__BB0_1:\n\tret;\n\n}\n"
    assert modules.stitch_ptx([a, b]) == (head + "\t// .globl\ta\n.extern .shared .align 16 .b8 s[];\n\n"
                                          ".visible .entry a()\n{\n$L__BB0_1:\n\tret;\n\n}\n"
                                          "\t// .globl\tb\n.visible .entry b()\n{\n$L__BB1_1:\n\tret;\n\n}\n")
    assert modules.stitch_ptx([a, b.replace("ret;", "// callseq 0, 0\n\tret;")]) is None
    assert modules.stitch_ptx([a, b.replace(".extern .shared", ".extern .func (.param .b32 r) f\n.extern .shared")]) \
        is None
