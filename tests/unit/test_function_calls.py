"""One @function calling another of the same file (issue 14, item 3): type-checked calls, located errors,
the interpreter running `func.call`, and compiled images where the caller's plan runs the callee's kernels
inlined while the callee keeps its own plan."""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.dialects import make_context
from tessera.interpret import Interpreter
from tessera.mlir import ir

RNG = np.random.default_rng(14)

SRC = """
@function
def inner(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return op.relu(X @ W)

@function
def mid(X: tensor[f32, "A", "B"], W: tensor[f32, "B", "B"]):
    return inner(inner(X, W), W) + 1.0

@function
def outer(X: tensor[f32, "R", 8], W1: tensor[f32, 8, 8], W2: tensor[f32, 8, 3]):
    H = mid(X, W1)
    return inner(H, W2), H
"""


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def relu(x):
    return np.maximum(x, 0)


def numpy_outer(X, W1, W2):
    H = relu(relu(X @ W1) @ W1) + 1.0
    return relu(H @ W2), H


def test_nested_calls_cpu_vs_interpreter_vs_numpy():
    X, W1, W2 = randn(5, 8), randn(8, 8), randn(8, 3)
    image = compiler.compile_source(SRC, "prog.py").image
    prog = executor.load(image)
    cpu = prog.function("outer")(X, W1, W2)
    ref = tessera_frontend_compile(SRC, {"filename": "prog.py"}).interpret("outer", X, W1, W2)
    want = numpy_outer(X, W1, W2)
    for c, r, w in zip(cpu, ref, want):
        np.testing.assert_allclose(c, r, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c, w, rtol=1e-4, atol=1e-4)
    # the callees stay callable, each with its own plan
    np.testing.assert_allclose(prog.function("inner")(X, W1), relu(X @ W1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(prog.function("mid")(X, W1), want[1], rtol=1e-4, atol=1e-4)


def test_callee_used_twice_with_different_extents():
    src = """
@function
def proj(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"]):
    return op.gelu(X @ W)

@function
def two(X: tensor[f32, "B", 16], Wa: tensor[f32, 16, 32], Wb: tensor[f32, 32, 4]):
    return proj(proj(X, Wa), Wb)
"""
    X, Wa, Wb = randn(7, 16), randn(16, 32), randn(32, 4)
    r = compiler.compile_source(src, "prog.py")
    cpu = executor.load(r.image).function("two")(X, Wa, Wb)
    ref = tessera_frontend_compile(src, {"filename": "prog.py"}).interpret("two", X, Wa, Wb)
    assert cpu.shape == (7, 4)
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-5)
    assert set(r.metadata["plans"]) == {"proj", "two"}
    # the caller's plan runs its own copies of the callee's kernels, none of proj's
    assert all(s["kernel"].startswith("two__") for s in r.metadata["plans"]["two"]["steps"] if "kernel" in s)


def _stage(src: str, stage: str) -> str:
    out = {}
    compiler.compile_source(src, "prog.py", stop_after=stage, on_stage=lambda n, a: out.__setitem__(n, a))
    return str(out[stage])


def test_ttir_calls_canonical_inlines_and_fusion_sees_one_body():
    src = """
@function
def act(X: tensor[f32, "N", "D"]):
    return op.gelu(X) * 0.5

@function
def f(X: tensor[f32, "N", "D"], b: tensor[f32, "D"]):
    return act(op.bias_add(X, b)) + 1.0
"""
    ttir = _stage(src, "ttir")
    assert "call @act" in ttir
    canonical = _stage(src, "canonical")
    assert "call @act" not in canonical and "tensor.cast" not in canonical
    r = compiler.compile_source(src, "prog.py")
    assert [s["kernel"] for s in r.metadata["plans"]["f"]["steps"]] == ["f__elementwise0"]


def test_interpreter_runs_inlined_and_called_forms_alike():
    X, W1, W2 = randn(3, 8), randn(8, 8), randn(8, 3)
    with make_context():
        for stage in ("ttir", "canonical"):
            mod = ir.Module.parse(_stage(SRC, stage))
            got = Interpreter(mod).run("outer", X, W1, W2)
            for g, w in zip(got, numpy_outer(X, W1, W2)):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_multiple_results_and_keyword_arguments():
    src = """
@function
def split(X: tensor[f32, "N"], s: f32):
    return X * s, X + s

@function
def f(X: tensor[f32, "N"]):
    a, b = split(s=2.0, X=X)
    return a - b
"""
    X = randn(10)
    r = compiler.compile_source(src, "prog.py")
    np.testing.assert_allclose(executor.load(r.image).function("f")(X), X * 2 - (X + 2), rtol=1e-6, atol=1e-6)


def test_callee_defined_after_caller_and_only():
    src = """
@function
def f(X: tensor[f32, "N"]):
    return g(X) * 3.0

@function
def g(X: tensor[f32, "N"]):
    return op.exp(X)
"""
    X = randn(6)
    r = compiler.compile_source(src, "prog.py", compiler.CompileOptions(kernels=("f",)))
    np.testing.assert_allclose(executor.load(r.image).function("f")(X), np.exp(X) * 3, rtol=1e-5)


def _error(src: str) -> CompileError:
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "prog.py")
    return e.value


@pytest.mark.parametrize("call, message, col", [
    ("g(X, X)", "'g' takes 1 argument(s), got 2", 12),
    ("g()", "'g' takes 1 argument(s): missing Y", 12),
    ("g(Z=X)", "'g' has no parameter 'Z'", 12),
    ("g(op.cast(X, bf16))", "argument 1 ('Y') of 'g' is a tensor of f32, got a tensor of bf16", 12),
    ("g(op.reshape(X, (2, 4)))", "argument 1 ('Y') of 'g' has rank 1 (['K']), got rank 2", 12),
    ("g(2)", "argument 1 ('Y') of 'g' is a tensor of f32, got int 2", 12),
])
def test_located_argument_errors(call, message, col):
    src = f"""
@function
def g(Y: tensor[f32, "K"]):
    return Y + 1.0

@function
def f(X: tensor[f32, 8]):
    return {call}
"""
    e = _error(src)
    assert message in e.message, e.message
    assert (e.line, e.col) == (8, col)


def test_shared_extent_names_must_agree():
    e = _error("""
@function
def g(A: tensor[f32, "K"], B: tensor[f32, "K"]):
    return A + B

@function
def f(X: tensor[f32, 8], Y: tensor[f32, 9]):
    return g(X, Y)
""")
    assert "argument 2 ('B') of 'g', axis 0 ('K' in 'g')" in e.message and "8 and 9 differ" in e.message
    assert e.line == 8


def test_recursion_refused_at_the_call():
    e = _error("""
@function
def f(X: tensor[f32, "N"]):
    return g(X)

@function
def g(X: tensor[f32, "N"]):
    return f(X) + 1.0
""")
    assert "'g' calls 'f' recursively (f -> g -> f)" in e.message
    assert (e.line, e.col) == (8, 12)
    e = _error("""
@function
def f(X: tensor[f32, "N"]):
    return f(X)
""")
    assert "recursively (f -> f)" in e.message


def test_a_kernel_is_not_callable_from_a_function():
    e = _error("""
@kernel
def k(x: tensor[f32, "N"]):
    pass

@function
def f(X: tensor[f32, "N"]):
    return k(X)
""")
    assert "'k' is a @kernel" in e.message and e.line == 8
