"""op.log_softmax's row kernel and the derivatives built on it, compiled for sm_80 (kernels.py autodiff_xent),
against torch on the same GPU: the forward against torch.log_softmax, a cross-entropy's gradient against
torch.autograd of F.cross_entropy (its closed form is (softmax - onehot) / B), and prod's vjp at zeros against
torch.autograd of torch.prod (whose backward also gives the products of the other elements).
`test_references_match_the_compiler` runs the same references on torch's CPU against the compiled CPU image
(it needs no GPU, and skips without the compiler)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from kernels import AUTODIFF_XENT  # noqa: E402

torch = pytest.importorskip("torch")

SIZES = [(8, 10), (64, 1000)]   # a row narrower than a warp, and one of many warp-wide chunks


def _inputs(b, c):
    rng = np.random.default_rng(b * 1000 + c)
    Z = (rng.standard_normal((b, c)) * 4).astype(np.float32)
    Z[0, :2] = [60.0, -60.0]                                  # probabilities that underflow in f32
    labels = rng.integers(0, c, b)
    P = rng.uniform(0.9, 1.1, (b, c)).astype(np.float32)     # prod's input: its product stays near 1
    P[1, 3] = 0.0                                             # one zero in row 1, two in row 2
    P[2, [0, c - 1]] = 0.0
    D = rng.standard_normal((b, c)).astype(np.float32)
    d = rng.standard_normal(b).astype(np.float32)
    return Z, labels, P, D, d


def _torch(device, Z, labels, P, D, d):
    """(log_softmax(Z), d cross_entropy / dZ, the vjp of (log_softmax, prod) at (P; D, d) wrt P)."""
    F = torch.nn.functional
    z = torch.tensor(Z, device=device, requires_grad=True)
    F.cross_entropy(z, torch.tensor(labels, device=device)).backward()
    p = torch.tensor(P, device=device, requires_grad=True)
    out = (F.log_softmax(p, -1) * torch.tensor(D, device=device)).sum() + \
        (torch.prod(p, -1) * torch.tensor(d, device=device)).sum()
    (ct,) = torch.autograd.grad(out, p)
    return [t.detach().cpu().numpy() for t in (F.log_softmax(torch.tensor(Z, device=device), -1), z.grad, ct)]


def _check(fn, device):
    """fn(name) -> the program's function; within f32 rounding of the kernels' exp, log and sums: 2e-6 ·
    (1 + |y|) for log_softmax (|y| up to ~120), 1e-6 for the gradients (entries ≤ 1/B), 1e-5 relative to
    the largest for the vjp (products of up to 1000 factors near 1)."""
    for b, c in SIZES:
        Z, labels, P, D, d = _inputs(b, c)
        want_ls, want_dz, want_ct = _torch(device, Z, labels, P, D, d)
        got_ls, _ = fn("rows")(Z)
        np.testing.assert_allclose(got_ls, want_ls, rtol=0, atol=2e-6 * (1 + np.abs(want_ls).max()))
        onehot = np.eye(c, dtype=np.float32)[labels]
        np.testing.assert_allclose(fn("dxent")(Z, onehot), want_dz, rtol=0, atol=1e-6)
        ct = fn("vjp_rows")(P, D, d)[-1]
        assert np.all(np.isfinite(ct))
        np.testing.assert_allclose(ct, want_ct, rtol=0, atol=1e-5 * np.abs(want_ct).max())


def test_log_softmax_cross_entropy_and_prod_match_torch(program):
    prog = program("autodiff_xent")
    _check(lambda name: getattr(prog, name), "cuda")


def test_references_match_the_compiler():
    """The references above against the compiled CPU image of the same program, at the same tolerances."""
    try:
        from tessera import compiler, executor
        prog = executor.load(compiler.compile_source(AUTODIFF_XENT, "xent.py").image)
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    _check(lambda name: prog.function(name), "cpu")
