"""Derivatives (passes/autodiff.py) compiled for the GPU, against torch.autograd on the same GPU.

The programs are kernels.py's autodiff_*: prebuilt by build_images.py for a GPU machine without the compiler,
where the references are torch's (autograd) and numpy's, written here. `test_references_match_the_compiler`
ties those references to the compiler: where it is installed, the same references on the CPU agree with the
compiled CPU images of the same programs (it needs no GPU, and skips without the compiler).
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from kernels import AUTODIFF_BF16, AUTODIFF_F32, AUTODIFF_MLP  # noqa: E402

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
