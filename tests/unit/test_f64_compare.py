"""Comparisons and selects of f64 values in generated elementwise kernels (passes/kernelgen.elementwise)
compute in f64, whatever the group's first output is: a bool one (the comparison's own), an f32 one (a
select of f32 values on an f64 condition, a cast of an f64 result). They computed in f32 (the compute type
was taken from the first output), so 1e100 overflowed to inf (s > max(s)·1e-15 all False) and 1 + 1e-12
rounded to 1. Exact against numpy on the CPU and on the OpenCL CPU runtime (spirv); the kernel source every
target compiles (cpu, ptx, amdgpu, spirv share it) loads f64 values as f64."""

import numpy as np
import pytest

from tessera import compiler, executor
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SOURCE = """
from tessera import f16, f32, f64, function, i64, op, tensor

@function
def gt(a: tensor[f64, "M", "N"], b: tensor[f64, "M", "N"]):
    return a > b

@function
def le_row(a: tensor[f64, "N"], b: tensor[f64, "N"]):
    return a <= b

@function
def cut(s: tensor[f64, "N"]):
    return s > op.max(s) * 1e-15

@function
def select32(a: tensor[f64, "M", "N"], b: tensor[f64, "M", "N"], x: tensor[f32, "M", "N"], y: tensor[f32, "M", "N"]):
    return op.where(a > b, x, y)

@function
def max_cast(a: tensor[f64, "M", "N"], b: tensor[f64, "M", "N"]):
    return op.cast(op.maximum(a, b) - 1.0, f32)

@function
def icmp(a: tensor[i64, "N"], b: tensor[i64, "N"]):
    return a > b

@function
def hcmp(a: tensor[f16, "N"], b: tensor[f16, "N"]):
    return a > b
"""

ONE = np.ones((5, 7))
TINY = ONE + 1e-12                      # 1 in f32
HUGE = np.full((5, 7), 1e100)           # inf in f32
X = np.arange(35, dtype=np.float32).reshape(5, 7)


def _check(p) -> None:
    assert p.gt(TINY, ONE).all() and not p.gt(ONE, TINY).any()
    assert p.gt(HUGE, HUGE / 10).all() and not p.gt(HUGE / 10, HUGE).any()
    assert not p.le_row(TINY[0], ONE[0]).any() and p.le_row(ONE[0], TINY[0]).all()
    s = np.array([1e100, 3e99, 2e85, 1e84, 5e80, 1e100, 2e86, 7.0])
    np.testing.assert_array_equal(p.cut(s), s > s.max() * 1e-15)
    np.testing.assert_array_equal(p.select32(TINY, ONE, X, -X), X)
    np.testing.assert_array_equal(p.select32(ONE, TINY, X, -X), -X)
    np.testing.assert_array_equal(p.max_cast(TINY, ONE), (np.maximum(TINY, ONE) - 1.0).astype(np.float32))
    big = np.full(6, 2 ** 40 + 1, np.int64)
    np.testing.assert_array_equal(p.icmp(big, big - 1), np.ones(6, bool))
    h = np.full(6, 1.0, np.float16)
    np.testing.assert_array_equal(p.hcmp(h + np.float16(0.001), h), np.ones(6, bool))


def test_on_the_cpu():
    _check(executor.load(compiler.compile_source(SOURCE, "f64_compare.py").image))


def test_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    _check(executor.load(compiler.compile_source(SOURCE, "f64_compare.py", CompileOptions(target="spirv")).image,
                         opencl))


@pytest.mark.parametrize("target", ["ptx", "amdgpu"])
def test_gpu_kernels_load_f64_as_f64(target):
    result = compiler.compile_source(SOURCE, "f64_compare.py", CompileOptions(
        target=target, kernels=("gt", "select32", "max_cast")))
    sources = [s["source"] for p in result.metadata["plans"].values() for s in p["steps"] if "source" in s]
    f64_params = [(src, k) for src in sources for k in range(4) if f"I{k}: tensor[f64" in src]
    assert len(f64_params) >= 6, sources
    for src, k in f64_params:
        assert f"f32(I{k}[" not in src and f"= I{k}[" in src, src


# The row kernels of layernorm and rmsnorm (passes/kernelgen.row) accumulated an f64 row's sum and sum of
# squares from a bare 0.0, an f32 variable: a row of mean 1e6 lost its low digits (max error 0.068). Their
# accumulators start from f64(0.0) now, as softmax's do; f32 kernels are unchanged.
NORM_SOURCE = """
from tessera import f64, function, op, tensor

@function
def ln(x: tensor[f64, "M", "N"], g: tensor[f64, "N"], b: tensor[f64, "N"]):
    return op.layernorm(x, gamma=g, beta=b)

@function
def rms(x: tensor[f64, "M", "N"], g: tensor[f64, "N"]):
    return op.rmsnorm(x, gamma=g)
"""


def _check_norms(p) -> None:
    rng = np.random.default_rng(29)
    x = 1e6 + 1e3 * rng.standard_normal((4, 64))
    g, b = rng.standard_normal(64), rng.standard_normal(64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    eps_ln, eps_rms = float(np.float32(1e-5)), float(np.float32(1e-6))   # eps is an f32 attribute
    for got, want in ((p.ln(x, g, b), (x - mean) / np.sqrt(var + eps_ln) * g + b),
                      (p.rms(x, g), x / np.sqrt((x * x).mean(-1, keepdims=True) + eps_rms) * g)):
        assert got.dtype == np.float64
        assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max(), np.abs(got - want).max()


def test_f64_norms_on_the_cpu():
    _check_norms(executor.load(compiler.compile_source(NORM_SOURCE, "f64_norms.py").image))


def test_f64_norms_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    _check_norms(executor.load(compiler.compile_source(NORM_SOURCE, "f64_norms.py",
                                                       CompileOptions(target="spirv")).image, opencl))
