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
