"""PTX kernels on an NVIDIA GPU through libtessera's CUDA backend, checked against numpy (and PyTorch, where
it is installed). Tolerances as on the CPU (tests/unit/test_cpu_kernels.py, test_graph_cpu.py): exact for
saxpy and integer results; 1e-5 relative for f32 reductions and the math lowering (≤ 2 ulp functions)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

RNG = np.random.default_rng(5)


def f32(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def dev(x, ctx):
    from tessera.runtime import DeviceArray
    return DeviceArray.from_numpy(x, ctx)


def test_device_properties(cuda):
    p = cuda.properties
    assert p["backend"] == "cuda" and p["arch"].startswith("sm_") and p["warp_size"] == 32
    assert p["compute_units"] > 0 and p["total_memory_bytes"] > 0 and p["name"]
    print(f"{p['name']} ({p['arch']}, {p['compute_units']} SMs)")


@pytest.mark.parametrize("n, block", [(1, 32), (1000, 256), (4097, 128), (1_000_003, 1024), (777, 100)])
def test_saxpy(load, cuda, n, block):
    mod = load("saxpy")
    X, Y = f32(n), f32(n)
    Out = dev(np.full(n, np.nan, np.float32), cuda)
    a = np.float32(-1.75)
    mod.saxpy(a, dev(X, cuda), dev(Y, cuda), Out, grid=(n + block - 1) // block, block=block)
    np.testing.assert_array_equal(Out.numpy(), a * X + Y)


def test_sm90a_image_runs_only_on_compute_capability_9_0(load, cuda):
    from tessera import runtime
    if cuda.properties["arch"] != "sm_90":
        with pytest.raises(runtime.Error, match="no kernel"):
            load("saxpy_sm90a").kernel("saxpy")
        return
    mod = load("saxpy_sm90a")
    X = f32(5000)
    Out = dev(np.zeros(5000, np.float32), cuda)
    mod.saxpy(np.float32(2), dev(X, cuda), dev(X, cuda), Out, grid=20, block=256)
    np.testing.assert_array_equal(Out.numpy(), np.float32(2) * X + X)


@pytest.mark.parametrize("warps, block", [(1, 32), (64, 256), (4096, 128)])
def test_warp_reduce_sum(load, cuda, warps, block):
    mod = load("saxpy")
    X = f32(warps * 32)
    Out = dev(np.zeros(warps, np.float32), cuda)
    mod.warp_reduce_sum(dev(X, cuda), Out, grid=warps * 32 // block, block=block)
    np.testing.assert_allclose(Out.numpy(), X.reshape(warps, 32).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_shuffle_down_keeps_out_of_warp_lanes(load, cuda):
    mod = load("shuffles")
    X = np.arange(64, dtype=np.int32)
    Out = dev(np.zeros(64, np.int32), cuda)
    mod.shift_down(dev(X, cuda), Out, grid=1, block=64)
    lane = np.arange(64) % 32
    np.testing.assert_array_equal(Out.numpy(), np.where(lane + 3 < 32, X + 3, X))


def test_butterfly_of_f64_sums_every_warp(load, cuda):
    mod = load("shuffles")
    X = RNG.standard_normal(128)
    Out = dev(np.zeros(128), cuda)
    mod.butterfly_f64(dev(X, cuda), Out, grid=2, block=64)
    np.testing.assert_allclose(Out.numpy(), np.repeat(X.reshape(4, 32).sum(axis=1), 32), rtol=1e-12)


def test_lane_and_global_warp_ids(load, cuda):
    mod = load("shuffles")
    n = 4 * 96
    Out = dev(np.zeros((n, 4), np.int32), cuda)
    mod.ids(Out, grid=4, block=96)
    i = np.arange(n)
    np.testing.assert_array_equal(Out.numpy(), np.stack([i % 32, i // 32, i // 96, np.full(n, 32)], axis=1))


@pytest.mark.parametrize("shape", [(1, 1), (5, 33), (64, 1000), (300, 4096)])
def test_generated_softmax_layernorm_rmsnorm(program, shape):
    X, g, b = f32(*shape) * 3, f32(shape[-1]), f32(shape[-1])
    sm, ln, rms = program("rows").f(X, g, b)  # tessera.executor: numpy in, device memory, numpy out
    x = X.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=2e-6)
    mu, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    np.testing.assert_allclose(ln, (x - mu) / np.sqrt(var + 1e-5) * g + b, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(rms, x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * g,
                               rtol=1e-4, atol=2e-5)


def test_generated_elementwise_chain(program):
    from math import erf
    X, b = f32(257, 1000) * 2, f32(1000)
    got = program("elementwise").f(X, b)
    x = X.astype(np.float64)
    h = x + b
    gelu = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    want = np.log(np.exp(np.tanh(gelu * 0.5) * 3.0) + 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_torch_tensors_are_used_in_place(load, cuda):
    torch = pytest.importorskip("torch")
    mod = load("saxpy")
    n = 1 << 20
    X = torch.randn(n, device="cuda")
    Y = torch.randn(n, device="cuda")
    Out = torch.empty(n, device="cuda")
    mod.saxpy(2.5, X, Y, Out, grid=n // 256, block=256)
    assert torch.equal(Out, 2.5 * X + Y)
    with pytest.raises(ValueError, match="C-contiguous"):
        mod.saxpy(2.5, X[::2], Y[::2], Out[::2], grid=n // 512, block=256)
    with pytest.raises(TypeError, match="numpy array, in host memory"):
        mod.saxpy(2.5, X.cpu().numpy(), Y, Out, grid=n // 256, block=256)


def test_device_array_round_trip_and_torch_view(cuda):
    from tessera.runtime import DeviceArray
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = DeviceArray.from_numpy(x, cuda)
    np.testing.assert_array_equal(d.numpy(), x)
    np.testing.assert_array_equal(d.reshape(4, 3).numpy(), x.reshape(4, 3))
    torch = pytest.importorskip("torch")
    t = torch.as_tensor(d, device="cuda")
    t.mul_(2)
    np.testing.assert_array_equal(d.numpy(), 2 * x)


def test_bad_ptx_is_refused_with_the_jit_log(cuda, image_of):
    from tessera import image, runtime
    img = image.read_image(image_of("saxpy"))
    ptx = img.section(".tessera.code.ptx").replace(b"ret;", b"ret_broken;", 1)
    records = [k for k in img.kernels]
    data = image.write_image(records, {".tessera.code.ptx": ptx})
    with pytest.raises(runtime.Error) as info:
        runtime.load(data, cuda)
    assert info.value.status_name == "TSR_ERROR_BAD_IMAGE" and "CUDA_ERROR_INVALID_PTX" in str(info.value)


def test_c_host_runs_on_the_gpu(cuda, image_of, tmp_path):
    """tests/c/host_saxpy.c, unchanged, runs the compiled saxpy on the GPU when TESSERA_BACKEND=cuda."""
    import shutil
    from tessera import _runtime
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    prefix = os.path.dirname(_runtime.__file__)
    if not os.path.exists(os.path.join(prefix, "include", "tessera", "tessera.h")):
        pytest.skip("libtessera's headers are not installed next to tessera._runtime")
    here = os.path.dirname(__file__)
    exe = tmp_path / "host_saxpy"
    subprocess.run([cc, "-std=c11", os.path.join(here, os.pardir, "c", "host_saxpy.c"), f"-I{prefix}/include",
                    f"-L{prefix}/lib", f"-Wl,-rpath,{prefix}/lib", "-ltessera", "-lm", "-o", str(exe)], check=True)
    (tmp_path / "saxpy.tessera").write_bytes(image_of("saxpy"))
    p = subprocess.run([str(exe), str(tmp_path / "saxpy.tessera")], capture_output=True, text=True,
                       env=dict(os.environ, TESSERA_BACKEND="cuda"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "saxpy: 7 args" in p.stdout and p.stdout.rstrip().endswith("ok")


def test_a_gpu_fault_is_a_status_and_the_host_lives(cuda, image_of, tmp_path):
    """A kernel reading through a bad pointer: the launch returns TSR_ERROR_LAUNCH_FAILED with the driver's
    words, and the process carries on (in a child process: such a fault ends the CUDA context)."""
    (tmp_path / "saxpy.tessera").write_bytes(image_of("saxpy"))
    script = textwrap.dedent(f"""
        import numpy as np
        from tessera import _runtime, runtime

        class Bad:  # a CUDA array at an address no allocation holds
            __cuda_array_interface__ = {{"shape": (1 << 20,), "typestr": "<f4", "data": (1 << 40, False),
                                         "version": 3}}

        ctx = _runtime.Context("cuda")
        mod = runtime.load({str(tmp_path / "saxpy.tessera")!r}, ctx)
        try:
            mod.saxpy(1.0, Bad(), Bad(), Bad(), grid=4096, block=256)
        except runtime.Error as e:
            print("caught", e.status_name, e)
        print("still here")
        """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)  # not the checkout, whose tessera/ would shadow the installed package
    assert p.returncode == 0, p.stdout + p.stderr
    assert "caught TSR_ERROR_LAUNCH_FAILED" in p.stdout and "CUDA_ERROR_ILLEGAL_ADDRESS" in p.stdout
    assert p.stdout.rstrip().endswith("still here")
