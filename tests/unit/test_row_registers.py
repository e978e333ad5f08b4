"""Row kernels held in registers (passes/kernelgen._register_row): layernorm, rmsnorm, softmax and log_softmax
over rows of a static length C that is a multiple of the warp (at most REGISTER_ROW elements a lane) read each
element once into registers, reduce from them (layernorm's variance a second pass over the registers) and store
once; other lengths take the generic kernel, which stays in the same kernel behind `if n == C`. The CPU image
runs the same source: its results against float64 numpy references of the same inputs (f32: 2e-6 of the
largest value plus 1e-5 relative; bf16 results: one bf16 rounding, 2^-8 of the largest), with rows that do not
fill the last block (R not a multiple of rows_per_block) and C that takes the fallback. The PTX for sm_80 and
sm_90a assembles (ptxas), with no local memory (the row stays in registers at C = 4096)."""

import re

import numpy as np
import pytest

from tessera import compiler, executor, image
from tessera.backends.ptx import ptxas
from tessera.options import CompileOptions

RNG = np.random.default_rng(31)
OPS = ["layernorm", "rmsnorm", "softmax", "log_softmax"]


def _source(kind: str, dt: str, rows, cols: int) -> str:
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


def _step(src: str) -> dict:
    (step,) = compiler.compile_source(src, "rows.py").metadata["plans"]["f"]["steps"]
    return step


@pytest.mark.parametrize("kind", OPS)
def test_register_kernel_reads_each_element_once(kind):
    src = _step(_source(kind, "bf16", '"N"', 2048))["source"]
    fast, generic = src.split("        else:\n")
    assert "        if n == 2048:" in fast
    loads = re.findall(r"X\[r, (lane(?: \+ \d+)?)\]", fast)
    assert loads == ["lane"] + [f"lane + {32 * i}" for i in range(1, 64)]   # each column once, in order
    assert "for c0 in range" not in fast and "for c0 in range" in generic
    assert fast.count("Y[r, ") == 64


@pytest.mark.parametrize("kind,dt,cols", [("rmsnorm", "bf16", 1001), ("layernorm", "f32", 48),
                                           ("softmax", "bf16", 32 * 128 + 32), ("layernorm", "f32", '"D"'),
                                           ("softmax", "f64", 256)])
def test_other_rows_take_the_generic_kernel(kind, dt, cols):
    # not a multiple of the warp; more than 128 elements a lane; a symbolic length; f64 (its own accumulators)
    assert "if n ==" not in _step(_source(kind, dt, '"N"', cols))["source"]


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("kind", OPS)
@pytest.mark.parametrize("rows,cols", [(7, 2048), (13, 4096), (5, 64), (6, 1001)])
def test_cpu_matches_numpy(kind, dt, rows, cols):
    x = RNG.standard_normal((rows, cols)).astype(np.float32) * 3 + 1.5
    g = RNG.standard_normal(cols).astype(np.float32)
    b = RNG.standard_normal(cols).astype(np.float32)
    if dt == "bf16":
        x, g, b = _bf16(x), _bf16(g), _bf16(b)
    src = _source(kind, dt, rows, cols)
    assert ("if n ==" in _step(src)["source"]) == (cols % 32 == 0 and cols <= 4096)
    got = np.asarray(executor.load(compiler.compile_source(src, "rows.py").image).function("f")(x, g, b),
                     np.float64)
    want = _reference(kind, x, g, b)
    scale = np.abs(want).max()
    tol = 2.0 ** -8 * scale if dt == "bf16" else 2e-6 * scale + 1e-5 * np.abs(want)
    assert np.all(np.abs(got - want) <= tol), f"max error {np.abs(got - want).max():.3g} (largest {scale:.3g})"


needs_ptxas = pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed")


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("kind,cols", [("layernorm", 2048), ("layernorm", 4096), ("rmsnorm", 4096),
                                       ("softmax", 2048)])
def test_ptx_assembles_without_local_memory(kind, cols, arch):
    r = compiler.compile_source(_source(kind, "bf16", '"N"', cols), "rows.py", CompileOptions(target="ptx", arch=arch))
    img = image.read_image(r.image)
    ptx = img.section(".tessera.code.ptx").decode()
    assert "ld.local" not in ptx and "st.local" not in ptx and ".local" not in ptx
    (k,) = img.kernels
    assert 0 < k.regs <= 255
    # the row's elements read once each (bf16: 2 bytes) in the register kernel, plus the generic kernel's
    x_loads = len(re.findall(r"ld\.global\.(?:nc\.)?b16", ptx))
    assert x_loads >= cols // 32
