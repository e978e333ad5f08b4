"""Scaled quantization (issue 17, item 1; docs/language.md, "Quantization"): op.quantize and op.dequantize per
tensor, per channel and per block, to and from i8, fp8_e4m3 and fp8_e5m2, op.amax and op.round.

Every op runs compiled on the CPU, in the interpreter (the reference semantics) and in numpy written here
from the definition — x / scale in f32, then for i8 saturation to [-128, 127] and rounding half to even, for
fp8 the format's rounding (ties to even) saturated at its largest finite value; q * scale in f32 back — and
the three agree exactly. The same programs compile for PTX, AMDGPU and SPIR-V (the one elementwise path),
and the SPIR-V image runs on the OpenCL CPU runtime.
What the ops cannot mean is refused at the user's line."""

import pathlib

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.diagnostics import CompileError
from tessera.numerics.rounding import round_to
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(1717)
FP8_MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}

SOURCE = """
@function
def per_tensor(X: tensor[f32, "N", "D"], s: tensor[f32]):
    return op.quantize(X, i8, scale=s), op.quantize(X, fp8_e4m3, scale=s), op.quantize(X, fp8_e5m2, scale=s)

@function
def static(X: tensor[bf16, "N", "D"]):
    return op.quantize(X, i8, scale=0.5), op.quantize(X, fp8_e4m3, scale=0.25)

@function
def per_channel(X: tensor[f32, "N", "D"], c: tensor[f32, "D"], r: tensor[f32, "N"]):
    return op.quantize(X, i8, scale=c, axis=-1), op.quantize(X, fp8_e4m3, scale=r, axis=0)

@function
def per_block(X: tensor[f32, "N", "D"], b: tensor[f32, "N", "B"]):
    return op.quantize(X, i8, scale=b, block=8), op.quantize(X, fp8_e5m2, scale=b, block=8)

@function
def dequantize(Q: tensor[i8, "N", "D"], E: tensor[fp8_e4m3, "N", "D"], s: tensor[f32], c: tensor[f32, "D"],
               b: tensor[f32, "N", "B"]):
    return (op.dequantize(Q, s), op.dequantize(Q, c, axis=1), op.dequantize(Q, b, block=8, dtype=f16),
            op.dequantize(E, s), op.dequantize(E, b, block=8))

@function
def round_trip(X: tensor[f32, "N", "D"], s: tensor[f32]):
    return op.dequantize(op.quantize(X, i8, scale=s), s), op.dequantize(op.quantize(X, fp8_e5m2, scale=s), s)

@function
def requantize(acc: tensor[i32, "N", "D"], w: tensor[f32, "D"], bias: tensor[f32, "D"], s: tensor[f32]):
    return op.quantize(op.relu(op.bias_add(op.cast(acc, f32) * w, bias)), i8, scale=s)

@function
def amax(X: tensor[f32, "N", "D"]):
    return op.amax(X), op.quantize(X, fp8_e4m3, scale=op.amax(X) / 448.0), op.round(X)
"""


@pytest.fixture(scope="module")
def programs():
    return executor.load(compiler.compile_source(SOURCE, "q.py").image), \
        tessera_frontend_compile(SOURCE, {"filename": "q.py"})


def to_i8(t: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.round(np.clip(t.astype(np.float64), -128, 127)), nan=0.0).astype(np.int8)


def to_fp8(t: np.ndarray, fmt: str) -> np.ndarray:
    return round_to(t.astype(np.float64), fmt)


