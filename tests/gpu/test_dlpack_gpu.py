"""DLPack on the GPU: torch CUDA tensors and JAX GPU arrays through tessera.runtime.from_dlpack and
DeviceArray.__dlpack__ zero-copy, and as tessera.executor arguments (the C executor's DLTensors), bit-identical
to the numpy path. tests/unit/test_dlpack.py covers the same protocol on the CPU."""

import gc

import numpy as np
import pytest

RNG = np.random.default_rng(14)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


@pytest.fixture(scope="module")
def jax_gpu():
    jax = pytest.importorskip("jax")
    try:
        return jax, jax.devices("gpu")[0]
    except RuntimeError as e:
        pytest.skip(f"JAX has no GPU here: {e}")


def test_torch_cuda_tensor_becomes_a_device_array_in_place(cuda, torch_cuda):
    from tessera import runtime
    torch = torch_cuda
    t = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    d = runtime.from_dlpack(t, cuda)
    assert isinstance(d, runtime.DeviceArray) and d.address == t.data_ptr() and d.shape == (3, 4)
    np.testing.assert_array_equal(d.numpy(), t.cpu().numpy())
    d.copy_from(np.full((3, 4), 7, np.float32))  # the same memory
    torch.cuda.synchronize()
    assert (t == 7).all().item()
    del d
    gc.collect()
    assert t.sum().item() == 84  # the producer's tensor outlives the view
    bits = runtime.from_dlpack(torch.ones(4, dtype=torch.bfloat16, device="cuda"), cuda)
    assert bits.dtype == np.uint16 and (bits.numpy() == 0x3F80).all()


def test_device_array_into_torch_and_back(cuda, torch_cuda):
    from tessera import runtime
    torch = torch_cuda
    x = f32(5, 6)
    d = runtime.DeviceArray.from_numpy(x, cuda)
    assert d.__dlpack_device__() == (runtime._runtime.DLPACK_DEVICE["cuda"], 0)
    t = torch.from_dlpack(d)
    assert t.device.type == "cuda" and t.data_ptr() == d.address
    t.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(d.numpy(), 2 * x)
    del d
    gc.collect()
    np.testing.assert_array_equal(t.cpu().numpy(), 2 * x)  # torch's tensor keeps the DeviceArray's memory


def test_cuda_tensors_are_refused_where_they_cannot_run(cuda, torch_cuda):
    from tessera import runtime
    torch = torch_cuda
    with pytest.raises(ValueError, match="kDLCuda device 0 memory, but the cpu context"):
        runtime.from_dlpack(torch.zeros(3, device="cuda"), runtime._runtime.Context("cpu"))
    with pytest.raises(ValueError, match="is not compact row-major"):
        runtime.from_dlpack(torch.zeros(4, 4, device="cuda").t(), cuda)


def test_executor_takes_torch_cuda_tensors(program, torch_cuda):
    torch = torch_cuda
    X, g, b = f32(33, 64) * 3, f32(64), f32(64)
    want = program("rows").f(X, g, b)  # numpy in, numpy out
    got = program("rows").f(*(torch.from_numpy(a).cuda() for a in (X, g, b)))  # DeviceArrays out
    for w, r in zip(want, got):
        np.testing.assert_array_equal(r.numpy(), w)
    out = torch.from_dlpack(got[0])  # and on into torch, in place
    np.testing.assert_array_equal(out.cpu().numpy(), want[0])


def test_executor_quick_path_takes_torch_cuda_tensors_as_dlpack_does(cuda, program, torch_cuda, monkeypatch):
    """After the full path took a (dtype, device) of compact torch CUDA tensors through DLPack once, later calls
    take such tensors without a DLPack capsule (tessera/executor.py, Function._device_call): the same bits, for
    another signature of shapes too; on a stream the tensors are kept for the queued work. What the quick path
    does not take goes the full way with the full path's error or result: a tensor that requires grad (torch's
    __dlpack__ refuses it), another dtype, a strided view, torch's current stream not its default stream (where
    __dlpack__ queues an event wait)."""
    from tessera import runtime, stream
    torch = torch_cuda
    f = program("rows").f
    imports = []
    take = runtime._dlpack_argument
    monkeypatch.setattr(runtime, "_dlpack_argument", lambda *a, **k: imports.append(1) or take(*a, **k))
    for call, rows in enumerate((33, 33, 17)):
        X, g, b = f32(rows, 64) * 3, f32(64), f32(64)
        want = f(X, g, b)
        imports.clear()
        got = f(*(torch.from_numpy(a).cuda() for a in (X, g, b)))
        for w, r in zip(want, got):
            np.testing.assert_array_equal(r.numpy(), w)
        assert len(imports) == (3 if call == 0 else 0), (call, imports)  # the first call's DLPack teaches the rest
    imports.clear()
    s = stream.Stream(context=cuda)
    tensors = [torch.from_numpy(a).cuda() for a in (X, g, b)]
    queued = f(*tensors, stream=s)
    assert not imports and all(any(t is k for k in s._kept) for t in tensors)
    s.synchronize()
    for w, q in zip(want, queued):
        np.testing.assert_array_equal(q.numpy(), w)
    with pytest.raises((RuntimeError, BufferError), match="require"):  # torch's own refusal, as before
        f(tensors[0].clone().requires_grad_(), tensors[1], tensors[2])
    with pytest.raises(TypeError, match="must have dtype f32"):
        f(tensors[0].double(), tensors[1], tensors[2])
    imports.clear()
    strided = f(torch.from_numpy(X.T.copy()).cuda().t(), tensors[1], tensors[2])
    assert len(imports) == 3
    np.testing.assert_array_equal(strided[0].numpy(), want[0])
    imports.clear()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_side = f(*tensors)
    assert len(imports) == 3  # DLPack's way: torch makes its default stream wait for the side stream
    np.testing.assert_array_equal(on_side[1].numpy(), want[1])


