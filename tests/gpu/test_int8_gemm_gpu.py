"""The sm_90a int8 GEMM (backends/ptx/gemm_sm90.py's s8 kind, issue 17 item 2): i8 x i8 accumulated in i32
and returned as i32, exactly as numpy's int32 matmul does, at sizes that are not multiples of the 128x256 tile
(any M and N, K a multiple of 16), of stored transposes, batched, and refused at the launch where K is not a
multiple of 16."""

import numpy as np
import pytest

RNG = np.random.default_rng(17)


@pytest.fixture(scope="module")
def hopper(cuda):
    from tessera import runtime
    if not runtime.capabilities(cuda)["arch"].startswith("sm_90"):
        pytest.skip("the sm_90a kernels need an H100/H200 (compute capability 9.0)")


def int8(*shape):
    """Values over the whole i8 range: sums of K products pass i16's range, and -128 * -128 is in."""
    return RNG.integers(-128, 128, shape).astype(np.int8)


@pytest.mark.parametrize("M, K, N", [(128, 128, 256), (300, 272, 264), (1000, 1040, 777), (7, 16, 9),
                                     (129, 4096, 520), (2048, 2048, 2048)])
def test_int8_gemm_is_exact(program, hopper, M, K, N):
    A, B = int8(M, K), int8(K, N)
    got = program("hopper_int8").mm(A, B)
    assert got.dtype == np.int32 and got.shape == (M, N)
    np.testing.assert_array_equal(got, A.astype(np.int32) @ B.astype(np.int32))


def test_int8_gemm_extremes(program, hopper):
    """The largest magnitudes i8 holds: -128 times -128 and 127, summed over K = 4096 (±2^26): a byte read
    unsigned, or a sum wrapped narrower than i32, shows at once."""
    A, B = np.full((200, 4096), -128, np.int8), np.full((4096, 136), -128, np.int8)
    B[:, 1::2] = 127
    got = program("hopper_int8").mm(A, B)
    np.testing.assert_array_equal(got, A.astype(np.int32) @ B.astype(np.int32))


@pytest.mark.parametrize("M, K, N", [(300, 272, 264), (129, 1024, 77)])
def test_int8_gemm_of_stored_transposes(program, hopper, M, K, N):
    """A @ Bᵀ reads a stored Bᵀ [N, K] in place (no copy); Aᵀ @ B copies both to K-major rows first."""
    prog = program("hopper_int8")
    A, B = int8(M, K), int8(K, N)
    want = A.astype(np.int32) @ B.astype(np.int32)
    np.testing.assert_array_equal(prog.nt(A, np.ascontiguousarray(B.T)), want)
    np.testing.assert_array_equal(prog.tn(np.ascontiguousarray(A.T), B), want)


def test_int8_gemm_batched(program, hopper):
    A, B = int8(3, 70, 96), int8(3, 96, 136)
    got = program("hopper_int8").batched(A, B)
    np.testing.assert_array_equal(got, np.einsum("bmk,bkn->bmn", A.astype(np.int32), B.astype(np.int32)))


def test_k_not_a_multiple_of_16_is_refused(program, hopper):
    with pytest.raises(Exception, match="K = 100 is not a multiple of 16"):
        program("hopper_int8").mm(int8(64, 100), int8(100, 64))
