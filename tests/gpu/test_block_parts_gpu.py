"""A transformer block's parts on an H100/H200 (bench/transformer_block_gpu.py runs the whole block against
PyTorch): the split of a [B, S, H·128] projection into heads and the merge back (kernelgen._transpose_rows,
grid-stride loops over (b, h) and blocks of S), and sm_90a GEMM epilogues with activations that divide (erf's,
tanh's rational forms, sigmoid's reciprocal), whose divisions are div.approx.f32 (gemm_lowering's
_approximate_divisions). Against float64 references of the bf16 inputs; results are bf16, so 2^-8 of the
largest value (the transposes: exact)."""

import math

import numpy as np
import pytest

RNG = np.random.default_rng(19)


@pytest.fixture(scope="module")
def hopper(cuda):
    from tessera import runtime
    if not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a kernels need an H100/H200 (compute capability 9.0)")


def bf16(x):
    from tessera.numerics.rounding import round_to
    return round_to(np.asarray(x, np.float64), "bf16")


@pytest.mark.parametrize("shape", [(2, 300, 5, 128), (1, 17, 1, 128), (1, 2, 65537, 128)])
def test_heads_and_merge(program, hopper, shape):   # the last: 65537 (b, h) pairs, past a grid dimension
    prog = program("block_parts")
    x = bf16(RNG.standard_normal(shape)).astype(np.float32)
    h = prog.heads(x)
    np.testing.assert_array_equal(h, x.transpose(0, 2, 1, 3))
    B, S, H, D = shape
    np.testing.assert_array_equal(prog.merge(np.ascontiguousarray(h)), x.reshape(B, S, H * D))


@pytest.mark.parametrize("act", ["gelu", "silu", "sigmoid", "tanh"])
def test_epilogues_that_divide(program, hopper, act):
    prog = program("block_parts")
    X, W, b = (bf16(RNG.standard_normal(s) * sc) for s, sc in (((300, 136), 1.0), ((136, 264), 0.3), ((264,), 1.0)))
    Z = X @ W + b
    sig = 1 / (1 + np.exp(-Z))
    want = {"gelu": 0.5 * Z * (1 + np.vectorize(math.erf)(Z / math.sqrt(2))), "silu": Z * sig, "sigmoid": sig,
            "tanh": np.tanh(Z)}[act]
    got = getattr(prog, f"linear_{act}")(*(a.astype(np.float32) for a in (X, W, b)))
    err = np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()
    assert err <= 2 ** -8, f"max error {err:.3g} of the largest value"


def test_empty_heads(program, hopper):
    # no rows to copy: the launch still has a block along each grid dimension (a grid of 0 is refused)
    assert program("block_parts").heads(np.zeros((2, 0, 3, 128), np.float32)).shape == (2, 3, 0, 128)
