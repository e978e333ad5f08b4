"""Flash attention on sm_80's mma.sync kernel (backends/ptx/attention_sm80.py; kernels.py's ampere_attention,
compiled for sm_80 with TESSERA_ATTENTION_SM80=1, compile_env.py) on whatever NVIDIA GPU is here (sm_80
PTX runs on every later GPU): bf16 and f16,
head dimensions 64 and 128, causal or not, sequence lengths that are not multiples of the kernel's blocks
(the last key block and the last query rows masked), against the attention of the inputs rounded to the
dtype, in float64 (test_hopper.py's reference; test_reference_matches_the_interpreter ties it to the
interpreter where the compiler is installed). A head dimension of 96 takes the decomposition (two GEMMs and a
softmax), which the same reference checks.

Tolerance, relative to the largest |value| of O: P is rounded to the operand dtype before its product with V
(as FlashAttention does), 2^-8 of each weight in bf16, and O is rounded to the dtype: 2^-7 (test_hopper.py's
for the sm_90a kernel). f16 keeps three more bits: 2^-9. A wrong mask, scale or layout is off by O(1).
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_hopper import reference_attention  # noqa: E402

TOL = {"bf16": 2 ** -7, "f16": 2 ** -9}


def _rounded(x, dtype):
    from tessera.numerics.rounding import round_to
    return round_to(np.asarray(x, np.float64), dtype)


def test_the_image_has_the_kernel(image_of):
    """The functions of D = 64 and 128 are the kernel's one step each (not the decomposition's GEMMs)."""
    from tessera import image, plan
    plans = plan.decode(image.read_image(image_of("ampere_attention")).section(plan.SECTION))
    for name, fn in plans.items():
        kernels = [s.kernel for s in fn.steps]
        assert kernels == [f"{name}__attention0"] if "d96" not in name else len(kernels) > 1, (name, kernels)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S, T", [(200, 200), (77, 300), (300, 77), (1, 65), (1024, 1024)])
def test_flash_attention_sm80(program, dtype, d, causal, S, T):
    rng = np.random.default_rng(S * 7 + T)
    Q, K, V = (rng.standard_normal((6, n, d)).astype(np.float32) for n in (S, T, T))
    want = reference_attention(*(_rounded(x, dtype)[None] for x in (Q, K, V)), d ** -0.5, causal)[0]
    # the runtime takes float32 arrays for bf16 parameters, float16 arrays for f16 ones
    args = [x.astype(np.float16) if dtype == "f16" else x for x in (Q, K, V)]
    got = getattr(program("ampere_attention"), f"{dtype}_d{d}{'_causal' if causal else ''}")(*args)
    err = np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()
    assert err <= TOL[dtype], f"max error {err:.3g} of the largest |value| exceeds {TOL[dtype]:.3g}"


@pytest.mark.parametrize("causal", [False, True])
def test_other_head_dimensions_take_the_decomposition(program, causal):
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((2, n, 96)).astype(np.float32) for n in (130, 70, 70))
    want = reference_attention(*(_rounded(x, "bf16")[None] for x in (Q, K, V)), 96 ** -0.5, causal)[0]
    got = getattr(program("ampere_attention"), f"bf16_d96{'_causal' if causal else ''}")(Q, K, V)
    err = np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()
    assert err <= TOL["bf16"], f"max error {err:.3g}"


def test_reference_matches_the_interpreter():
    """The reference against the interpreter on the same program, at a small size; runs where the compiler is
    installed (no GPU needed)."""
    from kernels import AMPERE_ATTENTION
    try:
        from tessera import tessera_frontend_compile
        prog = tessera_frontend_compile(AMPERE_ATTENTION, {"filename": "ampere_attention.py"})
    except ImportError as e:
        pytest.skip(f"no compiler here: {e}")
    rng = np.random.default_rng(5)
    for d in (64, 128):
        for causal in (False, True):
            Q, K, V = (rng.standard_normal((2, n, d)).astype(np.float32) for n in (19, 23, 23))
            got = prog.interpret(f"bf16_d{d}{'_causal' if causal else ''}", Q, K, V)
            want = reference_attention(*(_rounded(x, "bf16")[None] for x in (Q, K, V)), d ** -0.5, causal)[0]
            err = np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()
            assert err <= TOL["bf16"], f"d={d} causal={causal}: max error {err:.3g}"
