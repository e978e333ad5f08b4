"""DLPack in Python: DeviceArray.__dlpack__ / __dlpack_device__ (a producer, as the Python array API's protocol
says) and tessera.runtime.from_dlpack (a consumer of any producer), zero-copy both ways, lifetimes kept.
numpy's own DLPack and, where it is installed, torch's (CPU) are the other side here; tests/gpu/test_dlpack_gpu.py
does the same with CUDA tensors and JAX arrays."""

import gc
import re
import sys

import numpy as np
import pytest

from tessera import runtime
from tessera._runtime import DLPACK_DEVICE

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)


def test_numpy_round_trip_shares_memory_and_strides():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::2]  # negative and non-unit strides
    y = runtime.from_dlpack(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (4, 3) and y.strides == x.strides
    np.testing.assert_array_equal(y, x)
    y[0, 0] = -5.0  # the same memory
    assert x[0, 0] == -5.0


def test_numpy_read_only_stays_read_only():
    x = np.arange(4.0)
    x.flags.writeable = False
    assert not runtime.from_dlpack(x).flags.writeable  # the versioned capsule's READ_ONLY flag


def test_device_array_is_a_producer():
    d = runtime.DeviceArray.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert d.__dlpack_device__() == (DLPACK_DEVICE["cpu"], 0)  # the CPU backend's memory is host memory
    n = np.from_dlpack(d)
    np.testing.assert_array_equal(n, [[0, 1, 2], [3, 4, 5]])
    n[1, 2] = 50  # zero-copy
    assert d.numpy()[1, 2] == 50


def test_exported_capsule_keeps_the_array_alive_until_the_consumer_is_done():
    d = runtime.DeviceArray.from_numpy(np.arange(8, dtype=np.float64))
    before = sys.getrefcount(d)
    n = np.from_dlpack(d)
    assert sys.getrefcount(d) == before + 1  # the managed tensor's reference
    del d
    gc.collect()
    np.testing.assert_array_equal(n, np.arange(8.0))  # the memory is still the array's: not freed
    base = n.base
    del n
    gc.collect()
    assert base is None or sys.getrefcount(base) >= 1


def test_an_unconsumed_capsule_releases_its_array():
    d = runtime.DeviceArray.from_numpy(np.zeros(4, np.float32))
    before = sys.getrefcount(d)
    for max_version in (None, (1, 0)):
        capsule = d.__dlpack__(max_version=max_version)
        assert sys.getrefcount(d) == before + 1
        del capsule
        assert sys.getrefcount(d) == before


def test_versioned_capsules():
    d = runtime.DeviceArray.from_numpy(np.zeros(4, np.float32))
    assert "dltensor_versioned" in repr(d.__dlpack__(max_version=(1, 0)))
    assert '"dltensor"' in repr(d.__dlpack__())
    assert '"dltensor"' in repr(d.__dlpack__(max_version=(0, 8)))


def test_a_capsule_is_consumed_once():
    capsule = np.arange(3.0).__dlpack__()
    t = runtime._runtime.DLPackTensor(capsule)
    assert "used_dltensor" in repr(capsule)
    with pytest.raises(ValueError, match="already consumed"):
        runtime._runtime.DLPackTensor(capsule)
    t.release()
    with pytest.raises(runtime.Error, match="released"):
        t.shape


def test_dlpack_of_a_freed_array_is_refused():
    d = runtime.DeviceArray.from_numpy(np.zeros(4, np.float32))
    d.free()
    with pytest.raises(runtime.Error, match="after its memory was freed"):
        d.__dlpack__()


def test_export_options():
    d = runtime.DeviceArray.from_numpy(np.zeros(4, np.float32))
    with pytest.raises(BufferError, match="never copied"):
        d.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="not copied across devices"):
        d.__dlpack__(dl_device=(DLPACK_DEVICE["cuda"], 0))
    np.testing.assert_array_equal(np.from_dlpack(d, copy=False), np.zeros(4, np.float32))


class Producer:
    """A DLPack producer claiming the device `device` for a numpy array's capsule."""

    def __init__(self, array, device):
        self.array, self.device = array, device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)


