"""Broadcasts a compiled function checks at the call (plan format 7's `broadcasts`): the plan's extent of a
broadcast is max(a, b), numpy's only where a and b are equal or one of them is 1 (and the other not 0). A
@function's shapes are checked by the frontend (two symbols broadcast only where equal), but a tile program's
parameters have their own symbols: before the check, gemm_mma's `C += A @ B` (examples/tile/partial_tiles.py)
with C of 7 columns against B's 5 ran and read `A @ B` modulo 5, and with C of 0 columns divided by 0 inside the
kernel (SIGFPE on x86: the fuzzer's crash in tests/c/test_robustness.py)."""

import json
import pathlib

import numpy as np
import pytest

from tessera import compiler, executor, plan
from tessera.image.reader import read_image

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def image():
    source = (REPO / "examples/tile/partial_tiles.py").read_text()
    return compiler.compile_source(source, "partial_tiles.py").image


def test_the_plan_lists_the_pairs_it_broadcasts(image):
    doc = json.loads(read_image(image).plan)
    assert doc["version"] == plan.VERSION
    assert doc["functions"]["gemm_mma"]["broadcasts"] == [["B_1", "C_1"], ["A_0", "C_0"]]


@pytest.mark.parametrize("c", [(3, 5), (1, 5), (3, 1), (1, 1)])
def test_broadcastable_accumulators_match_numpy(image, c):
    gemm = executor.load(image).function("gemm_mma")
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((3, 2), dtype=np.float32), rng.standard_normal((2, 5), dtype=np.float32)
    C = rng.standard_normal(c, dtype=np.float32)
    if c == (3, 5):
        want = A @ B + C   # before the call: the program writes its result into C
        np.testing.assert_allclose(gemm(A, B, C), want, rtol=1e-5, atol=1e-6)
    else:  # the result is larger than C, which the program also writes: refused, as before
        with pytest.raises(ValueError, match="their extents must agree"):
            gemm(A, B, C)


@pytest.mark.parametrize("c, message", [
    ((3, 7), r"B.shape\[1\] = 5 and C.shape\[1\] = 7 do not broadcast: they must be equal, or one of them 1 "
             r"\(numpy's rule\)"),
    ((2, 5), r"A.shape\[0\] = 3 and C.shape\[0\] = 2 do not broadcast"),
    ((3, 0), r"B.shape\[1\] = 5 and C.shape\[1\] = 0 do not broadcast"),
    ((0, 5), r"A.shape\[0\] = 3 and C.shape\[0\] = 0 do not broadcast"),
])
def test_accumulators_that_do_not_broadcast_are_refused_not_divided_by(image, c, message):
    gemm = executor.load(image).function("gemm_mma")
    with pytest.raises(ValueError, match=message):
        gemm(np.ones((3, 2), np.float32), np.ones((2, 5), np.float32), np.zeros(c, np.float32))


def test_one_against_zero_is_refused(image):
    """numpy broadcasts 1 against 0 to 0; the plan's max(1, 0) is 1, so compiled functions refuse it."""
    gemm = executor.load(image).function("gemm_k_tail")
    with pytest.raises(ValueError, match=r"C.shape\[0\] = 0 and A.shape\[0\] = 1 do not broadcast: .*an extent "
                                         r"of 1 against 0, which numpy allows"):
        gemm(np.ones((1, 2), np.float32), np.ones((2, 5), np.float32), np.zeros((0, 5), np.float32))
