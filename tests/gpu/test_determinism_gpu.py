"""The deterministic numerics profile on an H100/H200 (kernels.py's deterministic_sm90a and
deterministic_attention_bwd, compiled with numerics="deterministic"): every run gives the same bits — a bf16
GEMM on wgmma, row, column and whole-tensor sums (split over blocks in a fixed order), a softmax, elementwise
exp and division, and flash attention's gradients, whose dQ the deterministic profile adds in a kernel of its
own instead of by f32 atomics (backends/ptx/options.py, fused_dq). The image records the profile."""

import numpy as np
import pytest

RUNS = 4


@pytest.fixture(scope="module")
def hopper(cuda):
    from tessera import runtime
    if not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a kernels need an H100/H200 (compute capability 9.0)")


def _repeats(fn, *args) -> None:
    first = [np.array(r, copy=True) for r in fn(*args)]
    for _ in range(RUNS - 1):
        for a, b in zip(first, fn(*args), strict=True):
            assert np.array_equal(a, b, equal_nan=True)


def test_the_images_record_the_profile(image_of):
    from tessera import image
    for name in ("deterministic_sm90a", "deterministic_attention_bwd"):
        kernels = image.read_image(image_of(name)).kernels
        assert kernels and {k.props["numerics"] for k in kernels} == {"deterministic"}
    names = {k.name for k in image.read_image(image_of("deterministic_attention_bwd")).kernels}
    assert not any(n.endswith("_dq_cast") for n in names)   # the fused dQ's accumulator cast: none


def test_program_repeats_bitwise(program, hopper):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((1000, 1536)).astype(np.float32)   # bf16 parameters take float32 arrays
    B = rng.standard_normal((1536, 776)).astype(np.float32)
    X = rng.standard_normal((257, 100_003)).astype(np.float32)
    _repeats(program("deterministic_sm90a").prog, A, B, X)


@pytest.mark.parametrize("name, d, dtype", [("vjp_attn_d128", 128, np.float32), ("vjp_causal_d128", 128, np.float32),
                                            ("vjp_attn_d64", 64, np.float32), ("vjp_causal_d64", 64, np.float16)])
def test_attention_gradients_repeat_bitwise(program, hopper, name, d, dtype):
    rng = np.random.default_rng(15)
    q, do = rng.standard_normal((2, 2, 3, 1024, d)).astype(dtype)
    k, v = rng.standard_normal((2, 2, 3, 1024, d)).astype(dtype)
    _repeats(getattr(program("deterministic_attention_bwd"), name), q, k, v, do)
