"""tessera.executor as a binding over libtessera's tsrFunctionCall: DLPack tensors as arguments (zero-copy),
libtessera's argument errors naming function and argument, and a tile program writing into a torch tensor
passed for its output. Results are compared bit for bit with the numpy-in, numpy-out call."""

import numpy as np
import pytest

from tessera import _runtime, compiler, executor, runtime

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(41)

MLP = """
@function
def f(X: tensor[f32, "M", 32], W: tensor[f32, 32, 48], Z: tensor[f32, "M", 48]):
    Y = op.relu(X @ W)
    S = op.softmax(op.tanh(Z) * 2.0)
    return Y + S, op.sum(S, axis=-1)
"""

ROWS = ("@kernel\ndef scale_rows(X, Y):\n    for b in tile.range(X, axis=0, step=32):\n"
        "        tile.store(Y, b, tile.relu(tile.load(X, b)))\n")


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def mlp():
    return executor.load(compiler.compile_source(MLP, "prog.py").image)


class Producer:
    """Only the DLPack protocol of a numpy array: what the executor takes from any library."""

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)


def test_dlpack_producers_are_arguments(mlp):
    X, W, Z = randn(6, 32), randn(32, 48), randn(6, 48)
    want = mlp.f(X, W, Z)
    got = mlp.f(Producer(X), W, Producer(Z))
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray)
        np.testing.assert_array_equal(g, w)


def test_torch_cpu_tensors_are_arguments(mlp):
    torch = pytest.importorskip("torch")
    X, W, Z = randn(5, 32), randn(32, 48), randn(5, 48)
    want = mlp.f(X, W, Z)
    got = mlp.f(torch.from_numpy(X), torch.from_numpy(W), torch.from_numpy(Z))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(TypeError, match="argument 'X' of 'f' must have dtype f32, got float64"):
        mlp.f(torch.from_numpy(X.astype(np.float64)), W, Z)


def test_a_tile_program_writes_the_torch_tensor_passed_for_its_output():
    torch = pytest.importorskip("torch")
    prog = executor.load(compiler.compile_source(ROWS, "rows.py").image)
    X = randn(64, 8)
    Y = torch.zeros(64, 8)
    out = prog.scale_rows(torch.from_numpy(X), Y)
    np.testing.assert_array_equal(Y.numpy(), np.maximum(X, 0))  # in place, through DLPack
    np.testing.assert_array_equal(out, np.maximum(X, 0))


def test_argument_errors_are_libtesseras_and_name_function_and_argument(mlp):
    W, Z = randn(32, 48), randn(4, 48)
    with pytest.raises(_runtime.ArgumentError, match="function 'f': argument 'X' must have extent 32 on axis 1, "
                                                     "got 31") as e:
        mlp.f(randn(4, 31), W, Z)
    assert isinstance(e.value, ValueError) and isinstance(e.value, runtime.Error)
    assert e.value.status_name == "TSR_ERROR_INVALID_VALUE"
    with pytest.raises(ValueError, match="function 'f': argument 'Z' has M = 5 on axis 0, but an earlier argument "
                                         "has M = 4"):
        mlp.f(randn(4, 32), W, randn(5, 48))
    with pytest.raises(ValueError, match="argument 'W' must have rank 2, got 3"):
        mlp.f(randn(4, 32), randn(1, 32, 48), Z)


def test_strided_arguments_keep_their_strides(mlp):
    """Sliced, transposed and reversed numpy arrays go to libtessera with their strides (it gathers them)."""
    X, W, Z = randn(4, 64)[:, ::2], randn(32, 48), randn(48, 4).T[::-1]
    for g, w in zip(mlp.f(X, W, Z), mlp.f(X.copy(), W, Z.copy())):
        np.testing.assert_array_equal(g, w)


def test_a_tile_program_writes_a_strided_output_in_place():
    prog = executor.load(compiler.compile_source(ROWS, "rows.py").image)
    X = randn(64, 8)
    Y = np.zeros((8, 64), np.float32).T  # a transposed view: written through its strides
    prog.scale_rows(X, Y)
    np.testing.assert_array_equal(Y, np.maximum(X, 0))
    torch = pytest.importorskip("torch")
    T = torch.zeros(8, 64).t()
    prog.scale_rows(torch.from_numpy(X), T)
    np.testing.assert_array_equal(T.numpy(), np.maximum(X, 0))


def test_device_arrays_from_dlpack_run_in_place(opencl):  # noqa: F811
    from tessera.options import CompileOptions
    prog = executor.load(compiler.compile_source(MLP, "prog.py", CompileOptions(target="spirv")).image, opencl)
    X, W, Z = randn(3, 32), randn(32, 48), randn(3, 48)
    want = prog.f(X, W, Z)
    arrays = [runtime.DeviceArray.from_numpy(a, opencl) for a in (X, W, Z)]
    views = [runtime.from_dlpack(a, opencl) for a in arrays]  # the same memory, through DLPack
    assert [v.address for v in views] == [a.address for a in arrays]
    got = prog.f(*views)
    for g, w in zip(got, want):
        assert isinstance(g, runtime.DeviceArray)
        np.testing.assert_array_equal(g.numpy(), w)


def test_strides_of_no_whole_element_are_refused(mlp):
    """A field of a structured array: strides libtessera cannot express in elements."""
    X = np.zeros(4 * 32, dtype=[("x", np.float32), ("pad", np.int8)])["x"].reshape(4, 32)
    with pytest.raises(ValueError, match="function 'f': argument 'X' has strides that are not a multiple of its "
                                         "item size"):
        mlp.f(X, randn(32, 48), randn(4, 48))
