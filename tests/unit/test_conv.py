"""op.conv1d and op.conv2d (issue 18 item 2; docs/language.md, "Convolution"): PyTorch's cross-correlation with
stride, padding (ints, (low, high) pairs, "same", "valid") and dilation, input [N, C, *S], weight [O, C, *K].

The interpreter's reference equals a direct loop over the taps written here from the definition; the compiled
programs (im2col, the target's GEMM with the bias and activation in its epilogue, a transpose:
passes/convolution.py) equal the interpreter on the CPU and on the OpenCL CPU runtime (SPIR-V), and compile
for PTX and AMDGPU; so do their gradients (reverse and forward mode). What a conv cannot mean is refused at
the user's line."""

import json

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.image.reader import read_image
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(1818)

SOURCE = """
@function
def strided(X: tensor[f32, "N", 3, 10, 9], W: tensor[f32, 4, 3, 3, 2]):
    return op.conv2d(X, W, stride=(2, 1), padding=((1, 2), 0), dilation=(1, 2))

@function
def same1d(X: tensor[f32, "N", 3, 11], W: tensor[f32, 5, 3, 4]):
    return op.conv1d(X, W, padding="same", dilation=2)

@function
def valid1d(X: tensor[f32, "N", 6, 20], W: tensor[f32, 7, 6, 5]):
    return op.conv1d(X, W, stride=3, padding="valid")

@function
def block(X: tensor[f32, "N", 8, 12, 12], W: tensor[f32, 16, 8, 3, 3], b: tensor[f32, 16]):
    return op.relu(op.bias_add(op.conv2d(X, W, padding=1), b, axis=1))

@function
def half(X: tensor[bf16, 2, 16, 9, 9], W: tensor[bf16, 32, 16, 3, 3]):
    return op.conv2d(X, W, stride=2, padding=1)
"""

SHAPES = {"strided": [(2, 3, 10, 9), (4, 3, 3, 2)], "same1d": [(3, 3, 11), (5, 3, 4)],
          "valid1d": [(2, 6, 20), (7, 6, 5)], "block": [(2, 8, 12, 12), (16, 8, 3, 3), (16,)],
          "half": [(2, 16, 9, 9), (32, 16, 3, 3)]}


def direct(x, w, stride, pads, dilation):
    """The definition, one tap at a time: out[n, o, i..] = Σ_c,j x_padded[n, c, i·stride + j·dilation] w[o, c, j]."""
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(pads))
    spatial = x.ndim - 2
    out = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(x.shape[2:], w.shape[2:], stride, dilation)]
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for taps in np.ndindex(*w.shape[2:]):
        window = tuple(slice(j * d, j * d + (o - 1) * s + 1, s) for j, d, o, s in zip(taps, dilation, out, stride))
        y += np.einsum("nc...,oc->no...", x[(slice(None), slice(None), *window)],
                       w[(slice(None), slice(None), *taps)].astype(np.float64))
    assert y.ndim == spatial + 2
    return y


def args(name):
    return [RNG.standard_normal(s).astype(np.float32) for s in SHAPES[name]]


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "conv.py"})


@pytest.fixture(scope="module")
def cpu():
    return executor.load(compiler.compile_source(SOURCE, "conv.py").image)


def test_the_interpreter_is_the_definition(reference):
    """stride, (low, high) padding and dilation per axis; 'same' with an even kernel pads the odd zero after,
    as PyTorch does; 'valid' none; the bias and relu after the conv."""
    cases = {"strided": ((2, 1), [(1, 2), (0, 0)], (1, 2)), "same1d": ((1,), [(3, 3)], (2,)),
             "valid1d": ((3,), [(0, 0)], (1,)), "block": ((1, 1), [(1, 1), (1, 1)], (1, 1))}
    for name, (stride, pads, dilation) in cases.items():
        a = args(name)
        want = direct(a[0], a[1], stride, pads, dilation)
        if name == "block":
            want = np.maximum(want + a[2].reshape(1, -1, 1, 1), 0)
        got = reference.interpret(name, *a)
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5, err_msg=name)
    assert reference.interpret("same1d", *args("same1d")).shape == (3, 5, 11)


@pytest.mark.parametrize("name", ["strided", "same1d", "valid1d", "block"])
def test_the_cpu_matches_the_interpreter(cpu, reference, name):
    a = args(name)
    np.testing.assert_allclose(cpu.function(name)(*a), reference.interpret(name, *a), rtol=1e-5, atol=1e-5)


def test_bf16_on_the_cpu(cpu, reference):
    """bf16 operands, f32 accumulation, one rounding to bf16: within an ulp of bf16 of the interpreter."""
    a = args("half")
    got = np.asarray(cpu.function("half")(*a)).astype(np.float64)
    want = reference.interpret("half", *a)
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-2)


def test_the_bias_and_activation_are_the_gemm_epilogue():
    """The conv's bias over the channels and its relu run in the GEMM's epilogue (rows = output positions,
    columns = channels): three kernels (im2col, the GEMM, the transpose to [N, O, H, W])."""
    steps = json.loads(read_image(compiler.compile_source(SOURCE, "conv.py").image).plan)["functions"]["block"]
    kernels = [s["kernel"].split("__")[1].rstrip("0123456789") for s in steps["steps"] if s.get("kernel")]
    assert kernels == ["im2col", "gemm", "layout"]


