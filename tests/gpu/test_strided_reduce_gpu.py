"""Reductions over axes that are not all trailing (kernels.py strided_reduce: kernelgen._strided_reduce, one
thread per kept element, consecutive threads on consecutive columns) on a GPU, against numpy in f64: a
bias gradient's sum over leading axes, a mean over two leading axes, a max over the first and last, a min
over the middle one. `test_references_match_the_compiler` runs the same checks on the CPU image (it needs no
GPU, and skips without the compiler).

Tolerances: sums and means within the recursive-summation bound n·eps32·Σ|x| (n the elements reduced, each
thread adds its column in order), max and min exact."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from kernels import STRIDED_REDUCE  # noqa: E402

EPS = np.finfo(np.float32).eps


def _check(fn) -> None:
    """fn(name) -> the program's function."""
    X = np.random.default_rng(16).standard_normal((37, 129, 515), dtype=np.float32)
    X64 = X.astype(np.float64)
    s, m, mx, mn = fn("leading")(X)
    for got, axis, mean in ((s, 0, False), (m, (0, 1), True)):
        want = X64.mean(axis=axis) if mean else X64.sum(axis=axis)
        n = X.size // want.size
        bound = n * EPS * np.abs(X64).sum(axis=axis) / (n if mean else 1)
        assert got.shape == want.shape and np.all(np.abs(np.asarray(got, np.float64) - want) <= bound)
    assert np.array_equal(mx, X.max(axis=(0, 2))) and np.array_equal(mn, X.min(axis=1))


def test_strided_reductions_match_numpy(program):
    prog = program("strided_reduce")
    _check(lambda name: getattr(prog, name))


def test_references_match_the_compiler():
    try:
        from tessera import compiler, executor
        prog = executor.load(compiler.compile_source(STRIDED_REDUCE, "strided.py").image)
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    _check(lambda name: prog.function(name))