def test_wrong_device_is_refused():
    with pytest.raises(ValueError, match=r"kDLCuda device 0 memory, but the cpu context's kernels take host memory "
                                         r"or kDLCpu"):
        runtime.from_dlpack(Producer(np.zeros(3), (DLPACK_DEVICE["cuda"], 0)))


class Float128:
    """A producer of 128-bit floats, which tessera has no dtype for."""

    def __init__(self):
        self.array = np.zeros(2, np.longdouble)

    def __dlpack_device__(self):
        return DLPACK_DEVICE["cpu"], 0

    def __dlpack__(self, **kwargs):
        return runtime._runtime.dlpack_capsule(self, self.array.ctypes.data, self.array.shape, self.array.dtype,
                                               DLPACK_DEVICE["cpu"], 0, versioned=False)


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize != 16, reason="no 128-bit long double here")
def test_unknown_dtype_is_refused():
    producer = Float128()
    before = sys.getrefcount(producer)
    with pytest.raises(TypeError, match=r"DLPack dtype \(code 2, 128 bits, 1 lanes\) has no tessera storage dtype"):
        runtime.from_dlpack(producer)
    gc.collect()
    assert sys.getrefcount(producer) == before  # the producer's tensor was given back


def test_device_memory_of_the_context_becomes_a_device_array(opencl):  # noqa: F811
    d = runtime.DeviceArray.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4), opencl)
    assert d.__dlpack_device__() == (DLPACK_DEVICE["opencl"], 0)
    v = runtime.from_dlpack(d, opencl)
    assert isinstance(v, runtime.DeviceArray) and v.address == d.address and v.shape == (3, 4)
    before = sys.getrefcount(d)
    del v
    gc.collect()
    assert sys.getrefcount(d) == before - 1  # the view gave the producer's tensor back
    with pytest.raises(ValueError, match="kDLOpencl device 0 memory, but the cpu context"):
        runtime.from_dlpack(d)


def test_strided_device_tensors_are_refused(opencl):  # noqa: F811
    x = np.zeros((4, 4), np.float32)[:, ::2]
    with pytest.raises(ValueError, match=r"strides \(4, 2\) \(in elements\) is not compact row-major"):
        runtime.from_dlpack(Producer(x, (DLPACK_DEVICE["opencl"], 0)), opencl)


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a = runtime.from_dlpack(t)
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0
    assert runtime.from_dlpack(t.t()).strides == (4, 16)  # a transposed view, strides kept
    bits = runtime.from_dlpack(torch.ones(3, dtype=torch.bfloat16))
    assert bits.dtype == np.uint16 and (bits == 0x3F80).all()  # bf16 as its bit patterns
    d = runtime.DeviceArray.from_numpy(np.arange(6, dtype=np.float32))
    u = torch.from_dlpack(d)
    u[5] = -1.0
    np.testing.assert_array_equal(d.numpy(), [0, 1, 2, 3, 4, -1])
    del d
    gc.collect()
    assert u.tolist() == [0, 1, 2, 3, 4, -1]  # torch's tensor keeps the DeviceArray's memory


CUDA_HOST = """
import numpy as np
from tessera import _runtime, compiler, executor, runtime
ctx = _runtime.Context("cuda")
d = runtime.DeviceArray.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), ctx)
print(d.__dlpack_device__())
v = runtime.from_dlpack(d, ctx)
print(type(v).__name__, v.address == d.address, v.shape, v.numpy().tolist())
try:
    runtime.from_dlpack(d, _runtime.Context("cpu"))
except ValueError as e:
    print(e)
try:
    np.from_dlpack(d)
except (BufferError, RuntimeError, ValueError) as e:
    print("numpy refuses")
src = "@function\\ndef f(X: tensor[f32, 'N', 3]):\\n    return op.relu(X)\\n"
prog = executor.load(compiler.compile_source(src, "f.py", compiler.CompileOptions(target="ptx", arch="sm_80")).image,
                     ctx)
y = prog.f(v)
print(type(y).__name__, y.shape)
"""


