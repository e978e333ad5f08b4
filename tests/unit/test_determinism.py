"""The `deterministic` numerics profile's promise (docs/portability.md, "Numerics profiles"): the same bits on
every run and at 1, 2 and 7 worker threads, on the CPU backend and on the OpenCL CPU runtime (SPIR-V).

Each thread count runs in a fresh process (determinism_worker.py), since the CPU backend reads
TESSERA_NUM_THREADS both when it compiles (the GEMM cost model's blocking, the plan's launch-time blocking
choice) and when its pool starts; Intel's OpenCL CPU runtime reads CL_CONFIG_CPU_TBB_NUM_WORKERS. The program
has a GEMM over several K chunks, long row and column sums, a softmax and elementwise exp and division."""

import os
import subprocess
import sys

import numpy as np

import determinism_worker
from tessera import compiler, executor
from tessera.options import CompileOptions
from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

HERE = os.path.dirname(os.path.abspath(__file__))
THREADS = (1, 2, 7)


def digests(target: str, threads: int, tmp_path) -> list[str]:
    env = dict(os.environ, TESSERA_NUM_THREADS=str(threads), CL_CONFIG_CPU_TBB_NUM_WORKERS=str(threads),
               TESSERA_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, os.path.join(HERE, "determinism_worker.py"), target, "deterministic"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    runs = p.stdout.split()
    assert len(runs) == 2 and all(len(d) == 64 for d in runs), p.stdout
    return runs


def check(target: str, tmp_path) -> None:
    by_threads = {n: digests(target, n, tmp_path) for n in THREADS}
    for n, (first, again) in by_threads.items():
        assert first == again, f"{target}: two runs at {n} threads differ"
    assert len({runs[0] for runs in by_threads.values()}) == 1, f"{target}: results depend on the thread count"


def test_cpu_results_do_not_depend_on_threads_or_runs(tmp_path):
    check("cpu", tmp_path)


def test_opencl_cpu_results_do_not_depend_on_threads_or_runs(opencl, tmp_path):  # noqa: F811
    check("spirv", tmp_path)


def test_the_digested_results_are_the_programs():
    """What the workers digest is the program's results, right (so equal digests are equal results)."""
    prog = executor.load(compiler.compile_source(determinism_worker.PROGRAM, "determinism.py",
                                                 CompileOptions(numerics="deterministic")).image)
    A, B, X = determinism_worker.inputs()
    C, rows, cols, sm, ew = prog.prog(A, B, X)
    x = X.astype(np.float64)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(rows, x.sum(axis=-1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(cols, x.sum(axis=0), rtol=1e-4, atol=1e-4)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ew, np.exp(x) / (x * x + 1), rtol=1e-6)
