"""An amax history for delayed scaling (issue 17, item 1; docs/language.md, "Quantization"): op.amax_scale
keeps the history as state passed in and returned (ttensor.push, one small kernel). Compiled on the CPU, in
the interpreter and in numpy the steps agree exactly; the SPIR-V image runs on the OpenCL CPU runtime."""

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)
from test_quantize import check, divided, to_fp8

RNG = np.random.default_rng(1718)

HISTORY = """
@function
def step(X: tensor[f32, "N", "D"], h: tensor[f32, 4]):
    s, h2 = op.amax_scale(X, fp8_e4m3, history=h)
    return op.quantize(X, fp8_e4m3, scale=s), s, h2
"""


def test_an_amax_history_is_state_passed_in_and_returned():
    """Delayed scaling over six steps: each step's amax enters the history first, the oldest leaves, and the
    scale is the history's maximum / 448 — so one step's large amax (step 1) sets the scale of the next three
    and then is forgotten. Compiled, interpreter and numpy agree exactly."""
    run(executor.load(compiler.compile_source(HISTORY, "h.py").image),
        tessera_frontend_compile(HISTORY, {"filename": "h.py"}))


def test_the_history_on_the_opencl_cpu_runtime(opencl):  # noqa: F811
    mod = executor.load(compiler.compile_source(HISTORY, "h.py", CompileOptions(target="spirv")).image, opencl)
    run(mod, tessera_frontend_compile(HISTORY, {"filename": "h.py"}))


def run(mod, ref):
    h = want_h = np.zeros(4, np.float32)
    for k in range(6):
        x = (RNG.standard_normal((3, 40)) * (10 if k == 1 else 1)).astype(np.float32)
        want_h = np.concatenate([[np.abs(x).max()], want_h[:-1]]).astype(np.float32)
        s = np.float32(want_h.max()) / np.float32(448.0)
        want = [to_fp8(divided(x, s), "fp8_e4m3"), np.array(s), want_h]
        check(mod, ref, "step", want, x, h)
        h = np.asarray(mod.function("step")(x, h)[2])
        big = k in (1, 2, 3, 4)
        assert (s > 20 / 448) == big, (k, s)   # step 1's amax (about 30) rules while in the history


@pytest.mark.parametrize("target", ["ptx", "amdgpu"])
def test_other_targets_compile_it(target):
    compiler.compile_source(HISTORY, "h.py", CompileOptions(target=target))
