"""A read in place by the 16-lane GEMM kernel's micro-kernels (backends/cpu/gemm.py DIRECT_A).

Where A is f32, stored untransposed, its rows are at most gemm.DIRECT_A bytes apart and the kernel's blocks at
most gemm.DIRECT_NC columns wide, the micro-kernels broadcast A's values from its rows instead of from a packed
copy, gemm.DIRECT_MR rows at a time in blocks of gemm.DIRECT_MC rows (rows past M clamped to the last row, their
results masked off at the stores). The sums are the same FMAs in the same order, so each case must give the
packed kernel's values bit for bit, and both must match a float64 reference: ragged M (last strips of 1, 3, 4,
5 or 7 rows, which the 8-row micro-kernel covers with clamped rows; blocks of 128 rows and a partial one),
ragged N, K not a multiple of the micro-kernel's unroll, several K chunks (a chunk's A columns start at k0), rows
up to DIRECT_A bytes long, and an epilogue.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tessera import runtime
from tessera.backends.cpu import gemm
from tessera.backends.cpu.gemm_schedule import Schedule
from tessera.tools import kernels

RNG = np.random.default_rng(32)
# The 16-lane tile with a short KC, so K > 128 takes several chunks.
TILE16 = Schedule(mb=280, nc=256, mc=56, kc=128, mr=14, nr=32, vector_width=16)


def build(spec, direct: int):
    saved = gemm.DIRECT_A
    gemm.DIRECT_A = direct
    try:
        return getattr(runtime.load(kernels.compile_gemm(spec)), spec.name)
    finally:
        gemm.DIRECT_A = saved


def llir_fmas(spec, direct: int) -> int:
    saved = gemm.DIRECT_A
    gemm.DIRECT_A = direct
    got = {}
    try:
        kernels.compile_built(lambda m: gemm.build_gemm(m, spec), stop_after="llir",
                              on_stage=lambda name, a: got.__setitem__(name, a))
    finally:
        gemm.DIRECT_A = saved
    return got["llir"].count("call <16 x float> @llvm.fmuladd.v16f32(")


def test_direct_path_only_where_it_applies():
    # Untransposed f32 A: a second set of micro-kernels (the in-place ones) beside the packed ones.
    plain = gemm.GemmSpec("mm_da", schedule=TILE16)
    assert llir_fmas(plain, gemm.DIRECT_A) > llir_fmas(plain, 0) > 0
    # Aᵀ stored, A narrower than f32, or blocks wider than DIRECT_NC columns: packed only.
    wide = Schedule(mb=280, nc=32 * (gemm.DIRECT_NC // 32 + 1), mc=56, kc=128, mr=14, nr=32, vector_width=16)
    for spec in (gemm.GemmSpec("mm_da", schedule=TILE16, trans_a=True),
                 gemm.GemmSpec("mm_da", dtype="bf16", schedule=TILE16),
                 gemm.GemmSpec("mm_da", schedule=wide)):
        assert llir_fmas(spec, gemm.DIRECT_A) == llir_fmas(spec, 0) > 0


_kernels: dict = {}


@pytest.mark.parametrize("M, N, K", [(29, 33, 7), (41, 96, 130), (5, 300, 129), (71, 64, 300), (1, 40, 64),
                                     (300, 290, 512), (27, 50, 1), (131, 70, 1024), (45, 33, 1000)])
@pytest.mark.parametrize("trans_b", [False, True], ids=["AB", "ABt"])
def test_in_place_matches_packed(M, N, K, trans_b):
    assert K * 4 <= gemm.DIRECT_A   # the in-place path applies
    for epilogue in ((), ("bias", "relu")):
        spec = gemm.GemmSpec("mm_da", epilogue=epilogue, schedule=TILE16, trans_b=trans_b)
        if spec not in _kernels:
            _kernels[spec] = build(spec, gemm.DIRECT_A), build(spec, 0)
        direct, packed = _kernels[spec]
        A = RNG.standard_normal((M, K), dtype=np.float32)
        B = RNG.standard_normal((N, K) if trans_b else (K, N), dtype=np.float32)
        bias = RNG.standard_normal(N, dtype=np.float32)
        extra = (bias,) if epilogue else ()
        grid = gemm.gemm_grid(spec, M, N)
        out = []
        for k in (direct, packed):
            C = np.full((M, N), np.nan, dtype=np.float32)
            k(A, B, C, *extra, grid=grid, block=1)
            out.append(C)
        np.testing.assert_array_equal(out[0], out[1])
        Bn = (B.T if trans_b else B).astype(np.float64)
        ref = A.astype(np.float64) @ Bn
        if epilogue:
            ref = np.maximum(ref + bias, 0.0)
        bound = 2e-6 * math.sqrt(K) * (np.abs(A).astype(np.float64) @ np.abs(Bn)) + 1e-6
        assert np.all(np.abs(out[0] - ref) <= bound)


@pytest.mark.parametrize("epilogue", [("gelu_grad",), ("scale", "add"), ("scale_by", "sub_from")],
                         ids=["gelu_grad", "scale_add", "scale_by_sub_from"])
def test_in_place_epilogues_match_packed(epilogue):
    # The epilogues that read tensors of C's extents (gelu' re-reads the stored tile a row at a time, DIRECT_MR
    # rows here) and take scalars: the in-place kernel's values are the packed kernel's, bit for bit.
    M, N, K = 61, 75, 200
    spec = gemm.GemmSpec("mm_da_ep", epilogue=epilogue, schedule=TILE16)
    direct, packed = build(spec, gemm.DIRECT_A), build(spec, 0)
    A, B = RNG.standard_normal((M, K), dtype=np.float32), RNG.standard_normal((K, N), dtype=np.float32)
    extra = []
    for _, dims in spec.extra_params:
        if dims is None:
            extra.append(0.75)
        else:
            extra.append(RNG.standard_normal([{"M": M, "N": N, "ONE": 1}[d] for d in dims], dtype=np.float32))
    out = []
    for k in (direct, packed):
        C = np.full((M, N), np.nan, dtype=np.float32)
        k(A, B, C, *extra, grid=gemm.gemm_grid(spec, M, N), block=1)
        out.append(C)
    assert np.all(np.isfinite(out[0]))
    np.testing.assert_array_equal(out[0], out[1])
