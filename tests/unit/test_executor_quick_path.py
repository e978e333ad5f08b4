"""The executor's quick path for host calls (tessera._runtime.Function.call_plain, tessera.executor's common
call): the same results and errors as the general path, taken only for exact writeable numpy arrays of the
parameters' dtypes, with no stream; everything else falls back to the general path's checks and conversions."""

import numpy as np
import pytest

from tessera import compiler, executor, stream

SRC = """
@function
def two(X: tensor[f32, "N", 4], Y: tensor[f32, "N", 4]):
    return op.relu(X + Y), X * 2.0

@function
def widen(X: tensor[bf16, 4]):
    return X + X
"""

RNG = np.random.default_rng(26)


@pytest.fixture(scope="module")
def prog():
    return executor.load(compiler.compile_source(SRC, "quick.py").image)


def general(f, *arrays):
    """The general path's answer: the quick one turned off for this call."""
    f._quick = False
    try:
        return f(*arrays)
    finally:
        f._quick = True


def test_quick_results_match_the_general_path(prog):
    f = prog.two
    assert f._quick
    for n in (1, 3, 17):  # a symbolic extent: each call's shapes come from its arguments
        X, Y = (RNG.standard_normal((n, 4)).astype(np.float32) for _ in range(2))
        quick = f(X, Y)
        assert [r.shape for r in quick] == [(n, 4), (n, 4)] and all(r.dtype == np.float32 for r in quick)
        for q, g, want in zip(quick, general(f, X, Y), (np.maximum(X + Y, 0), X * 2)):
            np.testing.assert_array_equal(q, g)
            np.testing.assert_allclose(q, want, rtol=1e-6)
    first, second = f(X, Y)[0], f(X, Y)[0]
    assert first is not second and not np.shares_memory(first, second)  # fresh results per call


def test_call_plain_declines_what_needs_the_general_path(prog):
    f = prog.two
    X = np.ones((2, 4), np.float32)
    assert f._native.call_plain((X, X)) is not None
    readonly = X.copy()
    readonly.flags.writeable = False

    class Sub(np.ndarray):
        pass

    for args in ((X.astype(np.float64), X), (readonly, X), (X.view(Sub), X), ([[1.0] * 4] * 2, X), (X,),
                 (X, X, X)):
        assert f._native.call_plain(args) is None
    # the general path then takes each as it did: a read-only input it does not write, a subclass
    np.testing.assert_array_equal(f(readonly, X)[1], X * 2)
    np.testing.assert_array_equal(f(X.view(Sub), X)[1], X * 2)


def test_errors_are_the_general_paths(prog):
    f = prog.two
    X = np.ones((2, 4), np.float32)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        f(X)
    with pytest.raises(TypeError, match="'X' of 'two'"):
        f(X.astype(np.float64), X)
    with pytest.raises(ValueError, match="'two'"):  # libtessera's ArgumentError, from call_plain
        f(X, np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match="set_plain: 1 argument and 2 result dtypes"):
        f._native.set_plain([np.dtype(np.float32)], [np.dtype(np.float32)] * 2)


def test_bf16_results_and_streams_keep_the_general_path(prog):
    w = prog.widen
    assert not w._quick  # its result is widened from bf16 bits to float32 values in Python
    x = np.array([1.0, 2.0, 0.5, -3.0], np.float32)
    r = w(x)
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r, 2 * x)
    f = prog.two
    X = np.ones((2, 4), np.float32)
    s = stream.Stream()
    np.testing.assert_array_equal(f(X, X, stream=s)[0], 2 * X)  # on a stream: the general path, synchronized


class _Counting:
    """A native function whose call_plain attempts are counted."""

    def __init__(self, native):
        self.native, self.attempts = native, 0

    def call_plain(self, arrays):
        self.attempts += 1
        return self.native.call_plain(arrays)

    def __getattr__(self, name):
        return getattr(self.native, name)


def test_a_declined_call_tries_the_quick_path_once(prog):
    """Regression: a call the quick path declines (here a read-only array) tried call_plain a second time with
    the same arguments before taking the general path."""
    f = prog.two
    native, f._native = f._native, _Counting(f._native)
    try:
        X = RNG.standard_normal((3, 4)).astype(np.float32)
        X.flags.writeable = False
        out = f(X, X)
        assert f._native.attempts == 1
        np.testing.assert_array_equal(out[1], X * 2)
    finally:
        f._native = native
