"""Atomics and fences on CUDA: the histogram and scatter-add examples (examples/tile/histogram.py,
scatter_add.py) with a million threads on 16 bins, and tests/unit/test_atomics.py's checks (exact histograms,
tickets, 2-D and f32 scatter-adds, i32/i64/f32 maxima, compare-and-swap elections), all against numpy."""

import importlib.util
import pathlib

import numpy as np
import pytest

_spec = importlib.util.spec_from_file_location("test_atomics", pathlib.Path(__file__).parents[1] / "unit" / "test_atomics.py")
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)

RNG = np.random.default_rng(17)


def dev(x, ctx):
    from tessera.runtime import DeviceArray
    return DeviceArray.from_numpy(x, ctx)


@pytest.fixture(scope="module")
def device(load, cuda):
    """launch(name, *arrays, grid=, block=) of a kernel of the "atomics" image, the arrays copied there and back."""
    mod = load("atomics")

    def launch(name, *arrays, grid, block):
        on_device = [dev(a, cuda) for a in arrays]
        getattr(mod, name)(*on_device, grid=grid, block=block)
        for a, d in zip(arrays, on_device):
            a[...] = d.numpy()
    return launch


def test_histogram_example(load, cuda):
    n, bins = 1_000_000, 16
    X = RNG.integers(-1, bins + 1, n).astype(np.int32)
    H = dev(np.zeros(bins, np.int32), cuda)
    load("histogram").histogram(dev(X, cuda), H, grid=(n + 255) // 256, block=256)
    np.testing.assert_array_equal(H.numpy(), np.bincount(X[(X >= 0) & (X < bins)], minlength=bins))


def test_scatter_add_example(load, cuda):
    n, m = 500_000, 37
    I = RNG.integers(0, m, n).astype(np.int32)
    X = RNG.integers(-2**40, 2**40, n).astype(np.int64)
    Out = dev(np.zeros(m, np.int64), cuda)
    mod = load("scatter_add")
    mod.scatter_add_i64(dev(X, cuda), dev(I, cuda), Out, grid=(n + 255) // 256, block=256)
    ref = np.zeros(m, np.int64)
    np.add.at(ref, I, X)
    np.testing.assert_array_equal(Out.numpy(), ref)
    Xf = RNG.integers(-8, 9, n).astype(np.float32)   # small integers: exact in any order of the additions
    Of = dev(np.zeros(m, np.float32), cuda)
    mod.scatter_add_f32(dev(Xf, cuda), dev(I, cuda), Of, grid=(n + 255) // 256, block=256)
    ref_f = np.zeros(m, np.float32)
    np.add.at(ref_f, I, Xf)
    np.testing.assert_array_equal(Of.numpy(), ref_f)


@pytest.mark.parametrize("n, bins, block", [(1000, 3, 64), (1_000_000, 8, 256), (77_777, 1, 100)])
def test_histogram_counts_every_hit(device, n, bins, block):
    checks.check_histogram(device, n, bins, block)


@pytest.mark.parametrize("check", [c for c in checks.CHECKS if c != "histograms"])
def test_atomics_match_numpy(device, check):
    checks.CHECKS[check](device)
