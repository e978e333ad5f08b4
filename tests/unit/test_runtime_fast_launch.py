"""Kernel.__call__'s fast path (runtime/python/launch_plan.cpp) takes exactly what the Python launcher
(Kernel.pack) takes and launches with the same values; for everything else it declines, launching nothing, and
the Python launcher raises its own message."""
import numpy as np
import pytest

from tessera import compile as compile_source, runtime

SOURCE = """
@kernel
def probe(a: float, b: int, X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + b
"""


@pytest.fixture(scope="module")
def kernel():
    return runtime.load(compile_source(SOURCE, "probe.py", target="cpu")).probe


def slow(k, args, grid, block):
    """The Python launcher's path: packed slots through Kernel.launch."""
    k._native.launch(runtime._dim3(grid, "grid"), runtime._dim3(block, "block"), 0, k.pack(args), None, 0.0, 0.0)


@pytest.mark.parametrize("a, b", [(1.5, 2), (np.float32(-0.25), np.int32(-7)), (3, np.int64(2**31 - 1)),
                                  (np.float64(1e38), -2**31), (float("inf"), 0), (np.int16(5), 0)])
def test_accepted_calls_launch_the_values_pack_gives(kernel, a, b):
    X = np.arange(40, dtype=np.float32) - 20
    fast, ref = np.zeros_like(X), np.zeros_like(X)
    assert kernel._native.call((a, b, X, fast), (2,), 32, 0, None, None, None) is True
    slow(kernel, (a, b, X, ref), (2,), 32)
    np.testing.assert_array_equal(fast, ref)  # bit for bit: the same slots
    assert fast.tobytes() == ref.tobytes()


def bad_calls():
    X = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    return [
        ((1.5, 2, X.astype(np.float64), out), 1, 8),            # dtype
        ((1.5, 2, X.reshape(2, 4), out), 1, 8),                # rank
        ((1.5, 2, np.ones(16, np.float32)[::2], out), 1, 8),   # not contiguous
        ((1.5, 2, X, ro), 1, 8),                               # read-only output
        ((1.5, 2, X, np.zeros(9, np.float32)), 1, 8),          # N bound twice differently
        ((True, 2, X, out), 1, 8),                             # a bool for a float
        ((1.5, 2.0, X, out), 1, 8),                            # a float for an int
        ((1.5, 2**31, X, out), 1, 8),                          # out of i32's range
        ((1e39, 2, X, out), 1, 8),                             # beyond f32's largest finite
        ((1.5, 2, list(X), out), 1, 8),                        # not an array
        ((1.5, 2, X), 1, 8),                                   # too few arguments
        ((1.5, 2, X, out), [1, 1, 1, 1], 8),                   # a grid of four
        ((1.5, 2, X, out), 1, -1),                             # a negative block
    ]


@pytest.mark.parametrize("case", range(len(bad_calls())))
def test_refused_calls_are_declined_and_raise_the_python_message(kernel, case):
    args, grid, block = bad_calls()[case]
    out = args[-1] if len(args) == 4 and isinstance(args[-1], np.ndarray) else None
    before = None if out is None else out.copy()
    assert kernel._native.call(args, grid, block, 0, None, None, None) is False
    if out is not None:
        np.testing.assert_array_equal(out, before)  # nothing ran
    with pytest.raises((TypeError, ValueError)) as fast:
        kernel(*args, grid=grid, block=block)
    with pytest.raises((TypeError, ValueError)) as python:
        slow(kernel, args, grid, block)
    assert type(fast.value) is type(python.value) and str(fast.value) == str(python.value)


def test_a_zero_block_is_refused_by_both_paths_alike(kernel):
    X = np.ones(8, np.float32)
    with pytest.raises(runtime.Error, match="block dimensions must be >= 1") as fast:
        kernel(1.5, 2, X, np.zeros(8, np.float32), grid=1, block=(8, 0))
    with pytest.raises(runtime.Error) as python:
        slow(kernel, (1.5, 2, X, np.zeros(8, np.float32)), 1, (8, 0))
    assert str(fast.value) == str(python.value)


def test_a_device_array_is_read_in_place(kernel):
    X = runtime.DeviceArray.from_numpy(np.arange(8, dtype=np.float32))
    out = runtime.DeviceArray((8,), np.float32)
    assert kernel._native.call((2.0, 1, X, out), 1, 8, 0, None, None, None) is True
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(8, dtype=np.float32) + 1)
    out.free()
    with pytest.raises(runtime.Error, match="used after its memory was freed"):
        kernel(2.0, 1, X, out, grid=1, block=8)
