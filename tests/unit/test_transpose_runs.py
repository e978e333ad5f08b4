"""Transposes that swap two adjacent runs of axes (kernelgen.transpose): the split of a [B, S, H, D] projection
into heads, [B, H, S, D], and its merge back, copy whole rows of the trailing axes they keep in place
(_transpose_rows); a swap of the last two axes keeps its tiled kernel; other permutations are refused with the
permutation named. Run on the CPU image against numpy, at extents that leave partial blocks; more (b, h) pairs
than a grid dimension holds (the grid-stride loop): tests/gpu/test_block_parts_gpu.py, where it is cheap."""

import numpy as np
import pytest

import tessera
from tessera import executor
from tessera.diagnostics import CompileError
from tessera.passes import kernelgen

SRC = """
from tessera import bf16, f32, i8, function, op, tensor

@function
def heads(X: tensor[f32, "B", "S", "H", "D"]):
    return op.transpose(X, (0, 2, 1, 3))

@function
def heads_bf16(X: tensor[bf16, 2, 7, 3, 5]):
    return op.transpose(X, (0, 2, 1, 3))

@function
def heads_i8(X: tensor[i8, 3, 19, 2, 4]):
    return op.transpose(X, (0, 2, 1, 3))

@function
def runs(X: tensor[f32, "A", "B", "C", 5, 3]):
    return op.transpose(X, (0, 2, 3, 1, 4))

@function
def leading(X: tensor[f32, "A", "B", 3]):
    return op.transpose(X, (1, 0, 2))

@function
def split_merge(X: tensor[f32, "T", 12]):
    Q = op.transpose(op.reshape(X, (2, -1, 3, 4)), (0, 2, 1, 3))
    return op.reshape(op.transpose(Q * 2.0, (0, 2, 1, 3)), ("T", 12))

@function
def last_two(X: tensor[f32, "A", "B", "C"]):
    return op.transpose(X, (0, 2, 1))
"""


@pytest.fixture(scope="module")
def prog():
    return executor.load(tessera.compile(SRC, "transpose_runs.py"))


@pytest.mark.parametrize("perm, runs", [
    ([0, 2, 1, 3], (1, 1, 1)), ([1, 0], (0, 1, 1)), ([0, 2, 3, 1, 4], (1, 1, 2)), ([2, 0, 1], (0, 2, 1)),
    ([1, 2, 0], (0, 1, 2)), ([0, 1, 3, 2], (2, 1, 1)), ([0, 1, 2], None), ([2, 1, 0], None), ([1, 0, 3, 2], None),
])
def test_runs(perm, runs):
    assert kernelgen.transpose_runs(perm) == runs


@pytest.mark.parametrize("fn, shape, perm", [
    ("heads", (2, 7, 3, 9), (0, 2, 1, 3)),         # 7 rows of S: a partial block of 4 rows a thread
    ("heads", (1, 1, 1, 1), (0, 2, 1, 3)),
    ("heads", (3, 130, 5, 129), (0, 2, 1, 3)),     # D past one block of 128 columns
    ("runs", (2, 3, 4, 5, 3), (0, 2, 3, 1, 4)),
    ("leading", (5, 6, 3), (1, 0, 2)),
    ("last_two", (2, 37, 5), (0, 2, 1)),
])
def test_matches_numpy(prog, fn, shape, perm):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(getattr(prog, fn)(x), x.transpose(perm))


def test_narrow_dtypes(prog):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 3, 5)).astype(np.float32)
    # the executor takes and returns bf16 as float32 values: exact on values already bf16
    x = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)
    np.testing.assert_array_equal(prog.heads_bf16(x), x.transpose(0, 2, 1, 3))
    y = rng.integers(-128, 128, (3, 19, 2, 4), dtype=np.int8)
    np.testing.assert_array_equal(prog.heads_i8(y), y.transpose(0, 2, 1, 3))


def test_split_and_merge(prog):
    x = np.random.default_rng(2).standard_normal((10, 12)).astype(np.float32)
    np.testing.assert_array_equal(prog.split_merge(x), x * 2)


def test_empty(prog):
    x = np.zeros((2, 0, 3, 4), np.float32)
    assert prog.heads(x).shape == (2, 3, 0, 4)


def test_other_permutations_refused():
    src = ("from tessera import f32, function, op, tensor\n\n@function\n"
           "def rev(X: tensor[f32, 2, 3, 4]):\n    return op.transpose(X, (2, 1, 0))\n")
    with pytest.raises(CompileError, match=r"swap two adjacent runs of axes only \(yet\), not \[2, 1, 0\]"):
        tessera.compile(src, "rev.py")
