"""Derivatives (passes/autodiff.py) compiled for the GPU, against torch.autograd on the same GPU.

The programs are kernels.py's autodiff_*: prebuilt by build_images.py for a GPU machine without the compiler,
where the references are torch's (autograd) and numpy's, written here (dropout's masks: the interpreter's
Philox generator, tessera/numerics/philox.py, which needs only numpy). `test_references_match_the_compiler`
ties those references to the compiler: where it is installed, the same references on the CPU agree with the
compiled CPU images of the same programs (it needs no GPU, and skips without the compiler).
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from kernels import (AUTODIFF_BF16, AUTODIFF_DROPOUT, AUTODIFF_F32, AUTODIFF_MLP, DROPOUT_OFFSET,  # noqa: E402
                     DROPOUT_SEED)

from tessera.numerics.philox import uniforms  # noqa: E402  (the interpreter's generator: numpy only)

torch = pytest.importorskip("torch")


def _f32_inputs():
    rng = np.random.default_rng(15)
    X, V = rng.standard_normal((2, 64, 32)).astype(np.float32)
    P = rng.uniform(0.5, 2.0, (64, 32)).astype(np.float32)
    g, b = rng.standard_normal((2, 32)).astype(np.float32)
    return X, P, g, b, V


def _torch_f32_grads(device, X, P, g, b, V):
    """The gradients of AUTODIFF_F32's loss with respect to X, P, g, b, by torch.autograd in f32."""
    X, P, g, b = (torch.tensor(a, device=device, requires_grad=True) for a in (X, P, g, b))
    V = torch.tensor(V, device=device)
    F = torch.nn.functional
    rms = X * torch.rsqrt((X * X).mean(-1, keepdim=True) + 1e-6) * g
    A = torch.softmax(X, -1) + F.layer_norm(X, (32,), g, b, eps=1e-5) + rms + F.gelu(X + b)
    B = torch.log(P) / P + torch.exp(X * 0.5) * torch.sqrt(P) + torch.sigmoid(X.T.reshape(64, 32))
    C = X.sum(1, keepdim=True) * torch.rsqrt(P) + F.gelu(X, approximate="tanh") - torch.relu(-X) + F.silu(X)
    D = X.amax(1, keepdim=True) * X.mean(0) + torch.softmax(X.T, -1).T * X
    loss = (torch.tanh(A + B + C + D) * V).mean()
    return [t.cpu().numpy() for t in torch.autograd.grad(loss, (X, P, g, b))]


def _bf16_inputs():
    rng = np.random.default_rng(16)
    X = rng.standard_normal((64, 64)).astype(np.float32)
    W = (rng.standard_normal((64, 128)) / 8).astype(np.float32)
    b, V = rng.standard_normal(128).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
    return X, W, b, V


def _torch_bf16_grads(device, X, W, b, V):
    """AUTODIFF_BF16's gradients by torch.autograd: the operands rounded to bf16, their product accumulated in
    f32 (torch multiplies bf16-exact f32 values; the program's GEMM takes the bf16 values themselves)."""
    X, W, b = (torch.tensor(a, device=device, requires_grad=True) for a in (X, W, b))
    V = torch.tensor(V, device=device)
    prod = X.to(torch.bfloat16).float() @ W.to(torch.bfloat16).float()
    loss = (torch.tanh(torch.nn.functional.gelu(prod + b)) * V).mean()
    return [t.cpu().numpy() for t in torch.autograd.grad(loss, (X, W, b))]


def _close(got, want, rtol, atol_of_max):
    """Elementwise within rtol, and atol_of_max times the largest |want| (gradients near 0 have no relative
    accuracy to speak of)."""
    for w, c in zip(want, got):
        c = np.asarray(c)
        assert c.shape == w.shape
        np.testing.assert_allclose(c, w, rtol=rtol, atol=atol_of_max * np.abs(w).max())


# f32: torch and the program round differently (fused, another summation order, the GPU's exp and erf) by a few
# ulps per op over some 40 ops; a wrong rule is off by O(1)
F32_TOL = (1e-3, 1e-4)
# bf16 operands: the program also rounds each backward GEMM's cotangent operand and product to bf16 (2^-8
# relative), which torch, multiplying f32 cotangents, does not
BF16_TOL = (3e-2, 1e-2)


