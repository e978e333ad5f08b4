"""tile.atomic_add / atomic_max / atomic_cas and tile.fence in SIMT kernels on the CPU backend, against numpy.

Integer results are exact whatever order the threads run in. The CPU runs blocks on several worker threads and
a warp's 32 lanes as one vector, so a kernel whose lanes share an element loses updates unless each is one
atomic read-modify-write: `test_plain_stores_lose_counts` shows the histogram harness catches that.
"""

import runpy
import pathlib

import numpy as np
import pytest

from tessera import ceil_div

REPO = pathlib.Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(4321)

HISTOGRAM = """
from tessera import kernel, launch, tensor, tile

@kernel
def atomic_hist(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(H[X[i]], 1)

@kernel
def plain_hist(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        H[X[i]] = H[X[i]] + 1
"""


@pytest.mark.parametrize("n, bins, block", [(1, 4, 32), (1000, 3, 64), (200_000, 8, 256), (77_777, 1, 100)])
def test_histogram_counts_every_hit(build, n, bins, block):
    """Many threads (and lanes of one warp) hit the same bins, across blocks run by several workers."""
    mod = build(HISTOGRAM)
    X = RNG.integers(0, bins, n).astype(np.int32)
    H = np.zeros(bins, dtype=np.int32)
    mod.atomic_hist(X, H, grid=ceil_div(n, block), block=block)
    np.testing.assert_array_equal(H, np.bincount(X, minlength=bins))


def test_plain_stores_lose_counts(build):
    """The same histogram with a load and a store in place of the atomic loses counts under this contention:
    the exact-count tests above would catch atomics lowered as plain memory accesses."""
    mod = build(HISTOGRAM)
    n, bins = 100_000, 4
    X = RNG.integers(0, bins, n).astype(np.int32)
    H = np.zeros(bins, dtype=np.int32)
    mod.plain_hist(X, H, grid=ceil_div(n, 256), block=256)
    assert H.sum() < n
    H[:] = 0
    mod.atomic_hist(X, H, grid=ceil_div(n, 256), block=256)
    assert H.sum() == n