def test_they_run_on_the_opencl_cpu_runtime(opencl, reference):  # noqa: F811
    mod = executor.load(compiler.compile_source(SOURCE, "conv.py", CompileOptions(target="spirv")).image, opencl)
    for name in ("strided", "same1d", "valid1d", "block"):
        a = args(name)
        np.testing.assert_allclose(mod.function(name)(*a), reference.interpret(name, *a), rtol=1e-5, atol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("target, arch", [("ptx", "sm_90a"), ("ptx", "sm_80"), ("amdgpu", "gfx942"),
                                          ("amdgpu", "gfx1100"), ("spirv", None)])
def test_every_target_compiles_them(target, arch):
    compiler.compile_source(SOURCE, "conv.py", CompileOptions(target=target, **({"arch": arch} if arch else {})))


@pytest.mark.parametrize("line, message", [
    ("op.conv2d(X, h)", "op.conv2d takes an input and a weight of one floating-point dtype"),
    ("op.conv2d(X, W1)", "op.conv2d takes an input [N, C, H, W] and a weight [O, C, KH, KW], got shapes"),
    ("op.conv1d(Y, W1, padding=1.5)", "op.conv1d's padding 1.5: each axis takes an int >= 0 or a (low, high) pair"),
    ("op.conv2d(X, W, stride=0)", "op.conv2d's stride must be positive ints, got 0"),
    ("op.conv2d(X, W, dilation=(1, 2, 3))", "op.conv2d's dilation takes 2 value(s) (one per spatial axis), got 3"),
    ("op.conv2d(X, W, padding='full')", "op.conv2d's padding is an int, a tuple, 'same' or 'valid', not 'full'"),
    ("op.conv2d(X, W, stride=2, padding='same')", "op.conv2d's padding='same' needs stride 1, got stride (2, 2)"),
    ("op.conv2d(X, W, dilation=4)", "op.conv2d: the window (kernel (3, 3), dilation (4, 4)) does not fit the padded"),
    ("op.conv2d(X, V)", "op.conv2d's input channels and the weight's"),
    ("op.conv2d(Z, W)", "op.conv2d needs static channel, spatial and kernel extents"),
    # a symbolic count of output channels reached the plan as an extent of -2^63 (a PlanError traceback; found by
    # test_frontend_fuzz mutating test_conv.py's op.conv1d(X, W) into op.conv1d(X, X))
    ("op.conv1d(Y, O)", "op.conv1d needs static channel, spatial and kernel extents"),
])
def test_refusals_at_the_users_line(line, message):
    src = ("@function\ndef f(X: tensor[f32, 2, 4, 6, 6], W: tensor[f32, 8, 4, 3, 3], V: tensor[f32, 8, 5, 3, 3],\n"
           "      W1: tensor[f32, 8, 4, 3], Y: tensor[f32, 2, 4, 6], Z: tensor[f32, 2, 4, \"H\", 6],\n"
           f"      h: tensor[bf16, 2, 4, 6, 6], O: tensor[f32, \"O\", 4, 3]):\n    return {line}\n")
    with pytest.raises(CompileError) as e:
        tessera_frontend_compile(src, {"filename": "bad.py"})
    assert message in str(e.value)
    assert "bad.py:5:12:" in str(e.value)


GRADIENTS = """
@function
def loss2d(X: tensor[f32, "N", 3, 9, 8], W: tensor[f32, 4, 3, 3, 2], G: tensor[f32, "N", 4, 5, 6]):
    return op.sum(op.conv2d(X, W, stride=(2, 1), padding=((1, 2), 0), dilation=(1, 2)) * G)

@function
def loss1d(X: tensor[f32, "N", 3, 11], W: tensor[f32, 5, 3, 4], G: tensor[f32, "N", 5, 11]):
    return op.sum(op.conv1d(X, W, padding="same", dilation=2) * G)

d2 = grad(loss2d, argnums=(0, 1))
d1 = grad(loss1d, argnums=(0, 1))
t1 = jvp(loss1d)

@function
def grad2d(X: tensor[f32, "N", 3, 9, 8], W: tensor[f32, 4, 3, 3, 2], G: tensor[f32, "N", 4, 5, 6]):
    return d2(X, W, G)

@function
def grad1d(X: tensor[f32, "N", 3, 11], W: tensor[f32, 5, 3, 4], G: tensor[f32, "N", 5, 11]):
    return d1(X, W, G)

@function
def tangent1d(X: tensor[f32, "N", 3, 11], W: tensor[f32, 5, 3, 4], G: tensor[f32, "N", 5, 11],
              dX: tensor[f32, "N", 3, 11], dW: tensor[f32, 5, 3, 4], dG: tensor[f32, "N", 5, 11]):
    return t1(X, W, G, dX, dW, dG)
"""
GEOMETRY = {"grad2d": ((2, 1), [(1, 2), (0, 0)], (1, 2), [(2, 3, 9, 8), (4, 3, 3, 2), (2, 4, 5, 6)]),
            "grad1d": ((1,), [(3, 3)], (2,), [(2, 3, 11), (5, 3, 4), (2, 5, 11)])}


def linear_gradient(f, at):
    """The gradient of a function linear in its argument: its value at each unit vector."""
    out = np.zeros(at.shape)
    for k in np.ndindex(*at.shape):
        unit = np.zeros(at.shape)
        unit[k] = 1.0
        out[k] = f(unit)
    return out


@pytest.fixture(scope="module")
def gradients():
    return (tessera_frontend_compile(GRADIENTS, {"filename": "grads.py"}),
            executor.load(compiler.compile_source(GRADIENTS, "grads.py").image))


@pytest.mark.parametrize("name", ["grad2d", "grad1d"])
def test_the_gradients_are_the_definition(gradients, name):
    """x̄ = col2im(ȳ₂ w₂) and w̄ = ȳ₂ᵀ im2col(x) (passes/autodiff_conv.py), in the interpreter and compiled on the
    CPU, equal the gradients of the definition (the loss Σ G·conv(x, w) is linear in each)."""
    stride, pads, dilation, shapes = GEOMETRY[name]
    x, w, g = (RNG.standard_normal(s).astype(np.float32) for s in shapes)
    want = (linear_gradient(lambda u: np.sum(g * direct(u, w, stride, pads, dilation)), x),
            linear_gradient(lambda u: np.sum(g * direct(x, u, stride, pads, dilation)), w))
    reference, cpu = gradients
    for got in (reference.interpret(name, x, w, g), cpu.function(name)(x, w, g)):
        for gv, wv in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(gv), wv, rtol=1e-5, atol=1e-4, err_msg=name)


