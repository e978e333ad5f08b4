"""tessera.runtime: launching from Python, and every kind of bad input refused with a clear error."""

import struct

import numpy as np
import pytest

from tessera import _runtime, compiler, runtime
from tessera.image import read_image, write_image

SRC = """
@kernel
def scale(s: float, X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = s * X[i]

@kernel
def matvec(A: tensor[float, "M", "K"], x: tensor[float, "K"], y: tensor[float, "M"]):
    r = launch.thread_id()
    if r < A.shape[0]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[r, k] * x[k]
        y[r] = acc
"""


@pytest.fixture(scope="module")
def image():
    return compiler.compile_source(SRC, "kernels.py").image


@pytest.fixture
def mod(image):
    return runtime.load(image)


def status_of(excinfo) -> str:
    return excinfo.value.status_name


def test_launch_and_kernel_syntax(mod):
    X = np.arange(10, dtype=np.float32)
    Out = np.zeros_like(X)
    mod.scale(2.0, X, Out, grid=1, block=32)
    np.testing.assert_array_equal(Out, 2 * X)
    mod.kernel("scale")[(1,), (16,)](3.0, X, Out)
    np.testing.assert_array_equal(Out, 3 * X)
    assert sorted(mod.kernel_names) == ["matvec", "scale"]


def test_matvec(mod):
    A = np.random.default_rng(0).standard_normal((100, 37), dtype=np.float32)
    x = np.random.default_rng(1).standard_normal(37, dtype=np.float32)
    y = np.zeros(100, dtype=np.float32)
    mod.matvec(A, x, y, grid=1, block=128)
    np.testing.assert_allclose(y, A @ x, rtol=1e-5, atol=1e-5)


def test_wrong_argument_count(mod):
    with pytest.raises(TypeError, match=r"kernel 'scale' takes 3 arguments \(s, X, Out\), got 2"):
        mod.scale(1.0, np.zeros(4, np.float32), grid=1, block=32)


def test_wrong_dtype(mod):
    with pytest.raises(TypeError, match="argument 'X' of 'scale' must have dtype f32, got float64"):
        mod.scale(1.0, np.zeros(4), np.zeros(4, np.float32), grid=1, block=32)


def test_not_an_array(mod):
    with pytest.raises(TypeError, match="must be a numpy array of f32, got list"):
        mod.scale(1.0, [1.0, 2.0], np.zeros(2, np.float32), grid=1, block=32)


def test_shared_extent_mismatch(mod):
    with pytest.raises(ValueError, match="has N = 5 on axis 0, but an earlier argument has N = 4"):
        mod.scale(1.0, np.zeros(4, np.float32), np.zeros(5, np.float32), grid=1, block=32)


def test_rank_and_contiguity(mod):
    with pytest.raises(ValueError, match="must have rank 1"):
        mod.scale(1.0, np.zeros((2, 2), np.float32), np.zeros(4, np.float32), grid=1, block=32)
    with pytest.raises(ValueError, match="C-contiguous"):
        mod.scale(1.0, np.zeros(8, np.float32)[::2], np.zeros(4, np.float32), grid=1, block=32)


def test_bad_launch_geometry(mod):
    X = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="grid must be an int or a tuple"):
        mod.scale(1.0, X, X, grid=(1, 1, 1, 1), block=32)
    with pytest.raises(_runtime.Error) as e:
        mod.scale(1.0, X, X, grid=0, block=32)
    assert status_of(e) == "TSR_ERROR_INVALID_VALUE"


def test_missing_kernel(mod):
    with pytest.raises(_runtime.Error) as e:
        mod.kernel("nope")
    assert status_of(e) == "TSR_ERROR_NOT_FOUND" and "nope" in str(e.value)


@pytest.mark.parametrize("cut", [0, 10, 64, 300])
def test_truncated_image(image, cut):
    with pytest.raises(_runtime.Error) as e:
        runtime.load(image[:cut])
    assert status_of(e) == "TSR_ERROR_BAD_IMAGE"


