"""sm_90a and sm_80 attention over heads split from [B, S, H, D] by op.transpose and merged back (passes/
fold_transposes.attention: the sm_90a kernel reads and writes that layout through 4-D TMA maps, the sm_80 one
through computed row addresses, no copies) on an H100/H200: bit for bit what the kernel gives on the same heads laid out [B, H, S, D], and within bf16's
rounding of torch's scaled_dot_product_attention on the [B, S, H, D] tensors' transposed views (atol and
rtol 1e-2: O's values are below 4; both round O to bf16 and exponentiate differently)."""

import numpy as np
import pytest

RNG = np.random.default_rng(28)


@pytest.fixture(scope="module", params=["hopper_attention_seq_heads", "ampere_attention_seq_heads"])
def prog(cuda, program, request):
    from tessera import runtime
    if request.param.startswith("hopper") and not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a kernels need an H100/H200 (compute capability 9.0)")
    return program(request.param)


def _bf16(shape):
    from tessera.numerics.rounding import round_to
    return round_to(RNG.standard_normal(shape), "bf16").astype(np.float32)


@pytest.mark.parametrize("name, q_shape, k_shape, causal, scale", [
    ("causal", (2, 300, 5, 128), (2, 300, 5, 128), True, 0.08838834764831845),
    ("cross", (3, 200, 4, 64), (3, 333, 4, 64), False, 0.125),
    # more query tiles (9 × 48, 4 × 48) than SMs: a persistent grid's CTAs take several (attention_sm90)
    ("causal", (4, 1100, 12, 128), (4, 1100, 12, 128), True, 0.08838834764831845),
    ("cross", (4, 700, 12, 64), (4, 900, 12, 64), False, 0.125),
])
def test_heads_in_place(prog, name, q_shape, k_shape, causal, scale):
    q, k, v = _bf16(q_shape), _bf16(k_shape), _bf16(k_shape)
    got = np.asarray(getattr(prog, name)(q, k, v), np.float32)
    heads = [np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v)]
    plain = np.asarray(getattr(prog, f"plain_{name}")(*heads), np.float32)
    np.testing.assert_array_equal(got, plain.transpose(0, 2, 1, 3))
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    tq, tk, tv = (torch.tensor(x, dtype=torch.bfloat16, device="cuda").transpose(1, 2) for x in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
    want = want.transpose(1, 2).float().cpu().numpy()
    np.testing.assert_allclose(got, want, atol=1e-2, rtol=1e-2)
