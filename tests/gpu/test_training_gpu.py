"""The training loops of examples/graph on sm_90a (kernels.py's train_mlp_sm90a: train_mlp.py with bf16 GEMMs;
train_transformer_sm90a: train_transformer.py as written), 20 steps from the examples' starting points, against
PyTorch references of the same steps: the loss curves agree within the tolerances below.

The references run the forward with the program's bf16 roundings (each GEMM operand rounded to bf16, products
accumulated in f32) and let autograd do the backward in f32; the program also rounds the backward GEMMs'
cotangents to bf16 (docs/language.md, "Derivatives"), which the tolerances cover. `test_references_match_the_
compiler` ties the references to the compiler where it is installed: the same references on the CPU against
the same programs compiled for the CPU, at the same tolerances (no GPU needed), so that a GPU failure is the
GPU's.
"""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "examples", "graph"))
from kernels import SOURCES, TRAIN_MLP_BF16  # noqa: E402
import train_mlp  # noqa: E402
import train_transformer  # noqa: E402

torch = pytest.importorskip("torch")

STEPS = 20
# Measured on the CPU images (test_references_match_the_compiler): the program's bf16 backward GEMMs against
# the references' f32 ones move the curves apart by at most 1.5e-4 (SGD), 5.6e-4 (Adam, which normalises each
# gradient) and 2.7e-4 (the transformer) relative over 20 steps; the GPU's GEMMs sum in another order, whose
# bf16 roundings land elsewhere, hence some 10x room. A wrong rule or update moves the loss by far more
MLP_RTOL = {"sgd": 5e-3, "adam": 1e-2}
TRANSFORMER_RTOL = 1e-2


def _rb(t):
    """t rounded to bf16, as f32 (autograd passes the cotangent through unchanged)."""
    return t.to(torch.bfloat16).float()


def _gelu(z):
    return torch.nn.functional.gelu(z)   # the exact (erf) form, as op.gelu


def _torch_mlp_losses(device, optimizer, lr, X, Y, params, steps):
    """train_mlp.py's sgd_step / adam_step with bf16 GEMM operands, by torch.autograd on `device`."""
    X, Y = (torch.tensor(a, device=device) for a in (X, Y))
    params = [torch.tensor(p, device=device) for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    losses = []
    for t in range(1, steps + 1):
        W1, b1, W2, b2 = (p.clone().requires_grad_() for p in params)
        H = _gelu(_rb(X) @ _rb(W1) + b1)
        E = _rb(H) @ _rb(W2) + b2 - Y
        loss = (E * E).mean()
        grads = torch.autograd.grad(loss, (W1, b1, W2, b2))
        losses.append(loss.item())
        with torch.no_grad():
            if optimizer == "sgd":
                params = [p - lr * g for p, g in zip(params, grads)]
            else:
                lr_t = lr * (1 - 0.999 ** t) ** 0.5 / (1 - 0.9 ** t)
                m = [0.9 * a + 0.1 * g for a, g in zip(m, grads)]
                v = [0.999 * a + 0.001 * (g * g) for a, g in zip(v, grads)]
                params = [p - lr_t * a / (torch.sqrt(b) + 1e-8) for p, a, b in zip(params, m, v)]
    return losses


def _torch_transformer_losses(device, X, Y, params, steps, lr=0.05):
    """train_transformer.py's sgd_step by torch.autograd on `device`, its GEMM operands rounded to bf16 (the
    attention probabilities too, as flash attention multiplies them by V in bf16)."""
    F = torch.nn.functional
    X, Y = (torch.tensor(a, device=device) for a in (X, Y))
    S = X.shape[0]
    mask = torch.triu(torch.full((S, S), float("-inf"), device=device), 1)
    params = [torch.tensor(p, device=device) for p in params]
    losses = []
    for _ in range(steps):
        ln1, Wq, Wk, Wv, Wo, ln2, W1, b1, W2, b2 = ws = [p.clone().requires_grad_() for p in params]
        H = _rb(F.layer_norm(X, (64,), ln1, None, eps=1e-5))
        Q, K, V = _rb(H @ _rb(Wq)), _rb(H @ _rb(Wk)), _rb(H @ _rb(Wv))
        A = _rb(_rb(torch.softmax(Q @ K.T * 0.125 + mask, -1)) @ V)
        X1 = X + A @ _rb(Wo)
        N = _rb(F.layer_norm(X1, (64,), ln2, None, eps=1e-5))
        M = _gelu(N @ _rb(W1) + b1)
        E = X1 + _rb(M) @ _rb(W2) + b2 - Y
        loss = (E * E).mean()
        grads = torch.autograd.grad(loss, ws)
        losses.append(loss.item())
        params = [p - lr * g for p, g in zip(params, grads)]
    return losses


MLP_CASES = [("sgd", "sgd_step", 1.0), ("adam", "adam_step", 0.01)]


def _check_mlp(step_of, device):
    X, Y, params = train_mlp.problem()
    for optimizer, name, lr in MLP_CASES:
        got, _ = train_mlp.train(step_of(name), X, Y, params, STEPS, optimizer, lr)
        want = _torch_mlp_losses(device, optimizer, lr, X, Y, params, STEPS)
        assert got[-1] < got[0] / 4, (optimizer, got)
        np.testing.assert_allclose(got, want, rtol=MLP_RTOL[optimizer], err_msg=optimizer)


def _check_transformer(step, device):
    X, Y, params = train_transformer.problem(seq=16)
    got, _ = train_transformer.train(step, X, Y, params, STEPS)
    want = _torch_transformer_losses(device, X, Y, params, STEPS)
    assert got[-1] < 0.75 * got[0], got
    np.testing.assert_allclose(got, want, rtol=TRANSFORMER_RTOL)


def test_mlp_training_on_sm90a_matches_torch(program):
    prog = program("train_mlp_sm90a")
    _check_mlp(prog.function, "cuda")


def test_transformer_training_on_sm90a_matches_torch(program):
    _check_transformer(program("train_transformer_sm90a").function("sgd_step"), "cuda")


def test_references_match_the_compiler():
    """Where the compiler is: the references above on the CPU against the same programs compiled for the CPU
    (and train_mlp_sm90a's source, not the example's, so the bf16 rewrite is what is checked)."""
    try:
        from tessera import compiler, executor
        mlp = executor.load(compiler.compile_source(TRAIN_MLP_BF16, "train_mlp_bf16.py").image)
        block = executor.load(compiler.compile_source(SOURCES["train_transformer_sm90a"][0],
                                                      "train_transformer.py").image)
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    _check_mlp(mlp.function, "cpu")
    _check_transformer(block.function("sgd_step"), "cpu")