def _rb(x):
    """x rounded to bf16 (nearest, ties to even), as f32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def _gelu(z):
    return 0.5 * z * (1 + torch.erf(torch.from_numpy(z / np.sqrt(2))).numpy())


def _d_gelu(z):
    return 0.5 * (1 + torch.erf(torch.from_numpy(z / np.sqrt(2))).numpy()) + z * np.exp(-0.5 * z * z) / np.sqrt(
        2 * np.pi)


def _mlp_start():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 32)).astype(np.float32)
    Y = np.tanh(X[:, :16] * X[:, 16:]).astype(np.float32)
    params = [(rng.standard_normal(s) * 0.3).astype(np.float32) for s in [(32, 64), (64,), (64, 16), (16,)]]
    return X, Y, params


def _numpy_mlp_losses(X, Y, params, steps):
    """AUTODIFF_MLP's `step` written out in numpy (f64 arithmetic, bf16 roundings where the program casts,
    the backward GEMMs' operands and products in bf16 as passes/autodiff.py makes them): the loss per step."""
    W1, b1, W2, b2 = (p.astype(np.float64) for p in params)
    Xb, losses = _rb(X).astype(np.float64), []
    for _ in range(steps):
        W1b, W2b = _rb(W1), _rb(W2)
        Z = Xb @ W1b + b1
        H = _gelu(Z)
        Hb = _rb(H)
        E = Hb @ W2b + b2 - Y
        losses.append(float(np.mean(E * E)))
        dO = 2 * E / E.size
        dOb = _rb(dO)
        gW2, gb2 = _rb(Hb.T @ dOb), dO.sum(0)
        dZ = _rb(dOb @ W2b.T) * _d_gelu(Z)
        gW1, gb1 = _rb(Xb.T @ _rb(dZ)), dZ.sum(0)
        W1, b1, W2, b2 = W1 - 0.1 * gW1, b1 - 0.1 * gb1, W2 - 0.1 * gW2, b2 - 0.1 * gb2
    return losses


def _train(step, X, Y, params, steps):
    losses = []
    for _ in range(steps):
        out = step(X, Y, *params)
        losses.append(float(np.asarray(out[0])))
        params = [np.asarray(p) for p in out[1:]]
    return losses


STEPS = 40
# The trajectories agree to 1e-2 relative: bf16 roundings that land on the other side of a tie in one of them
# move a weight by 2^-8 relative, which later steps carry along, while the loss falls by more than 3x
MLP_RTOL = 1e-2


def test_f32_gradients_match_torch_autograd(program):
    inputs = _f32_inputs()
    _close(program("autodiff_f32").dloss(*inputs), _torch_f32_grads("cuda", *inputs), *F32_TOL)


@pytest.mark.parametrize("name", ["autodiff_bf16", "autodiff_bf16_sm90a"])
def test_bf16_gemm_gradients_match_torch_autograd(program, name):
    inputs = _bf16_inputs()
    _close(program(name).dloss(*inputs), _torch_bf16_grads("cuda", *inputs), *BF16_TOL)


def test_mlp_training_on_the_gpu_matches_the_reference(program):
    X, Y, params = _mlp_start()
    got = _train(program("autodiff_mlp").step, X, Y, params, STEPS)
    want = _numpy_mlp_losses(X, Y, params, STEPS)
    assert got[-1] < got[0] / 3
    np.testing.assert_allclose(got, want, rtol=MLP_RTOL)


def test_references_match_the_compiler():
    """Runs where the compiler is: the references above against the compiled CPU images and the interpreter
    of the same programs, at the same tolerances (so that a GPU failure is the GPU's, not the reference's)."""
    try:
        from tessera import compiler, executor, tessera_frontend_compile
        cpu = {name: executor.load(compiler.compile_source(src, f"{name}.py").image)
               for name, src in (("f32", AUTODIFF_F32), ("bf16", AUTODIFF_BF16), ("mlp", AUTODIFF_MLP))}
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    inputs = _f32_inputs()
    _close(cpu["f32"].dloss(*inputs), _torch_f32_grads("cpu", *inputs), *F32_TOL)
    inputs = _bf16_inputs()
    _close(cpu["bf16"].dloss(*inputs), _torch_bf16_grads("cpu", *inputs), *BF16_TOL)
    X, Y, params = _mlp_start()
    want = _numpy_mlp_losses(X, Y, params, STEPS)
    np.testing.assert_allclose(_train(cpu["mlp"].step, X, Y, params, STEPS), want, rtol=MLP_RTOL)
    interp = tessera_frontend_compile(AUTODIFF_MLP, {"filename": "mlp.py"})
    np.testing.assert_allclose(_train(lambda *a: interp.interpret("step", *a), X, Y, params, STEPS), want,
                               rtol=MLP_RTOL)


