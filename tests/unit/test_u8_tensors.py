"""u8 tensors (issue 17, item 3; docs/language.md, "Integer tensors"): Graph IR on every target and SIMT kernels.

MLIR's integers are signless and the kernel language's are signed, so a kernel holds a u8 zero-extended in an
i32 (tessera/frontend/kernel.py): the signed ops on 0..255 are the unsigned ones, and results that can leave
0..255 wrap back (numpy's arithmetic mod 256). Every op runs on the CPU image, the interpreter and numpy,
compared exactly (operands past 127, where a signed reading would differ, zero divisors, wraps both ways,
float -> u8 saturating at 0 and 255 with NaN -> 0); the programs compile for PTX, AMDGPU and SPIR-V and run
on the OpenCL CPU runtime where there is one."""

import numpy as np
import pytest

from tessera import compiler, executor, runtime, tessera_frontend_compile
from tessera.abi import signature_of
from tessera.cheader import image_header
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

from test_integer_tensors import DLPackOnly, check, compiled
from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(8)

SOURCE = """
@function
def arith(A: tensor[u8, "N", "D"], B: tensor[u8, "N", "D"]):
    return A + B, A - B, A * B, A // B, A % B, -A, op.abs(A), op.maximum(A, B), op.minimum(A, B), op.relu(A)

@function
def mixed(A: tensor[u8, "N", "D"], b: tensor[u8, "D"]):
    return (A * 3 - b) // 4 + A % 200, op.square(A) % 7, op.where(A > 200, A, 250)

@function
def reduce(A: tensor[u8, "N", "D"]):
    return op.sum(A, -1), op.max(A, -1), op.min(A, -1), op.prod(A, -1), op.sum(A, 0), op.max(A, 0), op.min(A, 0)

@function
def casts(A: tensor[u8, "N", "D"], X: tensor[f32, "N", "D"], Y: tensor[f64, "N", "D"], I: tensor[i32, "N", "D"]):
    return (op.cast(A, f32), op.cast(A, f16), op.cast(A, i8), op.cast(A, i64), op.cast(X, u8), op.cast(Y, u8),
            op.cast(I, u8), op.cast(A, bool), op.cast(A > 200, u8))

@function
def compare(A: tensor[u8, "N", "D"], B: tensor[u8, "N", "D"]):
    return A < B, A <= B, A > B, A >= B, A == B, A != B, op.where(A < B, A, B)
"""


def operands(shape=(7, 37)) -> tuple[np.ndarray, np.ndarray]:
    a = RNG.integers(0, 256, shape).astype(np.uint8)
    b = RNG.integers(0, 256, shape).astype(np.uint8)
    a.flat[:6] = [255, 0, 200, 7, 128, 129]
    b.flat[:6] = [0, 0, 3, 200, 127, 255]
    return a, b


def floats(shape=(7, 37)) -> np.ndarray:
    x = (RNG.standard_normal(shape) * 200).astype(np.float32)
    x.flat[:12] = [2.9, -2.9, 0.5, -0.5, np.nan, np.inf, -np.inf, 255.9, 256.0, -1.0, 127.5, 1e30]
    return x


def saturated(x: np.ndarray) -> np.ndarray:
    """float -> u8 as the language defines it: truncated toward zero, clamped to [0, 255], NaN -> 0."""
    return np.clip(np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0)), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def programs():
    return compiled(SOURCE, "u8.py")


