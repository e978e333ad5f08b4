"""Coarsened elementwise kernels (passes/simt_coarsen.py) on an NVIDIA GPU: the results of the kernels as
written, exactly (each element's operations are the ones written), for every n: below the 4 or 8 elements a
thread does, not a multiple of them, launches covering fewer threads than n (the rest stays untouched), tensors
misaligned for 16-byte accesses (the per-element path), and in-place."""

import numpy as np
import pytest

RNG = np.random.default_rng(19)


def dev(x, ctx):
    from tessera.runtime import DeviceArray
    return DeviceArray.from_numpy(x, ctx)


def test_saxpy_is_coarsened(image_of):
    from tessera import image
    kernels = {k.name: k for k in image.read_image(image_of("saxpy")).kernels}
    assert kernels["saxpy"].props["simt.coarsen"] == "4" and "simt.coarsen" not in kernels["warp_reduce_sum"].props


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 127, 128, 129, 1000, 4099, 1 << 20, (1 << 20) + 3])
@pytest.mark.parametrize("block", [32, 256])
@pytest.mark.parametrize("cover", ["all", "fewer", "more"])
def test_saxpy_as_written(load, cuda, n, block, cover):
    mod = load("saxpy")
    X, Y = RNG.standard_normal(n, dtype=np.float32), RNG.standard_normal(n, dtype=np.float32)
    grid = {"all": -(-n // block), "fewer": max(1, n // block // 3), "more": -(-n // block) + 5}[cover]
    Out = dev(np.full(n, np.nan, np.float32), cuda)
    a = np.float32(-1.75)
    mod.saxpy(a, dev(X, cuda), dev(Y, cuda), Out, grid=grid, block=block)
    done = min(n, grid * block)
    got = Out.numpy()
    np.testing.assert_array_equal(got[:done], a * X[:done] + Y[:done])
    assert np.isnan(got[done:]).all()


@pytest.mark.parametrize("n", [3, 1000, 4099])
@pytest.mark.parametrize("offsets", [(1, 0, 0), (0, 2, 0), (0, 0, 3), (1, 1, 1)])
def test_saxpy_on_misaligned_tensors(load, cuda, n, offsets):
    """Views a few f32 past a 16-byte boundary: the kernel takes its per-element path, same results."""
    torch = pytest.importorskip("torch")
    mod = load("saxpy")
    bases = [torch.randn(n + 4, device="cuda") for _ in range(3)]
    X, Y, Out = (b[o:o + n] for b, o in zip(bases, offsets))
    want = (1.5 * X.cpu().numpy().astype(np.float32) + Y.cpu().numpy()).astype(np.float32)
    mod.saxpy(1.5, X, Y, Out, grid=-(-n // 128), block=128)
    np.testing.assert_array_equal(Out.cpu().numpy(), want)


def test_saxpy_in_place(load, cuda):
    mod = load("saxpy")
    n = 100_003
    X = RNG.standard_normal(n, dtype=np.float32)
    D = dev(X, cuda)
    mod.saxpy(np.float32(3), D, D, D, grid=-(-n // 256), block=256)
    np.testing.assert_array_equal(D.numpy(), np.float32(3) * X + X)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1000, 65_539])
@pytest.mark.parametrize("bound", ["n", "half"])
def test_16_bit_and_mixed_kernels_as_written(load, cuda, n, bound):
    """Eight 16-bit elements a thread; f16 in and f32 out (two 16-byte stores a thread)."""
    mod = load("coarsened")
    X = RNG.standard_normal(n).astype(np.float16)
    count = n if bound == "n" else n // 2
    Out = dev(np.zeros(n, np.float16), cuda)
    mod.halves(dev(X, cuda), Out, count, grid=-(-n // 64), block=64)
    want = np.zeros(n, np.float16)
    want[:count] = X[:count] * X[:count] + X[:count]
    np.testing.assert_array_equal(Out.numpy(), want)
    W = dev(np.zeros(n, np.float32), cuda)
    mod.widen(dev(X, cuda), W, grid=-(-n // 64), block=64)
    np.testing.assert_array_equal(W.numpy(), X.astype(np.float32) * np.float32(2))
