"""op.log_softmax (the op, its row kernel on every target, its derivatives), a cross-entropy loss built on it,
and the prod reduction's derivative at zeros (issue 15).

The per-op finite-difference and jvp/vjp duality checks of both rules run with the others in
test_autodiff.py (CASES); here: the forward's numerics, the compiled kernels, the loss's gradient against its
closed form softmax − onehot, and prod's gradient where the input has zeros.
"""

import numpy as np
import pytest

from tessera import compiler, executor, image, tessera_frontend_compile
from tessera.backends.ptx import ptxas
from tessera.options import CompileOptions
from tessera.numerics.rounding import round_to

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

# f32 and bf16: what every target computes (the GPU targets have no f64 exp or log)
ROWS = '''
from tessera import bf16, f32, f64, function, op, tensor

@function
def rows(X: tensor[f32, "M", "N"]):
    return op.log_softmax(X)

@function
def narrow(X: tensor[bf16, "M", "N"]):
    return op.log_softmax(X)
'''
# f64 on the CPU, and an axis other than the last, which generated row kernels do not normalize (softmax's
# neither): the interpreter's
FORWARD = ROWS + '''
@function
def rows64(X: tensor[f64, "M", "N"]):
    return op.log_softmax(X, axis=-1)

@function
def columns(X: tensor[f64, "M", "N"]):
    return op.log_softmax(X, 0)
'''
CPU = FORWARD.split("@function\ndef columns")[0]


def _reference(x, axis=-1):
    x = np.asarray(x, np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@pytest.fixture(scope="module")
def forward():
    return tessera_frontend_compile(FORWARD, {"filename": "forward.py"})


def test_interpreter_is_stable_where_log_of_softmax_is_not(forward):
    """x − max − log Σ exp(x − max): a row spread over 2000 keeps finite logs (log(softmax) gives -inf where
    the probability underflows), and a shift of the row does not change the result."""
    x = np.array([[0.0, -1000.0, 1000.0, 3.0], [1.0, 2.0, 3.0, 4.0]])
    y = forward.interpret("rows64", x)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, _reference(x), rtol=1e-15, atol=0)
    np.testing.assert_allclose(y[0], [-1000.0, -2000.0, 0.0, -997.0], rtol=1e-15)
    np.testing.assert_allclose(forward.interpret("rows64", x + 1e3), y, rtol=0, atol=1e-12)
    np.testing.assert_allclose(forward.interpret("columns", x), _reference(x, 0), rtol=1e-15, atol=1e-15)


def test_cpu_row_kernel_matches_the_interpreter(forward):
    """One image, symbolic extents, at two sizes (one row wider than a warp, one narrower); f32 with values up
    to ~90: the CPU's vectorized exp/log against the interpreter within 2e-6 · (1 + |y|). bf16 storage is
    computed in f32 and rounded once (rtol 1e-2)."""
    prog = executor.load(compiler.compile_source(CPU, "forward.py").image)
    rng = np.random.default_rng(0)
    for m, n in [(3, 5), (7, 130)]:
        x = (rng.standard_normal((m, n)) * 30).astype(np.float32)
        want = forward.interpret("rows", x)
        got = prog.function("rows")(x)
        assert got.dtype == np.float32 and got.shape == (m, n)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * (1 + np.abs(want).max()))
        np.testing.assert_allclose(prog.function("rows64")(x.astype(np.float64)), _reference(x), rtol=1e-12,
                                   atol=1e-12)
        xb = round_to(x, "bf16").astype(np.float32)   # bf16 values, passed as f32 (docs/runtime.md)
        np.testing.assert_allclose(np.asarray(prog.function("narrow")(xb), np.float32), _reference(xb),
                                   rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("target, arch", [("amdgpu", "gfx942"), ("spirv", None),
                                          pytest.param("ptx", "sm_80", marks=pytest.mark.skipif(
                                              ptxas.find() is None, reason="ptxas is not installed")),
                                          pytest.param("ptx", "sm_90a", marks=pytest.mark.skipif(
                                              ptxas.find() is None, reason="ptxas is not installed"))])
def test_every_target_compiles_one_row_kernel(target, arch):
    """log_softmax is one row kernel per call on every target, as softmax is (no separate max, exp, sum and log
    kernels); the GPU runs are in tests/gpu/test_autodiff_gpu.py."""
    options = CompileOptions(target=target, arch=arch) if arch else CompileOptions(target=target)
    result = compiler.compile_source(ROWS, "forward.py", options)
    kernels = sorted(k.name for k in image.read_image(result.image).kernels)
    assert kernels == ["narrow__row0", "rows__row0"]


# f32: compiled for the CPU and for SPIR-V (run on OpenCL below)
XENT32 = '''
from tessera import f32, f64, function, grad, op, tensor

@function
def xent32(Z: tensor[f32, "B", "C"], onehot: tensor[f32, "B", "C"]):
    return -op.mean(op.sum(onehot * op.log_softmax(Z), axis=-1))

dxent32 = grad(xent32)
'''
CROSS_ENTROPY = XENT32 + '''
@function
def xent(Z: tensor[f64, "B", "C"], onehot: tensor[f64, "B", "C"]):
    return -op.mean(op.sum(onehot * op.log_softmax(Z), axis=-1))

dxent = grad(xent)
'''


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    """d/dZ of the mean cross-entropy −mean_b Σ_c onehot·log_softmax(Z) is (softmax(Z) − onehot) / B: f64
    through the interpreter to 1e-14, f32 in the CPU image to 1e-6 (entries ~1/B), at two sizes of one image,
    including logits of ±60 whose softmax underflows in f32."""
    m = tessera_frontend_compile(CROSS_ENTROPY, {"filename": "xent.py"})
    prog = executor.load(compiler.compile_source(XENT32, "xent.py").image)
    rng = np.random.default_rng(7)
    for b, c in [(4, 10), (16, 40)]:
        z = rng.standard_normal((b, c)) * 3
        z[0, :2] = [60.0, -60.0]
        onehot = np.eye(c)[rng.integers(0, c, b)]
        want = (_softmax(z) - onehot) / b
        np.testing.assert_allclose(m.interpret("dxent", z, onehot), want, rtol=0, atol=1e-14)
        loss = -np.mean(np.sum(onehot * _reference(z), axis=-1))
        np.testing.assert_allclose(m.interpret("xent", z, onehot), loss, rtol=1e-14)
        got = prog.function("dxent32")(z.astype(np.float32), onehot.astype(np.float32))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


PROD = '''
from tessera import f32, f64, function, jvp, op, tensor, vjp

@function
def rows(X: tensor[f64, 3, 4]):
    return op.prod(X, 1)

@function
def cols(X: tensor[f64, 3, 4]):
    return op.prod(X, axis=0, keepdims=True)

@function
def whole(X: tensor[f64, 3, 4]):
    return op.prod(X)

''' + "".join(f"vjp_{n} = vjp({n})\njvp_{n} = jvp({n})\n" for n in ("rows", "cols", "whole"))
# what the CPU compiles: a reduction of the last axis (generated row kernels reduce trailing axes)
PROD32 = '''
from tessera import f32, function, op, tensor, vjp

@function
def rows32(X: tensor[f32, "M", "N"]):
    return op.prod(X, 1)

vjp_rows32 = vjp(rows32)
'''


def _others(x, axes):
    """The product of the other elements of each element's slice, by deleting it: the definition."""
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape):
        mask = np.ones(x.shape, bool)
        # the slice through idx along `axes`, idx itself left out
        sl = tuple(slice(None) if a in axes else idx[a] for a in range(x.ndim))
        mask[idx] = False
        out[idx] = np.prod(x[sl][mask[sl]])
    return out


