"""Dropout on a GPU target, run here: SPIR-V kernels through Intel's OpenCL CPU runtime (test_opencl.py's
fixture: skips without it, fails in CI where the test extra installs it). The SPIR-V kernels draw the mask
from the same generated kernel source and the same Philox lowering (passes/simt_to_warps.philox_uniform,
lowered by passes/simt_to_gpu.py) as the PTX and AMDGPU ones, so this is their numerics check without a GPU:
the results must equal the interpreter's bit for bit (f32: the mask, and x / (1 - p) correctly rounded on
both sides), and the gradient through dropout must drop exactly the interpreter's elements."""

import importlib.util
import pathlib

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.numerics.philox import uniforms
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

# the GPU tests' dropout program (tests/gpu/kernels.py): the same source, here on OpenCL
_spec = importlib.util.spec_from_file_location("gpu_kernels", pathlib.Path(__file__).parents[1] / "gpu" / "kernels.py")
gpu_kernels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_kernels)
SOURCE, SEED, OFFSET = gpu_kernels.AUTODIFF_DROPOUT, gpu_kernels.DROPOUT_SEED, gpu_kernels.DROPOUT_OFFSET


@pytest.fixture(scope="module")
def programs(opencl):  # noqa: F811
    """(the SPIR-V image's functions on OpenCL, the interpreter's module)."""
    image = compiler.compile_source(SOURCE, "drop.py", CompileOptions(target="spirv")).image
    return executor.load(image, opencl), tessera_frontend_compile(SOURCE, {"filename": "drop.py"})


def test_dropout_and_its_replay_equal_the_interpreter_bit_for_bit(programs):
    ocl, interp = programs
    rng = np.random.default_rng(15)
    X = rng.standard_normal((3, 37, 129)).astype(np.float32)
    got, want = ocl.drop(X), interp.interpret("drop", X)
    np.testing.assert_array_equal(got, want)
    keep = uniforms(X.size, SEED, OFFSET).reshape(X.shape) >= 0.3
    np.testing.assert_array_equal(got, np.where(keep, X * 2 / np.float32(0.7), 0).astype(np.float32) - 1)
    assert 0.25 < 1 - keep.mean() < 0.35
    D = rng.standard_normal(X.shape).astype(np.float32)
    for g, w in zip(ocl.vjp_drop(X, D), interp.interpret("vjp_drop", X, D)):
        np.testing.assert_array_equal(g, w)
    S = rng.standard_normal((45, 300)).astype(np.float32)
    got, want = ocl.probs(S), interp.interpret("probs", S)
    np.testing.assert_array_equal(got == 0, want == 0)   # the mask, exactly
    # the kept probabilities: the kernel's exp and its butterfly sum differ from numpy's by a few ulps
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)


def test_gradient_through_dropout_matches_the_interpreter(programs):
    ocl, interp = programs
    rng = np.random.default_rng(16)
    X, V = rng.standard_normal((2, 64, 48)).astype(np.float32)
    got, want = np.asarray(ocl.dloss(X, V)), np.asarray(interp.interpret("dloss", X, V))
    dropped = uniforms(X.size, 11, 5).reshape(X.shape) < 0.25
    assert 0.2 < dropped.mean() < 0.3 and np.all(want[dropped] == 0) and np.all(got[dropped] == 0)
    # (kept elements may be 0 too where tanh saturates to ±1 in one of them)
    # f32 both sides; the device's tanh against numpy's (a few ulps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