# AUTODIFF_DROPOUT's references. The masks are the interpreter's own generator (tessera/numerics/philox.py);
# x·2 / (1 - p) and the cotangent's replay are exact f32 operations (one correctly rounded division: PTX's
# div.rn.f32, numpy's f32 division), so those results must equal the references bit for bit.
def _dropout_inputs():
    rng = np.random.default_rng(17)
    X, D = rng.standard_normal((2, 3, 37, 129)).astype(np.float32)
    S = rng.standard_normal((45, 300)).astype(np.float32)
    L, V = rng.standard_normal((2, 64, 48)).astype(np.float32)
    return X, D, S, L, V


def _kept(shape, p, seed, offset=0):
    return uniforms(int(np.prod(shape)), seed, offset).reshape(shape) >= p


def _dropout_references(X, D, S, L, V):
    """drop(X), vjp_drop(X, D)'s cotangent, probs(S) (in f64), dloss(L, V) (in f64)."""
    keep = _kept(X.shape, 0.3, DROPOUT_SEED, DROPOUT_OFFSET)
    drop = np.where(keep, X * np.float32(2) / np.float32(0.7), np.float32(0)) - np.float32(1)
    ct = np.where(keep, D / np.float32(0.7), np.float32(0)) * np.float32(2)
    e = np.exp(S - S.max(-1, keepdims=True).astype(np.float64))
    probs = np.where(_kept(S.shape, 0.1, 7), e / e.sum(-1, keepdims=True) / 0.9, 0.0)
    m = np.where(_kept(L.shape, 0.25, 11, 5), 2.0 / 0.75, 0.0)
    dloss = V * (1 - np.tanh(L * m) ** 2) * m / L.size
    return drop, ct, probs, dloss


def _check_dropout(run):
    """`run(name, *args)`: AUTODIFF_DROPOUT's functions against the references, masks and exact results bit
    for bit; the softmax and the gradient (exp, tanh: a few ulps of f32) within 1e-5 relative."""
    X, D, S, L, V = _dropout_inputs()
    drop, ct, probs, dloss = _dropout_references(X, D, S, L, V)
    np.testing.assert_array_equal(np.asarray(run("drop", X)), drop)
    y, got_ct = run("vjp_drop", X, D)
    np.testing.assert_array_equal(np.asarray(y), drop)
    np.testing.assert_array_equal(np.asarray(got_ct), ct)
    got = np.asarray(run("probs", S))
    np.testing.assert_array_equal(got == 0, probs == 0)
    np.testing.assert_allclose(got, probs, rtol=1e-5)
    got = np.asarray(run("dloss", L, V))
    dropped = ~_kept(L.shape, 0.25, 11, 5)
    assert np.all(got[dropped] == 0)
    np.testing.assert_allclose(got, dloss, rtol=1e-5, atol=1e-6 * np.abs(dloss).max())


def test_dropout_and_its_gradient_on_the_gpu_draw_the_interpreters_mask(program):
    prog = program("autodiff_dropout")
    _check_dropout(lambda name, *args: getattr(prog, name)(*args))


def test_dropout_references_match_the_interpreter_and_the_cpu():
    """Where the compiler is: the dropout references above against the interpreter and the CPU image, at the
    same tolerances (the interpreter is the oracle whose masks the GPU must reproduce)."""
    try:
        from tessera import compiler, executor, tessera_frontend_compile
        cpu = executor.load(compiler.compile_source(AUTODIFF_DROPOUT, "dropout.py").image)
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    interp = tessera_frontend_compile(AUTODIFF_DROPOUT, {"filename": "dropout.py"})
    _check_dropout(interp.interpret)
    _check_dropout(lambda name, *args: getattr(cpu, name)(*args))