def test_atomic_add_returns_each_thread_a_distinct_ticket(build):
    """Old values of one counter: every thread draws a different one, 0 … n-1 (a uniform address; fence too)."""
    mod = build("""
        from tessera import int64, kernel, launch, tensor, tile

        @kernel
        def tickets(Counter: tensor[int64, "K"], T: tensor[int64, "N"]):
            i = launch.thread_id()
            if i < T.shape[0]:
                T[i] = tile.atomic_add(Counter[0], 1, order="acq_rel", scope="device")
                tile.fence(order="seq_cst", scope="system")
    """)
    n = 50_000
    counter, T = np.zeros(1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    mod.tickets(counter, T, grid=ceil_div(n, 128), block=128)
    assert counter[0] == n
    np.testing.assert_array_equal(np.sort(T), np.arange(n))


def test_scatter_add_two_dimensional_and_float(build):
    mod = build("""
        from tessera import int64, kernel, launch, tensor, tile

        @kernel
        def scatter2(V: tensor[int64, "N"], R: tensor[int, "N"], C: tensor[int, "N"], Out: tensor[int64, "P", "Q"]):
            i = launch.thread_id()
            if i < V.shape[0]:
                tile.atomic_add(Out[R[i], C[i]], V[i], order="relaxed", scope="block")

        @kernel
        def scatter_f(V: tensor[float, "N"], I: tensor[int, "N"], Out: tensor[float, "M"]):
            i = launch.thread_id()
            if i < V.shape[0]:
                tile.atomic_add(Out[I[i]], V[i])
    """)
    n, p, q = 30_000, 3, 5
    V = RNG.integers(-2**40, 2**40, n).astype(np.int64)
    R, C = RNG.integers(0, p, n).astype(np.int32), RNG.integers(0, q, n).astype(np.int32)
    Out = np.zeros((p, q), dtype=np.int64)
    mod.scatter2(V, R, C, Out, grid=ceil_div(n, 128), block=128)
    ref = np.zeros((p, q), dtype=np.int64)
    np.add.at(ref, (R, C), V)
    np.testing.assert_array_equal(Out, ref)
    # float32 sums depend on the order of the additions: small integers make every order exact
    Vf = RNG.integers(-8, 9, n).astype(np.float32)
    Of = np.zeros(7, dtype=np.float32)
    mod.scatter_f(Vf, R, Of, grid=ceil_div(n, 128), block=128)
    ref_f = np.zeros(7, dtype=np.float32)
    np.add.at(ref_f, R, Vf)
    np.testing.assert_array_equal(Of, ref_f)


@pytest.mark.parametrize("dtype, name", [(np.int32, "int"), (np.int64, "int64")])
def test_atomic_max(build, dtype, name):
    mod = build(f"""
        from tessera import int64, kernel, launch, tensor, tile

        @kernel
        def segmax(X: tensor[{name}, "N"], I: tensor[int, "N"], Out: tensor[{name}, "M"], Old: tensor[{name}, "N"]):
            i = launch.thread_id()
            if i < X.shape[0]:
                Old[i] = tile.atomic_max(Out[I[i]], X[i], order="release")
    """)
    n, m = 20_000, 9
    info = np.iinfo(dtype)
    X = RNG.integers(info.min, info.max, n, dtype=dtype)
    I = RNG.integers(0, m, n).astype(np.int32)
    Out, Old = np.full(m, info.min, dtype=dtype), np.zeros(n, dtype=dtype)
    mod.segmax(X, I, Out, Old, grid=ceil_div(n, 64), block=64)
    ref = np.full(m, info.min, dtype=dtype)
    np.maximum.at(ref, I, X)
    np.testing.assert_array_equal(Out, ref)
    assert np.all(Old <= ref[I])  # every thread saw a value no larger than the final maximum


@pytest.mark.parametrize("name", ["int", "int64"])
def test_atomic_cas_elects_one_winner_per_slot(build, name):
    """Every thread tries to claim its slot (0 -> its id + 1): exactly one succeeds per slot touched, and the
    slot holds the winner's id; each loser's old value is the winner's."""
    mod = build(f"""
        from tessera import int64, kernel, launch, tensor, tile

        @kernel
        def claim(I: tensor[int, "N"], Slots: tensor[{name}, "M"], Old: tensor[{name}, "N"]):
            i = launch.thread_id()
            if i < I.shape[0]:
                Old[i] = tile.atomic_cas(Slots[I[i]], 0, i + 1, order="acq_rel", scope="device")
    """)
    n, m = 10_000, 50
    dtype = np.int32 if name == "int" else np.int64
    I = RNG.integers(0, m, n).astype(np.int32)
    Slots, Old = np.zeros(m, dtype=dtype), np.full(n, -1, dtype=dtype)
    mod.claim(I, Slots, Old, grid=ceil_div(n, 128), block=128)
    winners = np.flatnonzero(Old == 0)
    assert sorted(I[winners]) == sorted(set(I.tolist()))       # one winner per slot
    np.testing.assert_array_equal(Slots[I[winners]], winners + 1)
    np.testing.assert_array_equal(Old[Old != 0], Slots[I[Old != 0]])


@pytest.mark.parametrize("example", ["histogram.py", "scatter_add.py"])
def test_examples(example, capsys):
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(REPO / "examples" / "tile" / example), run_name="__main__")
    assert done.value.code == 0, capsys.readouterr().out


KERNEL = """
from tessera import kernel, launch, tensor, tile

@kernel
def k(X: tensor[float, "N"], Y: tensor[int, "N"]):
    i = launch.thread_id()
    {line}
"""


@pytest.mark.parametrize("line, message", [
    ("tile.atomic_max(X[i], 1.0)", "tile.atomic_max takes a tensor of i32 or i64 elements; 'X' has f32"),
    ("tile.atomic_cas(X[i], 1.0, 2.0)", "tile.atomic_cas takes a tensor of i32 or i64 elements; 'X' has f32"),
    ("tile.atomic_add(Y[i], 1, order=\"consume\")", "order must be one of 'relaxed', 'acquire'"),
    ("tile.atomic_add(Y[i], 1, scope=\"warp\")", "scope must be one of 'block', 'device', 'system'"),
    ("tile.atomic_add(Y[i], 1, sync=True)", "takes order= and scope= keywords, not sync"),
    ("tile.atomic_add(Y, 1)", "the first argument is the tensor element to update"),
    ("tile.atomic_cas(Y[i], 1)", "tile.atomic_cas(X[index], compare, value, order=..., scope=...)"),
    ("tile.fence(order=\"relaxed\")", "a relaxed fence orders nothing"),
    ("tile.fence(Y)", "tile.fence takes only order= and scope= keywords"),
])
def test_refusals_at_the_users_line(compile_error, line, message):
    source = KERNEL.format(line=line)
    e = compile_error(source)
    assert message in e.message and (e.filename, e.line) == ("user.py", 7), e
