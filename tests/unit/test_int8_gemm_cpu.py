"""The CPU's int8 GEMM (issue 17 item 2; backends/cpu/gemm_i8.py): i8 x i8 -> i32, exact and wrapped to i32
as the interpreter's reference, on every path this machine has (TESSERA_CPU_INT8_GEMM pins each, so the
plain path runs on an AMX machine too), against numpy's int64 product wrapped to int32."""

import numpy as np
import pytest

from tessera import compiler, plan, tessera_frontend_compile
from tessera.backends.cpu import gemm_i8, target
from tessera.diagnostics import CompileError

from pinned_compile import compile_pinned

SRC = """
@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B

@function
def bmm(A: tensor[i8, "S", "M", "K"], B: tensor[i8, "S", "K", "N"]):
    return A @ B

@function
def rows(A: tensor[i8, "S", "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
"""
PATHS = gemm_i8.available_paths(target.host())
# what each path's kernel calls in the optimized LLVM IR (amx carries vnni or plain for a refused request)
MARKS = {"amx": "llvm.x86.tdpbssd", "vnni": "llvm.x86.avx512.vpdpbusd", "plain": None}
RNG = np.random.default_rng(8)


def ref(a, b):
    return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)   # wraps modulo 2^32


def ints(shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


@pytest.fixture(scope="module", params=PATHS)
def compiled(request):
    return compile_pinned(SRC, "TESSERA_CPU_INT8_GEMM", request.param)


def test_the_pinned_path_is_the_kernel(compiled):
    path, _, llir = compiled
    for other, mark in MARKS.items():
        if mark is None:
            continue
        carried = other == path or (path == "amx" and other == "vnni" and "vnni" in PATHS)
        assert (mark in llir) == carried, (path, other)


# (67, 4099, 18): two amx K chunks, the second of one step with a 3-byte tail; vnni's pack ends in a part of
# its 64-row block; rows past a whole 8- or 32-row strip, columns past one 16-column group
@pytest.mark.parametrize("M, K, N", [(1, 1, 1), (7, 13, 5), (64, 64, 64), (130, 257, 65), (33, 3, 100),
                                     (17, 64, 33), (5, 0, 7), (40, 1000, 70), (67, 4099, 18)])
def test_exact_at_odd_shapes(compiled, M, K, N):
    _, mod, _ = compiled
    a, b = ints((M, K)), ints((K, N))
    got = np.asarray(mod.mm(a, b))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref(a, b))


def test_matches_the_interpreter(compiled):
    _, mod, _ = compiled
    a, b = ints((19, 70)), ints((70, 23))
    interp = tessera_frontend_compile(SRC, {"filename": "mm.py"}).interpret("mm", a, b)
    np.testing.assert_array_equal(np.asarray(mod.mm(a, b)), interp)


@pytest.mark.parametrize("fill_a, fill_b", [(-128, -128), (127, 127), (-128, 127), (127, -128)])
def test_extreme_values(compiled, fill_a, fill_b):
    _, mod, _ = compiled
    a, b = np.full((20, 129), fill_a, np.int8), np.full((129, 35), fill_b, np.int8)
    a[3, :] = np.resize(np.array([-128, 127], np.int8), 129)
    np.testing.assert_array_equal(np.asarray(mod.mm(a, b)), ref(a, b))


def test_the_sum_wraps_to_i32_as_the_reference(compiled):
    _, mod, _ = compiled
    k = 140_000   # 140000 * 128^2 passes 2^31
    a, b = np.full((2, k), -128, np.int8), np.full((k, 3), -128, np.int8)
    got = np.asarray(mod.mm(a, b))
    assert (got < 0).all()
    np.testing.assert_array_equal(got, ref(a, b))


@pytest.mark.parametrize("M, K, N", [(3, 20_000, 100), (40, 5000, 500)])
def test_blocks_narrow_as_k_grows(compiled, M, K, N):
    """A block's columns follow the call's K (gemm_i8.width: a panel of half of L2, 0.5-2 MiB on x86): here
    fewer than N, so several column blocks meet, the last partial; the grid and the kernel must agree."""
    _, mod, _ = compiled
    a, b = ints((M, K)), ints((K, N))
    np.testing.assert_array_equal(np.asarray(mod.mm(a, b)), ref(a, b))


def test_an_output_sharing_memory_with_an_argument_is_still_exact(compiled):
    """libtessera computes a result in its output's memory only where that shares no byte with an argument:
    here C's output overlays A, and the GEMM reads all of A before the copy into C."""
    _, mod, _ = compiled
    n = 48
    buf = np.zeros(n * n * 4, np.uint8)
    a = buf[: n * n].view(np.int8).reshape(n, n)
    a[...] = ints((n, n))
    b = ints((n, n))
    want = ref(a.copy(), b)
    c = buf.view(np.int32).reshape(n, n)
    mod.mm._native.call([a, b], [c], None, 0)
    np.testing.assert_array_equal(c, want)


