"""Valid but silly programs once hung the compiler or exhausted its memory (`@function(stages=1000000)`, an
unused `x = 9 ** 9 ** 9`, `max(range(10**18))`): hints have ranges, constant expressions have limits checked
before the work, loops unroll a bounded number of times, and only the module constants a function reads are
evaluated. Each case runs in a child process with a deadline, so a regression fails instead of hanging."""

import os
import subprocess
import sys
import textwrap

import pytest

from tessera.frontend import consts
from tessera.options import HINT_LIMITS, CompileOptions

SAXPY = """
@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""
MATMUL = """
def mm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return A @ B
"""


def compile_in_child(source: str, timeout: float = 60) -> subprocess.CompletedProcess:
    script = textwrap.dedent("""
        import sys, tessera
        from tessera.diagnostics import CompileError
        try:
            tessera.compile(sys.stdin.read(), "prog.py")
        except CompileError as e:
            print(e)
            sys.exit(1)
    """)
    return subprocess.run([sys.executable, "-c", script], input=source, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, TESSERA_CACHE="0"))


@pytest.mark.parametrize("prelude", ["x = 9 ** 9 ** 9", "y = max(range(10**18))", "z = 1 << 10**18",
                                     "s = 'ab' * 10**12", "max(range(10**18))"])
def test_unused_module_constants_are_never_evaluated(prelude):
    p = compile_in_child(prelude + "\n" + SAXPY)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("hint, message", [
    ("stages=1000000", "stages= takes a positive integer up to 16, not 1000000"),
    ("stages=10000", "stages= takes a positive integer up to 16"),
    ("stages=0", "stages= takes a positive integer"),
    ("vector=1048576", "vector= takes a positive integer, a power of two up to 64"),
    ("vector=3", "a power of two"),
    ("tile=(1000000000, 64, 64)", "each at most 4096"),
])
def test_every_hint_is_bounded_at_its_line(hint, message):
    p = compile_in_child(f"@function({hint})" + MATMUL)
    assert p.returncode == 1 and "prog.py:1:" in p.stdout and message in p.stdout, p.stdout + p.stderr


def test_a_specialization_is_bounded_too():
    p = compile_in_child('@op.specialize(when={"backend": "cpu"}, use={"stages": 99})\n@function' + MATMUL)
    assert p.returncode == 1 and "stages= takes a positive integer up to 16" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("expr, message", [
    ("9 ** 9 ** 9", "a power of more than 64 bits"),
    ("1 << 10**18", "a shift to more than 64 bits"),
    ("max(range(10**18))", "max(): the argument has more than 65536 items"),
    ("min(range(-10**18, 10**18))", "min(): the argument has more than 65536 items"),
    ("(1, 2) * 10**9", "a constant sequence of more than 65536 items"),
    ("10**9 * 'ab'", "a constant sequence of more than 65536 items"),
])
def test_constant_expressions_used_by_a_function_are_bounded(expr, message):
    src = f"N = {expr}\n@function\ndef f(A: tensor[f32, 'M']):\n    n = {expr}\n    return A\n"
    p = compile_in_child(src)
    assert p.returncode == 1 and "prog.py:4:9: error: " + message in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("expr, message", [("9 ** 9 ** 9", "a power of more than 64 bits"),
                                           ("1 << 10**18", "a shift to more than 64 bits")])
def test_kernel_constants_are_bounded(expr, message):
    src = f"@kernel\ndef k(X: tensor[float]):\n    X[launch.thread_id()] = {expr}\n"
    p = compile_in_child(src)
    assert p.returncode == 1 and "prog.py:3:" in p.stdout and message in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("loops", ["for i in range(10**9):", "for i in range(-2**63, 2**63 - 1):",
                                   "for i in range(100):\n        for j in range(100):"])
def test_unrolled_loops_are_bounded(loops):
    src = f"@function\ndef f(A: tensor[f32, 'M']):\n    {loops}\n            A = A + 1.0\n    return A\n"
    p = compile_in_child(src.replace("\n            A", "\n" + " " * (8 if loops.count("for") == 1 else 12) + "A"))
    assert p.returncode == 1 and f"at most {consts.MAX_UNROLLED} iterations" in p.stdout, p.stdout + p.stderr


def test_constants_within_the_limits_still_fold():
    assert consts.binop(__import__("ast").Pow(), 2, 64) == 1 << 64
    assert consts.binop(__import__("ast").LShift(), 1, 63) == 1 << 63
    assert consts.binop(__import__("ast").Mult(), (1,), 3) == (1, 1, 1)
    p = compile_in_child("N = 2 ** 10\n@function\ndef f(A: tensor[f32, 'M']):\n"
                         "    for i in range(max(range(4))):\n        A = A * float(N)\n    return A\n")
    assert p.returncode == 0, p.stdout + p.stderr


def test_option_hints_are_bounded():
    with pytest.raises(ValueError, match="hint stages=1000 is out of range"):
        CompileOptions(hints=(("stages", 1000),))
    with pytest.raises(ValueError, match="hint bogus=1 is out of range"):
        CompileOptions(hints=(("bogus", 1),))
    assert CompileOptions(hints=tuple((k, v) for k, v in HINT_LIMITS.items())).hints
