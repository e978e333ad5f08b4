"""Where the CPU int8/bf16 GEMM kernels keep a block's packed B panel (backends/cpu/gemm_i8.py `_panel`): on
the block's stack up to `_STACK_PANEL` bytes, from the heap beyond.

Until 2026-11-27 every panel was an aligned_alloc and a free per block per call, which glibc serves from a
fresh mmap while its mmap threshold is below the panel's size (first touch: a page fault per 4 KiB page, 64 for
the 256 KiB panel of a 512³ bf16 block, every call) — docs/performance.md, Session 30. The fault test pins
glibc's threshold at 128 KiB (MALLOC_MMAP_THRESHOLD_, which also stops its dynamic adjustment) so that a heap
panel faults on every call, deterministically: with the old kernels a warm call took ~130 minor faults, now
~0-3 (results and intermediates come from the runtime's pool and are reused). The "plain" paths have no
such panel and are not checked here: bf16's (gemm.py's widening f32 GEMM) took ~370 faults a warm call under
the pinned threshold (its own packing buffers, allocated per call by the MLIR lowering: not fixed here).

The heap branch (panels past the limit: K beyond ~16K words at the narrowest block) is checked by compiling
with the limit set to 0, against exact (int8) or float64 (bf16) references."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tessera.backends.cpu import gemm_bf16, gemm_i8, target

from pinned_compile import compile_pinned

BF16_SRC = """
@function
def mm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B, out_dtype=f32)
"""
I8_SRC = """
@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
"""
CASES = ([("bf16", p) for p in gemm_bf16.available_paths(target.host())]
         + [("i8", p) for p in gemm_i8.available_paths(target.host())])
RNG = np.random.default_rng(30)

FAULTS = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from tessera import compiler, executor, runtime
    dtype, src = sys.argv[1], sys.argv[2]
    mod = executor.load(compiler.compile_source(src, "mm.py").image)
    rng = np.random.default_rng(0)
    if dtype == "bf16":
        a, b = (rng.integers(0x3F00, 0x4000, (512, 512)).astype(np.uint16) for _ in range(2))
    else:
        a, b = (rng.integers(-128, 128, (512, 512)).astype(np.int8) for _ in range(2))
    da, db = runtime.DeviceArray.from_numpy(a), runtime.DeviceArray.from_numpy(b)
    for _ in range(10):   # warm-up: the pool's blocks, the threads' stacks, the code's pages
        mod.mm(da, db)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(30):
        mod.mm(da, db)   # the result dropped: its block goes back to the pool for the next call
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 30)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's MALLOC_MMAP_THRESHOLD_, Linux's getrusage")
@pytest.mark.parametrize("dtype, path", [c for c in CASES if c[1] != "plain"])
def test_a_warm_512_cubed_call_faults_in_no_panel(tmp_path, dtype, path):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", TESSERA_NUM_THREADS="2", TESSERA_CACHE_DIR=str(tmp_path),
               TESSERA_CPU_BF16_GEMM=path if dtype == "bf16" else "auto",
               TESSERA_CPU_INT8_GEMM=path if dtype == "i8" else "auto")
    out = subprocess.run([sys.executable, "-c", FAULTS, dtype, BF16_SRC if dtype == "bf16" else I8_SRC], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    faults = float(out.stdout.split()[-1])
    # a heap panel: 64 faults per block (256 KiB), 2+ blocks a call
    assert faults < 16, f"{faults} minor faults per warm call"


@pytest.mark.parametrize("dtype, path", CASES)
@pytest.mark.parametrize("M, K, N", [(130, 257, 65), (33, 3, 100), (64, 600, 96)])
def test_heap_panels_past_the_stack_limit(monkeypatch, dtype, path, M, K, N):
    monkeypatch.setattr(gemm_i8, "_STACK_PANEL", 0)
    monkeypatch.setenv("TESSERA_CACHE", "0")   # the compile cache keys the sources, not this value
    if dtype == "bf16":
        _, mod, _ = compile_pinned(BF16_SRC, "TESSERA_CPU_BF16_GEMM", path)
        a, b = (RNG.integers(0x3E00, 0x4080, s).astype(np.uint16) | (RNG.integers(0, 2, s) << 15).astype(np.uint16)
                for s in ((M, K), (K, N)))
        A, B = ((x.astype(np.uint32) << 16).view(np.float32).astype(np.float64) for x in (a, b))
        got = np.asarray(mod.mm(a, b), np.float64)
        tol = 2.0 ** -22 * np.sqrt(K) * (np.abs(A) @ np.abs(B))
        assert (np.abs(got - A @ B) <= tol).all()
    else:
        _, mod, _ = compile_pinned(I8_SRC, "TESSERA_CPU_INT8_GEMM", path)
        a, b = RNG.integers(-128, 128, (M, K)).astype(np.int8), RNG.integers(-128, 128, (K, N)).astype(np.int8)
        np.testing.assert_array_equal(np.asarray(mod.mm(a, b)), a.astype(np.int64) @ b.astype(np.int64))

