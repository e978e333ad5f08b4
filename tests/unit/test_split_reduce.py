"""Reductions whose rows are few and long run as two kernels (kernelgen.SPLIT_CHUNK): chunks of each row to
partials in a temporary, then each row of partials to the result, so a whole-tensor sum or mean uses every
core (CPU) or SM (GPU) instead of one warp. Checked on the CPU image against numpy in f64; the PTX kernels
through ptxas.

Tolerances: a sum or mean within the recursive-summation bound n·eps32·Σ|x| (n the elements reduced; the
chunked order only tightens it), max and min exactly, prod within n·eps32 relative; bf16 results one bf16
ulp (2^-7 relative) of the f32 reduction, rounded once at the store."""

import numpy as np
import pytest

from tessera import compiler, executor, image, plan
from tessera.backends.ptx import ptxas
from tessera.options import CompileOptions
from tessera.numerics.rounding import round_to
from tessera.passes import kernelgen

RNG = np.random.default_rng(15)


def compiled(src: str, target: str = "cpu"):
    return compiler.compile_source(src, "prog.py", CompileOptions(target=target))


def kernels(result, fn: str = "f") -> list[str]:
    return [s["kernel"] for s in result.metadata["plans"][fn]["steps"] if "kernel" in s]


def check(kind: str, got, X: np.ndarray, axes) -> None:
    want = getattr(np, kind)(X.astype(np.float64), axis=axes)
    assert np.shape(got) == want.shape
    n = X.size // max(want.size, 1)
    if kind in ("sum", "mean"):
        bound = n * np.finfo(np.float32).eps * np.sum(np.abs(X.astype(np.float64)), axis=axes)
        assert np.all(np.abs(got - want) <= (bound / n if kind == "mean" else bound)), (got, want)
    elif kind == "prod":   # n roundings of a product, each within eps32 relative
        np.testing.assert_allclose(got, want, rtol=n * np.finfo(np.float32).eps)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod"])
def test_whole_tensor_of_a_million_elements_symbolic(kind):
    """[3, 333_337] (odd, not a multiple of a warp or a chunk) reduced whole: P = ceil(1_000_011/4096) = 245
    chunks, each a whole number of warps; repeated runs give the same bits."""
    src = f"""
@function
def f(X: tensor[f32, "N", "D"]):
    return op.{kind}(X)
"""
    result = compiled(src)
    assert kernels(result) == ["f__row0_part", "f__row0"]
    X = RNG.uniform(0.999, 1.001, (3, 333_337)) if kind == "prod" else RNG.standard_normal((3, 333_337))
    X = X.astype(np.float32)
    fn = executor.load(result.image).function("f")
    got = fn(X)
    check(kind, got, X, None)
    for _ in range(3):
        assert np.array_equal(fn(X), got)


@pytest.mark.parametrize("shape", [(2, 5, 70_001), (7, 1), (1, 4097), (4, 31)])
def test_trailing_axes_few_rows_symbolic(shape):
    """Sum and mean over the trailing axes of few rows, of lengths below, at and just past one chunk: rows
    split into chunks only while rows × chunks stays within SPLIT_CHUNKS, and a row shorter than a chunk has
    one chunk (the finish then reduces one partial)."""
    dims = ", ".join(f'"D{i}"' for i in range(len(shape)))
    src = f"""
@function
def f(X: tensor[f32, {dims}]):
    return op.sum(X, axis=-1), op.mean(X, axis=-1)
"""
    result = compiled(src)
    assert kernels(result) == ["f__row0_part", "f__row0", "f__row1_part", "f__row1"]
    X = RNG.standard_normal(shape).astype(np.float32)
    s, m = executor.load(result.image).function("f")(X)
    check("sum", s, X, -1)
    check("mean", m, X, -1)


def test_static_extents_split_only_long_rows():
    """With extents written in, the split is decided at compile time: many short rows keep one kernel."""
    long = compiled("@function\ndef f(X: tensor[f32, 4, 100000]):\n    return op.sum(X, axis=-1)\n")
    short = compiled("@function\ndef f(X: tensor[f32, 8192, 4096]):\n    return op.max(X, axis=-1)\n")
    assert kernels(long) == ["f__row0_part", "f__row0"] and kernels(short) == ["f__row0"]
    X = RNG.standard_normal((4, 100000)).astype(np.float32)
    check("sum", executor.load(long.image).function("f")(X), X, -1)


def test_chunk_count():
    """P: chunks of at least SPLIT_CHUNK elements, rows × P at most SPLIT_CHUNKS, one chunk per row of many
    short rows, none for empty rows (then neither kernel launches)."""
    P = kernelgen.split_chunks("R", "C")
    cases = {(1, 33554432): 8192, (1, 1_000_011): 245, (3, 10**8): 2730, (8192, 4096): 1, (100000, 10**6): 1,
             (2, 4096): 1, (2, 4097): 2, (5, 0): 0}
    for (r, c), want in cases.items():
        assert plan.evaluate(P, {"R": r, "C": c}) == want, (r, c)


def test_mean_of_square_in_bf16():
    """The training loss's form: a bf16 tensor, squared, its mean in bf16 (f32 partials, one rounding)."""
    src = """
@function
def f(E: tensor[bf16, "T", "D"]):
    return op.mean(E * E)
"""
    result = compiled(src)
    assert kernels(result)[-2:] == ["f__row1_part", "f__row1"]
    # the CPU stores bf16 as f32 (rounded): bf16 values are passed as float32
    E = round_to(RNG.standard_normal((64, 3001)), "bf16").astype(np.float32)
    got = np.float64(executor.load(result.image).function("f")(E))
    sq = round_to(E * E, "bf16")
    assert abs(got - sq.mean()) <= 2 ** -7 * sq.mean()


needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed")


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_split_kernels_assemble(arch):
    src = """
@function
def f(X: tensor[f32, "N", "D"], Y: tensor[bf16, "N", "D"]):
    return op.mean(X * X), op.max(Y, axis=-1), op.prod(X, axis=(0, 1))
"""
    result = compiler.compile_source(src, "prog.py", CompileOptions(target="ptx", arch=arch))
    img = image.read_image(result.image)
    steps = kernels(result)
    assert sum(s.endswith("_part") for s in steps) == 3
    assert sorted(k.name for k in img.kernels) == sorted(steps) and all(k.regs > 0 for k in img.kernels)


@pytest.mark.parametrize("shape", [(1, 1_000_001), (4096, 1000)], ids=["split", "one-kernel"])
def test_f64_accumulates_in_f64(shape):
    """An f64 reduction starts from an f64 literal (kernelgen.reduce_init): a bare 0.0 made the accumulator
    f32, a sum of 1e6 normals off by ~1e-3 and max/min rounded to f32. Sums within n·eps64·Σ|x| (n the
    elements of a row); max, min exact. Extents written in: one long row splits, 4096 short ones do not."""
    src = f"""
@function
def f(X: tensor[f64, {shape[0]}, {shape[1]}]):
    return op.sum(X, axis=-1), op.max(X, axis=-1), op.min(X, axis=-1)
"""
    result = compiled(src)
    assert any(k.endswith("_part") for k in kernels(result)) == (shape[0] == 1)
    X = RNG.standard_normal(shape)
    s, mx, mn = executor.load(result.image).function("f")(X)
    bound = shape[1] * np.finfo(np.float64).eps * np.sum(np.abs(X), axis=-1)
    assert np.all(np.abs(s - X.sum(axis=-1)) <= bound)
    assert np.array_equal(mx, X.max(axis=-1)) and np.array_equal(mn, X.min(axis=-1))
