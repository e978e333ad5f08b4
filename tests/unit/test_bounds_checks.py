"""Run-time bounds checks of CPU kernels (passes/simt_to_warps.py, passes/bounds_facts.py): an access outside
its tensor makes the launch fail with TSR_ERROR_MEMORY_FAULT naming kernel, tensor and line; the process goes
on; in-bounds results are unchanged; `bounds_checks=False` (tessera-cc --no-bounds-checks) omits the checks."""

import numpy as np
import pytest

from tessera import compiler, runtime
from tessera.options import CompileOptions

SHIFT = """
@kernel
def shift(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i + 1] = X[i]
"""

SAXPY = """
@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""


def _fault(call) -> runtime.Error:
    with pytest.raises(runtime.Error) as info:
        call()
    assert info.value.status_name == "TSR_ERROR_MEMORY_FAULT"
    return info.value


def test_write_past_the_end_names_kernel_tensor_and_line(build):
    mod = build(SHIFT, "shift.py")
    X = np.arange(1000, dtype=np.float32)
    Out = np.zeros(1001, np.float32)
    guard = Out[1000:]  # the element past Out's view: the check must keep the kernel off it
    view = Out[:1000]
    e = _fault(lambda: mod.shift(X, view, grid=4, block=256))
    assert "kernel 'shift'" in str(e) and "tensor 'Out'" in str(e) and "shift.py:6" in str(e), str(e)
    assert guard[0] == 0
    # The process lives on: the module launches again (and faults again), other kernels run as before.
    _fault(lambda: mod.shift(X, view, grid=4, block=256))
    saxpy = build(SAXPY)
    saxpy.saxpy(np.float32(2), X, X, Out, grid=4, block=256)
    np.testing.assert_array_equal(Out[:1000], 3 * X)


@pytest.mark.parametrize("index, line", [("i - 1", 6), ("i + 1", 6)])
def test_read_outside_is_reported(build, index, line):
    mod = build(f"""
        @kernel
        def read(X: tensor[float, "N"], Out: tensor[float, "N"]):
            i = launch.thread_id()
            if i < X.shape[0]:
                Out[i] = X[{index}]
        """, "read.py")
    X = np.arange(100, dtype=np.float32)
    e = _fault(lambda: mod.read(X, np.zeros_like(X), grid=1, block=128))
    assert "tensor 'X'" in str(e) and f"read.py:{line}" in str(e), str(e)


def test_uniform_access_is_checked(build):
    mod = build("""
        @kernel
        def first(X: tensor[float, "N"], Out: tensor[float, "M"]):
            Out[0] = X[3]
        """, "first.py")
    Out = np.zeros(1, np.float32)
    e = _fault(lambda: mod.first(np.arange(3, dtype=np.float32), Out, grid=1, block=32))
    assert "tensor 'X'" in str(e) and "first.py:4" in str(e), str(e)
    mod.first(np.arange(4, dtype=np.float32), Out, grid=1, block=32)
    assert Out[0] == 3


@pytest.mark.parametrize("checks", [True, False])
def test_in_bounds_results_match_numpy(build, checks):
    mod = build(SAXPY, bounds_checks=checks)
    rng = np.random.default_rng(0)
    for n in (1, 31, 1000, 4099):
        X, Y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        Out = np.empty_like(X)
        mod.saxpy(np.float32(1.5), X, Y, Out, grid=(n + 255) // 256, block=256)
        np.testing.assert_array_equal(Out, np.float32(1.5) * X + Y)


def test_short_out_is_a_fault_not_an_overwrite(build):
    """README's saxpy with Out shorter than X: the checked store stops at Out's end."""
    mod = build(SAXPY, "saxpy.py")
    X = Y = np.ones(4096, np.float32)
    backing = np.zeros(4096, np.float32)
    e = _fault(lambda: mod.saxpy(np.float32(2), X, Y, backing[:100], grid=16, block=256))
    assert "kernel 'saxpy'" in str(e) and "tensor 'Out'" in str(e) and "saxpy.py:6" in str(e), str(e)
    assert not backing[100:].any()


def test_short_circuit_and_guards_the_read(build):
    """`i < n and X[i] > 0` reads X[i] only where i < n (Python's evaluation): nothing to report."""
    mod = build("""
        @kernel
        def positive(X: tensor[float, "N"], Out: tensor[float, "N"]):
            i = launch.thread_id()
            if i < X.shape[0] and X[i] > 0.0:
                Out[i] = X[i]
        """)
    X = np.linspace(-1, 1, 1000, dtype=np.float32)
    Out = np.zeros_like(X)
    mod.positive(X, Out, grid=4, block=256)
    np.testing.assert_array_equal(Out, np.where(X > 0, X, 0))


def _llir(source: str, **options) -> str:
    stages = {}
    compiler.compile_source(source, "k.py", CompileOptions(**options), stop_after="llir",
                            on_stage=stages.__setitem__)
    return stages["llir"]


def test_proven_accesses_are_not_checked():
    shared = SAXPY.replace("tensor[float]", 'tensor[float, "N"]')
    assert "__tessera_oob" not in _llir(shared)
    assert "__tessera_oob_saxpy" in _llir(SAXPY)  # Y and Out have extents of their own


def test_opt_out_omits_checks_and_changes_the_cache_key():
    assert "__tessera_oob" not in _llir(SHIFT, bounds_checks=False)
    assert CompileOptions().hash() != CompileOptions(bounds_checks=False).hash()
