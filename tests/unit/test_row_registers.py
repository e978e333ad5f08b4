"""Row kernels held in registers (passes/kernelgen._register_row) and 16-byte accesses
(passes/simt_vector_access.py). On ptx, layernorm, rmsnorm, softmax and log_softmax over rows of a static
length C that is a multiple of the warp (at most REGISTER_ROW elements a lane) read each element once into
registers, lane l holding chunks of E consecutive columns (16 bytes of bf16 or f32), reduce from them and
store once; other lengths, and the CPU (where its loops ran faster), take the generic kernel, which stays in
the same kernel behind `if n == C`.

Numerics: the register source compiled for the CPU (REGISTER_TARGETS widened for the test, the compile cache
off) against float64 numpy references of the same inputs (f32: 2e-6 of the largest value plus 1e-5 relative;
bf16 results: one bf16 rounding, 2^-8 of the largest), with rows that do not fill the last block and C that
takes the fallback. The PTX for sm_80 and sm_90a assembles with no local memory, with the chunks' loads and
stores as ld/st.global.v4.b32 (the vector path's numerics: tests/gpu/test_row_registers_gpu.py)."""

import re

import numpy as np
import pytest

from tessera import compiler, executor, image
from tessera.backends.ptx import ptxas
from tessera.options import CompileOptions
from tessera.passes import kernelgen

RNG = np.random.default_rng(31)
OPS = ["layernorm", "rmsnorm", "softmax", "log_softmax"]


def _source(kind: str, dt: str, rows, cols) -> str:
    call = {"layernorm": "op.layernorm(X, gamma=g, beta=b)", "rmsnorm": "op.rmsnorm(X, gamma=g)",
            "softmax": "op.softmax(X)", "log_softmax": "op.log_softmax(X)"}[kind]
    return f"""
@function
def f(X: tensor[{dt}, {rows}, {cols}], g: tensor[{dt}, {cols}], b: tensor[{dt}, {cols}]):
    return {call}
"""


