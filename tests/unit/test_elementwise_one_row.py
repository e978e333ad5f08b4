"""Elementwise kernels of one row (1-D results, kernelgen._one_row): a thread per column in blocks of
ELEMENTWISE_THREADS, no idle rows of threads; on ptx coarsened to 16 bytes a thread (passes/simt_coarsen.py).
Results against the reference interpreter on the CPU and the OpenCL CPU runtime, for lengths around the
block and the 4, 8 or 16 elements a GPU thread does: exact for f32 add/multiply and u8, 1e-5 relative and
1e-6 absolute for gelu (erf), as test_graph_cpu.py; f16 exactly against numpy computing as generated kernels do (in f32, rounded once to f16)."""

import numpy as np
import pytest

from tessera import compiler, executor, image, tessera_frontend_compile
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SOURCE = """
from tessera import f16, f32, function, op, tensor, u8

@function
def axpy(X: tensor[f32, "N"], Y: tensor[f32, "N"]) -> tensor[f32, "N"]:
    return X * 1.5 + Y

@function
def gelu_scale(X: tensor[f32, "N"], s: tensor[f32, 1]) -> tensor[f32, "N"]:
    return op.gelu(X) * s

@function
def halves(X: tensor[f16, "N"]) -> tensor[f16, "N"]:
    return X * X + X

@function
def bytes_(X: tensor[u8, "N"]) -> tensor[u8, "N"]:
    return X + X
"""

LENGTHS = [1, 3, 4, 7, 8, 9, 511, 512, 513, 4099]
RNG = np.random.default_rng(3)


def _args(name: str, n: int) -> tuple:
    x = RNG.standard_normal(n).astype(np.float32)
    return {"axpy": (x, RNG.standard_normal(n).astype(np.float32)),
            "gelu_scale": (x, np.array([0.75], np.float32)),
            "halves": (x.astype(np.float16),),
            "bytes_": (RNG.integers(0, 256, n).astype(np.uint8),)}[name]


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "one_row.py"})


def _check(mod, reference, n: int) -> None:
    for name in ("axpy", "gelu_scale", "halves", "bytes_"):
        args = _args(name, n)
        got, want = mod.function(name)(*args), reference.interpret(name, *args)
        if name == "halves":   # computed in f32, rounded once (the interpreter rounds each op to f16)
            x = args[0].astype(np.float32)
            want = (x * x + x).astype(np.float16)
        tol = 1e-5 if name == "gelu_scale" else 0   # as test_graph_cpu.py's gelu (erf's rounding in f32)
        np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol / 10, err_msg=f"{name} n={n}")


def test_one_row_kernels_are_a_thread_per_column():
    result = compiler.compile_source(SOURCE, "one_row.py", CompileOptions(target="ptx"))
    steps = [s for p in result.metadata["plans"].values() for s in p["steps"]]
    assert steps and all(s["block"] == [512, 1, 1] and s["grid"] == ["ceil(C/512)", "1", "1"] for s in steps)
    props = {k.name: k.props.get("simt.coarsen") for k in image.read_image(result.image).kernels}
    assert sorted(props.values()) == ["16", "4", "4", "8"], props   # u8: 16 a thread, f16: 8, f32: 4
    ptx = image.read_image(result.image).section(".tessera.code.ptx").decode()
    assert ptx.count("st.global.v4") == 4


def test_rows_of_a_matrix_keep_their_rows_of_threads():
    src = SOURCE.replace('"N"]', '"M", "N"]')
    result = compiler.compile_source(src, "rows.py", CompileOptions(target="ptx"))
    steps = [s for p in result.metadata["plans"].values() for s in p["steps"]]
    assert all(s["block"][1] > 1 for s in steps)
    assert all("simt.coarsen" not in k.props for k in image.read_image(result.image).kernels)


@pytest.mark.parametrize("n", LENGTHS)
def test_on_the_cpu(reference, n):
    _check(executor.load(compiler.compile_source(SOURCE, "one_row.py").image), reference, n)


def test_on_the_opencl_cpu_runtime(opencl, reference):  # noqa: F811
    mod = executor.load(compiler.compile_source(SOURCE, "one_row.py", CompileOptions(target="spirv")).image, opencl)
    for n in LENGTHS:
        _check(mod, reference, n)
