"""One dtype rule for every argument (docs/runtime.md, "Argument dtypes"): an array has the dtype its parameter
declares and nothing is converted implicitly — through the executor (numpy arrays, DeviceArrays, a tile
program's in-place outputs) as through the kernel launcher, refused in one message form. bf16, tf32 and fp8,
which numpy lacks, take float32 values in a function call (bf16 also its uint16 bits); the plan records the
declared dtype of an argument it stores as another (fp8 in an f16 container, taken as f32: on ptx before
sm_90a, where mma.sync reads fp8 GEMM operands from the container; the CPU's GEMM reads the bytes)."""

import re

import numpy as np
import pytest

from tessera import compiler, executor, plan, runtime
from tessera.numerics.rounding import fp8_bits, round_to

SRC = """
@function
def scale(X: tensor[f32, "N"]):
    return X * 2.0

@function
def wide(X: tensor[f64, "N"], H: tensor[f16, "N"]):
    return X + op.cast(H, f64)

@function
def narrow(Y: tensor[bf16, "N"], E: tensor[fp8_e4m3, "N"], F: tensor[fp8_e5m2, "N"]):
    return op.cast(Y, f32), op.cast(E, f32), op.cast(F, f32)

@function
def declared(E: tensor[fp8_e4m3, "N", "N"], F: tensor[fp8_e5m2, "N", "N"]):
    return op.matmul(E, F)   # the CPU's GEMM reads the bytes; sm_80's the f16 containers (taken as f32)

@kernel
def relu_rows(X, Y):
    for b in tile.range(X, axis=0, step=4):
        tile.store(Y, b, tile.relu(tile.load(X, b)))

@kernel
def to_bf16(X, Y: tensor[bf16]):
    for b in tile.range(X, axis=0, step=4):
        tile.store(Y, b, tile.load(X, b))
"""

# the one form of a refused dtype, the launcher's and the executor's
FORM = re.compile(r"argument '(\w+)' of '(\w+)' must have dtype (\w+), got ([\w ]+): pass .+; "
                  r"no dtype is converted implicitly")
VALUES = np.array([1.0, -2.5, 1 + 2 ** -9, 3.14159, 300.0, 1e-3, 0.0, -7.0625], np.float32)


@pytest.fixture(scope="module")
def prog():
    return executor.load(compiler.compile_source(SRC, "dtypes.py").image)


def refused(call, *args) -> tuple[str, ...]:
    """(argument, function, declared, given) of the TypeError `call(*args)` raises, in the one form."""
    with pytest.raises(TypeError) as e:
        call(*args)
    m = FORM.fullmatch(str(e.value))
    assert m, f"not the one form: {e.value}"
    return m.groups()


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16, np.int64])
def test_f32_parameter_refuses_other_dtypes(prog, dtype):
    assert refused(prog.scale, VALUES.astype(dtype)) == ("X", "scale", "f32", np.dtype(dtype).name)
    np.testing.assert_array_equal(prog.scale(VALUES), VALUES * 2)


def test_f64_and_f16_parameters_take_their_own_dtype_only(prog):
    x, h = VALUES.astype(np.float64), VALUES.astype(np.float16)
    np.testing.assert_array_equal(prog.wide(x, h), x + h.astype(np.float64))
    assert refused(prog.wide, VALUES, h) == ("X", "wide", "f64", "float32")
    assert refused(prog.wide, x, VALUES) == ("H", "wide", "f16", "float32")


def test_bf16_and_fp8_take_float32_values_rounded_once(prog):
    y, e, f = prog.narrow(VALUES, VALUES, VALUES)
    np.testing.assert_array_equal(y, round_to(VALUES, "bf16"))
    np.testing.assert_array_equal(e, round_to(VALUES, "fp8_e4m3"))
    np.testing.assert_array_equal(f, round_to(VALUES, "fp8_e5m2"))


def test_bf16_takes_its_bit_patterns_as_uint16(prog):
    rounded = round_to(VALUES, "bf16").astype(np.float32)
    bits = (rounded.view(np.uint32) >> 16).astype(np.uint16)
    y, _, _ = prog.narrow(bits, VALUES, VALUES)
    np.testing.assert_array_equal(y, rounded)


