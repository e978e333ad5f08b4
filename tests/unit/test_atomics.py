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

KERNELS = (REPO / "tests" / "unit" / "atomic_kernels.py").read_text()  # also built for CUDA: tests/gpu/kernels.py


@pytest.fixture(scope="module")
def cpu():
    """launch(name, *arrays, grid=, block=): runs a kernel of KERNELS on the CPU, updating the arrays."""
    from tessera import compiler, runtime
    mod = runtime.load(compiler.compile_source(KERNELS, "atomics.py", compiler.CompileOptions()).image)
    return lambda name, *arrays, grid, block: getattr(mod, name)(*arrays, grid=grid, block=block)


# The checks, shared with the OpenCL tests (test_opencl_atomics.py): `launch` runs a kernel of KERNELS.

def check_histogram(launch, n, bins, block):
    """Many threads (and lanes of one warp) hit the same bins, across blocks run by several workers."""
    X = RNG.integers(0, bins, n).astype(np.int32)
    H = np.zeros(bins, dtype=np.int32)
    launch("atomic_hist", X, H, grid=ceil_div(n, block), block=block)
    np.testing.assert_array_equal(H, np.bincount(X, minlength=bins))


def check_tickets(launch, n=50_000):
    """Old values of one counter: every thread draws a different one, 0 … n-1 (a uniform address)."""
    counter, T = np.zeros(1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    launch("tickets", counter, T, grid=ceil_div(n, 128), block=128)
    assert counter[0] == n
    np.testing.assert_array_equal(np.sort(T), np.arange(n))


def check_scatter_add(launch, n=30_000, p=3, q=5):
    V = RNG.integers(-2**40, 2**40, n).astype(np.int64)
    R, C = RNG.integers(0, p, n).astype(np.int32), RNG.integers(0, q, n).astype(np.int32)
    Out = np.zeros((p, q), dtype=np.int64)
    launch("scatter2", V, R, C, Out, grid=ceil_div(n, 128), block=128)
    ref = np.zeros((p, q), dtype=np.int64)
    np.add.at(ref, (R, C), V)
    np.testing.assert_array_equal(Out, ref)
    # float32 sums depend on the order of the additions: small integers make every order exact
    Vf = RNG.integers(-8, 9, n).astype(np.float32)
    Of = np.zeros(p, dtype=np.float32)
    launch("scatter_f", Vf, R, Of, grid=ceil_div(n, 128), block=128)
    ref_f = np.zeros(p, dtype=np.float32)
    np.add.at(ref_f, R, Vf)
    np.testing.assert_array_equal(Of, ref_f)


def check_max(launch, dtype, n=20_000, m=9):
    info = np.iinfo(dtype)
    X = RNG.integers(info.min, info.max, n, dtype=dtype)
    I = RNG.integers(0, m, n).astype(np.int32)
    Out, Old = np.full(m, info.min, dtype=dtype), np.zeros(n, dtype=dtype)
    launch(f"segmax_i{info.bits}", X, I, Out, Old, grid=ceil_div(n, 64), block=64)
    ref = np.full(m, info.min, dtype=dtype)
    np.maximum.at(ref, I, X)
    np.testing.assert_array_equal(Out, ref)
    assert np.all(Old <= ref[I])  # every thread saw a value no larger than the final maximum


def check_cas(launch, dtype, n=10_000, m=50):
    """Every thread tries to claim its slot (0 -> its id + 1): exactly one succeeds per slot touched, and the
    slot holds the winner's id; each loser's old value is the winner's."""
    I = RNG.integers(0, m, n).astype(np.int32)
    Slots, Old = np.zeros(m, dtype=dtype), np.full(n, -1, dtype=dtype)
    launch(f"claim_i{np.iinfo(dtype).bits}", I, Slots, Old, grid=ceil_div(n, 128), block=128)
    winners = np.flatnonzero(Old == 0)
    assert sorted(I[winners]) == sorted(set(I.tolist()))       # one winner per slot
    np.testing.assert_array_equal(Slots[I[winners]], winners + 1)
    np.testing.assert_array_equal(Old[Old != 0], Slots[I[Old != 0]])


@pytest.mark.parametrize("n, bins, block", [(1, 4, 32), (1000, 3, 64), (200_000, 8, 256), (77_777, 1, 100)])
def test_histogram_counts_every_hit(cpu, n, bins, block):
    check_histogram(cpu, n, bins, block)


def test_plain_stores_lose_counts(cpu):
    """The same histogram with a load and a store in place of the atomic loses counts under this contention:
    the exact-count tests would catch atomics lowered as plain memory accesses."""
    n, bins = 100_000, 4
    X = RNG.integers(0, bins, n).astype(np.int32)
    H = np.zeros(bins, dtype=np.int32)
    cpu("plain_hist", X, H, grid=ceil_div(n, 256), block=256)
    assert H.sum() < n
    H[:] = 0
    cpu("atomic_hist", X, H, grid=ceil_div(n, 256), block=256)
    assert H.sum() == n


def test_atomic_add_returns_each_thread_a_distinct_ticket(cpu):
    check_tickets(cpu)


def test_scatter_add_two_dimensional_and_float(cpu):
    check_scatter_add(cpu)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_atomic_max(cpu, dtype):
    check_max(cpu, dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_atomic_cas_elects_one_winner_per_slot(cpu, dtype):
    check_cas(cpu, dtype)


OUT_OF_BOUNDS = """
from tessera import kernel, launch, tensor, tile

@kernel
def hist(X: tensor[int, "N"], H: tensor[int, "B"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        tile.atomic_add(H[X[i]], 1)
"""


def check_out_of_bounds_atomic_faults(launch, runtime):
    """A bin past the end is a memory fault naming the tensor and the line; the atomics in bounds happened and
    the memory past the tensor is untouched."""
    X = np.array([0, 1, 1, 7, 2], dtype=np.int32)  # bin 7 of 4
    whole = np.zeros(4 + 16, dtype=np.int32)
    with pytest.raises(runtime.Error) as e:
        launch(X, whole, 4)
    assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT"
    assert "tensor 'H' accessed outside its extents at hist.py:8" in str(e.value), str(e.value)
    np.testing.assert_array_equal(whole, [1, 2, 1, 0] + [0] * 16)


def test_out_of_bounds_atomic_faults(build):
    from tessera import runtime
    mod = build(OUT_OF_BOUNDS, "hist.py")
    check_out_of_bounds_atomic_faults(lambda X, whole, n: mod.hist(X, whole[:n], grid=1, block=32), runtime)


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


def test_a_tile_program_has_no_atomics(compile_error):
    e = compile_error("""
        from tessera import kernel, tensor, tile

        @kernel
        def tp(A: tensor[float, "M", "N"], H: tensor[int, "B"]):
            for b in tile.range(A, axis=0, step=32):
                x = tile.load(A, b, mask=b.mask, other=0.0)
                tile.atomic_add(H[0], 1)
        """)
    assert "tile.atomic_add is a SIMT operation" in e.message and (e.line, e.col) == (8, 9), e