def test_jax_gpu_arrays_round_trip(cuda, program, jax_gpu):
    from tessera import runtime
    jax, gpu = jax_gpu
    import jax.dlpack
    x = f32(8, 16)
    a = jax.device_put(x, gpu)
    d = runtime.from_dlpack(a, cuda)
    assert isinstance(d, runtime.DeviceArray)
    np.testing.assert_array_equal(d.numpy(), x)
    back = jax.dlpack.from_dlpack(runtime.DeviceArray.from_numpy(2 * x, cuda))
    np.testing.assert_array_equal(np.asarray(back), 2 * x)
    X, g, b = f32(9, 32), f32(32), f32(32)
    want = program("rows").f(X, g, b)
    got = program("rows").f(*(jax.device_put(v, gpu) for v in (X, g, b)))
    for w, r in zip(want, got):
        np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(r)), w)


def test_executor_takes_strided_torch_cuda_views(cuda, program, torch_cuda):
    """Transposed and sliced torch CUDA views go to an executor call as they are (not DeviceArrays, which are
    compact; libtessera gathers them): the compact call's bits, and numpy's; on a stream, the call keeps the
    producers' tensors alive for its queued work."""
    from tessera import runtime, stream
    torch = torch_cuda
    X, g, b = f32(64, 33) * 3, f32(128), f32(64)
    Xt = torch.from_numpy(X).cuda().t()  # (33, 64), strides (1, 33)
    gs = torch.from_numpy(g).cuda()[1::2]  # sliced with an offset, stride 2
    bd = torch.from_numpy(b).cuda()
    assert not Xt.is_contiguous() and not gs.is_contiguous()
    want = program("rows").f(X.T, g[1::2], b)  # numpy in, numpy out
    compact = program("rows").f(Xt.contiguous(), gs.contiguous(), bd)
    strided = program("rows").f(Xt, gs, bd)
    for w, c, s in zip(want, compact, strided):
        assert isinstance(s, runtime.DeviceArray)
        np.testing.assert_array_equal(s.numpy(), c.numpy())
        np.testing.assert_array_equal(c.numpy(), w)
    del compact, strided
    gc.collect()
    registered = cuda.memory_stats()["registered_bytes"]  # of bd, and of nothing of the calls'
    s = stream.Stream(context=cuda)
    queued = program("rows").f(torch.from_numpy(X).cuda().t(), torch.from_numpy(g).cuda()[1::2], bd, stream=s)
    gc.collect()  # the views exist only in the call's keep-alive now
    s.synchronize()  # which lets them go: their ranges are unregistered
    gc.collect()
    for w, q in zip(want, queued):
        np.testing.assert_array_equal(q.numpy(), w)
    assert cuda.memory_stats()["registered_bytes"] == registered


def column_major(jax, x, gpu):
    """`x` on the GPU laid out column-major (jax.experimental.layout), which JAX exports through DLPack with
    strides; skips where this JAX cannot make or export one."""
    from jax.sharding import SingleDeviceSharding

    from tessera import _runtime
    try:
        from jax.experimental.layout import Format, Layout  # JAX 0.6+: Format(Layout(major_to_minor), sharding)
        spec = Format(Layout(major_to_minor=(1, 0)), SingleDeviceSharding(gpu))
    except ImportError:
        try:  # earlier: Layout(DeviceLocalLayout(major_to_minor), sharding)
            from jax.experimental.layout import DeviceLocalLayout, Layout
            spec = Layout(DeviceLocalLayout(major_to_minor=(1, 0)), SingleDeviceSharding(gpu))
        except ImportError as e:
            pytest.skip(f"this JAX has no array layouts: {e}")
    try:
        a = jax.device_put(x, spec)
        tensor = _runtime.DLPackTensor(a.__dlpack__())
    except (ValueError, TypeError, RuntimeError, NotImplementedError, BufferError) as e:
        pytest.skip(f"this JAX cannot make or export a column-major GPU array: {e}")
    strides = tensor.strides
    tensor.release()
    if strides != [1, x.shape[0]]:
        pytest.skip(f"this JAX exports the column-major array with strides {strides}")
    return a


def test_executor_takes_a_strided_jax_array(cuda, program, jax_gpu):
    """A column-major JAX GPU array (DLPack strides (1, rows)) through an executor call: the bits of the same
    values row-major."""
    from tessera import runtime
    jax, gpu = jax_gpu
    X, g, b = f32(40, 32), f32(32), f32(32)
    Xc = column_major(jax, X, gpu)
    gd, bd = jax.device_put(g, gpu), jax.device_put(b, gpu)
    with pytest.raises(ValueError, match="is not compact row-major"):
        runtime.from_dlpack(Xc, cuda)
    compact = program("rows").f(jax.device_put(X, gpu), gd, bd)
    strided = program("rows").f(Xc, gd, bd)
    for c, s in zip(compact, strided):
        np.testing.assert_array_equal(s.numpy(), c.numpy())
