"""Bitwise and shift ops of integer tensors, logic of bool tensors (issue 17, item 3; docs/language.md,
"Integer tensors"): `& | ^ ~` (op.bitwise_and, bitwise_or, bitwise_xor, invert / bitwise_not) are numpy's on
every integer dtype and on bool (logical and, or, xor, not); `<< >>` (op.left_shift, right_shift) take the
count modulo the type's width (numpy's result past the width is C's undefined behaviour), `>>` arithmetic for
signed types and logical for u8. The CPU image, the interpreter and numpy agree exactly; the programs compile
for PTX, AMDGPU and SPIR-V and run on the OpenCL CPU runtime where there is one. The refusals (floats, bool
shifts, Python's `not`) are test_integer_tensors.py's."""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.options import CompileOptions

from test_integer_tensors import check, compiled
from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(29)
INTS = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8}


def source(dt: str) -> str:
    return f"""
@function
def bits(A: tensor[{dt}, "N", "D"], B: tensor[{dt}, "N", "D"], s: tensor[{dt}, "D"]):
    return (A & B, A | B, A ^ B, ~A, A << B, A >> B, op.bitwise_not(A), op.left_shift(A, 3) ^ 5, A >> s,
            (A & 12) | (B << 1), op.bitwise_and(A, B))

@function
def logic(A: tensor[{dt}, "N", "D"], B: tensor[{dt}, "N", "D"]):
    p, q = A < B, A == 0
    return p & q, p | q, p ^ q, ~p, op.where(~(p | q), A, B), op.cast(p & ~q, {dt})
"""


def operands(dt: str, shape=(6, 37)):
    info = np.iinfo(INTS[dt])
    a = RNG.integers(info.min, info.max, shape, dtype=np.int64, endpoint=True).astype(INTS[dt])
    a.flat[:4] = [info.min, info.max, 0, 1]
    lo = -3 * info.bits if info.min < 0 else 0
    b = RNG.integers(lo, 3 * info.bits, shape).astype(INTS[dt])   # counts past the width, negative ones
    b.flat[:4] = [info.bits, info.bits - 1, 0, 1]
    s = RNG.integers(lo, 3 * info.bits, shape[1]).astype(INTS[dt])
    return a, b, s


def shifted(a, b, left: bool):
    """numpy's shift with the count taken modulo the width (the language's rule)."""
    info = np.iinfo(a.dtype)
    n = (b.astype(np.int64) & (info.bits - 1)).astype(a.dtype)
    with np.errstate(all="ignore"):
        return np.left_shift(a, n) if left else np.right_shift(a, n)


@pytest.fixture(scope="module", params=list(INTS))
def programs(request):
    return (request.param, *compiled(source(request.param), f"{request.param}.py"))


def test_bitwise_and_shifts_are_numpys_with_the_count_modulo_the_width(programs):
    dt, mod, ref = programs
    a, b, s = operands(dt)
    t = INTS[dt]
    want = [a & b, a | b, a ^ b, ~a, shifted(a, b, True), shifted(a, b, False), ~a,
            shifted(a, np.full_like(a, 3), True) ^ t(5), shifted(a, np.broadcast_to(s, a.shape), False),
            (a & t(12)) | shifted(b, np.ones_like(b), True), a & b]
    check(mod, ref, "bits", want, a, b, s)
    got = np.asarray(mod.function("bits")(a, b, s)[5]).flat
    info = np.iinfo(t)
    # a count of `bits` shifts by 0 (not to 0 or -1, as numpy's); max >> (bits - 1) is 0 signed, 1 for u8
    assert got[0] == (a.flat[0] >> 0) and got[1] == (info.max >> (info.bits - 1))


def test_logic_of_bool_tensors(programs):
    dt, mod, ref = programs
    a, b, _ = operands(dt)
    p, q = a < b, a == 0
    t = INTS[dt]
    want = [p & q, p | q, p ^ q, ~p, np.where(~(p | q), a, b), (p & ~q).astype(t)]
    check(mod, ref, "logic", want, a, b)


@pytest.mark.parametrize("target", ["ptx", "amdgpu", "spirv"])
def test_the_programs_compile_for_every_gpu_target(target):
    for dt in INTS:
        assert compiler.compile_source(source(dt), f"{dt}.py", CompileOptions(target=target)).image


@pytest.mark.parametrize("dt", list(INTS))
def test_the_programs_run_on_the_opencl_cpu_runtime(opencl, dt):  # noqa: F811
    src = source(dt)
    mod = executor.load(compiler.compile_source(src, f"{dt}.py", CompileOptions(target="spirv")).image, opencl)
    ref = tessera_frontend_compile(src, {"filename": f"{dt}.py"})
    a, b, s = operands(dt)
    for name, args in (("bits", (a, b, s)), ("logic", (a, b))):
        for g, w in zip(mod.function(name)(*args), ref.interpret(name, *args), strict=True):
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)
