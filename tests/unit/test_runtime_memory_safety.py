"""Launches from Python never write memory they must not: read-only arrays a kernel writes are refused (naming
the argument), extents are checked against every buffer the runtime knows (randomized below), and a
DeviceArray, or a view of one, refuses every use once its memory is freed."""

import mmap

import numpy as np
import pytest

from tessera import compiler, executor, runtime, stream

SOURCE = '''
from tessera import kernel, launch, tensor

@kernel
def shift(X: tensor[float, "n"], Out: tensor[float, "n"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = X[i] + 1.0
'''

TILE = ("from tessera import kernel, tile\n\n@kernel\ndef fused_mlp(X, W1, b1, W2, b2, Out):\n"
        "    H = tile.dot(X, W1) + b1\n    H = tile.relu(H)\n    Out[:] = tile.dot(H, W2) + b2\n")


@pytest.fixture(scope="module")
def shift():
    return runtime.load(compiler.compile_source(SOURCE, "shift.py").image).shift


def launch(kernel, X, Out):
    kernel(X, Out, grid=((max(X.shape[0], 1) + 255) // 256,), block=(256,))


def read_only(shape):
    return np.frombuffer(bytes(4 * int(np.prod(shape))), np.float32).reshape(shape)


# -- read-only arrays ---------------------------------------------------------------------------------------

def test_read_only_inputs_are_read(shift):
    x = read_only((64,))
    out = np.zeros(64, np.float32)
    launch(shift, x, out)
    np.testing.assert_array_equal(out, 1)


def test_read_only_outputs_are_refused(shift):
    data = bytes(4 * 64)
    out = np.frombuffer(data, np.float32)
    with pytest.raises(ValueError, match="argument 'Out' of 'shift' is written by the kernel, but the array is "
                                         "read-only"):
        launch(shift, np.ones(64, np.float32), out)
    assert data == bytes(4 * 64)
    frozen = np.zeros(64, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="'Out'"):
        launch(shift, np.ones(64, np.float32), frozen)
    assert not frozen.any()


def test_read_only_mapping_is_refused_not_faulted(shift, tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(bytes(4 * 64))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        with pytest.raises(ValueError, match="'Out'"):
            launch(shift, np.ones(64, np.float32), np.frombuffer(m, np.float32))
    assert path.read_bytes() == bytes(4 * 64)


def test_copies_into_read_only_arrays_are_refused():
    src = runtime.DeviceArray.from_numpy(np.ones(16, np.float32))
    with pytest.raises(ValueError, match="destination of a copy is a read-only array"):
        stream.memcpy_async(read_only((16,)), src)


def test_executor_refuses_read_only_outputs():
    prog = executor.load(compiler.compile_source(TILE, "tiles.py").image)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 12), (1, 12), (12, 4), (1, 4))]
    for a in args:
        a.flags.writeable = False  # inputs may be read-only
    out = np.zeros((16, 4), np.float32)
    prog.fused_mlp(*args, out)
    X, W1, b1, W2, b2 = args
    np.testing.assert_allclose(out, np.maximum(X @ W1 + b1, 0) @ W2 + b2, rtol=1e-4, atol=1e-4)
    data = bytes(16 * 4 * 4)
    with pytest.raises(ValueError, match="argument 'Out' of 'fused_mlp' is written by the call, but the array "
                                         "is read-only"):
        prog.fused_mlp(*args, np.frombuffer(data, np.float32).reshape(16, 4))
    assert data == bytes(16 * 4 * 4)


# -- extents against buffers --------------------------------------------------------------------------------

