"""fp8 as a one-byte memory type of SIMT kernels (tessera/frontend/kernel.py FP8, passes/fp8_convert.py): a
load widens the byte to f32, a store narrows to nearest even with saturation, bit for bit as the interpreter
rounds (numerics.rounding.fp8_bits / fp8_values), on the CPU and on the OpenCL CPU runtime; ptx sm_90+ uses
cvt, other targets integer arithmetic. The programs: fp8_memory_programs.py (tests/gpu/test_fp8_memory_gpu.py
runs them on a GPU against the CPU image)."""

import re

import numpy as np
import pytest

from tessera import compiler, dtypes, runtime
from tessera.numerics.rounding import fp8_bits, fp8_values
from tessera.options import CompileOptions
from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)
from fp8_memory_programs import FORMATS, GRAPH, SOURCE, sweep


def _launch(mod, name, *arrays, ctx=None):
    n = arrays[0].shape[0]
    if ctx is None:
        mod.kernel(name)[((n + 127) // 128,), (128,)](*arrays)
        return [np.asarray(a) for a in arrays]
    dev = [runtime.DeviceArray.from_numpy(a, ctx) for a in arrays]
    mod.kernel(name)[((n + 127) // 128,), (128,)](*dev)
    return [d.numpy() for d in dev]


def check(mod, ctx=None) -> None:
    x = sweep()
    with np.errstate(invalid="ignore"):
        want = [fp8_bits(x.astype(np.float64), f) for f in FORMATS]
    _, y, z = _launch(mod, "narrow", x, np.zeros(x.size, np.uint8), np.zeros(x.size, np.uint8), ctx=ctx)
    for got, w, f in zip((y, z), want, FORMATS):
        bad = np.nonzero(got != w)[0]
        assert bad.size == 0, f"{f}: {bad.size} bytes differ, first x={x[bad[:4]]} got={got[bad[:4]]} want={w[bad[:4]]}"
    with np.errstate(invalid="ignore"):   # signalling NaNs of the bit-pattern stride
        x64 = x.astype(np.float64)
    _, y64, z64 = _launch(mod, "narrow64", x64, np.zeros(x.size, np.uint8),
                          np.zeros(x.size, np.uint8), ctx=ctx)
    assert np.array_equal(y64, want[0]) and np.array_equal(z64, want[1])
    b = np.arange(256, dtype=np.uint8)
    _, _, a, c = _launch(mod, "widen", b, b.copy(), np.zeros(256, np.float32), np.zeros(256, np.float32), ctx=ctx)
    for got, f in zip((a, c), FORMATS):
        w = fp8_values(b, f).astype(np.float32)
        assert np.array_equal(got, w, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(w))
    _, a, c = _launch(mod, "rounded", x, np.zeros_like(x), np.zeros_like(x), ctx=ctx)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(a, fp8_values(want[0], "fp8_e4m3").astype(np.float32) * 2, equal_nan=True)
        assert np.array_equal(c, fp8_values(want[1], "fp8_e5m2").astype(np.float32), equal_nan=True)


@pytest.fixture(scope="module")
def cpu_module():
    return runtime.load(compiler.compile_source(SOURCE, "fp8mem.py", CompileOptions(target="cpu")).image)


def test_bytes_equal_the_interpreters_rounding_on_the_cpu(cpu_module):
    check(cpu_module)


def test_bytes_equal_the_interpreters_rounding_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    image = compiler.compile_source(SOURCE, "fp8mem.py", CompileOptions(target="spirv")).image
    check(runtime.load(image, opencl), opencl)


def test_the_signature_says_fp8_and_the_memory_is_one_byte(cpu_module):
    args = {a.name: a for a in cpu_module.kernel("narrow").record.args}
    assert dtypes.BY_CODE[args["Y"].dtype].name == "fp8_e4m3" and dtypes.BY_CODE[args["Z"].dtype].name == "fp8_e5m2"
    with pytest.raises(TypeError, match="fp8_e4m3 bit patterns as uint8"):
        cpu_module.kernel("narrow")[(1,), (128,)](np.zeros(4, np.float32), np.zeros(4, np.float32),
                                                  np.zeros(4, np.uint8))


@pytest.mark.parametrize("arch, native", [("sm_80", False), ("sm_89", False), ("sm_90a", True), ("sm_100a", True)])
def test_ptx_converts_with_cvt_from_sm_90(arch, native):
    stages = {}
    compiler.compile_source(SOURCE, "fp8mem.py", CompileOptions(target="ptx", arch=arch), stop_after="ptx",
                            on_stage=stages.__setitem__)
    ptx = stages["ptx"]
    assert ("cvt.rn.satfinite.e4m3x2.f32" in ptx and "cvt.rn.f16x2.e5m2x2" in ptx) == native
    assert re.search(r"ld\.global(\.nc)?\.[bsu]8", ptx) and re.search(r"st\.global\.[bu]8", ptx)   # one byte


def test_amdgpu_compiles_the_software_conversion():
    compiler.compile_source(SOURCE, "fp8mem.py", CompileOptions(target="amdgpu", arch="gfx942"))


def _graph_check(target: str, ctx=None) -> None:
    """An fp8 parameter and an fp8 result of elementwise kernels are one byte in the plan and at the call
    (passes/fp8_fallback.read_by_kernels): numpy results are their values, DeviceArray results their bytes,
    both equal to the interpreter's."""
    from tessera import executor, tessera_frontend_compile
    image = compiler.compile_source(GRAPH, "q8.py", CompileOptions(target=target)).image
    fn = executor.load(image, ctx).function("q8")
    assert [fn.plan.values[v].dtype for v in fn.plan.args] == ["f32", "fp8_e5m2"]
    assert [fn.plan.values[v].dtype for v in fn.plan.results] == ["fp8_e4m3", "f32"]
    x = sweep()[:64 * 200].reshape(200, 64)
    e = np.nan_to_num(x[::-1].copy(), nan=1.0)
    want = tessera_frontend_compile(GRAPH, {"filename": "q8.py"}).interpret("q8", x, e)
    with np.errstate(invalid="ignore", over="ignore"):
        got = fn(x, e)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
        device = fn(runtime.DeviceArray.from_numpy(x, ctx), runtime.DeviceArray.from_numpy(fp8_bits(e, "fp8_e5m2"), ctx))
        assert device[0].dtype == np.uint8
        np.testing.assert_array_equal(device[0].numpy(), fp8_bits(np.asarray(want[0], np.float64), "fp8_e4m3"))


def test_fp8_between_kernels_and_at_the_call_is_one_byte_on_the_cpu():
    _graph_check("cpu")


def test_fp8_between_kernels_and_at_the_call_is_one_byte_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    _graph_check("spirv", opencl)
