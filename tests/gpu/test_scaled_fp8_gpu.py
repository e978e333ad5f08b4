"""The scaled fp8 GEMM from one-byte tensors on an H100/H200 (issue 17 item 2): examples/gpu/gemm.py's
`gemm_fp8_scaled`, dequantize(A, sa) @ dequantize(Bt, sb)ᵀ cast to bf16, which compiles to one wgmma e4m3
kernel reading A [M, K] and Bt [N, K] in place with sa·sb in its epilogue (tests/unit/test_scaled_fp8_gemm.py
checks the plan, and the CPU's decomposition against the interpreter).

Reference: the float64 product of the fp8 values times sa·sb. Tolerance: fp8 tensor cores sum a K step's
products with about 13 fraction bits, the kernel sums the steps in fp32 (2^-11 of the sum of the products'
magnitudes, as test_hopper.close_fp8), then one rounding to bf16 (2^-8 of the value)."""

import numpy as np
import pytest

from test_hopper import hopper  # noqa: F401  (the fixture: skips below an H100/H200)

RNG = np.random.default_rng(1726)


def fp8(*shape):
    """e4m3 values over most of the range (products to 2^14), as float64."""
    from tessera.numerics.rounding import round_to
    return round_to(RNG.standard_normal(shape) * 16, "fp8_e4m3")


def bits(x):
    from tessera.numerics.rounding import fp8_bits
    return fp8_bits(x, "fp8_e4m3")


def check(got, A, Bt, sa, sb):
    want = (A @ Bt.T) * (float(sa) * float(sb))
    bound = 2 ** -11 * (np.abs(A) @ np.abs(Bt).T) * (float(sa) * float(sb)) + 2 ** -8 * np.abs(want) + 1e-30
    err = np.abs(np.asarray(got, np.float64) - want)
    assert (err <= bound).all(), f"error {(err / bound).max():.3g} times the bound"


@pytest.mark.parametrize("M, K, N", [(128, 128, 256), (300, 272, 264), (1000, 1040, 776), (7, 16, 8),
                                     (129, 4096, 520), (2048, 2048, 2048)])
def test_scaled_fp8_gemm(program, hopper, M, K, N):
    """Any M; K a multiple of 16 (TMA reads the one-byte rows in 16-byte units); N a multiple of 8 (the bf16
    result leaves by TMA stores, as the bf16 GEMM's)."""
    A, Bt = fp8(M, K), fp8(N, K)
    sa, sb = np.array(0.0125, np.float32), np.array(3.5, np.float32)
    got = program("hopper_gemm").gemm_fp8_scaled(bits(A), bits(Bt), sa, sb)
    assert got.dtype == np.float32 and got.shape == (M, N)   # bf16 values
    check(got, A, Bt, sa, sb)


def test_values_bits_ml_dtypes_and_torch_tensors_give_the_same_bits(program, hopper):
    """float32 values (rounded and encoded by the executor), uint8 bit patterns, ml_dtypes float8 arrays and
    torch float8 tensors' bytes (DLPack, device memory used in place) are the same one-byte tensor."""
    prog = program("hopper_gemm")
    A, Bt = fp8(200, 320), fp8(136, 320)
    sa, sb = np.array(0.5, np.float32), np.array(0.25, np.float32)
    want = prog.gemm_fp8_scaled(bits(A), bits(Bt), sa, sb)
    check(want, A, Bt, sa, sb)
    np.testing.assert_array_equal(prog.gemm_fp8_scaled(A.astype(np.float32), Bt.astype(np.float32), sa, sb), want)
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None:
        e4m3 = ml_dtypes.float8_e4m3fn
        np.testing.assert_array_equal(prog.gemm_fp8_scaled(A.astype(e4m3), Bt.astype(e4m3), sa, sb), want)
    torch = pytest.importorskip("torch")
    At = torch.from_numpy(A.astype(np.float32)).cuda().to(torch.float8_e4m3fn).view(torch.uint8)
    Btt = torch.from_numpy(Bt.astype(np.float32)).cuda().to(torch.float8_e4m3fn).view(torch.uint8)
    got = prog.gemm_fp8_scaled(At, Btt, torch.tensor(0.5, device="cuda"), torch.tensor(0.25, device="cuda"))
    # given device tensors, the call returns a DeviceArray of what the plan stores: bf16 bit patterns
    np.testing.assert_array_equal((got.numpy().astype(np.uint32) << 16).view(np.float32), want)


def test_wrong_dtypes_and_k_are_refused(program, hopper):
    prog = program("hopper_gemm")
    sa = np.array(1.0, np.float32)
    with pytest.raises(TypeError, match="argument 'A' of 'gemm_fp8_scaled' must have dtype fp8_e4m3.*float32 "
                                        "values or fp8_e4m3 bit patterns as uint8"):
        prog.gemm_fp8_scaled(np.zeros((16, 32), np.float16), bits(fp8(16, 32)), sa, sa)
    with pytest.raises(Exception, match="K = 100 is not a multiple of 16"):
        prog.gemm_fp8_scaled(bits(fp8(64, 100)), bits(fp8(64, 100)), sa, sa)