def test_prod_gradient_at_zeros():
    """Rows with no zero, one zero and two zeros (and columns likewise): the cotangent of x_i is the product of
    the other elements, exactly, with no 0/0 (no NaN): p/x_i, p at a lone zero and 0 beside it, 0 for two or
    more zeros. jvp and vjp stay transposes there."""
    m = tessera_frontend_compile(PROD, {"filename": "prod.py"})
    x = np.array([[1.5, -2.0, 3.0, 0.5], [0.0, 2.0, -3.0, 4.0], [0.0, 2.0, 0.0, 4.0]])
    rng = np.random.default_rng(1)
    for name, axes in [("rows", (1,)), ("cols", (0,)), ("whole", (0, 1))]:
        y = np.asarray(m.interpret(name, x))
        v = rng.standard_normal(y.shape)
        ct = m.interpret(f"vjp_{name}", x, v)[1]
        assert np.all(np.isfinite(ct))
        want = _others(x, axes) * (v[:, None] if name == "rows" else v)   # v broadcast over the slice
        np.testing.assert_allclose(ct, want, rtol=1e-15, atol=0)
        u = rng.standard_normal(x.shape)
        tangent = m.interpret(f"jvp_{name}", x, u)[1]
        assert float(np.sum(v * tangent)) == pytest.approx(float(np.sum(ct * u)), rel=1e-14)
    np.testing.assert_array_equal(m.interpret("vjp_rows", x, np.ones(3))[1],
                                  [[-3.0, 2.25, -1.5, -9.0], [-24.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])


def test_prod_gradient_compiled_matches_the_interpreter():
    """The same rule in the CPU image (f32, symbolic extents, two sizes), zeros included."""
    m = tessera_frontend_compile(PROD32, {"filename": "prod32.py"})
    prog = executor.load(compiler.compile_source(PROD32, "prod32.py").image)
    rng = np.random.default_rng(2)
    for rows, cols in [(3, 4), (6, 37)]:
        x = (rng.uniform(0.8, 1.25, (rows, cols)) * rng.choice([-1, 1], (rows, cols))).astype(np.float32)
        x[1, 3] = 0.0
        x[2, [0, 5 % cols]] = 0.0
        v = rng.standard_normal(rows).astype(np.float32)
        want = m.interpret("vjp_rows32", x, v)
        got = prog.function("vjp_rows32")(x, v)
        for w, c in zip(want, got):
            np.testing.assert_allclose(c, w, rtol=1e-5, atol=1e-6)
        assert np.all(got[1][2] == 0) and np.count_nonzero(got[1][1]) == 1


def test_spirv_on_opencl(opencl):  # noqa: F811
    """The SPIR-V row kernel and the cross-entropy gradient run on OpenCL (a GPU target's kernels, run here):
    against numpy in f64, within f32 rounding of the kernel's exp and log (forward: 2e-6 · (1 + |y|);
    gradient entries ~1/B: 1e-6)."""
    rows = executor.load(compiler.compile_source(ROWS, "forward.py", CompileOptions(target="spirv")).image, opencl)
    xent = executor.load(compiler.compile_source(XENT32, "xent.py", CompileOptions(target="spirv")).image, opencl)
    rng = np.random.default_rng(4)
    for b, c in [(5, 7), (9, 300)]:
        z = (rng.standard_normal((b, c)) * 20).astype(np.float32)
        want = _reference(z)
        np.testing.assert_allclose(rows.rows(z), want, rtol=0, atol=2e-6 * (1 + np.abs(want).max()))
        onehot = np.eye(c, dtype=np.float32)[rng.integers(0, c, b)]
        np.testing.assert_allclose(xent.dxent32(z, onehot), (_softmax(z.astype(np.float64)) - onehot) / b,
                                   rtol=0, atol=1e-6)
