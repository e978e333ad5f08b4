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
    # float32 sums depend on the order of the additions: small integers make every order exact
    F = RNG.integers(-8, 9, n).astype(np.float32)
    Out, OutF = np.zeros((p, q), dtype=np.int64), np.zeros(p, dtype=np.float32)
    launch("scatter", V, R, C, Out, F, OutF, grid=ceil_div(n, 128), block=128)
    ref, ref_f = np.zeros((p, q), dtype=np.int64), np.zeros(p, dtype=np.float32)
    np.add.at(ref, (R, C), V)
    np.add.at(ref_f, R, F)
    np.testing.assert_array_equal(Out, ref)
    np.testing.assert_array_equal(OutF, ref_f)


def check_max(launch, n=20_000, m=9):
    """i32, i64 and f32 maxima per segment, each thread's old value no larger than the final one. f32 is IEEE
    maximum (numpy's maximum: a NaN wins); its values have both signs (PTX orders negative floats' bits as
    unsigned integers, positive ones' as signed: passes/atomics.py), infinities, and one segment a NaN."""
    I = RNG.integers(0, m, n).astype(np.int32)
    ints = [RNG.integers(np.iinfo(t).min, np.iinfo(t).max, n, dtype=t) for t in (np.int32, np.int64)]
    XF = (RNG.standard_normal(n) * 1e3).astype(np.float32)
    XF[I == 1] = -np.abs(XF[I == 1])            # a segment of negative floats only
    XF[np.flatnonzero(I == 2)[:2]] = [np.inf, -np.inf]
    XF[np.flatnonzero(I == 3)[5]] = np.nan
    starts = [np.full(m, np.iinfo(t).min, dtype=t) for t in (np.int32, np.int64)] + [np.full(m, -np.inf, np.float32)]
    arrays = [I]
    for x, start in zip(ints + [XF], starts):
        arrays += [x, start.copy(), np.zeros(n, dtype=x.dtype)]
    launch("segmax", *arrays, grid=ceil_div(n, 64), block=64)
    for k, x in enumerate(ints + [XF]):
        out, old = arrays[2 + 3 * k], arrays[3 + 3 * k]
        ref = starts[k].copy()
        with np.errstate(invalid="ignore"):  # the NaN
            np.maximum.at(ref, I, x)
        np.testing.assert_array_equal(out, ref, err_msg=str(x.dtype))
        settled = ~np.isnan(ref[I])
        assert np.all(old[settled] <= ref[I][settled]), x.dtype   # no thread saw more than the final maximum
    assert np.isnan(arrays[-2][3]) and arrays[-2][2] == np.inf and np.all(arrays[-2][1] < 0)


def check_cas(launch, n=10_000, m=50):
    """Every thread tries to claim its slot (0 -> its id + 1), in an i32 and an i64 table: exactly one succeeds
    per slot touched, and the slot holds the winner's id; each loser's old value is the winner's."""
    I = RNG.integers(0, m, n).astype(np.int32)
    tables = [(np.zeros(m, dtype=t), np.full(n, -1, dtype=t)) for t in (np.int32, np.int64)]
    launch("claim", I, *tables[0], *tables[1], grid=ceil_div(n, 128), block=128)
    for Slots, Old in tables:
        winners = np.flatnonzero(Old == 0)
        assert sorted(I[winners]) == sorted(set(I.tolist()))       # one winner per slot
        np.testing.assert_array_equal(Slots[I[winners]], winners + 1)
        np.testing.assert_array_equal(Old[Old != 0], Slots[I[Old != 0]])


HISTOGRAMS = [(1, 4, 32), (1000, 3, 64), (200_000, 8, 256), (77_777, 1, 100)]
# Every check by name, for each backend's test (here, test_opencl_atomics.py): check(launch)
CHECKS = {"histograms": lambda launch: [check_histogram(launch, *h) for h in HISTOGRAMS],
          "tickets": check_tickets, "scatter_add": check_scatter_add, "max": check_max, "cas": check_cas}


@pytest.mark.parametrize("check", list(CHECKS))
def test_atomics_match_numpy(cpu, check):
    CHECKS[check](cpu)


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


def check_out_of_bounds_atomic_faults(launch, runtime):
    """A bin past the end is a memory fault naming the tensor and the line; the atomics in bounds happened and
    the memory past the tensor is untouched."""
    X = np.array([0, 1, 1, 7, 2], dtype=np.int32)  # bin 7 of 4
    whole = np.zeros(4 + 16, dtype=np.int32)
    with pytest.raises(runtime.Error) as e:
        launch(X, whole, 4)
    assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT"
    assert "tensor 'H' accessed outside its extents at atomics.py:12" in str(e.value), str(e.value)
    np.testing.assert_array_equal(whole, [1, 2, 1, 0] + [0] * 16)


def test_out_of_bounds_atomic_faults(build):
    from tessera import runtime
    mod = build(KERNELS, "atomics.py")
    check_out_of_bounds_atomic_faults(lambda X, whole, n: mod.atomic_hist(X, whole[:n], grid=1, block=32), runtime)


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
    ("tile.atomic_max(Y[i], X[i])", "a f32 value needs an explicit conversion to i32"),
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
