"""Integer tensors (i8, i16, i32, i64) in Graph IR (issue 17, item 3; docs/language.md, "Integer tensors"), and
the comparisons and `op.where` that bool tensors make possible.

Every op and dtype runs on the CPU image, the interpreter and numpy, compared exactly: arithmetic wraps in the
tensor's type as numpy's does, `//` and `%` are Python's (floor, the divisor's sign; numpy's 0 for a zero
divisor, and the minimum // -1 wrapping to itself), float -> integer casts truncate toward zero and saturate
(NaN -> 0), reductions stay in the tensor's type. The same programs compile for PTX (ptxas), AMDGPU and SPIR-V
(spirv-val, both run by compilation where installed) and run on the OpenCL CPU runtime where there is one.
What has no integer meaning is refused at the user's line."""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(17)
INTS = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}


def source(dt: str) -> str:
    return f"""
@function
def arith(A: tensor[{dt}, "N", "D"], B: tensor[{dt}, "N", "D"]):
    return A + B, A - B, A * B, A // B, A % B, -A, op.abs(A), op.maximum(A, B), op.minimum(A, B)

@function
def mixed(A: tensor[{dt}, "N", "D"], b: tensor[{dt}, "D"]):
    return op.relu(A * 3 - b) // 4 + A % -3, op.square(A) % 7

@function
def reduce(A: tensor[{dt}, "N", "D"]):
    return op.sum(A, -1), op.max(A, -1), op.min(A, -1), op.prod(A, -1), op.sum(A, 0), op.max(A, 0)

@function
def to_float(A: tensor[{dt}, "N", "D"]):
    return op.cast(A, f32), op.cast(A, f64), op.cast(A, f16)

@function
def from_float(X: tensor[f32, "N", "D"], Y: tensor[f64, "N", "D"]):
    return op.cast(X, {dt}), op.cast(Y, {dt})

@function
def between(A: tensor[{dt}, "N", "D"]):
    return op.cast(A, i8), op.cast(A, i16), op.cast(A, i32), op.cast(A, i64)

@function
def compare(A: tensor[{dt}, "N", "D"], B: tensor[{dt}, "N", "D"], X: tensor[f32, "N", "D"]):
    return (A < B, A <= B, A > B, A >= B, A == B, A != B, op.where(A < B, A, B), op.where(A > 0, A // 2, -1),
            op.where(X > 0.5, X, 0.0), op.cast(A != 0, {dt}), op.cast(A > B, f32), op.cast(X, bool),
            op.cast(A, bool))
"""


def operands(dt: str, shape=(7, 37)) -> tuple[np.ndarray, np.ndarray]:
    """Values across the type's range, its edges included, and divisors with both signs, 0 and -1."""
    info = np.iinfo(INTS[dt])
    a = RNG.integers(info.min, info.max, shape, dtype=np.int64, endpoint=True).astype(INTS[dt])
    b = RNG.integers(-9, 10, shape).astype(INTS[dt])
    a.flat[:8] = [info.min, info.max, -7, 7, -7, 7, info.min, 0]
    b.flat[:8] = [-1, -1, 2, -2, -2, 2, 0, 0]
    if dt == "i64":  # to f32 in one rounding (numpy's astype), where two through f64 would round up
        a.flat[8] = 2 ** 62 + 2 ** 38 + 1
    return a, b


def compiled(src: str, filename: str) -> tuple:
    """`src`'s CPU image loaded, and its module for the reference interpreter."""
    return executor.load(compiler.compile_source(src, filename).image), \
        tessera_frontend_compile(src, {"filename": filename})


@pytest.fixture(scope="module", params=list(INTS))
def programs(request):
    return (request.param, *compiled(source(request.param), f"{request.param}.py"))


def check(mod, ref, name, want, *args):
    got, interp = mod.function(name)(*args), ref.interpret(name, *args)
    for g, i, w in zip(got, interp, want, strict=True):
        assert g.dtype == w.dtype and i.dtype == w.dtype, (name, g.dtype, i.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"{name}: the CPU image")
        np.testing.assert_array_equal(i, w, err_msg=f"{name}: the interpreter")


