"""Split reductions on sm_90a (kernels.py split_reduce): the training loss's mean(E·E) over a whole
[8192, 4096] tensor (one row: the case that ran 108 ms on one CTA), whole-tensor sum/max/min/prod of odd
extents, and trailing-axis sums and means of few long bf16 rows, against numpy in f64. Determinism: the same
inputs give the same bits on every run (fixed chunking, no atomics). `test_references_match_the_compiler`
runs the same checks on the CPU image (it needs no GPU, and skips without the compiler).

Tolerances: sums and means within the recursive-summation bound n·eps32·Σ|x| (n the elements reduced), max
and min exact, prod within n·eps32 relative; bf16 inputs are exact in f32, the results f32."""

import os
import sys

import numpy as np
import pytest

from tessera.numerics.rounding import round_to

sys.path.insert(0, os.path.dirname(__file__))
from kernels import SPLIT_REDUCE  # noqa: E402

EPS = np.finfo(np.float32).eps


def _within_sum_bound(got, X64: np.ndarray, axis, mean: bool) -> None:
    want = X64.mean(axis=axis) if mean else X64.sum(axis=axis)
    n = X64.size // max(np.size(want), 1)
    bound = n * EPS * np.abs(X64).sum(axis=axis) / (n if mean else 1)
    assert np.all(np.abs(np.asarray(got, np.float64) - want) <= bound), (got, want)


def _check(fn) -> None:
    """fn(name) -> the program's function (bf16 parameters take float32 values, rounded to bf16 here)."""
    rng = np.random.default_rng(15)
    E = rng.standard_normal((8192, 4096), dtype=np.float32)
    first = fn("loss")(E)
    _within_sum_bound(first, E.astype(np.float64) ** 2, None, True)
    for _ in range(3):
        assert np.array_equal(fn("loss")(E), first)
    X = rng.standard_normal((3, 1_000_003), dtype=np.float32)
    P = rng.uniform(0.999, 1.001, (3, 1_000_003)).astype(np.float32)
    s, mx, mn, pr = fn("whole")(X, P)
    _within_sum_bound(s, X.astype(np.float64), None, False)
    assert mx == X.max() and mn == X.min()
    want = np.prod(P.astype(np.float64))
    assert abs(pr - want) <= P.size * EPS * want
    R = rng.standard_normal((5, 300_001), dtype=np.float32)
    R = round_to(R, "bf16").astype(np.float32)
    s, m = fn("rows")(R)
    _within_sum_bound(s, R.astype(np.float64), -1, False)
    _within_sum_bound(m, R.astype(np.float64), -1, True)


def test_split_reductions_match_numpy_and_repeat_bitwise(program):
    prog = program("split_reduce")
    _check(lambda name: getattr(prog, name))


def test_references_match_the_compiler():
    try:
        from tessera import compiler, executor
        prog = executor.load(compiler.compile_source(SPLIT_REDUCE, "split.py").image)
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    _check(lambda name: prog.function(name))