def test_the_width_expression():
    spec = gemm_i8.I8GemmSpec("k", "plain", 512, 1024, panel=1 << 20)
    widths = {K: plan.evaluate(gemm_i8.width(spec), {"K": K, "N": 4096})
              for K in (0, 1024, 2048, 5000, 20_000, 10 ** 6)}
    assert widths == {0: 1024, 1024: 1024, 2048: 512, 5000: 192, 20_000: 32, 10 ** 6: 32}
    assert plan.evaluate(gemm_i8.grid(spec)[0], {"N": 2048, "K": 4096}) == 8


def test_the_rows_expression():
    """Columns split first, down to 256 (each column block packs A again); then as few row blocks as, beside
    the column blocks, give each thread one (each packs B again)."""
    spec = gemm_i8.I8GemmSpec("k", "plain", 1 << 20, 1024, panel=1 << 20, threads=2)
    shapes = {(1024, 1024, 1024): (512, 1024), (2048, 2048, 2048): (512, 2048), (1024, 300, 64): (256, 1024),
              (1024, 100, 64): (256, 512), (130, 65, 257): (256, 96), (5, 7, 0): (256, 32), (0, 0, 0): (256, 32)}
    for (M, N, K), blocks in shapes.items():
        env = {"M": M, "N": N, "K": K}
        assert (plan.evaluate(gemm_i8.width(spec), env), plan.evaluate(gemm_i8.rows(spec), env)) == blocks, (M, N, K)
    assert [plan.evaluate(g, {"M": 1024, "N": 1024, "K": 1024}) for g in gemm_i8.grid(spec)] == [2, 1, 1]
    assert plan.evaluate(gemm_i8.rows(gemm_i8.I8GemmSpec("k", "plain", 64, 1024, threads=8)),
                         {"M": 1024, "N": 32, "K": 64}) == 64   # at most MB


def test_batched(compiled):
    _, mod, _ = compiled
    a, b = ints((3, 9, 70)), ints((3, 70, 17))
    np.testing.assert_array_equal(np.asarray(mod.bmm(a, b)), ref(a, b))
    a, b = ints((2, 5, 40)), ints((40, 6))   # the lhs' batch axis folds into rows
    np.testing.assert_array_equal(np.asarray(mod.rows(a, b)), ref(a, b))


def test_an_unknown_path_is_refused_at_the_users_line(monkeypatch):
    monkeypatch.setenv("TESSERA_CPU_INT8_GEMM", "simd")
    with pytest.raises(CompileError, match=r"mm\.py:4:12: error: unknown int8 GEMM path 'simd'"):
        compiler.compile_source(SRC, "mm.py")


def test_an_epilogue_is_refused_at_the_users_line():
    src = """
@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"], C: tensor[i32, "M", "N"]):
    return A @ B + C
"""
    with pytest.raises(CompileError, match=r"mm\.py:4:\d+: error: .*int8 GEMM's epilogue"):
        compiler.compile_source(src, "mm.py")


def test_a_path_the_cpu_lacks_is_named():
    lacking = target.HostTarget("x86_64", "x86_64-unknown-linux-gnu", "znver3", "+avx2,+fma")
    assert gemm_i8.available_paths(lacking) == ("plain",)
    with pytest.raises(ValueError, match="'amx' needs a CPU feature this one \\(znver3\\) lacks"):
        gemm_i8.choose_path(lacking, "amx")


# vnni reads A in place and subtracts 128·Σ_k A[i, k] per row (its sum in 64-byte pieces, the last a masked
# load): K on both sides of 64 and its multiples, K % 4 of 0-3 (the last, partial quad), rows past a strip
@pytest.mark.parametrize("K", [2, 3, 4, 5, 63, 64, 65, 127, 128, 129, 130, 131, 255, 257])
def test_row_sums_at_every_k_tail(compiled, K):
    _, mod, _ = compiled
    a, b = ints((11, K)), ints((K, 37))
    np.testing.assert_array_equal(np.asarray(mod.mm(a, b)), ref(a, b))


@pytest.mark.parametrize("K", [63, 64, 67, 200])
def test_extreme_rows_and_columns(compiled, K):
    """Rows of A all -128 or all 127 (the largest row sums either way, so the largest offsets to take back),
    against columns of B all -128, all 127 and alternating, beside random ones."""
    _, mod, _ = compiled
    a, b = ints((9, K)), ints((K, 20))
    a[0], a[1], a[8] = -128, 127, np.resize(np.array([-128, 127], np.int8), K)
    b[:, 0], b[:, 1], b[:, 19] = -128, 127, np.resize(np.array([127, -128], np.int8), K)
    np.testing.assert_array_equal(np.asarray(mod.mm(a, b)), ref(a, b))

