"""tessera._runtime, the pybind11 layer that tessera/runtime.py stands on: errors, lifetimes, launches."""
import gc
import struct
import threading

import numpy as np
import pytest

import make_image

rt = pytest.importorskip("tessera._runtime", reason="libtessera's Python module is not installed")


def slots(a, x, y):
    """Argument slots of the test image's saxpy(a, x, y, N): y = a * x + y."""
    return [struct.pack("<f", a), struct.pack("<Q", x.ctypes.data), struct.pack("<Q", y.ctypes.data),
            struct.pack("<q", x.size)]


@pytest.fixture
def module(test_image):
    with rt.Context() as ctx:
        yield ctx.load_module(test_image.read_bytes())


def test_versions_and_status_table():
    assert rt.version() == (0, 2, 0)
    assert rt.abi_version() == (1, 0)
    assert rt.STATUS["TSR_ERROR_BAD_IMAGE"] == 7 and rt.STATUS["TSR_SUCCESS"] == 0
    assert all(rt.status_name(code) == name for name, code in rt.STATUS.items())
    assert rt.status_name(12345) == "TSR_STATUS_UNKNOWN"
    assert issubclass(rt.Error, RuntimeError)


def test_introspection(module):
    assert module.kernel_names() == ["saxpy", "fill_fixed", "scale_add", "spin_until", "set_flag", "overrun",
                                     "sleep_ms", "add_one"]
    k = module.kernel("saxpy")
    assert (k.name, k.arg_count, k.block) == ("saxpy", 4, [0, 0, 0])
    assert [(a["name"], a["kind"], a["dims"]) for a in k.args] == [
        ("a", 0, []), ("x", 1, [-4]), ("y", 1, [-4]), ("N", 2, [])]
    assert k.args[1]["flags"] == 1  # x is read-only
    assert module.kernel("fill_fixed").block == [64, 1, 1]


def test_launch_computes_saxpy(module):
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, dtype=np.float32)
    module.kernel("saxpy").launch((8, 1, 1), (128, 1, 1), 0, slots(2.0, x, y))
    np.testing.assert_array_equal(y, 2 * np.arange(1000, dtype=np.float32) + 1)


def test_errors_carry_status_and_message(module, test_image):
    k = module.kernel("saxpy")
    with pytest.raises(rt.Error, match="kernel 'saxpy' expects 4 arguments, got 3") as e:
        k.launch((1, 1, 1), (1, 1, 1), 0, [b"\0" * 8] * 3)
    assert (e.value.status, e.value.status_name) == (5, "TSR_ERROR_INVALID_VALUE")
    with pytest.raises(rt.Error, match="ptx/sm_90a") as e:
        module.kernel("gpu_only")
    assert e.value.status_name == "TSR_ERROR_NOT_FOUND"
    with pytest.raises(ValueError, match="needs a 4-byte slot"):
        k.launch((1, 1, 1), (1, 1, 1), 0, [b"", b"\0" * 8, b"\0" * 8, b"\0" * 8])
    with rt.Context() as ctx:
        with pytest.raises(rt.Error) as e:
            ctx.load_module(test_image.read_bytes()[:100])
        assert e.value.status_name == "TSR_ERROR_BAD_IMAGE"


def test_abi_mismatch(cc, test_image, tmp_path):
    so = test_image.parent / "kernels_cpu.so"
    with rt.Context() as ctx:
        with pytest.raises(rt.Error, match="ABI 2.0") as e:
            ctx.load_module(make_image.build(so.read_bytes(), abi=(2, 0)))
        assert e.value.status == rt.STATUS["TSR_ERROR_ABI_MISMATCH"]


def test_kernel_keeps_its_module_and_context_alive(test_image):
    k = rt.Context().load_module(test_image.read_bytes()).kernel("saxpy")
    gc.collect()
    x, y = np.ones(10, np.float32), np.zeros(10, np.float32)
    k.launch((1, 1, 1), (16, 1, 1), 0, slots(3.0, x, y))
    assert (y == 3).all()


def test_closed_context_refuses_instead_of_crashing(test_image):
    ctx = rt.Context()
    m = ctx.load_module(test_image.read_bytes())
    k = m.kernel("saxpy")
    ctx.close()
    ctx.close()  # harmless
    assert ctx.closed
    for call in (m.kernel_names, lambda: k.arg_count, ctx.synchronize,
                 lambda: ctx.load_module(test_image.read_bytes())):
        with pytest.raises(rt.Error) as e:
            call()
        assert e.value.status_name == "TSR_ERROR_INVALID_HANDLE"


def test_launches_from_many_threads(module):
    """The GIL is released during launches; concurrent launches on one context serialize correctly."""
    k = module.kernel("saxpy")
    ys = [np.zeros(4096, np.float32) for _ in range(8)]
    x = np.ones(4096, np.float32)

    def work(i):
        for _ in range(20):
            k.launch((32, 1, 1), (128, 1, 1), 0, slots(float(i), x, ys[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, y in enumerate(ys):
        assert (y == 20 * i).all()
