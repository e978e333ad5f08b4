"""What the CPU GEMM path tests share (test_int8_gemm_cpu.py, test_bf16_gemm_cpu.py): a program compiled with
its GEMM path pinned by an environment variable, and the LLVM IR it became (to tell which kernel ran)."""

import pytest

from tessera import compiler, executor


def compile_pinned(src: str, env: str, path: str):
    """(path, the loaded module, the llir stage's text) of `src` compiled with `env` set to `path`; the
    variable is restored before returning (the compiler reads it while compiling)."""
    mp = pytest.MonkeyPatch()
    mp.setenv(env, path)
    llir = []
    try:
        result = compiler.compile_source(src, "mm.py",
                                         on_stage=lambda stage, art: llir.append(art) if stage == "llir" else None)
    finally:
        mp.undo()
    return path, executor.load(result.image), "".join(llir)
