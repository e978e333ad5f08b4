"""Streaming (non-temporal) stores of C in the 16-lane GEMM kernel (backends/cpu/gemm.py NT_STORES).

Where C is written once (one K chunk), its rows start on 64-byte boundaries and it is at least
gemm.NT_MIN_BYTES, the kernel's whole-tile stores are non-temporal; elsewhere (an unaligned buffer, a row
length that is not a multiple of 16 floats, several K chunks, a small C) the plain stores. Each case must
give the same values as the plain kernel, stay inside C, and never fault on an unaligned buffer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tessera import runtime
from tessera.backends.cpu import gemm
from tessera.backends.cpu.gemm_schedule import Schedule
from tessera.tools import kernels

RNG = np.random.default_rng(31)
# The 16-lane tile with a short KC, so K > 128 takes several chunks (no streaming stores there).
TILE16 = Schedule(mb=280, nc=256, mc=56, kc=128, mr=14, nr=32, vector_width=16)
_images: dict = {}


def load(spec):
    if spec not in _images:
        _images[spec] = runtime.load(kernels.compile_gemm(spec))
    return getattr(_images[spec], spec.name)


def c_buffer(M, N, misalign_floats=0):
    """C (M×N, filled with NaN) in a 64-byte aligned buffer, `misalign_floats` floats past the boundary,
    and the backing array, whose floats after C are 7.0."""
    backing = np.full(M * N + 64, 7.0, dtype=np.float32)
    off = (-backing.ctypes.data % 64) // 4 + misalign_floats
    C = backing[off:off + M * N].reshape(M, N)
    C[...] = np.nan
    assert (C.ctypes.data % 64 == 0) == (misalign_floats % 16 == 0)
    return C, backing, off + M * N


def check(C, A, B, bias=None):
    ref = A.astype(np.float64) @ B.astype(np.float64)
    if bias is not None:
        ref = np.maximum(ref + bias, 0.0)
    bound = 2e-6 * math.sqrt(A.shape[1]) * (np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64)) + 1e-6
    err = np.abs(C - ref)
    assert np.all(err <= bound), f"max error {err.max():.3g}"


def test_kernel_has_streaming_and_plain_stores():
    got = {}
    spec = gemm.GemmSpec("mm_nt", schedule=TILE16)
    kernels.compile_built(lambda m: gemm.build_gemm(m, spec), stop_after="llir",
                          on_stage=lambda name, a: got.__setitem__(name, a))
    llir = got["llir"]
    assert llir.count("!nontemporal") >= TILE16.mr * TILE16.nr // 16
    assert "llvm.prefetch" in llir   # the plain stores' C prefetch is still there


# (M, N, K): big enough for streaming stores (>= 2 MiB of C), edge tiles in both directions (1000 rows are
# 71 strips of 14 and one of 6; 784 columns end in a half strip), one K chunk or several, a row length that
# is not a multiple of 16 floats (plain stores), and a small C (plain stores).
SHAPES = [(1000, 784, 100), (1000, 784, 300), (700, 1000, 64), (64, 96, 128)]


@pytest.mark.parametrize("M, N, K", SHAPES)
@pytest.mark.parametrize("misalign", [0, 4, 1], ids=["aligned", "16B", "4B"])
def test_values_and_bounds(M, N, K, misalign):
    assert M * N * 4 >= gemm.NT_MIN_BYTES or (M, N) == (64, 96)
    spec = gemm.GemmSpec("mm_nt", schedule=TILE16)
    A, B = RNG.standard_normal((M, K), dtype=np.float32), RNG.standard_normal((K, N), dtype=np.float32)
    C, backing, end = c_buffer(M, N, misalign)
    load(spec)(A, B, C, grid=gemm.gemm_grid(spec, M, N), block=1)
    check(C, A, B)
    assert np.all(backing[end:] == 7.0)


def test_streaming_matches_plain_stores_exactly():
    """The same kernel with NT_STORES off: bit-identical C (only the stores differ), with an epilogue."""
    M, N, K = 1000, 784, 100
    A, B = RNG.standard_normal((M, K), dtype=np.float32), RNG.standard_normal((K, N), dtype=np.float32)
    bias = RNG.standard_normal(N, dtype=np.float32)
    streaming = gemm.GemmSpec("mm_nt_relu", epilogue=("bias", "relu"), schedule=TILE16)
    C, _, _ = c_buffer(M, N)
    load(streaming)(A, B, C, bias, grid=gemm.gemm_grid(streaming, M, N), block=1)
    saved = gemm.NT_STORES
    gemm.NT_STORES = False
    try:
        plain = gemm.GemmSpec("mm_plain_relu", epilogue=("bias", "relu"), schedule=TILE16)
        got = {}
        kernels.compile_built(lambda m: gemm.build_gemm(m, plain), stop_after="llir",
                              on_stage=lambda name, a: got.__setitem__(name, a))
        assert "!nontemporal" not in got["llir"]
        P, _, _ = c_buffer(M, N)
        load(plain)(A, B, P, bias, grid=gemm.gemm_grid(plain, M, N), block=1)
    finally:
        gemm.NT_STORES = saved
    check(C, A, B, bias)
    np.testing.assert_array_equal(C, P)