def _reference(kind: str, x, g, b):
    x, g, b = (np.asarray(a, np.float64) for a in (x, g, b))
    if kind == "layernorm":
        m = x.mean(-1, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    if kind == "rmsnorm":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
    z = x - x.max(-1, keepdims=True)
    if kind == "softmax":
        return np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _bf16(x):
    from tessera.numerics.rounding import round_to
    return round_to(np.asarray(x, np.float64), "bf16").astype(np.float32)


def _step(src: str, target: str = "ptx") -> dict:
    options = CompileOptions(target=target, arch="sm_90a") if target == "ptx" else CompileOptions(target=target)
    (step,) = compiler.compile_source(src, "rows.py", options).metadata["plans"]["f"]["steps"]
    return step


@pytest.fixture
def cpu_registers(monkeypatch):
    """The CPU image takes the register kernel too (its source is the ptx image's)."""
    monkeypatch.setattr(kernelgen, "REGISTER_TARGETS", frozenset({"ptx", "cpu"}))
    monkeypatch.setenv("TESSERA_CACHE", "0")


@pytest.mark.parametrize("kind", OPS)
def test_register_kernel_reads_each_element_once(kind):
    src = _step(_source(kind, "bf16", '"N"', 2048))["source"]
    fast, generic = src.split("        else:\n")
    assert "        if n == 2048:" in fast and "le = lane * 8" in fast
    loads = re.findall(r"X\[r, (le(?: \+ \d+)?)\]", fast)
    # lane l: columns 8l + e + 256j, each once, chunk by chunk
    assert loads == ["le"] + [f"le + {e + 256 * j}" for j in range(8) for e in range(8)][1:]
    assert "for c0 in range" not in fast and "for c0 in range" in generic
    assert fast.count("Y[r, ") == 64


def test_the_cpu_takes_the_generic_kernel():
    assert "if n ==" not in _step(_source("layernorm", "bf16", '"N"', 2048), "cpu")["source"]


@pytest.mark.parametrize("kind,dt,cols", [("rmsnorm", "bf16", 1001), ("layernorm", "f32", 48),
                                           ("softmax", "bf16", 32 * 128 + 32), ("layernorm", "f32", '"D"'),
                                           ("softmax", "f64", 256)])
def test_other_rows_take_the_generic_kernel(kind, dt, cols):
    # not a multiple of the warp; more than 128 elements a lane; a symbolic length; f64 (its own accumulators)
    assert "if n ==" not in _step(_source(kind, dt, '"N"', cols))["source"]


def test_lanes_hold_single_columns_where_chunks_do_not_divide():
    # 96 columns: 3 a lane, not a multiple of 8 (bf16's chunk): lane l holds l, l + 32, l + 64
    fast = _step(_source("rmsnorm", "bf16", '"N"', 96))["source"].split("        else:\n")[0]
    assert "le = lane\n" in fast and re.findall(r"X\[r, ([^\]]+)\]", fast) == ["le", "le + 32", "le + 64"]


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("kind", OPS)
@pytest.mark.parametrize("rows,cols", [(7, 2048), (13, 4096), (5, 96), (6, 1001)])
def test_cpu_matches_numpy(cpu_registers, kind, dt, rows, cols):
    x = RNG.standard_normal((rows, cols)).astype(np.float32) * 3 + 1.5
    g = RNG.standard_normal(cols).astype(np.float32)
    b = RNG.standard_normal(cols).astype(np.float32)
    if dt == "bf16":
        x, g, b = _bf16(x), _bf16(g), _bf16(b)
    src = _source(kind, dt, rows, cols)
    got = np.asarray(executor.load(compiler.compile_source(src, "rows.py").image).function("f")(x, g, b),
                     np.float64)
    want = _reference(kind, x, g, b)
    scale = np.abs(want).max()
    tol = 2.0 ** -8 * scale if dt == "bf16" else 2e-6 * scale + 1e-5 * np.abs(want)
    assert np.all(np.abs(got - want) <= tol), f"max error {np.abs(got - want).max():.3g} (largest {scale:.3g})"


needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed")

# 16-byte loads and stores of the register kernel, by (op, dtype, C): a row's chunks (C / (32·E)), plus G's and
# B's where the op reads them
VECTORS = {("layernorm", "bf16", 2048): (24, 8), ("layernorm", "bf16", 4096): (48, 16),
           ("rmsnorm", "bf16", 4096): (32, 16), ("softmax", "bf16", 2048): (8, 8),
           ("log_softmax", "f32", 2048): (16, 16), ("layernorm", "f32", 4096): (96, 32)}


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("kind,dt,cols", list(VECTORS))
def test_ptx_has_16_byte_accesses_and_no_local_memory(kind, dt, cols, arch):
    r = compiler.compile_source(_source(kind, dt, '"N"', cols), "rows.py", CompileOptions(target="ptx", arch=arch))
    img = image.read_image(r.image)
    ptx = img.section(".tessera.code.ptx").decode()
    assert ".local" not in ptx
    (k,) = img.kernels
    assert 0 < k.regs <= 255
    assert (len(re.findall(r"ld\.global\.v4\.b32", ptx)), len(re.findall(r"st\.global\.v4\.b32", ptx))) == \
        VECTORS[(kind, dt, cols)]


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_softmax_with_dropout_matches_the_interpreter(cpu_registers, dt):
    """softmax + dropout as one register row kernel: the mask drawn for column c of row r (Philox counter
    r·C + c + offset) as the interpreter draws it, whatever lane holds the column."""
    from tessera import tessera_frontend_compile
    src = f"""
@function
def f(S: tensor[{dt}, 9, 512]):
    return op.dropout(op.softmax(S), p=0.25, seed=77, offset=3)
"""
    step = _step(src, "cpu")
    assert "if n == 512:" in step["source"] and "philox_uniform" in step["source"].split("        else:\n")[0]
    s = RNG.standard_normal((9, 512)).astype(np.float32) * 2
    if dt == "bf16":
        s = _bf16(s)
    got = np.asarray(executor.load(compiler.compile_source(src, "sd.py").image).function("f")(s), np.float64)
    want = np.asarray(tessera_frontend_compile(src, {"filename": "sd.py"}).interpret("f", s), np.float64)
    np.testing.assert_array_equal(got == 0, want == 0)   # the same elements dropped
    tol = 2.0 ** -8 * np.abs(want).max() if dt == "bf16" else 1e-5 * np.abs(want) + 1e-7
    assert np.all(np.abs(got - want) <= tol)