def divided(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """x / s in f32: numpy's f32 division rounds once, as the kernels' does."""
    with np.errstate(over="ignore"):   # 1e38 / 0.05: inf, saturated as the kernels saturate it
        return x.astype(np.float32) / s.astype(np.float32)


def blocks(b: np.ndarray) -> np.ndarray:
    return np.repeat(b, 8, axis=-1)


def values(shape=(6, 32)) -> np.ndarray:
    """Normal values with exact halves (ties of the rounding at scale 0.5), values past every saturation
    bound, NaN and a signed zero."""
    x = (RNG.standard_normal(shape) * 20).astype(np.float32)
    x.flat[:12] = [1.25, 1.75, -1.25, 0.25, -0.75, 1e6, -1e6, 1e38, np.nan, -0.0, 63.75, -64.25]
    return x


def check(mod, ref, name, want, *args):
    got, interp = mod.function(name)(*args), ref.interpret(name, *args)
    if len(want) == 1:   # a function of one result returns it, not a tuple
        got, interp = [got], [interp]
    for k, (g, i, w) in enumerate(zip(got, interp, want, strict=True)):
        g, i = np.asarray(g), np.asarray(i)
        if w.dtype == np.int8:
            assert g.dtype == i.dtype == np.int8, (name, k, g.dtype, i.dtype)
        np.testing.assert_array_equal(g.astype(np.float64), w.astype(np.float64), err_msg=f"{name}[{k}]: the CPU")
        np.testing.assert_array_equal(i.astype(np.float64), w.astype(np.float64), err_msg=f"{name}[{k}]: interpreter")


def test_per_tensor(programs):
    x, s = values(), np.array(0.5, np.float32)
    t = divided(x, s)
    want = [to_i8(t), to_fp8(t, "fp8_e4m3"), to_fp8(t, "fp8_e5m2")]
    assert list(want[0].flat[:5]) == [2, 4, -2, 0, -2] and want[0].flat[5] == 127 and want[0].flat[8] == 0
    assert want[1].flat[5] == 448 and want[2].flat[6] == -57344
    check(*programs, "per_tensor", want, x, s)


def test_a_static_scale_of_a_bf16_tensor(programs):
    x = values()
    xb = round_to(x.astype(np.float64), "bf16").astype(np.float32)   # what the bf16 parameter holds
    want = [to_i8(divided(xb, np.float32(0.5))), to_fp8(divided(xb, np.float32(0.25)), "fp8_e4m3")]
    check(*programs, "static", want, x)


def test_per_channel(programs):
    x = values()
    c, r = RNG.uniform(0.05, 0.5, 32).astype(np.float32), RNG.uniform(0.01, 0.2, 6).astype(np.float32)
    want = [to_i8(divided(x, c[None, :])), to_fp8(divided(x, r[:, None]), "fp8_e4m3")]
    check(*programs, "per_channel", want, x, c, r)


def test_per_block(programs):
    x, b = values(), RNG.uniform(0.05, 0.5, (6, 4)).astype(np.float32)
    t = divided(x, blocks(b))
    check(*programs, "per_block", [to_i8(t), to_fp8(t, "fp8_e5m2")], x, b)


def test_dequantize(programs):
    q = RNG.integers(-128, 128, (6, 32)).astype(np.int8)
    q.flat[:2] = [-128, 127]
    e = to_fp8(RNG.standard_normal((6, 32)) * 100, "fp8_e4m3").astype(np.float32)
    s, c = np.array(0.37, np.float32), RNG.uniform(0.05, 0.5, 32).astype(np.float32)
    b = RNG.uniform(0.05, 0.5, (6, 4)).astype(np.float32)
    f = q.astype(np.float32)
    want = [f * s, f * c, (f * blocks(b)).astype(np.float16), e * s, e * blocks(b)]
    check(*programs, "dequantize", want, q, e, s, c, b)


def test_round_trip_error_is_half_a_step(programs):
    x = (RNG.standard_normal((6, 32)) * 10).astype(np.float32)
    s = np.array(np.abs(x).max() / 127, np.float32)
    q8, f8 = programs[0].function("round_trip")(x, s)
    assert np.max(np.abs(np.asarray(q8) - x)) <= s / 2 * (1 + 1e-6)
    assert np.max(np.abs(np.asarray(f8) - x) / np.abs(x)) <= 2.0 ** -3   # e5m2: 2 fraction bits
    check(*programs, "round_trip", [to_i8(divided(x, s)).astype(np.float32) * s,
                                    (to_fp8(divided(x, s), "fp8_e5m2") * s).astype(np.float32)], x, s)


def test_requantizing_epilogue(programs):
    acc = RNG.integers(-2 ** 20, 2 ** 20, (6, 32)).astype(np.int32)
    w, bias = RNG.uniform(1e-5, 1e-4, 32).astype(np.float32), RNG.standard_normal(32).astype(np.float32)
    s = np.array(0.05, np.float32)
    y = np.maximum(acc.astype(np.float32) * w + bias, np.float32(0))
    check(*programs, "requantize", [to_i8(divided(y, s))], acc, w, bias, s)


def test_amax_and_round(programs):
    x = values()
    x.flat[7:9] = [3.0, -2.5]   # no inf or NaN in an amax
    a = np.float32(np.abs(x).max())
    r = np.round(x.astype(np.float64))
    check(*programs, "amax", [np.array(a), to_fp8(divided(x, a / np.float32(448.0)), "fp8_e4m3"), r], x)


def test_they_run_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    """The SPIR-V kernels of the same programs (the elementwise path every GPU target shares) equal the
    interpreter exactly."""
    mod = executor.load(compiler.compile_source(SOURCE, "q.py", CompileOptions(target="spirv")).image, opencl)
    ref = tessera_frontend_compile(SOURCE, {"filename": "q.py"})
    x, s = values(), np.array(0.5, np.float32)
    c, r = RNG.uniform(0.05, 0.5, 32).astype(np.float32), RNG.uniform(0.01, 0.2, 6).astype(np.float32)
    b = RNG.uniform(0.05, 0.5, (6, 4)).astype(np.float32)
    q = RNG.integers(-128, 128, (6, 32)).astype(np.int8)
    acc = RNG.integers(-2 ** 20, 2 ** 20, (6, 32)).astype(np.int32)
    for name, args in (("per_tensor", (x, s)), ("per_channel", (x, c, r)), ("per_block", (x, b)),
                       ("dequantize", (q, to_fp8(x, "fp8_e4m3").astype(np.float32), s, c, b)),
                       ("requantize", (acc, c / 1e4, c, s))):
        got, want = mod.function(name)(*args), ref.interpret(name, *args)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64),
                                          err_msg=name)