def test_corrupted_magic(image):
    bad = b"\x7fELG" + image[4:]
    with pytest.raises(_runtime.Error) as e:
        runtime.load(bad)
    assert status_of(e) == "TSR_ERROR_BAD_IMAGE"


def test_wrong_abi_major(image):
    img = read_image(image)
    code = {s.name: s.data for s in img.sections if s.name.startswith(".tessera.code.")}
    newer = write_image(img.kernels, code, ops=img.ops, abi=(2, 0))
    with pytest.raises(_runtime.Error) as e:
        runtime.load(newer)
    assert status_of(e) == "TSR_ERROR_ABI_MISMATCH"
    assert struct.unpack("<II", read_image(newer).section(".note.tessera")[20:28]) == (2, 0)


def test_process_survives_and_still_works(image):
    """After every refusal above, the same process loads and runs a good image."""
    for bad in (image[:100], b"garbage", b""):
        with pytest.raises(_runtime.Error):
            runtime.load(bad)
    X = np.ones(3, np.float32)
    Out = np.zeros(3, np.float32)
    runtime.load(image).scale(4.0, X, Out, grid=1, block=32)
    assert Out.tolist() == [4.0, 4.0, 4.0]


def test_kernel_decorator_and_launch_grid(tmp_path, monkeypatch):
    """The spec's launch form: launch.grid(blocks=…, threads=…)(saxpy)(a, X, Y, Out) from a Python module."""
    src = tmp_path / "user_kernels.py"
    src.write_text(
        "from tessera import kernel, launch, tensor\n\n"
        "@kernel\n"
        "def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):\n"
        "    i = launch.thread_id()\n"
        "    if i < X.shape[0]:\n"
        "        Out[i] = a * X[i] + Y[i]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import user_kernels
    from tessera import ceil_div, launch
    n = 1000
    X, Y, Out = np.ones(n, np.float32), np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    launch.grid(blocks=(ceil_div(n, 256),), threads=(256,))(user_kernels.saxpy)(np.float32(2), X, Y, Out)
    np.testing.assert_array_equal(Out, 2 + Y)
    with pytest.raises(RuntimeError, match="only be used inside a @kernel"):
        launch.thread_id()


def test_compiled_kernels_on_streams_and_in_graphs(mod):
    """Compiled kernels through the execution model's API: a launch per stream with an event between them,
    the [grid, block, stream] form, and a captured graph replayed with its recorded values."""
    from tessera import graph, stream
    X = np.arange(256, dtype=np.float32)
    A, B = np.zeros_like(X), np.zeros_like(X)
    s1, s2 = stream.new(), stream.new()
    mod.scale(2.0, X, A, grid=8, block=32, stream=s1)
    s2.wait_event(s1.record())
    mod.scale[(8,), (32,), s2](3.0, A, B)          # B = 3 * A, after A = 2 * X on the other stream
    stream.synchronize()
    np.testing.assert_array_equal(B, 6 * X)
    with graph.capture() as g:
        mod.scale(0.5, B, A, grid=8, block=32)
        mod.scale(4.0, A, B, grid=8, block=32)
    np.testing.assert_array_equal(B, 6 * X)       # recorded, not run
    graph.launch(g)
    np.testing.assert_array_equal(B, 12 * X)
    graph.launch(g)
    np.testing.assert_array_equal(B, 24 * X)


def test_capabilities_and_backend_choice():
    caps = runtime.capabilities()
    assert caps["backend"] == "cpu" and caps["warp_size"] == 32 and caps["cp_async"] is False
    assert caps["shared_bytes_per_block"] == 64 * 1024 and caps["threads"] >= 1 and caps["simd"]
    with pytest.raises(_runtime.Error, match=r"available: cpu") as e:
        runtime.select_backend("level_zero")
    assert status_of(e) == "TSR_ERROR_UNSUPPORTED"