def test_values_types_refuse_other_dtypes(prog):
    x = VALUES.astype(np.float64)
    assert refused(prog.narrow, x, VALUES, VALUES) == ("Y", "narrow", "bf16", "float64")
    assert refused(prog.narrow, VALUES.astype(np.float16), VALUES, VALUES)[3] == "float16"
    # fp8 that elementwise kernels or the CPU's GEMM read is one byte (float32 values or its bit patterns)
    assert refused(prog.narrow, VALUES, VALUES.astype(np.float16), VALUES) == ("E", "narrow", "fp8_e4m3", "float16")
    assert refused(prog.narrow, VALUES, VALUES, x) == ("F", "narrow", "fp8_e5m2", "float64")
    square = np.zeros((2, 2), np.float32)
    assert refused(prog.declared, square.astype(np.uint16), square) == ("E", "declared", "fp8_e4m3", "uint16")


def test_messages_say_what_is_taken(prog):
    with pytest.raises(TypeError, match="pass float32 values or bf16 bit patterns as uint16;"):
        prog.narrow(VALUES.astype(np.float64), VALUES, VALUES)
    with pytest.raises(TypeError, match="pass float32 values or fp8_e4m3 bit patterns as uint8 or ml_dtypes "
                                        "float8_e4m3fn arrays;"):
        prog.narrow(VALUES, VALUES.astype(np.float64), VALUES)
    with pytest.raises(TypeError, match="pass float32 values or fp8_e4m3 bit patterns as uint8 or ml_dtypes "):
        prog.declared(np.zeros((2, 2)), np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="pass a float32 array;"):
        prog.scale(VALUES.astype(np.float64))


def test_other_objects_are_refused(prog):
    with pytest.raises(TypeError, match="argument 'X' of 'scale' must be a numpy array or a "
                                        "tessera.runtime.DeviceArray, got list"):
        prog.scale([1.0, 2.0])


def test_device_arrays_hold_what_the_plan_stores(prog):
    ctx = prog.module.context
    got = prog.scale(runtime.DeviceArray.from_numpy(VALUES, ctx))
    np.testing.assert_array_equal(got.numpy(), VALUES * 2)
    assert refused(prog.scale, runtime.DeviceArray.from_numpy(VALUES.astype(np.float64), ctx)) == \
        ("X", "scale", "f32", "a DeviceArray of float64")
    # a DeviceArray is used in place: bf16 as its bits, one-byte fp8 (the CPU GEMM's operands too) as its bits
    bits = runtime.DeviceArray.from_numpy(np.zeros(8, np.uint16), ctx)
    f32 = runtime.DeviceArray.from_numpy(VALUES, ctx)
    e8, f8 = (runtime.DeviceArray.from_numpy(fp8_bits(VALUES, f), ctx) for f in ("fp8_e4m3", "fp8_e5m2"))
    y, e, _ = prog.narrow(bits, e8, f8)
    np.testing.assert_array_equal(y.numpy(), np.zeros(8, np.float32))
    np.testing.assert_array_equal(e.numpy(), round_to(VALUES, "fp8_e4m3"))
    with pytest.raises(TypeError, match=r"got a DeviceArray of float32: pass a DeviceArray of bf16 \(uint16 bit"):
        prog.narrow(f32, e8, f8)
    with pytest.raises(TypeError, match=r"pass a DeviceArray of fp8_e4m3 \(uint8 bit patterns\)"):
        prog.narrow(bits, f32, f8)
    square = runtime.DeviceArray.from_numpy(np.zeros((2, 2), np.uint16), ctx)
    with pytest.raises(TypeError, match=r"pass a DeviceArray of fp8_e4m3 \(uint8 bit patterns\)"):
        prog.declared(square, square)


DECLARED_CUDA = """
import sys
import numpy as np
from tessera import _runtime, executor, runtime
ctx = _runtime.Context("cuda")
prog = executor.load(open(sys.argv[1], "rb").read(), ctx)
square = np.zeros((16, 16), np.float32)   # K: the sm_80 GEMM's 16-byte rows of f16
print(type(prog.declared(square, square)).__name__)   # float32 values: rounded on entry
for args in ((square.astype(np.uint8), square), (runtime.DeviceArray.from_numpy(square.astype(np.uint16), ctx),) * 2):
    try:
        prog.declared(*args)
    except TypeError as e:
        print(e)
"""


def test_fp8_in_a_container_takes_float32_values(fake_cuda, tmp_path):
    """On ptx sm_80 the GEMM reads fp8 from the f16 container: its fp8 parameters are taken as f32 values,
    rounded on entry (the plan's `declared` dtype), not as bit patterns; through tests/c/fake_cuda.c's
    driver, which runs the executor's checks and launches nothing."""
    image = tmp_path / "declared.tessera"
    image.write_bytes(compiler.compile_source(SRC, "dtypes.py", compiler.CompileOptions(target="ptx",
                                                                                        arch="sm_80")).image)
    p = fake_cuda(DECLARED_CUDA, image)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout.splitlines()
    assert out[0] == "ndarray" and len(out) == 3, out
    assert FORM.fullmatch(out[1]).groups() == ("E", "declared", "fp8_e4m3", "uint8")
    assert "pass float32 values;" in out[1], out[1]
    assert "pass a DeviceArray of fp8_e4m3 (float32 values, as this target" in out[2], out[2]


