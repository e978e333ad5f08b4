"""Operators crossing the ABI (op.descriptor; dialects/tod_abi.py, passes/tod_descriptors.py, plan format 8):
compiled on the CPU against the reference interpreter and numpy (f32: 1e-5 of the largest entry — the kernels
apply an operator's factors in turn, the interpreter forms its matrix in f64 and rounds once), the records the
plan holds, the plan reader's rules, and the mistakes refused at the user's line."""

import json
import pathlib
import sys

import numpy as np
import pytest

from tessera import compiler, executor, plan, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.plan import OperatorRecord, PlanError

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "graph"
RNG = np.random.default_rng(29)

SOURCE = """
@function
def factor(U: tensor[f32, 8, 3], S: tensor[f32, 3], V: tensor[f32, 6, 3], x: tensor[f32, 6, 4]):
    A = op.descriptor("factor", U, S, V, decomposition="svd", name="A")
    return A @ x, op.adjoint(A) @ (A @ x)

@function
def adjoint_param(M: tensor[f32, 8, 6], x: tensor[f32, 8]):
    A = op.descriptor("dense", M, flags=("adjoint",), name="A")
    return A @ x

@function
def implicit(d: tensor[f32, 16], h: tensor[f32, 5], x: tensor[f32, 16, 3]):
    D = op.descriptor("implicit", d, tag="diag", flags=("self_adjoint",), name="D")
    C = op.descriptor("implicit", h, tag="conv1d", n=16, name="C")
    return C @ (D @ x), op.adjoint(C) @ x

@function
def results(M: tensor[f32, 8, 6], d: tensor[f32, 8]):
    B = op.descriptor("dense", 0.5 * M, name="B")
    G = op.descriptor("implicit", d * d, tag="diag", name="G")
    return op.adjoint(B), G
"""


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


ARGS = {
    "factor": lambda: (randn(8, 3), np.abs(randn(3)), randn(6, 3), randn(6, 4)),
    "adjoint_param": lambda: (randn(8, 6), randn(8)),
    "implicit": lambda: (randn(16), randn(5), randn(16, 3)),
    "results": lambda: (randn(8, 6), randn(8)),
}


@pytest.fixture(scope="module")
def built():
    return compiler.compile_source(SOURCE, "ops.py")


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "ops.py"})


def as_list(r):
    return list(r) if isinstance(r, (list, tuple)) else [r]


