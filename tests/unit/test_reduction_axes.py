"""Reductions and normalizations over any axes on every target (issue 18 item 1): sums, maxima, minima and
means over leading, middle and several non-adjacent axes, and softmax / log_softmax along an axis other than
the last (passes/decompose.softmax_axes: a [P, N, Q] view with its last two axes swapped), their derivative
too. The CPU and the OpenCL CPU runtime (SPIR-V) run them against the interpreter; ptx and AMDGPU compile."""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SOURCE = """
from tessera import vjp


@function
def leading(X: tensor[f32, "A", "B", "C"]):
    return op.sum(X, axis=0), op.max(X, axis=1), op.mean(X, axis=(0, 1), keepdims=True)


@function
def apart(X: tensor[f32, "A", "B", "C", "D"]):
    return op.min(X, axis=(1, 3)), op.sum(X, axis=(0, 2))


@function
def soft0(X: tensor[f32, 6, 5, 7]):
    return op.softmax(X, axis=0)


@function
def logsoft1(X: tensor[f32, "A", "B", "C"]):
    return op.log_softmax(X, axis=1)


@function
def soft_loss(X: tensor[f32, "A", "B"], W: tensor[f32, "A", "B"]):
    return op.sum(op.softmax(X, axis=0) * W)


vjp_soft_loss = vjp(soft_loss)
"""

RNG = np.random.default_rng(5)
ARGS = {"leading": lambda: (RNG.standard_normal((5, 6, 7)).astype(np.float32),),
        "apart": lambda: (RNG.standard_normal((3, 4, 5, 6)).astype(np.float32),),
        "soft0": lambda: (RNG.standard_normal((6, 5, 7)).astype(np.float32) * 3,),
        "logsoft1": lambda: (RNG.standard_normal((4, 9, 3)).astype(np.float32) * 3,),
        "vjp_soft_loss": lambda: tuple(RNG.standard_normal((7, 5)).astype(np.float32) for _ in range(2)) +
        (np.float32(1.0),)}


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "axes.py"})


def programs(target, context=None):
    return executor.load(compiler.compile_source(SOURCE, "axes.py", CompileOptions(target=target)).image, context)


@pytest.fixture(scope="module")
def cpu():
    return programs("cpu")


@pytest.fixture(scope="module")
def spirv(opencl):  # noqa: F811
    return programs("spirv", opencl)


@pytest.mark.parametrize("target", ["cpu", "spirv"])
@pytest.mark.parametrize("name", list(ARGS))
def test_matches_the_interpreter(request, reference, target, name):
    prog = request.getfixturevalue(target)
    args = ARGS[name]()
    got, want = getattr(prog, name)(*args), reference.interpret(name, *args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


def test_softmax_along_axis_0_sums_to_one_down_the_columns(cpu):
    y = cpu.soft0(*ARGS["soft0"]())
    np.testing.assert_allclose(y.sum(axis=0), 1.0, rtol=1e-5)


@pytest.mark.parametrize("target, arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942"),
                                          ("amdgpu", "gfx1100")])
def test_gpu_targets_compile(target, arch):
    result = compiler.compile_source(SOURCE, "axes.py", CompileOptions(target=target, arch=arch))
    kinds = [s["kernel"] for s in result.metadata["plans"]["soft0"]["steps"] if "kernel" in s]   # less views
    assert kinds == ["soft0__layout1", "soft0__row2", "soft0__layout3"], kinds