def test_cuda_device_arrays_through_dlpack(fake_cuda):
    """The CUDA backend's device memory (tests/c/fake_cuda.c's: kernels do not run) as kDLCUDA, through
    from_dlpack and into an executor call that stays in device memory."""
    p = fake_cuda(CUDA_HOST)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == [
        f"({DLPACK_DEVICE['cuda']}, 0)",
        "DeviceArray True (2, 3) [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]",
        "from_dlpack: the tensor is in kDLCuda device 0 memory, but the cpu context's kernels take host memory or "
        "kDLCpu device 0 memory: move it there first",
        "numpy refuses",
        "DeviceArray (2, 3)",
    ]


FOREIGN_CUDA_HOST = """
import gc
import sys
import weakref
import numpy as np
from tessera import _runtime, runtime
from tessera._runtime import DLPACK_DEVICE

class Producer:  # another library's CUDA memory; the fake driver's device memory is host memory
    def __init__(self, array):
        self.array = array
    def __dlpack_device__(self):
        return (DLPACK_DEVICE["cuda"], 0)
    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

ctx = _runtime.Context("cuda")
x = np.arange(6, dtype=np.float32).reshape(2, 3)
base, before = x.ctypes.data, sys.getrefcount(x)
try:
    ctx.copy_to_host(np.empty(6, np.float32), base)
except runtime.Error as e:
    print(e)
d = runtime.from_dlpack(Producer(x), ctx)
info = ctx.pointer_info(base + 8)
print(info["kind"], info["base"] == base, info["bytes"], ctx.memory_stats()["registered_bytes"])
print(d.numpy().tolist())
d.copy_from(np.full((2, 3), 7, np.float32))
print(x.tolist())
row = d[1]
again = runtime.from_dlpack(Producer(x[1]), ctx)  # inside d's range: shares its registration
print(again.numpy().tolist(), ctx.memory_stats()["registered_bytes"])
try:
    ctx.free(base)
except runtime.Error as e:
    print(e)
del d, again
gc.collect()
print(ctx.pointer_info(base)["kind"], row.numpy().tolist())  # the view keeps the range registered
del row
gc.collect()
print(ctx.pointer_info(base)["kind"], ctx.memory_stats()["registered_bytes"], sys.getrefcount(x) == before)
y = np.ones(4, np.float32)
ybase = y.ctypes.data
seen = []
weakref.finalize(y, lambda: seen.append(ctx.pointer_info(ybase)["kind"]))  # runs in the producer's deleter
e = runtime.from_dlpack(Producer(y), ctx)
del y
print(ctx.pointer_info(ybase)["kind"])
e.free()
print(seen)
empty = runtime.from_dlpack(Producer(np.zeros((0, 3), np.float32)), ctx)
print(empty.numpy().shape, ctx.memory_stats()["registered_bytes"])
"""


def test_foreign_cuda_memory_is_registered_while_its_arrays_live(fake_cuda):
    """A from_dlpack DeviceArray of another library's CUDA memory (a producer's, under tests/c/fake_cuda.c)
    registers its range with the context (tsrDeviceRegister), so that numpy() and copy_from, the runtime's
    copies, accept it; arrays inside a registered range share it; it is unregistered when the last array or
    view goes, before the producer's deleter runs; empty arrays need none."""
    p = fake_cuda(FOREIGN_CUDA_HOST)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert re.fullmatch(r"tsrFree: 0x[0-9a-f]+ is registered device memory: use tsrDeviceUnregister", lines[5])
    assert lines[:5] + lines[6:] == [
        "tsrMemcpyAsync: the source range of 24 bytes is not inside one device allocation of this context (tsrAlloc; "
        "another library's device memory needs tsrDeviceRegister)",
        "device_registered True 24 24",
        "[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]",
        "[[7.0, 7.0, 7.0], [7.0, 7.0, 7.0]]",
        "[7.0, 7.0, 7.0] 24",
        "device_registered [7.0, 7.0, 7.0]",
        "unknown 0 True",
        "device_registered",
        "['unknown']",
        "(0, 3) 0",
    ]
