"""Backend selection and device arrays in tessera.runtime, on the machine's own backends (the CPU everywhere;
the CUDA backend's own tests are in tests/gpu)."""

import numpy as np
import pytest

from tessera import compiler, runtime
from tessera.options import CompileOptions

SAXPY = """
@kernel
def saxpy(a: float, X: tensor[float, "N"], Y: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""


def test_the_cpu_backend_is_always_there():
    assert "cpu" in runtime.backends()


def test_an_unavailable_backend_says_why():
    if "cuda" in runtime.backends():
        pytest.skip("this machine runs the CUDA backend")
    with pytest.raises(runtime.Error) as info:
        runtime._runtime.Context("cuda")
    assert info.value.status_name == "TSR_ERROR_UNSUPPORTED" and "backend 'cuda'" in str(info.value)
    assert "available: cpu" in str(info.value)
    with pytest.raises(runtime.Error, match="unknown backend 'tpu'"):
        runtime._runtime.Context("tpu")


def test_select_backend_makes_the_default_context():
    ctx = runtime.select_backend("cpu")
    assert ctx.backend == "cpu" and runtime.default_context() is ctx


def test_device_arrays_round_trip_and_launch_on_any_backend():
    ctx = runtime._runtime.Context("cpu")
    x = np.arange(12, dtype=np.float32)
    X = runtime.DeviceArray.from_numpy(x, ctx)
    np.testing.assert_array_equal(X.numpy(), x)
    np.testing.assert_array_equal(X.reshape(3, -1).numpy(), x.reshape(3, 4))
    Out = runtime.DeviceArray(12, np.float32, ctx)
    mod = runtime.load(compiler.compile_source(SAXPY, "s.py").image, ctx)
    mod.saxpy(2.0, X, X, Out, grid=1, block=32)
    np.testing.assert_array_equal(Out.numpy(), 3 * x)
    with pytest.raises(ValueError, match="shape"):
        Out.copy_from(np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="dtype f32"):
        mod.saxpy(2.0, runtime.DeviceArray(12, np.float64, ctx), X, Out, grid=1, block=32)
    Out.free()
    Out.free()  # harmless


def test_a_module_picks_the_records_of_its_backends_target():
    """An image for cpu and ptx loads on the CPU with the CPU's records only."""
    ctx = runtime._runtime.Context("cpu")
    image = compiler.compile_source(SAXPY, "s.py", CompileOptions(target="cpu,ptx")).image
    mod = runtime.load(image, ctx)
    assert mod.kernel_names == ["saxpy"] and mod.saxpy.record.target == "cpu"
    x = np.ones(40, np.float32)
    out = np.zeros(40, np.float32)
    mod.saxpy(0.5, x, x, out, grid=2, block=32)
    np.testing.assert_array_equal(out, 1.5 * x)