def test_elementwise_arithmetic_is_numpys(programs):
    dt, mod, ref = programs
    a, b = operands(dt)
    with np.errstate(all="ignore"):
        want = [a + b, a - b, a * b, a // b, a % b, -a, np.abs(a), np.maximum(a, b), np.minimum(a, b)]
    check(mod, ref, "arith", want, a, b)
    q, r = np.asarray(mod.function("arith")(a, b)[3]).flat, np.asarray(mod.function("arith")(a, b)[4]).flat
    info = np.iinfo(INTS[dt])
    assert (q[0], q[2], q[3], q[4], q[5], q[6]) == (info.min, -4, -4, 3, 3, 0)   # wraps, floors, 0 for / 0
    assert (r[2], r[3], r[4], r[5], r[6]) == (1, -1, -1, 1, 0)                 # the divisor's sign


def test_fused_with_literals_and_a_broadcast(programs):
    dt, mod, ref = programs
    a, _ = operands(dt)
    b = RNG.integers(-50, 50, a.shape[1]).astype(INTS[dt])
    with np.errstate(all="ignore"):
        three, four, minus3, seven = (INTS[dt](v) for v in (3, 4, -3, 7))
        want = [np.maximum(a * three - b, 0) // four + a % minus3, np.square(a) % seven]
    check(mod, ref, "mixed", want, a, b)


def test_reductions_stay_in_the_tensors_type(programs):
    dt, mod, ref = programs
    a, _ = operands(dt)
    t = INTS[dt]
    with np.errstate(all="ignore"):
        want = [np.sum(a, -1, dtype=t), np.max(a, -1), np.min(a, -1), np.prod(a, -1, dtype=t),
                np.sum(a, 0, dtype=t), np.max(a, 0)]
    check(mod, ref, "reduce", want, a)


def test_integer_to_float_rounds_once(programs):
    dt, mod, ref = programs
    a, _ = operands(dt)
    with np.errstate(over="ignore"):  # past f16's range: infinities
        want = [a.astype(np.float32), a.astype(np.float64), a.astype(np.float16)]
    check(mod, ref, "to_float", want, a)


def test_float_to_integer_truncates_and_saturates(programs):
    dt, mod, ref = programs
    info = np.iinfo(INTS[dt])
    x = (RNG.standard_normal((5, 33)) * 100).astype(np.float32)
    x.flat[:10] = [2.9, -2.9, 0.5, -0.5, np.nan, np.inf, -np.inf, 1e30, -1e30, -0.0]
    y = x.astype(np.float64)
    y.flat[10:14] = [float(info.max) + 0.75 if dt != "i64" else 2.0 ** 63, float(info.min) - 0.75,
                     float(info.max) - 0.5 if dt != "i64" else 2.0 ** 62, float(info.min)]

    def sat(v):
        t = np.trunc(np.nan_to_num(v.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf))
        out = np.clip(t, -2.0 ** (info.bits - 1), 2.0 ** (info.bits - 1) - 1)
        big = t >= 2.0 ** (info.bits - 1)
        return np.where(big, info.max, np.where(big, 0, out).astype(np.int64)).astype(INTS[dt])

    want = [sat(x), sat(y)]
    assert want[0].flat[0] == 2 and want[0].flat[1] == -2 and want[0].flat[4] == 0 and want[0].flat[5] == info.max
    check(mod, ref, "from_float", want, x, y)


def test_casts_between_integers_wrap(programs):
    dt, mod, ref = programs
    a, _ = operands(dt)
    check(mod, ref, "between", [a.astype(t) for t in INTS.values()], a)


def test_comparisons_and_where_are_numpys(programs):
    dt, mod, ref = programs
    a, b = operands(dt)
    b.flat[8:40] = a.flat[8:40]   # equal elements too
    x = RNG.standard_normal(a.shape).astype(np.float32)
    x.flat[:3] = [np.nan, 0.5, -0.0]
    t = INTS[dt]
    want = [a < b, a <= b, a > b, a >= b, a == b, a != b, np.where(a < b, a, b), np.where(a > 0, a // t(2), t(-1)),
            np.where(x > 0.5, x, np.float32(0)), (a != 0).astype(t), (a > b).astype(np.float32), x.astype(bool),
            a.astype(bool)]
    check(mod, ref, "compare", want, a, b, x)


def test_bool_tensors_through_layout_kernels():
    """A bool tensor transposed and reshaped keeps one byte an element (the layout kernels copy bytes)."""
    src = """
@function
def layout(A: tensor[i16, "N", "D"], B: tensor[i16, "N", "D"]):
    T = op.transpose(A < B)
    return T, op.reshape(A > B, [-1]), op.where(T, op.cast(op.transpose(A), f32), -2.0)
"""
    a, b = operands("i16", (6, 41))
    mod = executor.load(compiler.compile_source(src, "layout.py").image)
    check(mod, tessera_frontend_compile(src, {"filename": "layout.py"}), "layout",
          [(a < b).T, (a > b).ravel(), np.where((a < b).T, a.T.astype(np.float32), np.float32(-2.0))], a, b)


def test_integer_matmul_accumulates_in_i32_in_the_interpreter():
    """The issue's reference semantics: int8 x int8 accumulates in i32 and returns i32 (it wrapped in i8)."""
    src = """
@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
"""
    a = RNG.integers(-128, 128, (9, 300)).astype(np.int8)
    b = RNG.integers(-128, 128, (300, 5)).astype(np.int8)
    got = tessera_frontend_compile(src, {"filename": "mm.py"}).interpret("mm", a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))
    assert np.abs(got).max() > 127


@pytest.mark.parametrize("line, message", [
    ("return A / A", "4:12: error: '/' (op.div) needs floating-point tensors, got i32; use // for floor division"),
    ("return A ** A", "4:12: error: '**' (op.pow) needs floating-point tensors, got i32"),
    ("return op.exp(A)", "4:12: error: op.exp needs a floating-point tensor, got i32"),
    ("return op.mean(A)", "4:12: error: op.mean needs a floating-point tensor, got i32; op.cast it first"),
    ("return X // X", "4:12: error: '//' (op.floordiv) needs integer tensors, got f32"),
    ("return X % X", "4:12: error: '%' (op.mod) needs integer tensors, got f32"),
    ("return A < A < A", "4:12: error: 'A < A < A': a tensor comparison is one of < <= > >= == != between two"),
    ("return op.where(A, A, A)", "4:12: error: op.where's condition must be a bool tensor (a comparison such as"),
    ("return op.where(A < 0, A, X)", "4:12: error: op.where's values have different dtypes (i32, f32); use op.cast"),
    ("return op.sum(A < 0)", "4:12: error: op.sum of a bool tensor: op.cast it to an integer type first"),
    ("return A * 0.5", "4:12: error: the float 0.5 meets a i32 tensor, and integer tensors do not promote"),
    ("return X & X", "4:12: error: '&' (op.bitwise_and) needs integer or bool tensors, got f32"),
    ("return X << X", "4:12: error: '<<' (op.left_shift) needs integer tensors, got f32"),
    ("return (A < 0) >> (A < 1)", "4:12: error: '>>' (op.right_shift) needs integer tensors, got bool"),
    ("return ~X", "4:12: error: '~' (op.invert) needs an integer or bool tensor, got f32"),
    ("return not A", "4:12: error: 'Not' is not defined on tensors"),
])
def test_what_has_no_integer_meaning_is_refused_at_the_users_line(line, message):
    src = f"""
@function
def f(A: tensor[i32, "N"], X: tensor[f32, "N"]):
    {line}
"""
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "bad.py")
    assert f"bad.py:{message}" in str(e.value)


@pytest.mark.parametrize("target", ["ptx", "amdgpu", "spirv"])   # the CPU's: test_int8_gemm_cpu.py
def test_integer_matmul_compiles_on_every_gpu_target(target):
    """ptx sm_80 (the default), AMDGPU and SPIR-V run it on the SIMT GEMM (test_simt_gemm.py: exact on OpenCL)."""
    src = """
@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
"""
    plan = compiler.compile_source(src, "mm.py", CompileOptions(target=target)).metadata["plans"]["mm"]
    assert [s["kernel"] for s in plan["steps"]] == ["mm__gemm0"]
    assert plan["values"][plan["results"][0]]["dtype"] == "i32"


@pytest.mark.parametrize("dt", list(INTS))
@pytest.mark.parametrize("target", ["ptx", "amdgpu", "spirv"])
def test_the_programs_compile_for_every_gpu_target(target, dt):
    """Compilation assembles PTX with ptxas and validates SPIR-V with spirv-val where they are installed."""
    image = compiler.compile_source(source(dt), f"{dt}.py", CompileOptions(target=target)).image
    assert image


@pytest.mark.parametrize("dt", list(INTS))
def test_the_programs_run_on_the_opencl_cpu_runtime(opencl, dt):  # noqa: F811
    src = source(dt)
    mod = executor.load(compiler.compile_source(src, f"{dt}.py", CompileOptions(target="spirv")).image, opencl)
    ref = tessera_frontend_compile(src, {"filename": f"{dt}.py"})
    a, b = operands(dt)
    x = (RNG.standard_normal(a.shape) * 1e3).astype(np.float32)
    x.flat[:4] = [np.nan, 1e30, -1e30, -2.5]
    for name, args in (("arith", (a, b)), ("mixed", (a, b[0])), ("reduce", (a,)), ("to_float", (a,)),
                       ("from_float", (x, x.astype(np.float64))), ("between", (a,)), ("compare", (a, b, x))):
        for g, w in zip(mod.function(name)(*args), ref.interpret(name, *args), strict=True):
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)


class DLPackOnly:
    """An array seen only through the DLPack protocol (not as an ndarray)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_integer_arguments_by_dlpack_and_the_dtype_rule():
    """Integer and bool tensors cross the executor by DLPack too; an argument of another integer width is
    refused (nothing is converted implicitly), naming the parameter."""
    src = """
@function
def f(A: tensor[i16, "N"], B: tensor[i16, "N"]):
    return A // B, A < B
"""
    fn = executor.load(compiler.compile_source(src, "f.py").image).function("f")
    a, b = np.array([7, -7, 5], np.int16), np.array([2, 2, 0], np.int16)
    q, lt = fn(DLPackOnly(a), DLPackOnly(b))
    np.testing.assert_array_equal(q, np.array([3, -4, 0], np.int16))
    assert q.dtype == np.int16 and lt.dtype == np.bool_ and lt.tolist() == [False, True, False]
    with pytest.raises(TypeError, match="argument 'A' of 'f' must have dtype i16, got int32"):
        fn(a.astype(np.int32), b)
