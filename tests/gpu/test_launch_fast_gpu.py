"""Kernel.__call__'s fast path on the CUDA backend (runtime/python/launch_plan.cpp): DeviceArrays and PyTorch
CUDA tensors are read and launched in C++ with the values Kernel.pack gives (results exact, as saxpy's are in
test_cuda.py); whatever the Python launcher refuses is declined, nothing launched, and the call raises the
Python launcher's message."""

import numpy as np
import pytest

RNG = np.random.default_rng(14)


def slow(k, args, grid, block):
    """The Python launcher's path: packed slots through the binding's Kernel.launch."""
    from tessera import runtime
    k._native.launch(runtime._dim3(grid, "grid"), runtime._dim3(block, "block"), 0, k.pack(args), None, 0.0, 0.0)


def test_device_arrays_take_the_fast_path(load, cuda):
    from tessera.runtime import DeviceArray
    k = load("saxpy").kernel("saxpy")
    x, y = RNG.standard_normal(1000, dtype=np.float32), RNG.standard_normal(1000, dtype=np.float32)
    X, Y, Out = (DeviceArray.from_numpy(v, cuda) for v in (x, y, np.zeros_like(x)))
    a = np.float32(1.25)
    assert k._native.call((a, X, Y, Out), (4,), 256, 0, None, None, None) is True
    np.testing.assert_array_equal(Out.numpy(), a * x + y)


def test_torch_cuda_tensors_take_the_fast_path_with_packs_values(load, cuda):
    torch = pytest.importorskip("torch")
    k = load("saxpy").kernel("saxpy")
    x, y = RNG.standard_normal(1000, dtype=np.float32), RNG.standard_normal(1000, dtype=np.float32)
    X, Y = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    fast, ref = torch.zeros_like(X), torch.zeros_like(X)
    assert k._native.call((-0.5, X, Y, fast), 4, (256,), 0, None, None, None) is True
    slow(k, (-0.5, X, Y, ref), 4, (256,))
    torch.cuda.synchronize()
    assert torch.equal(fast, ref)
    np.testing.assert_array_equal(fast.cpu().numpy(), np.float32(-0.5) * x + y)


def test_refused_arguments_are_declined_and_raise_the_python_message(load, cuda):
    torch = pytest.importorskip("torch")
    k = load("saxpy").kernel("saxpy")
    X = torch.ones(64, device="cuda")
    out = torch.zeros(64, device="cuda")
    cases = [
        (1.0, X, X, np.zeros(64, np.float32)),                  # numpy, in host memory
        (1.0, torch.ones(64), X, out),                          # a CPU tensor
        (1.0, torch.ones(128, device="cuda")[::2], X, out),     # not contiguous
        (1.0, X.double(), X, out),                              # float64 for f32
        (1.0, X.reshape(8, 8), X, out),                         # rank 2 for rank 1
        (True, X, X, out),                                      # a bool for a float
    ]
    for args in cases:
        assert k._native.call(args, 1, 64, 0, None, None, None) is False
        with pytest.raises((TypeError, ValueError)) as fast:
            k(*args, grid=1, block=64)
        with pytest.raises((TypeError, ValueError)) as python:
            slow(k, args, 1, 64)
        assert type(fast.value) is type(python.value) and str(fast.value) == str(python.value)
    torch.cuda.synchronize()
    assert not out.any()  # nothing ran
