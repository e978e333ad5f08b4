"""The generated kernels' launch grids stay within every target's limits for tall tensors: row blocks are
numbered across two grid dimensions of at most 65535 blocks each (kernelgen.split_grid, folded_block: CUDA's
grid y and z limit, the least of any target's), column blocks along x (2^31 - 1 on CUDA); a transpose and a
push loop over their blocks (grid-stride). Before, row blocks went to grid y one block each, and a GPU refused
a tall tensor at the call (an i4 quantize of more than 16383 rows of 32). Each kind of generated kernel runs
here with 65537 blocks of work along its capped dimension, so the second grid dimension (or the loop) is
used: on the CPU and, through the same generated kernels compiled for SPIR-V, on the OpenCL CPU runtime,
against numpy."""

import numpy as np
import pytest

from tessera import compiler, executor, plan
from tessera.options import CompileOptions
from tessera.passes import kernelgen

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SRC = """
@function
def ew(X: tensor[f32, "N", 2], b: tensor[f32, 2]):
    return op.relu(X * 2.0 + b)

@function
def rows(X: tensor[f32, "N", 2]):
    return op.softmax(X, axis=-1)

@function
def rowsum(X: tensor[f32, "N", 2]):
    return op.sum(X, axis=-1)

@function
def colsum(X: tensor[f32, "N", 1]):
    return op.sum(X, axis=0)

@function
def colsum_wide(X: tensor[f32, 2, "N"]):
    return op.sum(X, axis=0)

@function
def tr(X: tensor[f32, "N", 1]):
    return op.transpose(X, (1, 0))
"""
# rows giving each function's split (or looped) dimension 65537 blocks of work: 16 rows a block of an elementwise
# kernel (4 rows of threads, 4 rows each), 4 rows a block of a row kernel (and of a split reduction's two
# kernels: P = 1 chunk a row of 2), 64 rows a chunk of a column sum (K = 1 kept element: P = 65537 chunks along grid
# y and z), 32 rows a block of a transpose
ROWS = {"ew": 16 * 65536 + 5, "rows": 4 * 65536 + 3, "rowsum": 4 * 65536 + 3, "colsum": 64 * 65536 + 7,
        "tr": 32 * 65536 + 9}


def _grids(result, fn: str, n: int) -> list[tuple[str, list[int], list[str]]]:
    """Each kernel step of `fn` as it launches with N = n: (kernel, grid, its expressions)."""
    env = {"N": n}
    out = []
    for s in result.metadata["plans"][fn]["steps"]:
        if "kernel" not in s or "R" not in s:
            continue
        ext = {**env, **{k: plan.evaluate(s.get(k, "1"), env) for k in ("R", "C", "B")}}
        out.append((s["kernel"], [plan.evaluate(g, ext) for g in s["grid"]], s["grid"]))
    return out


@pytest.fixture(scope="module")
def cpu_result():
    return compiler.compile_source(SRC, "grid.py", CompileOptions(target="cpu"))


@pytest.mark.parametrize("n", [ROWS["colsum"], 2 ** 32, 2 ** 35])
def test_no_grid_dimension_passes_the_limit(cpu_result, n):
    """Every generated kernel's grid, at extents up to 2^35 rows (256 GiB of f32 as [2^35, 2]: past any device's
    memory; an elementwise kernel's limit is 65535² blocks of 16 rows, 2^36), is within CUDA's limits: 65535
    blocks along y and z, 2^31 - 1 along x (the plan's expressions: the same for every target)."""
    for fn in ("ew", "rows", "rowsum", "colsum", "colsum_wide", "tr"):
        for kernel, grid, exprs in _grids(cpu_result, fn, n):
            assert 1 <= grid[0] <= 2 ** 31 - 1 and all(1 <= g <= kernelgen.GRID_LIMIT for g in grid[1:]), \
                (fn, kernel, grid, exprs)


def test_the_chosen_extents_give_more_blocks_than_the_limit(cpu_result):
    """Each run below has a kernel at the cap, its blocks of work numbered across two dimensions or looped
    over (what the numerics tests exercise)."""
    for fn, n in ROWS.items():
        assert any(kernelgen.GRID_LIMIT in grid for _, grid, _ in _grids(cpu_result, fn, n)), fn


def _check(prog) -> None:
    rng = np.random.default_rng(17)
    X = rng.standard_normal((ROWS["ew"], 2)).astype(np.float32)
    b = np.array([0.5, -1.0], np.float32)
    np.testing.assert_array_equal(prog.ew(X, b), np.maximum(X * np.float32(2) + b, 0))
    X = rng.standard_normal((ROWS["rows"], 2)).astype(np.float32)
    e = np.exp(X.astype(np.float64) - X.max(1, keepdims=True))
    np.testing.assert_allclose(prog.rows(X), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(prog.rowsum(X), X[:, 0] + X[:, 1])   # one f32 addition a row
    X = rng.standard_normal((ROWS["colsum"], 1)).astype(np.float32)
    want = X.astype(np.float64).sum(0)
    n = X.shape[0]   # the recursive-summation bound n·eps32·Σ|x|
    assert np.all(np.abs(prog.colsum(X) - want) <= n * np.finfo(np.float32).eps * np.abs(X).sum())
    X = rng.standard_normal((ROWS["tr"], 1)).astype(np.float32)
    np.testing.assert_array_equal(prog.tr(X), X.T)


def test_kernels_past_the_limit_on_the_cpu(cpu_result):
    _check(executor.load(cpu_result.image))


def test_kernels_past_the_limit_on_opencl(opencl):  # noqa: F811
    """The same generated kernels compiled for SPIR-V (a GPU target's), on the OpenCL CPU runtime."""
    result = compiler.compile_source(SRC, "grid.py", CompileOptions(target="spirv"))
    _check(executor.load(result.image, opencl))
