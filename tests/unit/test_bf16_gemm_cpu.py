"""The CPU's bf16 GEMM (issue 19 item 2; backends/cpu/gemm_bf16.py): bf16 x bf16 products summed in f32, the
result f32 or rounded once to bf16, on every path this machine has (TESSERA_CPU_BF16_GEMM pins each, so the
plain path, gemm.py's widening f32 GEMM, runs on an AMX machine too), against float64 sums of the same
bf16 values.

Tolerance: |got - ref| <= 2^-22 · √K · (|A|·|B|) elementwise — a few rounding units of f32 sums of K terms in
any order (the paths add in different orders: pairs, tiles, K chunks). A dropped or repeated product of
these unit-scale values misses it by an order of magnitude or more. A bf16 result may differ from the
reference rounded to bf16 by one bf16 unit (2^-8 relative) beyond that."""

import numpy as np
import pytest

from tessera import tessera_frontend_compile
from tessera.backends.cpu import gemm_bf16, target
from tessera.backends.cpu.target import HostTarget

from pinned_compile import compile_pinned

SRC = """
@function
def mm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B, out_dtype=f32)

@function
def mm16(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return A @ B

@function
def bmm(A: tensor[bf16, "S", "M", "K"], B: tensor[bf16, "S", "K", "N"]):
    return op.matmul(A, B, out_dtype=f32)

@function
def rows(A: tensor[bf16, "S", "M", "K"], B: tensor[bf16, "K", "N"]):
    return op.matmul(A, B, out_dtype=f32)
"""
PATHS = gemm_bf16.available_paths(target.host())
# what each path's kernel calls in the optimized LLVM IR (amx carries avx512 for a refused request)
MARKS = {"amx": "llvm.x86.tdpbf16ps", "avx512": "llvm.x86.avx512bf16.dpbf16ps", "plain": None}
RNG = np.random.default_rng(19)


def bf16(shape):
    """Random bf16 bit patterns (uint16, as the runtime takes bf16 tensors) of unit-scale values."""
    u = RNG.standard_normal(shape).astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def check(got, a, b, rounded=False):
    A, B = value(a), value(b)
    ref = A @ B
    tol = 2.0 ** -22 * np.sqrt(max(A.shape[-1], 1)) * (np.abs(A) @ np.abs(B))
    if rounded:
        tol = tol + 2.0 ** -8 * np.abs(ref)
    assert got.shape == ref.shape
    assert (np.abs(np.asarray(got, np.float64) - ref) <= tol).all(), np.abs(got - ref).max()


@pytest.fixture(scope="module", params=PATHS)
def compiled(request):
    return compile_pinned(SRC, "TESSERA_CPU_BF16_GEMM", request.param)


def test_the_pinned_path_is_the_kernel(compiled):
    path, _, llir = compiled
    for other, mark in MARKS.items():
        if mark is None:
            continue
        carried = other == path or (path == "amx" and other == "avx512")
        assert (mark in llir) == carried, (path, other)


# (67, 4099, 18): three amx K chunks (2048 per chunk), the last a part of a 32-step with K % 32 = 3, an odd K
# for avx512's pairs; rows past a whole 8- or 32-row strip, columns past one 16-column group
@pytest.mark.parametrize("M, K, N", [(1, 1, 1), (7, 13, 5), (64, 64, 64), (130, 257, 65), (33, 3, 100),
                                     (17, 32, 33), (5, 0, 7), (40, 1000, 70), (67, 4099, 18)])
def test_f32_result_at_odd_shapes(compiled, M, K, N):
    _, mod, _ = compiled
    a, b = bf16((M, K)), bf16((K, N))
    got = np.asarray(mod.mm(a, b))
    assert got.dtype == np.float32
    check(got, a, b)


@pytest.mark.parametrize("M, K, N", [(9, 45, 31), (64, 96, 48)])
def test_bf16_result_is_rounded_once(compiled, M, K, N):
    _, mod, _ = compiled
    a, b = bf16((M, K)), bf16((K, N))
    check(np.asarray(mod.mm16(a, b)), a, b, rounded=True)


def test_batches(compiled):
    _, mod, _ = compiled
    a, b = bf16((3, 19, 70)), bf16((3, 70, 23))
    check(np.asarray(mod.bmm(a, b)), a, b)
    a, b = bf16((2, 21, 40)), bf16((40, 17))   # the lhs' batch axis as more rows
    check(np.asarray(mod.rows(a, b)), a, b)


def test_matches_the_interpreter(compiled):
    _, mod, _ = compiled
    a, b = bf16((19, 70)), bf16((70, 23))
    # the interpreter takes the bf16 values as f32 (exactly) and rounds them to bf16 as the parameters say
    interp = tessera_frontend_compile(SRC, {"filename": "mm.py"}).interpret(
        "mm", value(a).astype(np.float32), value(b).astype(np.float32))
    got = np.asarray(mod.mm(a, b))
    check(got, a, b)
    np.testing.assert_allclose(got, np.asarray(interp, np.float32), rtol=0, atol=1e-4)


@pytest.mark.parametrize("K", [1, 2, 3, 31, 33, 63, 65, 129])
def test_k_tails(compiled, K):
    _, mod, _ = compiled
    a, b = bf16((10, K)), bf16((K, 35))
    check(np.asarray(mod.mm(a, b)), a, b)


@pytest.mark.parametrize("K", [1, 5, 33])
def test_an_odd_k_reads_no_element_past_its_row(compiled, K):
    """avx512 reads A's pairs in place and the last element of an odd K alone: read as a pair, it would take
    the next row's first element, here a NaN, against the panel's zero, and the row would be NaN."""
    _, mod, _ = compiled
    a, b = bf16((9, K)), bf16((K, 20))
    a[1::2, 0] = 0x7FC0   # NaN in the odd rows' first element
    got = np.asarray(mod.mm(a, b))
    assert np.isnan(got[1::2]).all()
    check(got[0::2], a[0::2], b)


@pytest.mark.parametrize("M, K, N", [(3, 20_000, 100), (40, 5000, 500)])
def test_blocks_narrow_as_k_grows(compiled, M, K, N):
    """A block's columns follow the call's K (gemm_i8.width, the panel counted in bf16): here fewer than N,
    so several column blocks meet, the last partial; the grid and the kernel must agree."""
    _, mod, _ = compiled
    a, b = bf16((M, K)), bf16((K, N))
    check(np.asarray(mod.mm(a, b)), a, b)


def test_paths_follow_the_cpu_features():
    def t(features):
        return HostTarget("x86_64", "x86_64-unknown-linux-gnu", "x", features)
    spr = "+avx512f,+avx512bw,+avx512bf16,+amx-tile,+amx-bf16"
    assert gemm_bf16.available_paths(t(spr)) == ("amx", "avx512", "plain")
    assert gemm_bf16.available_paths(t("+avx512f,+avx512bw,+avx512bf16,+amx-tile,-amx-bf16")) == ("avx512", "plain")
    assert gemm_bf16.available_paths(t("+avx2,+fma")) == ("plain",)
    assert gemm_bf16.choose_path(t(spr)) == "amx"
    with pytest.raises(ValueError, match="needs a CPU feature"):
        gemm_bf16.choose_path(t("+avx2"), "avx512")
    with pytest.raises(ValueError, match="unknown bf16 GEMM path 'simd'"):
        gemm_bf16.choose_path(t(spr), "simd")