@pytest.mark.parametrize("target", ["ptx", "amdgpu", "spirv"])
def test_every_target_compiles_them(target):
    compiler.compile_source(SOURCE, "q.py", CompileOptions(target=target))


@pytest.mark.parametrize("line, message", [
    ("op.quantize(X, f16, scale=0.5)", "op.quantize quantizes to i8, fp8_e4m3, fp8_e5m2, i4, not f16"),
    ("op.quantize(Q, i8, scale=0.5)", "op.quantize needs a floating-point tensor, got i8"),
    ("op.quantize(X, i8)", "op.quantize needs scale=: an f32 tensor or a positive number, got NoneType"),
    ("op.quantize(X, i8, scale=-1.0)", "op.quantize: a static scale must be a positive finite number, got -1.0"),
    ("op.quantize(X, i8, scale=X)", "op.quantize: a per-tensor scale is 0-d (give axis= or block= for others)"),
    ("op.quantize(X, i8, scale=c, axis=0)", "op.quantize's scale length and the extent of axis 0"),
    ("op.quantize(X, i8, scale=c, axis=2)", "op.quantize: axis 2 is out of range for a rank-2 tensor"),
    ("op.quantize(X, i8, scale=c, axis=1, block=4)", "op.quantize: give axis= (a scale per channel) or block="),
    ("op.quantize(X, i8, scale=X, block=3)", "op.quantize: the last extent 32 is not a multiple of the block 3"),
    ("op.quantize(X, i8, scale=X, block=8)", "op.quantize's scale's last extent (blocks of 8)"),
    ("op.quantize(X, i8, scale=op.cast(c, f16), axis=1)", "op.quantize: the scale must be an f32 tensor, got f16"),
    ("op.dequantize(X, 0.5)", "op.dequantize takes an i8, fp8_e4m3, fp8_e5m2, i4 tensor, got f32 tensor"),
    ("op.dequantize(Q, 0.5, dtype=i32)", "op.dequantize's dtype= is a floating-point dtype such as f32 or bf16"),
    ("op.amax(Q)", "op.amax needs a floating-point tensor, got i8"),
    ("op.amax_scale(X, i8, history=X)", "op.amax_scale needs history=: a 1-D f32 tensor of past amaxes"),
    ("op.amax_scale(X, bf16, history=c)", "op.amax_scale scales for i8, fp8_e4m3, fp8_e5m2, i4, not bf16"),
])
def test_mistakes_are_refused_at_the_users_line(line, message):
    src = f"""
@function
def f(X: tensor[f32, 6, 32], Q: tensor[i8, 6, 32], c: tensor[f32, 32]):
    return {line}
"""
    with pytest.raises(CompileError) as e:
        compiler.compile_source(src, "bad.py")
    assert f"bad.py:4:12: error: {message}" in str(e.value)


def test_a_quantized_mlp_against_f32():
    """examples/graph/quantized_mlp.py: per-channel weights, per-tensor dynamic activations; int8 through
    i8 x i8 -> i32 GEMMs. Relative (Frobenius) error against the f32 MLP: 1.7 % in int8, 5.4 % in fp8 e4m3
    at this seed; compiled, the int8 MLP equals the interpreter's exactly, the fp8 one up to its f32 GEMMs'
    summation order."""
    src = (pathlib.Path(__file__).parents[2] / "examples" / "graph" / "quantized_mlp.py").read_text()
    mod = executor.load(compiler.compile_source(src, "quantized_mlp.py").image)
    ref = tessera_frontend_compile(src, {"filename": "quantized_mlp.py"})
    rng = np.random.default_rng(3)
    X = rng.standard_normal((128, 64)).astype(np.float32)
    W1 = (rng.standard_normal((64, 256)) / 8).astype(np.float32)
    W2 = (rng.standard_normal((256, 64)) / 16).astype(np.float32)
    b1, b2 = (rng.standard_normal(256) / 10).astype(np.float32), (rng.standard_normal(64) / 10).astype(np.float32)
    want = np.asarray(mod.function("mlp")(X, W1, b1, W2, b2))
    q1, s1, q2, s2, e1, t1, e2, t2 = mod.function("quantize_weights")(W1, W2)
    assert np.asarray(q1).dtype == np.int8 and np.asarray(q1).nbytes == 64 * 256
    for name, args, bound in (("mlp_int8", (X, q1, s1, b1, q2, s2, b2), 0.025),
                              ("mlp_fp8", (X, np.asarray(e1, np.float32), t1, b1, np.asarray(e2, np.float32), t2, b2),
                               0.07)):
        got = np.asarray(mod.function(name)(*args))
        if name == "mlp_int8":   # integer GEMMs are exact: the same bits as the interpreter's
            np.testing.assert_array_equal(got, ref.interpret(name, *args))
        else:  # f32 GEMMs sum in another order than the interpreter's, so a hidden value on a rounding boundary
            # of its quantization may take the next step: one step of h (about 0.03) times a column of W2
            np.testing.assert_allclose(got, ref.interpret(name, *args), rtol=0, atol=0.02)
        error = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert 0.002 < error < bound, (name, error)   # quantized (not f32 by mistake), and as accurate as stated
