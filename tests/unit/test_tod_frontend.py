"""Operator programs: mistakes are reported at the user's file:line:col, Python operators on operators build
the algebra's ops, and nothing a user writes surfaces as a traceback."""

import textwrap

import pytest

from tessera import tessera_frontend_compile

HEADER = """\
from tessera import *

@function
def f(M: tensor[f32, 4, 8], N: tensor[f32, 8, 8], W: tensor[f64, 8, 8], x: tensor[f32, 8], h: tensor[f32, 3],
      s: f32):
"""
LINE = HEADER.count("\n") + 1  # the line of the statement under test

CASES = [
    ("y = op.dense(x)", "op.dense matrix must be a 2-D tensor, got a tensor of f32 of shape [8]"),
    ("y = op.dense(M) @ op.dense(M)", "compose: the right operator's Dout and the left operator's Din: 4 and 8 differ"),
    ("y = op.dense(M) @ h", "operator Din and axis 0 of the tensor: 8 and 3 differ"),
    ("y = op.dense(M) + op.dense(N)", "plus: the operands' Dout: 4 and 8 differ"),
    ("y = op.expm(op.dense(M))", "expm needs a square operator: Din and Dout: 8 and 4 differ"),
    ("y = op.spectral(op.dense(M), kind='eig')", "needs a square operator: Din and Dout: 8 and 4 differ"),
    ("y = op.fft(0)", "op.fft size must be a positive int, got 0"),
    ("y = op.eye('K')", "op.eye size must be static, and 'K' is not known here"),
    ("y = op.conv1d(h, 2)", "op.conv1d: the kernel has 3 taps, more than the signal length 2"),
    ("y = op.power(op.dense(N), -1)", "an operator power must be a non-negative int, got -1"),
    ("y = op.dense(N) ** 1.5", "an operator power must be a non-negative int, got 1.5"),
    ("y = op.truncate(op.spectral(op.dense(N)), 9)", "op.truncate: k = 9 exceeds the factorization's rank 8"),
    ("y = op.truncate(op.dense(N), 2)", "op.truncate takes a factorization from op.spectral, got an operator 8 -> 8"),
    ("y = op.spectral(op.dense(N), kind='qr')", "op.spectral kind must be one of svd, eig, eigh, got 'qr'"),
    ("y = op.pseudoinverse(op.spectral(op.dense(N), kind='eig'))", "needs an svd or eigh factorization"),
    ("y = op.pseudoinverse(op.dense(N), rcond=2)", "rcond must be a number in [0, 1), got 2"),
    ("y = op.dense(N) * op.dense(N)", "is not defined on an operator 8 -> 8 of f32 and an operator 8 -> 8 of f32"),
    ("y = op.dense(N) / 0", "division of an operator by zero"),
    ("y = op.scale(x, op.dense(N))", "the scale factor must be a scalar (a 0-d tensor), got shape [8]"),
    ("y = op.fft(8) @ op.dense(W)", "compose operands have different precisions (c64, f64); use op.cast"),
    ("y = op.norm(x)", "op.norm takes operators, got a tensor of f32"),
    ("y = op.kronecker(op.dense(N))", "op.kronecker takes at least 2 operator(s), got 1 argument(s)"),
    ("y = x @ op.dense(N)", "'@' needs two tensors, got a tensor of f32 and an operator 8 -> 8 of f32"),
    ("return op.dense(N)", "result 0 is an operator 8 -> 8 of f32 built here: an operator crosses the ABI as an op.descriptor"),
    ("y = op.resolvent(op.dense(N), 1j)", "resolvent z: complex constants are not supported"),
    ("y = op.is_unitary(op.dense(N), tol=-1)", "tol must be a positive number, got -1"),
    ("y = op.projector(M)", "op.projector: 8 columns in dimension 4 cannot be orthonormal"),
    ("y = op.dense(N, accum=f16)", "accum f16 must be a float at least as wide as f32"),
    ("y = op.eye(4, dtype=int32)", "an operator must have float or complex entries, got i32"),
    ("y = op.fft(8) @ x + 1.0", "a Python number cannot meet a c64 tensor here"),
    ("y = op.apply(op.dense(N), s)", "an operator applies to a vector or a stack of column vectors"),
    # a fuzzed extent once reached MLIR's i64 attribute as 2^68 (std::bad_cast, a traceback)
    ("y = op.kronecker(op.eye(4294967296), op.eye(4294967296))", "exceeds the largest extent, 2^63 - 1"),
]


@pytest.mark.parametrize("stmt, message", CASES, ids=[c[0] for c in CASES])
def test_errors_are_located(compile_error, stmt, message):
    e = compile_error(HEADER + "    " + stmt + "\n    return x\n")
    assert message in e.message, str(e)
    assert (e.filename, e.line) == ("user.py", LINE) and e.col >= 5, str(e)


def build(body: str):
    m = tessera_frontend_compile(HEADER + textwrap.indent(textwrap.dedent(body), "    "), {"filename": "user.py"})
    return m.text()


def test_python_operators_build_the_algebra():
    text = build("""
        A, B = op.dense(N), op.dense(N)
        C = -A + B @ A - B / 4.0 + A * s
        return (C ** 2) @ x
        """)
    for name in ("tod.compose", "tod.plus", "tod.scale", "tod.power", "tod.apply"):
        assert f'"{name}"' in text
    assert text.count('"tod.scale"') == 4  # -A, B / 4, -(B / 4), A * s
    assert "value = 2.500000e-01 : f32" in text and "value = -1.000000e+00 : f32" in text


def test_extents_unify_through_operators():
    # "K" is bound by N's columns once the operator meets the tensor; the result has the static extent.
    text = tessera_frontend_compile(textwrap.dedent("""
        from tessera import *

        @function
        def g(A: tensor[f32, "K", "K"], x: tensor[f32, 8]):
            return op.dense(A) @ x
        """), {"filename": "user.py"}).text()
    assert "-> tensor<8xf32>" in text
