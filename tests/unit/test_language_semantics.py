"""Issue 13, item 16: Python's meaning for mixed int/float arithmetic in kernels, numpy's binding of axes
(positional or keyword) for the ops that take one, and what the reference interpreter runs (tile programs'
in-place outputs) or refuses by name (SIMT kernels)."""

import numpy as np
import pytest

import tessera
from tessera import executor, runtime, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.interpret.values import InterpreterError

RNG = np.random.default_rng(16)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


KERNEL = """
from tessera import kernel, launch, tensor

@kernel
def k(X: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = {expr}
"""


@pytest.mark.parametrize("expr, want", [
    ("X[i] + i * 0.5", lambda X, i: X + i * 0.5),
    ("X[i] + 0.5 * i", lambda X, i: X + 0.5 * i),
    ("X[i] - i / 4 + (i // 2) * 0.25", lambda X, i: X - i / 4 + (i // 2) * 0.25),
    ("X[i] * i", lambda X, i: X * i),
    ("X[i] + (i + 1.5)", lambda X, i: X + (i + 1.5)),
])
def test_an_index_meets_a_float_as_python_says(expr, want):
    mod = runtime.load(tessera.compile(KERNEL.format(expr=expr), "k.py"))
    X, Out = f32(70), np.zeros(70, np.float32)
    mod.kernel("k")(X, Out, grid=(3, 1, 1), block=(32, 1, 1))
    np.testing.assert_allclose(Out, want(X.astype(np.float64), np.arange(70)), rtol=1e-6, atol=1e-5)


def test_a_float_is_still_no_index():
    with pytest.raises(CompileError, match="float literal 1.5 used where index is expected"):
        tessera.compile(KERNEL.format(expr="X[1.5]"), "k.py")
    with pytest.raises(CompileError, match="needs an explicit conversion to index"):
        tessera.compile(KERNEL.format(expr="X[i * 0.5]"), "k.py")


FUNCTION = """
from tessera import function, op, tensor, f32

@function
def f(X: tensor[f32, "A", "B", "C"], b: tensor[f32, "B"]):
    return {expr}
"""


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("expr, want", [
    ("op.softmax(X, -1)", lambda X, b: softmax(X, -1)),
    ("op.softmax(X, axis=2)", lambda X, b: softmax(X, 2)),
    ("op.sum(X, 2)", lambda X, b: X.sum(2)),
    ("op.sum(X, -1, keepdims=True)", lambda X, b: X.sum(-1, keepdims=True)),
    ("op.max(X, (1, 2))", lambda X, b: X.max((1, 2))),
    ("op.mean(X, axis=-1)", lambda X, b: X.mean(-1)),
    ("op.transpose(X, (0, 2, 1))", lambda X, b: X.transpose(0, 2, 1)),
    ("op.transpose(X, axes=(0, -1, -2))", lambda X, b: X.transpose(0, 2, 1)),
    ("op.bias_add(X, b, 1)", lambda X, b: X + b[None, :, None]),
    ("op.bias_add(X, b, axis=-2)", lambda X, b: X + b[None, :, None]),
])
def test_axes_bind_as_numpy_binds_them(expr, want):
    src = FUNCTION.format(expr=expr)
    X, b = f32(2, 3, 5), f32(3)
    np.testing.assert_allclose(executor.load(tessera.compile(src, "f.py")).f(X, b), want(X, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tessera_frontend_compile(src, {"filename": "f.py"}).interpret("f", X, b), want(X, b),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("expr, message", [
    ("op.sum(X, 1, axis=1)", "op.sum got axis both by position and by keyword"),
    ("op.sum(X, 1, True)", "op.sum takes 1 tensor argument(s) and axis, got 3 positional arguments"),
    ("op.softmax(X, 3)", "op.softmax: axis 3 is out of range for a rank-3 tensor"),
    ("op.softmax(X, dim=1)", "unexpected keyword argument(s) dim (accepted: axis)"),
    ("op.transpose(X, 2)", "op.transpose's axes are a tuple of axis numbers, not 2"),
    ("op.transpose(X, perm=(0, 1, 2), axes=(0, 1, 2))", "op.transpose got both perm= and axes="),
])
def test_bad_axes_are_located_errors(expr, message):
    with pytest.raises(CompileError) as e:
        tessera_frontend_compile(FUNCTION.format(expr=expr), {"filename": "f.py"})
    assert message in e.value.message and e.value.line == 6, str(e.value)


TILE = """
from tessera import kernel, tile

@kernel
def fused(X, W, b, Out):
    Out[:] = tile.relu(tile.dot(X, W) + b)
"""


def test_the_interpreter_writes_a_tile_programs_outputs_in_place():
    X, W, b = f32(16, 8), f32(8, 4), f32(1, 4)
    Out = np.zeros((16, 4), np.float32)
    got = tessera_frontend_compile(TILE, {"filename": "t.py"}).interpret("fused", X, W, b, Out)
    want = np.maximum(X @ W + b, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(Out, want, rtol=1e-5, atol=1e-6)


def test_the_interpreter_names_a_simt_kernel_it_does_not_run():
    m = tessera_frontend_compile(KERNEL.format(expr="X[i]"), {"filename": "k.py"})
    with pytest.raises(InterpreterError, match="'k' is a SIMT kernel"):
        m.interpret("k", f32(4), np.zeros(4, np.float32))