def test_copy_from_takes_its_own_dtype():
    d = runtime.DeviceArray.from_numpy(VALUES)
    with pytest.raises(TypeError, match="cannot copy an array of float64 into a DeviceArray of float32"):
        d.copy_from(VALUES.astype(np.float64))
    d.copy_from(VALUES * 3)
    np.testing.assert_array_equal(d.numpy(), VALUES * 3)


def test_tile_program_outputs_must_match(prog):
    X = np.linspace(-4, 4, 24, dtype=np.float32).reshape(8, 3)
    for bad in (np.float64, np.float16, np.int32):
        Y = np.full((8, 3), 7, bad)
        assert refused(prog.relu_rows, X, Y) == ("Y", "relu_rows", "f32", np.dtype(bad).name)
        assert (Y == 7).all()  # nothing ran
    Y = np.zeros((8, 3), np.float32)
    prog.relu_rows(X, Y)
    np.testing.assert_array_equal(Y, np.maximum(X, 0))


def test_bf16_tile_program_output_as_values_or_bits(prog):
    X = (VALUES[:6] * 1.001).astype(np.float32).reshape(2, 3).repeat(2, axis=0)
    want = round_to(X, "bf16").astype(np.float32)
    values = np.zeros((4, 3), np.float32)
    prog.to_bf16(X, values)
    np.testing.assert_array_equal(values, want)
    bits = np.zeros((4, 3), np.uint16)
    prog.to_bf16(X, bits)
    np.testing.assert_array_equal(bits, (want.view(np.uint32) >> 16).astype(np.uint16))
    assert refused(prog.to_bf16, X, np.zeros((4, 3), np.float64))[2:] == ("bf16", "float64")


def test_the_launcher_refuses_in_the_same_form(prog):
    mod = runtime.load(compiler.compile_source(
        "@kernel\ndef saxpy(a: float, X: tensor[float, 'N'], Out: tensor[float, 'N']):\n"
        "    i = launch.thread_id()\n    if i < X.shape[0]:\n        Out[i] = a * X[i]\n", "k.py").image)
    out = np.zeros(8, np.float32)
    for dtype in (np.float64, np.int32):
        assert refused(lambda *a: mod.saxpy(*a, grid=1, block=32), 2.0, VALUES.astype(dtype), out) == \
            ("X", "saxpy", "f32", np.dtype(dtype).name)
    with pytest.raises(TypeError, match="pass a float32 array;"):
        mod.saxpy(2.0, VALUES.astype(np.float64), out, grid=1, block=32)
    mod.saxpy(2.0, VALUES, out, grid=1, block=32)
    np.testing.assert_array_equal(out, VALUES * 2)


def test_the_plan_records_declared_dtypes(prog):
    narrow = prog.plans["narrow"]   # fp8 read by elementwise kernels only: one byte, its own dtype
    assert [(narrow.values[v].dtype, narrow.values[v].declared) for v in narrow.args] == \
        [("bf16", None), ("fp8_e4m3", None), ("fp8_e5m2", None)]
    assert all(prog.plans["declared"].values[v].declared is None for v in prog.plans["declared"].args)  # bytes
    p = plan.Plan.from_json(compiler.compile_source(SRC, "dtypes.py", compiler.CompileOptions(
        target="ptx", arch="sm_80")).metadata["plans"]["declared"])   # mma.sync reads the f16 containers
    declared = [(p.values[v].dtype, p.values[v].declared) for v in p.args]
    assert declared == [("f32", "fp8_e4m3"), ("f32", "fp8_e5m2")]
    doc = p.to_json()
    assert doc["values"][p.args[0]]["declared"] == "fp8_e4m3"
    assert "declared" not in narrow.to_json()["values"][narrow.args[0]]
    assert plan.Plan.from_json(doc) == p
    inner = next(v for v in doc["values"] if v not in (*p.args, *p.results))   # an intermediate
    doc["values"][inner]["declared"] = "bf16"
    with pytest.raises(plan.PlanError, match="has a 'declared' dtype, which only an argument or a result has"):
        plan.Plan.from_json(doc)