def test_arithmetic_wraps_mod_256_and_divides_unsigned(programs):
    a, b = operands()
    with np.errstate(all="ignore"):
        want = [a + b, a - b, a * b, a // b, a % b, -a, np.abs(a), np.maximum(a, b), np.minimum(a, b), a]
    check(*programs, "arith", want, a, b)
    q, r = (np.asarray(x).flat for x in programs[0].function("arith")(a, b)[3:5])
    assert (q[0], q[2], q[3], q[4], r[0], r[2], r[5]) == (0, 66, 0, 1, 0, 2, 129)  # x // 0 = x % 0 = 0; 129 % 255


def test_fused_with_literals_and_a_broadcast(programs):
    a, _ = operands()
    b = RNG.integers(0, 256, a.shape[1]).astype(np.uint8)
    t = np.uint8
    with np.errstate(all="ignore"):
        want = [(a * t(3) - b) // t(4) + a % t(200), np.square(a) % t(7), np.where(a > 200, a, t(250))]
    check(*programs, "mixed", want, a, b)


def test_reductions_stay_in_u8(programs):
    a, _ = operands()
    u = np.uint8
    want = [np.sum(a, -1, dtype=u), np.max(a, -1), np.min(a, -1), np.prod(a, -1, dtype=u), np.sum(a, 0, dtype=u),
            np.max(a, 0), np.min(a, 0)]
    check(*programs, "reduce", want, a)


def test_casts(programs):
    a, _ = operands()
    x = floats()
    i = RNG.integers(-2 ** 31, 2 ** 31, a.shape).astype(np.int32)
    i.flat[:3] = [-1, 256, 255]
    want = [a.astype(np.float32), a.astype(np.float16), a.astype(np.int8), a.astype(np.int64), saturated(x),
            saturated(x.astype(np.float64)), i.astype(np.uint8), a.astype(bool), (a > 200).astype(np.uint8)]
    assert want[4].flat[1] == 0 and want[4].flat[5] == 255 and want[4].flat[7] == 255 and want[4].flat[4] == 0
    check(*programs, "casts", want, a, x, x.astype(np.float64), i)


def test_comparisons_are_unsigned(programs):
    a, b = operands()
    b.flat[10:30] = a.flat[10:30]
    want = [a < b, a <= b, a > b, a >= b, a == b, a != b, np.where(a < b, a, b)]
    check(*programs, "compare", want, a, b)
    assert bool(np.asarray(programs[0].function("compare")(a, b)[2]).flat[4]) is True  # 128 > 127


@pytest.mark.parametrize("target", ["ptx", "amdgpu", "spirv"])
def test_the_programs_compile_for_every_gpu_target(target):
    """Compilation assembles PTX with ptxas and validates SPIR-V with spirv-val where they are installed."""
    assert compiler.compile_source(SOURCE, "u8.py", CompileOptions(target=target)).image


def test_the_programs_run_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    mod = executor.load(compiler.compile_source(SOURCE, "u8.py", CompileOptions(target="spirv")).image, opencl)
    ref = tessera_frontend_compile(SOURCE, {"filename": "u8.py"})
    a, b = operands()
    x = floats()
    i = RNG.integers(-2 ** 31, 2 ** 31, a.shape).astype(np.int32)
    for name, args in (("arith", (a, b)), ("mixed", (a, b[0])), ("reduce", (a,)),
                       ("casts", (a, x, x.astype(np.float64), i)), ("compare", (a, b))):
        for g, w in zip(mod.function(name)(*args), ref.interpret(name, *args), strict=True):
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)


KERNEL = """
@kernel
def halve(X: tensor[u8, "N"], Y: tensor[u8, "N"], Z: tensor[i32, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Y[i] = u8(X[i] // 2 + 200)
        Z[i] = X[i] - 128
"""


def test_a_simt_kernel_reads_u8_zero_extended_and_its_signature_says_u8():
    image = compiler.compile_source(KERNEL, "halve.py").image
    x = np.arange(256, dtype=np.uint8)
    y, z = np.zeros(256, np.uint8), np.zeros(256, np.int32)
    runtime.load(image).halve(x, y, z, grid=2, block=128)
    np.testing.assert_array_equal(y, (x // 2 + 200).astype(np.uint8))   # wrapped mod 256
    np.testing.assert_array_equal(z, x.astype(np.int32) - 128)           # 255 reads as 255, not -1
    header = image_header(image, "halve.py", "halve")
    assert "const uint8_t* X" in header and "uint8_t* Y" in header
    with pytest.raises(TypeError, match="must have dtype u8"):
        runtime.load(image).halve(x.astype(np.int8), y, z, grid=2, block=128)


@pytest.mark.parametrize("target", ["ptx", "amdgpu", "spirv"])
def test_the_simt_kernel_compiles_for_every_gpu_target(target):
    assert compiler.compile_source(KERNEL, "halve.py", CompileOptions(target=target)).image


def test_the_simt_kernel_runs_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    mod = runtime.load(compiler.compile_source(KERNEL, "halve.py", CompileOptions(target="spirv")).image, opencl)
    x = np.arange(256, dtype=np.uint8)
    y, z = (runtime.DeviceArray.from_numpy(np.zeros(256, t), opencl) for t in (np.uint8, np.int32))
    mod.halve(runtime.DeviceArray.from_numpy(x, opencl), y, z, grid=2, block=128)
    np.testing.assert_array_equal(y.numpy(), (x // 2 + 200).astype(np.uint8))
    np.testing.assert_array_equal(z.numpy(), x.astype(np.int32) - 128)


def test_u8_arguments_by_dlpack():
    src = """
@function
def f(A: tensor[u8, "N"], B: tensor[u8, "N"]):
    return A // B, A < B
"""
    fn = executor.load(compiler.compile_source(src, "f.py").image).function("f")
    a, b = np.array([250, 7, 5], np.uint8), np.array([2, 200, 0], np.uint8)
    q, lt = fn(DLPackOnly(a), DLPackOnly(b))
    assert q.dtype == np.uint8 and q.tolist() == [125, 0, 0] and lt.tolist() == [False, True, False]
    with pytest.raises(TypeError, match="argument 'A' of 'f' must have dtype u8, got int8"):
        fn(a.astype(np.int8), b)


@pytest.mark.parametrize("src, message", [
    ("@function\ndef f(A: tensor[u8, \"N\"]):\n    return A * 0.5\n",
     "f.py:3:12: error: the float 0.5 meets a u8 tensor, and integer tensors do not promote"),
    ("@function\ndef f(A: tensor[u8, \"N\"]):\n    return A / A\n",
     "f.py:3:12: error: '/' (op.div) needs floating-point tensors, got u8"),
    ("@kernel\ndef k(X: tensor[u8, \"N\"], s: u8):\n    X[0] = s\n",
     "f.py:2:30: error: parameter 's': a u8 scalar parameter is not supported"),
])
def test_refusals_at_the_users_line(src, message):
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "f.py")
    assert message in str(e.value)


@pytest.mark.parametrize("target", ["cpu", "ptx", "amdgpu", "spirv"])
def test_u8_matmul_is_refused_like_i8_where_no_kernel_takes_it(target):
    src = "@function\ndef mm(A: tensor[u8, \"M\", \"K\"], B: tensor[u8, \"K\", \"N\"]):\n    return A @ B\n"
    with pytest.raises(CompileError, match=r"mm.py:3:12: error: integer matmul \(ui8\) has no \w+ kernel yet"):
        compiler.compile_source(src, "mm.py", CompileOptions(target=target))
    a = RNG.integers(0, 256, (5, 40)).astype(np.uint8)
    b = RNG.integers(0, 256, (40, 3)).astype(np.uint8)
    got = tessera_frontend_compile(src, {"filename": "mm.py"}).interpret("mm", a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))
