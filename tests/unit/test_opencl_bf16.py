"""bf16 tensors in SPIR-V kernels run through OpenCL (Intel's CPU runtime, as tests/unit/test_opencl.py): the
conversions to and from bf16, bf16 arithmetic, and a block dequantize to bf16 equal numpy written here, the
CPU backend and the interpreter bit for bit.

Without SPV_KHR_bfloat16 (every device but a declared xe-hpc one's cooperative matrices) the upstream SPIR-V
conversion made bf16 an f32: a bf16 tensor was an f32 pointer, so a kernel wrote 4 bytes into each 2-byte
element (every other element garbage, the rest written past the buffer's end: heap corruption, and Intel's
runtime aborting the process) and rounded nothing. backends/spirv/compiler.py's `_bf16_as_i16` keeps bf16
memory as its 16 bits and converts with integer arithmetic.

The reference is bf16 by its definition, with no ml_dtypes: the f32 bits rounded to their high 16 to nearest,
ties to even, in uint32 arithmetic; NaN stays NaN.
"""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SOURCE = """
from tessera import bf16, f32, i8, function, op, tensor

@function
def to_bf16(X: tensor[f32, "N", "D"], Q: tensor[i8, "N", "D"]):
    return op.cast(X, bf16), op.cast(Q, bf16)

@function
def from_bf16(B: tensor[bf16, "N", "D"]):
    return op.cast(B, f32), op.cast(op.cast(B, bf16) * 0.5, i8)

@function
def round_trip(X: tensor[f32, "N", "D"]):
    return op.cast(op.cast(X, bf16), f32)

@function
def arithmetic(A: tensor[bf16, "N", "D"], B: tensor[bf16, "N", "D"]):
    return A * B + 1.5, op.max(A, axis=-1)

@function
def dequantize(Q: tensor[i8, "N", "D"], b: tensor[f32, "N", "K"]):
    return op.dequantize(Q, b, block=8, dtype=bf16)
"""

RNG = np.random.default_rng(5)
SHAPE = (5, 40)   # 200 elements: not a multiple of a block's, so the last block's bounds are checked too


def bf16(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to bf16 (returned as f32, as the runtime returns bf16 tensors)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out).astype(np.float32)


def f32_values() -> np.ndarray:
    """Normal values, and bit patterns at each edge of the rounding: ties to even down and up, one past a tie,
    the largest f32 (rounds to inf), subnormals (a tie among them too), ±inf, NaN and -0."""
    x = (RNG.standard_normal(SHAPE) * 30).astype(np.float32)
    edges = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0xBF818000, 0x7F7FFFFF, 0x00000001, 0x00018000,
                      0x80008000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000, 0x477FE000], np.uint32)
    x.flat[:len(edges)] = edges.view(np.float32)
    return x


@pytest.fixture(scope="module")
def programs(opencl):  # noqa: F811
    ocl = executor.load(compiler.compile_source(SOURCE, "bf.py", CompileOptions(target="spirv")).image, opencl)
    cpu = executor.load(compiler.compile_source(SOURCE, "bf.py", CompileOptions(target="cpu")).image)
    return ocl, cpu, tessera_frontend_compile(SOURCE, {"filename": "bf.py"})


def agree(programs, name, want, *args, interpreter=True):
    """`name`'s results on OpenCL, the CPU and (unless told not) in the interpreter equal `want` bit for bit
    (NaN as NaN)."""
    ocl, cpu, ref = programs
    runs = [("OpenCL", ocl.function(name)(*args)), ("the CPU", cpu.function(name)(*args))]
    runs += [("the interpreter", ref.interpret(name, *args))] if interpreter else []
    for label, got in runs:
        got = got if isinstance(got, tuple) else (got,)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            g = np.asarray(g)
            assert g.shape == w.shape, (name, k, label, g.shape)
            np.testing.assert_array_equal(g.astype(np.float64), w.astype(np.float64),
                                          err_msg=f"{name}[{k}] on {label}")


def test_f32_and_i8_to_bf16(programs):
    x, q = f32_values(), RNG.integers(-128, 128, SHAPE).astype(np.int8)
    q.flat[:2] = [-128, 127]
    agree(programs, "to_bf16", (bf16(x), q.astype(np.float32)), x, q)


def test_bf16_to_f32_and_i8(programs):
    b = bf16((RNG.standard_normal(SHAPE) * 60).astype(np.float32))
    b.flat[:4] = [254.0, -256.0, 0.0, -0.0]   # halved: 127 and -128, the i8 extremes, exactly
    agree(programs, "from_bf16", (b, np.trunc(b * np.float32(0.5)).astype(np.int8)), b)


def test_round_trip(programs):
    x = f32_values()
    agree(programs, "round_trip", (bf16(x),), x)


def test_bf16_arithmetic_is_computed_in_f32(programs):
    """Compiled, bf16 arithmetic is computed in f32 and rounded at the store (docs/portability.md, "dtype
    fallbacks"), on OpenCL as on the CPU; the interpreter rounds each op, so it is left out here."""
    a, b = (bf16((RNG.standard_normal(SHAPE) * 4).astype(np.float32)) for _ in range(2))
    agree(programs, "arithmetic", (bf16(a * b + np.float32(1.5)), a.max(axis=-1)), a, b, interpreter=False)


def test_block_dequantize_to_bf16(programs):
    q = RNG.integers(-128, 128, SHAPE).astype(np.int8)
    q.flat[:2] = [-128, 127]
    b = RNG.uniform(0.001, 3.0, (SHAPE[0], SHAPE[1] // 8)).astype(np.float32)
    agree(programs, "dequantize", (bf16(q.astype(np.float32) * np.repeat(b, 8, axis=-1)),), q, b)
