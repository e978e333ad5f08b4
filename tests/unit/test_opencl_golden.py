"""Golden tests (portability guide §12): the same Graph IR programs, compiled under numerics.profile("strict")
for the CPU and for SPIR-V, run on the CPU backend and through OpenCL, agree bit for bit (docs/portability.md,
"Numerics profiles" and "Golden tests"):

- elementwise arithmetic (+, −, ×, constants), row sums and maxima: the generated kernels are one source,
  reduce in one order (a subgroup's butterfly), and strict forbids the driver to contract;
- exp, erf, tanh, log, sqrt and division, alone and inside softmax, layernorm and gelu: strict computes them
  in f64 and rounds once (passes/strict_math.py), the correctly rounded f32 result, as numpy's f64 functions
  rounded to f32 give it;
- a GEMM, with and without an epilogue: both sides run the one-product-one-sum kernel, k ascending
  (the sequential f32 loop), where the CPU's fast profile runs its blocked FMA GEMM.

Each program also gives the same bits on a second run on each backend (strict is deterministic).
"""

import math

import numpy as np
import pytest

from tessera import compiler, executor, numerics
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SOURCE = """
@function
def axpy(X: tensor[f32, "N", "D"], Y: tensor[f32, "N", "D"]):
    return X * 2.5 + Y - 1.0

@function
def rows(X: tensor[f32, "N", "D"]):
    return op.sum(X, axis=-1), op.max(X, axis=-1)

@function
def gemm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return op.matmul(A, B)

@function
def mlp(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.relu(op.matmul(A, B) + b)

@function
def norms(X: tensor[f32, "N", "D"], g: tensor[f32, "D"], bt: tensor[f32, "D"]):
    return op.softmax(X), op.layernorm(X, gamma=g, beta=bt), op.gelu(X)

@function
def maths(X: tensor[f32, "N", "D"], Y: tensor[f32, "N", "D"]):
    return op.exp(X), op.erf(X), X / Y, op.tanh(X), op.log(op.abs(X)), op.sqrt(op.abs(X))
"""

RNG = np.random.default_rng(11)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.fixture(scope="module")
def programs(opencl):  # noqa: F811
    with numerics.profile("strict"):
        cpu_options, spirv_options = CompileOptions(target="cpu"), CompileOptions(target="spirv")
    assert cpu_options.numerics == spirv_options.numerics == "strict"
    cpu = executor.load(compiler.compile_source(SOURCE, "golden.py", cpu_options).image)
    ocl = executor.load(compiler.compile_source(SOURCE, "golden.py", spirv_options).image, opencl)
    return cpu, ocl


def run_both(programs, name, *args):
    """The results of `name` on each backend, each checked to repeat bit for bit."""
    out = []
    for prog in programs:
        first, again = getattr(prog, name)(*args), getattr(prog, name)(*args)
        first, again = (first, again) if isinstance(first, tuple) else ((first,), (again,))
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} is not deterministic")
        out.append(first)
    return out


def test_strict_modules_forbid_contraction(tmp_path):
    from tessera import image
    from tessera.backends.spirv import compiler as spirv_compiler
    with numerics.profile("strict"):
        strict = compiler.compile_source(SOURCE, "golden.py", CompileOptions(target="spirv"))
    default = compiler.compile_source(SOURCE, "golden.py", CompileOptions(target="spirv", numerics="default"))
    words = [np.frombuffer(image.read_image(r.image).section(".tessera.code.spirv"), "<u4")
             for r in (strict, default)]

    def contraction_off(w):  # OpExecutionMode (3 words, opcode 16) with mode ContractionOff (31)
        return sum(1 for i in range(5, len(w) - 2) if w[i] == (3 << 16 | 16) and w[i + 2] == 31)
    kernels = len(image.read_image(strict.image).kernels)
    assert contraction_off(words[0]) == kernels > 0 and contraction_off(words[1]) == 0
    assert spirv_compiler.CONTRACTION_OFF == 31


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (37, 515)])
def test_elementwise_and_row_reductions_are_bitwise_equal(programs, shape):
    X, Y = f32(*shape, scale=3), f32(*shape)
    (cpu,), (ocl,) = run_both(programs, "axpy", X, Y)
    np.testing.assert_array_equal(cpu, ocl)
    np.testing.assert_allclose(cpu, X.astype(np.float64) * 2.5 + Y - 1.0, rtol=1e-6, atol=1e-6)
    (cs, cm), (os_, om) = run_both(programs, "rows", X)
    np.testing.assert_array_equal(cs, os_)
    np.testing.assert_array_equal(cm, om)
    np.testing.assert_array_equal(cm, X.max(axis=-1))


def sequential_gemm(A, B):
    """C = A @ B in f32, k ascending, each product and each sum rounded: the SPIR-V kernel's arithmetic."""
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        acc = acc + A[:, k:k + 1] * B[k:k + 1, :]
    return acc


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (67, 129, 45), (128, 1300, 96)])
def test_gemm(programs, m, k, n):
    A, B = f32(m, k), f32(k, n)
    (cpu,), (ocl,) = run_both(programs, "gemm", A, B)
    np.testing.assert_array_equal(ocl, sequential_gemm(A, B))
    np.testing.assert_array_equal(cpu, ocl)
    bound = 2 * k * 2.0 ** -24 * (np.abs(A).astype(np.float64) @ np.abs(B))
    assert np.all(np.abs(ocl - A.astype(np.float64) @ B) <= bound + 1e-30)


def test_gemm_with_epilogue(programs):
    A, B, b = f32(50, 70), f32(70, 33), f32(33)
    (cpu,), (ocl,) = run_both(programs, "mlp", A, B, b)
    np.testing.assert_array_equal(ocl, np.maximum(sequential_gemm(A, B) + b, 0))
    np.testing.assert_array_equal(cpu, ocl)


@pytest.mark.parametrize("shape", [(1, 1), (61, 517)])
def test_functions_are_correctly_rounded_on_both(programs, shape):
    X, Y = f32(*shape, scale=4), f32(*shape)
    cpu, ocl = run_both(programs, "maths", X, Y)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    erf = np.vectorize(math.erf)
    exact = [np.exp(x), erf(x), x / y, np.tanh(x), np.log(np.abs(x)), np.sqrt(np.abs(x))]
    for name, c, o, e in zip(["exp", "erf", "div", "tanh", "log", "sqrt"], cpu, ocl, exact):
        np.testing.assert_array_equal(c, o, err_msg=name)
        np.testing.assert_array_equal(c, e.astype(np.float32), err_msg=name)


@pytest.mark.parametrize("shape", [(1, 1), (5, 33), (37, 515)])
def test_softmax_layernorm_gelu(programs, shape):
    X, g, bt = f32(*shape, scale=3), f32(shape[-1]), f32(shape[-1])
    cpu, ocl = run_both(programs, "norms", X, g, bt)
    for name, c, o in zip(["softmax", "layernorm", "gelu"], cpu, ocl):
        np.testing.assert_array_equal(c, o, err_msg=name)
    x = X.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(ocl[0], e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=2e-7)
    mu, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    np.testing.assert_allclose(ocl[1], (x - mu) / np.sqrt(var + 1e-5) * g + bt, rtol=1e-4, atol=2e-5)
