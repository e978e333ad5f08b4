"""A C host passes operators to a compiled function as the spec's TessOperatorDesc (tessera/operator.h,
tsrFunctionBindOperator): a factor (svd) operator parameter and a dense adjoint operator result, on the CPU
backend, against numpy (f32: 1e-5 of the largest entry; the kernels apply V*, S and U in turn where numpy
forms the product in f64); descriptors of another repr, tag or flags are refused, naming the operator."""

import numpy as np
import pytest

from hostutil import run

RNG = np.random.default_rng(29)

SOURCE = """
@function
def apply_factor(U: tensor[f32, 8, 3], S: tensor[f32, 3], V: tensor[f32, 6, 3], x: tensor[f32, 6, 4]):
    A = op.descriptor("factor", U, S, V, decomposition="svd", flags=("normal",), name="A")
    return A @ x, op.adjoint(op.descriptor("dense", 2.0 * U, name="B"))
"""


def test_a_c_host_passes_operator_descriptors(build_host, tmp_path):
    compiler = pytest.importorskip("tessera.compiler")
    image = tmp_path / "ops.tessera"
    image.write_bytes(compiler.compile_source(SOURCE, "ops.py").image)
    U, V = (np.linalg.qr(RNG.standard_normal((n, 3)))[0].astype(np.float32) for n in (8, 6))
    S = np.array([3.0, 1.5, 0.25], np.float32)
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    for name, a in (("U", U), ("S", S), ("V", V), ("x", x)):
        (tmp_path / f"{name}.bin").write_bytes(a.tobytes())
    out = run([build_host("host_operator.c"), image, tmp_path]).stdout
    assert out.rstrip().endswith("0 failed"), out
    assert "operator A: param repr 1 tag 1 flags 0x4 payload 0 1 2" in out
    assert "operator B: result repr 0 tag 0 flags 0x8 payload 1" in out
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), np.float32).reshape(8, 4)
    want = (U.astype(np.float64) * S) @ V.T @ x
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-5 * np.abs(want).max())
    B = np.frombuffer((tmp_path / "B.bin").read_bytes(), np.float32).reshape(8, 3)
    np.testing.assert_array_equal(B, 2.0 * U)   # the payload of B = (2U)*, the adjoint flag saying which