def test_the_tangent_pairs_with_the_gradients(gradients):
    """jvp's tangent conv(ẋ, w) + conv(x, ẇ) (and ġ's term) is ⟨x̄, ẋ⟩ + ⟨w̄, ẇ⟩ + ⟨conv(x, w), ġ⟩."""
    reference, cpu = gradients
    stride, pads, dilation, shapes = GEOMETRY["grad1d"]
    x, w, g, dx, dw, dg = (RNG.standard_normal(s).astype(np.float32) for s in shapes * 2)
    gx, gw = reference.interpret("grad1d", x, w, g)
    want = np.sum(gx * dx) + np.sum(gw * dw) + np.sum(direct(x, w, stride, pads, dilation) * dg)
    for value, tangent in (reference.interpret("tangent1d", x, w, g, dx, dw, dg),
                           cpu.function("tangent1d")(x, w, g, dx, dw, dg)):
        np.testing.assert_allclose(float(tangent), want, rtol=1e-4)


def test_the_gradients_run_on_the_opencl_cpu_runtime(opencl, gradients):  # noqa: F811
    mod = executor.load(compiler.compile_source(GRADIENTS, "grads.py", CompileOptions(target="spirv")).image, opencl)
    reference = gradients[0]
    for name in ("grad2d", "grad1d"):
        a = [RNG.standard_normal(s).astype(np.float32) for s in GEOMETRY[name][3]]
        for got, want in zip(mod.function(name)(*a), reference.interpret(name, *a), strict=True):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("target, arch", [("ptx", "sm_90a"), ("amdgpu", "gfx942")])
def test_the_gradients_compile_for_gpus(target, arch):
    compiler.compile_source(GRADIENTS, "grads.py", CompileOptions(target=target, arch=arch))


CIRCULANT = """
@function
def circulant(h: tensor[f64, 5], x: tensor[f64, 12], g: tensor[f32, 3], X: tensor[f32, 2, 12, 3]):
    C = op.conv1d(h, 12)
    return C @ x, op.adjoint(C) @ x, op.conv1d(g, 12) @ X
"""


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_the_operator_algebras_circulant_compiles(target, request):
    """op.conv1d(h, n) @ x (passes/tod_lower.py: a circular, flipped im2col times h, summed over the taps), its
    adjoint, and a stack of columns, compiled, equal the definition (h ⊛ x)[i] = Σ_j h[j] x[(i − j) mod n]."""
    context = request.getfixturevalue("opencl") if target == "spirv" else None
    mod = executor.load(compiler.compile_source(CIRCULANT, "circ.py", CompileOptions(target=target)).image, context)
    h, x = RNG.standard_normal(5), RNG.standard_normal(12)
    g, xs = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal((2, 12, 3)).astype(np.float32)
    i, j = np.arange(12)[:, None], np.arange(5)[None, :]
    conv, corr = (h * x[(i - j) % 12]).sum(1), (h * x[(i + j) % 12]).sum(1)
    stacked = np.einsum("j,bijk->bik", g.astype(np.float64), xs[:, (i - np.arange(3)) % 12, :])
    got = mod.function("circulant")(h, x, g, xs)
    np.testing.assert_allclose(got[0], conv, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], corr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[2], stacked, rtol=1e-5, atol=1e-5)
