"""Flash attention's derivatives on sm_90a (kernels.py's hopper_attention_bwd): the vjp of flash_attention
runs the forward kernel writing each query row's LSE, then the backward kernels (backends/ptx/
attention_bwd_sm90.py: dK and dV in one that adds dQ into an f32 accumulator, or dK or dV alone), against
torch.autograd of the same attention in float64 on the inputs rounded to the programs' dtypes.

Tolerances, relative to each result's largest |value|: the results are rounded to bf16 or f16, and the kernels
round P and dS to the operand dtype before their products (as FlashAttention does), so 2^-8 per product term;
2e-2 covers it with room, and a wrong mask, scale or transposition is off by O(1). O: 2^-7 as
test_hopper.py's flash attention. `test_reference_matches_the_interpreter` ties the reference to the
interpreter's rules where the compiler is installed (it needs no GPU).
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from kernels import ATTENTION_BWD  # noqa: E402

torch = pytest.importorskip("torch")

# function -> (head dimension, scale, causal, dtype, the parameters whose cotangents it returns)
CASES = {"vjp_attn_d128": (128, 128 ** -0.5, False, "bf16", (0, 1, 2)),
         "vjp_causal_d128": (128, 128 ** -0.5, True, "bf16", (0, 1, 2)),
         "vjp_attn_d64": (64, 0.125, False, "bf16", (0, 1, 2)),
         "vjp_causal_d64": (64, 0.125, True, "f16", (0, 1, 2)),
         "vjp_v_d64": (64, 0.125, False, "bf16", (2,)),
         "vjp_qk_causal_d128": (128, 128 ** -0.5, True, "bf16", (0, 1))}
TOL = 2e-2
O_TOL = 2 ** -7


def _inputs(S, T, d, seed=15):
    rng = np.random.default_rng(seed)
    q, do = rng.standard_normal((2, 2, 3, S, d)).astype(np.float32)
    k, v = rng.standard_normal((2, 2, 3, T, d)).astype(np.float32)
    return q, k, v, do


def reference(q, k, v, do, scale, causal, dtype):
    """(O, dQ, dK, dV) by torch.autograd in float64 of the inputs rounded to `dtype`."""
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    q, k, v, do = (torch.tensor(x).to(tdt).double() for x in (q, k, v, do))
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ v
    return [o.detach().numpy()] + [g.numpy() for g in torch.autograd.grad(o, (q, k, v), do)]


def _close(got, want, rel, what):
    err = np.abs(np.asarray(got, np.float64) - want).max() / (np.abs(want).max() + 1e-30)
    assert err <= rel, f"{what}: max error {err:.3g} of the largest |value| exceeds {rel:.3g}"


@pytest.fixture(scope="module")
def hopper(cuda):
    from tessera import runtime
    if not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a kernels need an H100/H200 (compute capability 9.0)")


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("S, T", [(200, 200), (77, 300), (300, 77), (1024, 1024)])
def test_gradients_match_torch_autograd(program, hopper, name, S, T):
    d, scale, causal, dtype, argnums = CASES[name]
    q, k, v, do = _inputs(S, T, d)
    # the runtime takes float32 arrays for bf16 parameters, float16 arrays for f16 ones
    args = [x.astype(np.float16) if dtype == "f16" else x for x in (q, k, v, do)]
    got = getattr(program("hopper_attention_bwd"), name)(*args)
    want = reference(q, k, v, do, scale, causal, dtype)
    _close(got[0], want[0], O_TOL, "O")
    for g, i in zip(got[1:], argnums, strict=True):
        _close(g, want[1 + i], TOL, "d" + "QKV"[i])


def test_reference_matches_the_interpreter():
    """The reference against the interpreter's attention rules (passes/autodiff_attention.py) on the same
    program, at a small size; runs where the compiler is installed."""
    try:
        from tessera import tessera_frontend_compile
        prog = tessera_frontend_compile(ATTENTION_BWD, {"filename": "attention_bwd.py"})
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    for name, (d, scale, causal, dtype, argnums) in CASES.items():
        q, k, v, do = _inputs(19, 23, d, seed=3)
        got = prog.interpret(name, q, k, v, do)
        want = reference(q, k, v, do, scale, causal, dtype)
        _close(got[0], want[0], O_TOL, f"{name} O")
        for g, i in zip(got[1:], argnums, strict=True):
            _close(g, want[1 + i], TOL, f"{name} d{'QKV'[i]}")