@pytest.mark.parametrize("name", sorted(ARGS))
def test_compiled_descriptors_match_the_interpreter(built, reference, name):
    args = ARGS[name]()
    got, want = as_list(getattr(executor.load(built.image), name)(*args)), as_list(reference.interpret(name, *args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * float(np.abs(w).max()))


def test_the_interpreter_computes_what_the_descriptor_describes(reference):
    U, S, V, x = ARGS["factor"]()
    y, z = reference.interpret("factor", U, S, V, x)
    A = (U.astype(np.float64) * S) @ V.T
    np.testing.assert_allclose(y, A @ x, rtol=0, atol=1e-5 * np.abs(A @ x).max())
    np.testing.assert_allclose(z, A.T @ (A @ x), rtol=0, atol=1e-5 * np.abs(A.T @ A @ x).max())
    d, h, x = ARGS["implicit"]()
    circulant = np.array([[np.pad(h, (0, 11))[(i - j) % 16] for j in range(16)] for i in range(16)])
    want = circulant @ (d[:, None] * x), circulant.T @ x
    for g, w in zip(reference.interpret("implicit", d, h, x), want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * np.abs(w).max())


def test_the_plan_records_each_operator_with_its_contracts(built):
    ops = {n: p.get("operators") for n, p in built.metadata["plans"].items()}
    assert ops["factor"] == [{"name": "A", "role": "param", "repr": "factor", "tag": "none", "flags": [],
                              "payload": [0, 1, 2], "decomposition": "svd"}]
    assert ops["adjoint_param"] == [{"name": "A", "role": "param", "repr": "dense", "tag": "none",
                                     "flags": ["adjoint"], "payload": [0]}]
    assert [(o["name"], o["tag"], o["payload"]) for o in ops["implicit"]] == [("D", "diag", [0]), ("C", "conv1d", [1])]
    # an adjoint result crosses as its operand's payload with the adjoint flag (ABI spec §5.3)
    assert ops["results"] == [
        {"name": "B", "role": "result", "repr": "dense", "tag": "none", "flags": ["adjoint"], "payload": [0]},
        {"name": "G", "role": "result", "repr": "implicit", "tag": "diag", "flags": [], "payload": [1]}]


def test_an_operator_parameter_the_function_never_applies_is_still_recorded():
    src = """
@function
def f(M: tensor[f32, 4, 4], x: tensor[f32, 4]):
    A = op.descriptor("dense", M, name="A")
    return x * 2.0
"""
    ops = compiler.compile_source(src, "u.py").metadata["plans"]["f"]["operators"]
    assert ops == [{"name": "A", "role": "param", "repr": "dense", "tag": "none", "flags": [], "payload": [0]}]


def test_mor_example_matches_numpy():
    sys.path.insert(0, str(EXAMPLES))
    from mor import mor
    W, b, r, X = randn(64, 64) / 8, randn(64, 1) / 10, randn(1, 64) / 8, randn(64, 7)
    g = 1 / (1 + np.exp(-(r.astype(np.float64) @ X)))
    h, out, stay = X.astype(np.float64), 0.0, 1.0
    for k in range(3):
        h = h + np.maximum(W @ h + b, 0)
        out, stay = out + stay * ((1 - g) if k < 2 else 1) * h, stay * g
    np.testing.assert_allclose(mor(W, b, r, X), out, rtol=0, atol=1e-5 * np.abs(out).max())


def test_block_sparse_descriptors_run_in_the_interpreter_and_compile():
    src = """
@function
def bsr(B: tensor[f32, 3, 4, 4], rows: tensor[i32, 3], cols: tensor[i32, 3], x: tensor[f32, 8]):
    A = op.descriptor("blocksparse", B, rows, cols, din=8, dout=12, name="A")
    return A @ x
"""
    B, x = randn(3, 4, 4), randn(8)
    rows, cols = np.array([0, 2, 2], np.int32), np.array([1, 0, 1], np.int32)
    dense = np.zeros((12, 8))
    for k in range(3):
        dense[4 * rows[k]:4 * rows[k] + 4, 4 * cols[k]:4 * cols[k] + 4] += B[k]
    got = tessera_frontend_compile(src, {"filename": "b.py"}).interpret("bsr", B, rows, cols, x)
    np.testing.assert_allclose(got, dense @ x, rtol=0, atol=1e-5 * np.abs(dense @ x).max())
    built = compiler.compile_source(src, "b.py")   # more in tests/unit/test_blocksparse_compile.py
    np.testing.assert_allclose(executor.load(built.image).bsr(B, rows, cols, x), dense @ x, rtol=0,
                               atol=1e-5 * np.abs(dense @ x).max())
    assert built.metadata["plans"]["bsr"]["operators"] == [
        {"name": "A", "role": "param", "repr": "blocksparse", "tag": "none", "flags": [], "payload": [0, 1, 2]}]


@pytest.mark.parametrize("line, message", [
    ('op.descriptor("factor", M, x, M, name="A")', "a factor (spectral) operator declares its decomposition="),
    ('op.descriptor("dense", M, flags=("recursion",), name="A")',
     "a recursion operator (flags=('recursion',)), and only one, declares its stack-frame size frame_bytes="),
    ('op.descriptor("dense", M, flags=("recursion",), frame_bytes=8, depth=2, name="A")',
     "'tod.descriptor' frame_bytes 8 cannot hold one level's vector of 4 f32 entries (16 bytes)"),
    ('op.descriptor("dense", M, flags=("recursion",), frame_bytes=16, depth=1, name="A")',
     "'tod.descriptor' is applied 2 times, more than its declared recursion depth 1"),
    ('op.descriptor("dense", M, flags=("hermitian",))', "flags= takes names among unitary, self_adjoint"),
    ('op.descriptor("sparse", M)', "op.descriptor's first argument is the representation"),
    ('op.descriptor("dense", M, M)', "a dense descriptor carries 1 payload tensor(s), got 2"),
    ('op.dense(M)', "result 1 is an operator 4 -> 4 of f32 built here: an operator crosses the ABI as an "
                    "op.descriptor"),
    # the frontend fuzzer's duplicated line: a plan gives a parameter to one operator at most (was a PlanError)
    ('op.descriptor("dense", M, name="A")\n    A = op.descriptor("dense", M, name="B")',
     "payload 0 is already the payload of operator 'A': a tensor crosses the ABI as one operator's payload"),
])
def test_mistakes_are_refused_at_the_users_line(line, message):
    src = f"""
@function
def f(M: tensor[f32, 4, 4], x: tensor[f32, 4]):
    A = {line}
    return A @ (A @ x), A
"""
    with pytest.raises(CompileError, match=r"f.py:\d+:\d+: error: .*" + message.replace("(", r"\(").replace(
            ")", r"\)").replace("*", r"\*")):
        compiler.compile_source(src, "f.py")


RECORD = OperatorRecord(name="A", role="param", repr="factor", payload=(0, 1, 2), flags=("unitary", "recursion"),
                        decomposition="svd", frame_bytes=64, depth=3)


def _plan(*records):
    from tessera.plan import Plan, Value
    return Plan(params=("U", "S", "V"), args=("u", "s", "v"), results=("y",),
                values={k: Value("f32", ("N",)) for k in ("u", "s", "v", "y")}, steps=(), operators=records)


def test_operator_records_round_trip_and_need_version_8():
    section = plan.encode({"f": _plan(RECORD)})
    assert plan.decode(section)["f"].operators == (RECORD,)
    doc = json.loads(section)
    doc["version"] = 7
    with pytest.raises(PlanError, match="version 7 has 'operators', which version 8 introduced"):
        plan.decode(json.dumps(doc).encode())


@pytest.mark.parametrize("change, message", [
    (dict(decomposition=None), "a factor \\(spectral\\) operator, and only one, declares its decomposition"),
    (dict(frame_bytes=None), "a recursion operator, and only one, declares frame_bytes and depth"),
    (dict(depth=0), "frame_bytes 64 and depth 0 must be positive"),
    (dict(flags=("recursion", "unitary")), "repeat a flag or come out of the order"),
    (dict(payload=(0, 1, 5)), "payload index 5 is not one of the function's 3 parameters"),
    (dict(repr="dense", payload=(0,), decomposition=None, tag="diag"), "tag 'diag' is not one of none"),
])
def test_malformed_operator_records_are_refused(change, message):
    import dataclasses
    with pytest.raises(PlanError, match=message):
        plan.encode({"f": _plan(dataclasses.replace(RECORD, **change))})