def test_random_lengths_from_python(shift):
    """Arrays of random lengths: equal lengths run and are right, unequal ones are refused; nothing else is
    touched."""
    rng = np.random.default_rng(13)
    for _ in range(60):
        nx, nout = (int(v) for v in rng.integers(0, 700, 2))
        if rng.random() < 0.4:
            nout = nx
        device = rng.random() < 0.5
        guard = np.full(1024, 7, np.float32)          # memory around the output: untouched whatever happens
        x = rng.standard_normal(nx).astype(np.float32)
        out_host = guard[100:100 + nout]
        X = runtime.DeviceArray.from_numpy(x) if device else x
        Out = runtime.DeviceArray.from_numpy(out_host) if device else out_host
        if nx != nout:
            with pytest.raises(ValueError, match=f"Out' of 'shift' has n = {nout} on axis 0, but an earlier "
                                                 f"argument has n = {nx}"):
                launch(shift, X, Out)
            assert (guard == 7).all()
            continue
        launch(shift, X, Out)
        got = Out.numpy() if device else out_host
        np.testing.assert_array_equal(got, x + 1)
        assert (guard[:100] == 7).all() and (guard[100 + nout:] == 7).all()


def test_random_extents_against_device_arrays(shift):
    """Raw launches (the argument slots, as a replay script builds them) whose extents exceed a DeviceArray are
    refused with TSR_ERROR_MEMORY_FAULT naming the kernel and the tensor; the others run."""
    rng = np.random.default_rng(7)
    neighbours = [runtime.DeviceArray.from_numpy(np.full(256, 3, np.float32)) for _ in range(4)]
    native = shift._native
    for _ in range(80):
        nx, nout = (int(v) for v in rng.integers(1, 600, 2))
        n = int(rng.choice([min(nx, nout), max(nx, nout), int(rng.integers(0, 1200))]))
        X = runtime.DeviceArray.from_numpy(np.ones(nx, np.float32))
        Out = runtime.DeviceArray(nout, np.float32)
        slots = [X.address.to_bytes(8, "little"), Out.address.to_bytes(8, "little"), n.to_bytes(8, "little")]
        grid = ((max(n, 1) + 255) // 256, 1, 1)
        if 4 * n > min(X.nbytes, Out.nbytes):
            with pytest.raises(runtime.Error) as e:
                native.launch(grid, (256, 1, 1), 0, slots, None, 0.0, 0.0)
            assert e.value.status_name == "TSR_ERROR_MEMORY_FAULT"
            assert f"of kernel 'shift' needs {4 * n} bytes" in str(e.value)
            assert ("('X')" if 4 * n > X.nbytes else "('Out')") in str(e.value)
        else:
            native.launch(grid, (256, 1, 1), 0, slots, None, 0.0, 0.0)
            np.testing.assert_array_equal(Out.numpy()[:n], 2)
    for a in neighbours:
        np.testing.assert_array_equal(a.numpy(), 3)


# -- freed device arrays ------------------------------------------------------------------------------------

def freed_use(f):
    with pytest.raises(runtime.Error, match="used after its memory was freed") as e:
        f()
    assert e.value.status_name == "TSR_ERROR_INVALID_VALUE"


def test_views_of_a_freed_array_refuse_every_use(shift):
    base = runtime.DeviceArray.from_numpy(np.zeros((4, 64), np.float32))
    row, flat, bits = base[1], base.reshape(-1), base.view(np.uint8, (16,))
    base.free()
    later = runtime.DeviceArray.from_numpy(np.full((4, 64), 5, np.float32))  # may reuse the freed block
    for view in (row, flat, bits, base):
        freed_use(lambda: view.numpy())
        freed_use(lambda: view.copy_from(np.zeros(view.shape, view.dtype)))
        freed_use(lambda: view.address)
        freed_use(lambda: stream.memcpy_async(view, np.zeros(view.shape, view.dtype)))
    freed_use(lambda: base[0])
    freed_use(lambda: row.reshape(8, 8))
    freed_use(lambda: launch(shift, runtime.DeviceArray.from_numpy(np.ones(64, np.float32)), row))
    np.testing.assert_array_equal(later.numpy(), 5)
    row.free()  # freeing a view does nothing, and does not raise


def test_arrays_of_a_closed_context_refuse_every_use():
    ctx = runtime._runtime.Context("cpu")
    a = runtime.DeviceArray.from_numpy(np.ones(8, np.float32), ctx)
    view = a.reshape(2, 4)[1]
    ctx.close()
    freed_use(lambda: view.numpy())
    freed_use(lambda: a.numpy())
