"""LLVM's work on several independent modules at once, on threads.

llvmlite serializes every call into LLVM under one process-wide lock (llvmlite/binding/ffi.py's `_LLVMLock`),
so threads calling it take turns. LLVM itself optimizes and generates code for modules of distinct
LLVMContexts concurrently, each with its own TargetMachine and pass builder (what its own parallel code
generation does), and ctypes releases the GIL for the length of a call. The jobs here call llvmlite's C entry
points without its lock (`_cfn`, the ctypes function it wraps; their argument types are llvmlite's own), each
job on a module of a context of its own, with a target machine and a pass builder nobody else uses. Everything
shared (creating the target machines and pass builders, disposing) happens on the calling thread, and printing
a module takes llvmlite's lock (it changes the process's locale for a while: `_print`).

Used by the PTX backend (backends/ptx/compiler.py) for kernels whose LLVM modules are independent: a GEMM of
symbolic extents carries three wgmma tile kernels, each optimized and code-generated on its own.
"""

from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import llvmlite.binding as llvm
from llvmlite.binding import ffi


def _raw(name: str):
    """llvmlite's ctypes function `name`, without its lock (see the module docstring)."""
    return getattr(ffi.lib, name)._cfn


def workers(jobs: int) -> int:
    """Threads for `jobs` jobs: one per CPU this process may run on, at most one per job."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(jobs, cpus))


def _parse(ctx, text: str):
    with ffi.OutputString() as err:
        mod = _raw("LLVMPY_ParseAssembly")(ctx, ctypes.c_char_p(text.encode("utf8")), err)
        if err:
            if mod:
                _raw("LLVMPY_DisposeModule")(mod)
            raise RuntimeError(f"LLVM IR parsing error\n{err}")
    return mod


def _verify(mod) -> None:
    with ffi.OutputString() as err:
        if _raw("LLVMPY_VerifyModule")(mod, err):
            raise RuntimeError(str(err))


def _print(mod) -> str:
    """The module's text. Under llvmlite's lock: LLVMPY_PrintModuleToString sets the process's locale to "C" for
    the length of the printing and restores it after, and two threads doing so at once can leave it "C" (file
    reads without an encoding then decode ASCII); with the lock no other thread changes the locale meanwhile."""
    with ffi.OutputString() as out:
        ffi.lib.LLVMPY_PrintModuleToString(mod, out)
        return str(out)


def _emit_assembly(tm, mod) -> str:
    with ffi.OutputString() as err:
        buf = _raw("LLVMPY_TargetMachineEmitToMemory")(tm, mod, 0, err)
        if not buf:
            raise RuntimeError(str(err))
    try:
        data = ctypes.string_at(_raw("LLVMPY_GetBufferStart")(buf), _raw("LLVMPY_GetBufferSize")(buf))
    finally:
        _raw("LLVMPY_DisposeMemoryBuffer")(buf)
    return data.decode("utf8")


def _run(jobs: list[Callable[[], str]], sizes: list[int]) -> list[str]:
    """Each job's result, in the jobs' order; the largest jobs start first. The first failure is raised."""
    n = workers(len(jobs))
    if n == 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="tessera-llvm") as pool:
        order = sorted(range(len(jobs)), key=lambda i: -sizes[i])
        futures = {i: pool.submit(jobs[i]) for i in order}
        return [futures[i].result() for i in range(len(jobs))]


class _Job:
    """One module's context, target machine and pass builder, made on the calling thread."""

    def __init__(self, target_machine: Callable[[], object], speed_level: int | None = None):
        self.ctx = llvm.create_context()
        self.tm = target_machine()
        self.pb = self.mpm = None
        if speed_level is not None:
            self.pb = llvm.create_pass_builder(self.tm, llvm.create_pipeline_tuning_options(speed_level=speed_level))
            self.mpm = self.pb.getModulePassManager()


def optimize(texts: list[str], target_machine: Callable[[], object], triple: str, speed_level: int,
             renames: dict[str, str]) -> list[str]:
    """Each LLVM module of `texts` parsed, given `triple` and the target machine's data layout, its functions
    named in `renames` renamed, verified and optimized at `speed_level` (LLVM's default pipeline, as
    make_llir's sequential path runs it); the optimized modules' text, in order."""
    jobs = [_Job(target_machine, speed_level) for _ in texts]

    def one(job: _Job, text: str) -> str:
        mod = _parse(job.ctx, text)
        try:
            _raw("LLVMPY_SetTarget")(mod, triple.encode("utf8"))
            _raw("LLVMPY_SetDataLayout")(mod, job.layout)
            for old, new in renames.items():
                fn = _raw("LLVMPY_GetNamedFunction")(mod, old.encode("utf8"))
                if fn:
                    _raw("LLVMPY_SetValueName")(fn, new.encode("utf8"))
            _verify(mod)
            _raw("LLVMPY_RunNewModulePassManager")(job.mpm, mod, job.pb)
            return _print(mod)
        finally:
            _raw("LLVMPY_DisposeModule")(mod)

    for job in jobs:
        job.layout = str(job.tm.target_data).encode("utf8")
    try:
        return _run([lambda j=j, t=t: one(j, t) for j, t in zip(jobs, texts)], [len(t) for t in texts])
    finally:
        _dispose(jobs)


def emit_assembly(texts: list[str], target_machine: Callable[[], object]) -> list[str]:
    """Each LLVM module of `texts` parsed, verified (code generation of invalid IR aborts the process) and
    compiled to assembly by a target machine of its own; the assembly texts, in order."""
    jobs = [_Job(target_machine) for _ in texts]

    def one(job: _Job, text: str) -> str:
        mod = _parse(job.ctx, text)
        try:
            _verify(mod)
            return _emit_assembly(job.tm, mod)
        finally:
            _raw("LLVMPY_DisposeModule")(mod)

    try:
        return _run([lambda j=j, t=t: one(j, t) for j, t in zip(jobs, texts)], [len(t) for t in texts])
    finally:
        _dispose(jobs)


def _dispose(jobs: list[_Job]) -> None:
    for job in jobs:
        for obj in (job.mpm, job.pb, job.tm, job.ctx):
            if obj is not None:
                obj.close()
