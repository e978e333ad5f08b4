"""tessera.executor in device memory: the plan's tensors as DeviceArrays (the way it runs on a GPU, exercised
here on the CPU backend, whose DeviceArrays are allocations of its own), on streams and in graph captures.
Results are compared bit for bit with the numpy-in, numpy-out path: the same kernels run on the same values.
tests/gpu/test_cuda.py runs the same executor on CUDA."""

import numpy as np
import pytest

from tessera import compiler, executor, graph, runtime, stream

RNG = np.random.default_rng(23)

MLP = """
@function
def f(X: tensor[f32, "M", 32], W: tensor[f32, 32, 48], Z: tensor[f32, "M", 48]):
    Y = op.relu(X @ W)
    R = op.tanh(Z) * 2.0
    S = op.softmax(R)
    return Y + S, op.sum(S, axis=-1)
"""

BATCHED = """
@function
def f(A: tensor[f32, 2, 4, 8], B: tensor[f32, 2, 8, 3]):
    return A @ B
"""


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def mlp():
    r = compiler.compile_source(MLP, "prog.py")
    assert any("buffer" in v for v in r.metadata["plans"]["f"]["values"].values())  # slots are exercised
    return executor.load(r.image)


def device(x, prog):
    return runtime.DeviceArray.from_numpy(x, prog.module.context)


def test_device_arrays_in_device_arrays_out_same_bits(mlp):
    X, W, Z = randn(20, 32), randn(32, 48), randn(20, 48)
    want = mlp.f(X, W, Z)
    got = mlp.f(device(X, mlp), device(W, mlp), device(Z, mlp))
    assert all(isinstance(g, runtime.DeviceArray) for g in got)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g.numpy(), w)


def test_numpy_and_device_arrays_mixed_run_in_device_memory(mlp):
    X, W, Z = randn(7, 32), randn(32, 48), randn(7, 48)
    want = mlp.f(X, W, Z)
    got = mlp.f(X, device(W, mlp), Z)  # the numpy inputs are copied in
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


def test_a_numpy_scalar_beside_device_arrays_stays_0d():
    """Regression: a scalar parameter (a learning rate) given as np.float32 beside DeviceArrays was copied to
    the device 1-d (np.ascontiguousarray makes 0-d arrays 1-d), and the call refused it: 'must have rank 0'."""
    prog = executor.load(compiler.compile_source(
        "@function\ndef f(X: tensor[f32, \"M\"], lr: f32):\n    return X * lr\n", "scalar.py").image)
    X = randn(9)
    got = prog.f(device(X, prog), np.float32(0.5))
    np.testing.assert_array_equal(got.numpy(), X * np.float32(0.5))
    assert runtime.DeviceArray.from_numpy(np.float32(2.0), prog.module.context).shape == ()


def test_batched_steps_launch_on_device_array_slices():
    prog = executor.load(compiler.compile_source(BATCHED, "prog.py").image)
    assert any("batch" in s for s in prog.functions["f"]["steps"])
    A, B = randn(2, 4, 8), randn(2, 8, 3)
    got = prog.f(device(A, prog), device(B, prog))
    np.testing.assert_array_equal(got.numpy(), prog.f(A, B))
    np.testing.assert_allclose(got.numpy(), A @ B, rtol=1e-5, atol=1e-5)


def test_device_arguments_are_checked(mlp):
    X, W, Z = randn(4, 32), randn(32, 48), randn(4, 48)
    with pytest.raises(TypeError, match="DeviceArray of f32"):
        mlp.f(device(X.astype(np.float64), mlp), W, Z)
    with pytest.raises(ValueError, match="extent 32 on axis 1"):
        mlp.f(device(randn(4, 31), mlp), W, Z)
    with pytest.raises(ValueError, match="another context"):
        mlp.f(runtime.DeviceArray.from_numpy(X, runtime._runtime.Context("cpu")), W, Z)


def test_launches_go_to_the_stream(mlp):
    X, W, Z = randn(9, 32), randn(32, 48), randn(9, 48)
    want = mlp.f(X, W, Z)
    s = stream.new()
    got = mlp.f(device(X, mlp), device(W, mlp), device(Z, mlp), stream=s)  # queued; returns at once
    s.synchronize()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)
    with stream.use(s):  # numpy results: the call waits for its stream
        for g, w in zip(mlp.f(X, W, Z), want):
            np.testing.assert_array_equal(g, w)


def test_a_captured_call_replays_on_new_inputs(mlp):
    X, W, Z = device(randn(5, 32), mlp), device(randn(32, 48), mlp), device(randn(5, 48), mlp)
    with graph.capture() as g:
        out, sums = mlp.f(X, W, Z)
    for _ in range(2):
        x, w, z = randn(5, 32), randn(32, 48), randn(5, 48)
        X.copy_from(x), W.copy_from(w), Z.copy_from(z)
        g.launch()
        want_out, want_sums = mlp.f(x, w, z)
        np.testing.assert_array_equal(out.numpy(), want_out)
        np.testing.assert_array_equal(sums.numpy(), want_sums)


def test_a_captured_call_in_host_memory_writes_the_arrays_it_returned(mlp):
    """On the CPU backend numpy arrays are used in place: a capture's results are the arrays replays write."""
    x, w, z = randn(5, 32), randn(32, 48), randn(5, 48)
    with graph.capture() as g:
        out, sums = mlp.f(x, w, z)
    x[:] = randn(5, 32)
    g.launch()
    want_out, want_sums = mlp.f(x.copy(), w, z)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(sums, want_sums)


def test_device_array_views():
    a = runtime.DeviceArray.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    np.testing.assert_array_equal(a[1].numpy(), np.arange(12, 24, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(a[-1][2].numpy(), np.arange(20, 24, dtype=np.float32))
    assert a.size == 24 and a[0].size == 12
    raw = runtime.DeviceArray(64, np.uint8)
    raw.view(np.float32, (4, 4)).copy_from(np.ones((4, 4), np.float32))
    np.testing.assert_array_equal(raw.view(np.float32, (16,)).numpy(), np.ones(16, np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        raw.view(np.float64, (9,))
    with pytest.raises(IndexError):
        a[2]
