"""SPIR-V kernels run through libtessera's OpenCL backend and checked against numpy.

In CI the device is Intel's OpenCL CPU runtime from PyPI (the test extra installs intel-opencl-rt; .ci/run
installs Debian's ICD loader; tessera.opencl_icd registers the driver). Where OpenCL cannot run, every test
here skips, saying why — except in CI with the runtime installed, where that is a failure: these tests are
the proof that SPIR-V runs, and must not pass by skipping.

Tolerances: exact where every step is one IEEE operation (saxpy, shuffles, ids); for f32 sums over the 32
lanes of a subgroup 1e-5 relative (the shuffle tree adds in another order than numpy's pairwise sum).
"""

import importlib.metadata
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tessera import compiler, opencl_icd, runtime
from tessera.options import CompileOptions

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(7)

with open(os.path.join(REPO, "examples", "warp_ops.py"), encoding="utf-8") as _f:
    SHUFFLES = _f.read()  # the warp operations example


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def skip_without_opencl(reason: str):
    """Skips, saying why (the runtime's message names the package that is missing), or fails in CI, where the
    test extra installs intel-opencl-rt and .ci/run the ICD loader: there these tests must run."""
    if os.environ.get("CI") and _installed("intel-opencl-rt"):
        pytest.fail(f"intel-opencl-rt is installed (the test extra), yet {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def opencl():
    """A context on the OpenCL backend; skips (or, in CI with the runtime installed, fails) where there is none."""
    opencl_icd.register()
    try:
        return runtime._runtime.Context("opencl")
    except runtime.Error as e:
        skip_without_opencl(f"the OpenCL backend cannot run here: {e}")


def spirv_module(source: str, ctx, name: str = "k.py"):
    return runtime.load(compiler.compile_source(textwrap.dedent(source), name, CompileOptions(target="spirv")).image,
                        ctx)


@pytest.fixture(scope="module")
def saxpy(opencl):
    path = os.path.join(REPO, "examples", "saxpy.py")
    with open(path) as f:
        return spirv_module(f.read(), opencl, path)


def dev(x, ctx):
    return runtime.DeviceArray.from_numpy(x, ctx)


def test_the_device_is_described_from_opencl(opencl):
    p = opencl.properties
    assert p["backend"] == "opencl" and p["name"] and p["arch"].startswith("spirv1.")
    assert p["max_threads_per_block"] >= 32 and p["compute_units"] >= 1 and p["total_memory_bytes"] > 0
    caps = runtime.capabilities(opencl)
    # Intel's runtimes list the subgroup sizes a kernel may require; our kernels require 32
    assert caps["backend"] == "opencl" and caps["warp_size"] == 32
    assert caps["shared_bytes_per_block"] > 0 and caps["tensorcore"] == {} and not caps["cp_async"]
    assert "opencl" in runtime.backends()
    print(f"OpenCL device: {p['name']} ({p['arch']}, {p['compute_units']} compute units, "
          f"{caps['shared_bytes_per_block']} bytes of local memory per work-group)")


@pytest.mark.parametrize("n, block", [(1, 32), (1000, 256), (4097, 128), (1_000_003, 1024), (777, 100)])
def test_saxpy(saxpy, opencl, n, block):
    X, Y = RNG.standard_normal(n, dtype=np.float32), RNG.standard_normal(n, dtype=np.float32)
    Out = dev(np.full(n, np.nan, np.float32), opencl)
    a = np.float32(-1.75)
    saxpy.saxpy(a, dev(X, opencl), dev(Y, opencl), Out, grid=(n + block - 1) // block, block=block)
    np.testing.assert_array_equal(Out.numpy(), a * X + Y)


@pytest.mark.parametrize("warps, block", [(1, 32), (64, 256), (4096, 128)])
def test_warp_reduce_sum(saxpy, opencl, warps, block):
    X = RNG.standard_normal(warps * 32, dtype=np.float32)
    Out = dev(np.zeros(warps, np.float32), opencl)
    saxpy.warp_reduce_sum(dev(X, opencl), Out, grid=warps * 32 // block, block=block)
    np.testing.assert_allclose(Out.numpy(), X.reshape(warps, 32).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_shuffles_and_ids(opencl):
    mod = spirv_module(SHUFFLES, opencl)
    X = np.arange(64, dtype=np.int32)
    Out = dev(np.zeros(64, np.int32), opencl)
    mod.shift_down(dev(X, opencl), Out, grid=1, block=64)
    lane = np.arange(64) % 32
    np.testing.assert_array_equal(Out.numpy(), np.where(lane + 3 < 32, X + 3, X))

    F = RNG.standard_normal(128)
    Outf = dev(np.zeros(128), opencl)
    mod.butterfly_f64(dev(F, opencl), Outf, grid=2, block=64)
    np.testing.assert_allclose(Outf.numpy(), np.repeat(F.reshape(4, 32).sum(axis=1), 32), rtol=1e-12)

    n = 4 * 96
    Ids = dev(np.zeros((n, 4), np.int32), opencl)
    mod.ids(Ids, grid=4, block=96)
    i = np.arange(n)
    np.testing.assert_array_equal(Ids.numpy(), np.stack([i % 32, i // 32, i // 96, np.full(n, 32)], axis=1))


def test_copies_between_host_and_device_and_within(opencl):
    x = np.arange(1000, dtype=np.float32)
    X = dev(x, opencl)
    np.testing.assert_array_equal(X.numpy(), x)
    np.testing.assert_array_equal(X.reshape(10, 100).numpy(), x.reshape(10, 100))
    Y = runtime.DeviceArray(1000, np.float32, opencl)
    opencl.copy_device(Y.address, X.address, x.nbytes)
    np.testing.assert_array_equal(Y.numpy(), x)
    # overlapping ranges of one allocation copy as memmove does (OpenCL itself refuses overlap)
    opencl.copy_device(X.address + 4 * 10, X.address, 4 * 500)
    want = x.copy()
    want[10:510] = x[:500]
    np.testing.assert_array_equal(X.numpy(), want)


def test_a_numpy_array_is_refused_on_the_device(saxpy, opencl):
    X = dev(np.ones(32, np.float32), opencl)
    with pytest.raises(TypeError, match="numpy array, in host memory"):
        saxpy.saxpy(1.0, np.ones(32, np.float32), X, X, grid=1, block=32)


def test_the_loader_picks_the_spirv_section_of_a_many_target_image(opencl):
    """cpu and spirv in one image: on the OpenCL backend the spirv records load and run."""
    path = os.path.join(REPO, "examples", "saxpy.py")
    with open(path) as f:
        image = compiler.compile_source(f.read(), path, CompileOptions(target="cpu,spirv")).image
    mod = runtime.load(image, opencl)
    assert mod.saxpy.record.target == "spirv"
    X = RNG.standard_normal(300, dtype=np.float32)
    Out = dev(np.zeros(300, np.float32), opencl)
    mod.saxpy(np.float32(3), dev(X, opencl), dev(X, opencl), Out, grid=3, block=128)
    np.testing.assert_array_equal(Out.numpy(), np.float32(3) * X + X)


def test_an_image_without_spirv_says_so(opencl):
    path = os.path.join(REPO, "examples", "saxpy.py")
    with open(path) as f:
        image = compiler.compile_source(f.read(), path).image  # cpu only
    mod = runtime.load(image, opencl)
    with pytest.raises(runtime.Error, match=r"kernel 'saxpy' has no code this runtime can run \(spirv/spirv1\.\d+\); "
                                            r"the image has it for cpu/"):
        mod.kernel("saxpy")


def test_bad_spirv_is_refused_with_opencls_words(opencl, saxpy):
    from tessera import image
    img = image.read_image(compiler.compile_source(open(os.path.join(REPO, "examples", "saxpy.py")).read(), "s.py",
                                                   CompileOptions(target="spirv")).image)
    spv = bytearray(img.section(".tessera.code.spirv"))
    spv[0:4] = b"\0\0\0\0"  # not the SPIR-V magic number
    data = image.write_image(list(img.kernels), {".tessera.code.spirv": bytes(spv)})
    with pytest.raises(runtime.Error) as info:
        runtime.load(data, opencl)
    assert info.value.status_name == "TSR_ERROR_BAD_IMAGE" and "OpenCL" in str(info.value)
    assert "CL_INVALID" in str(info.value) or "CL_BUILD_PROGRAM_FAILURE" in str(info.value)


def test_launch_errors_are_statuses(saxpy, opencl):
    X = dev(np.ones(64, np.float32), opencl)
    with pytest.raises(runtime.Error) as info:
        saxpy.saxpy(1.0, X, X, X, grid=1, block=64, smem_bytes=1024)
    assert info.value.status_name == "TSR_ERROR_UNSUPPORTED" and "local-memory" in str(info.value)
    limit = opencl.properties["max_threads_per_block"]
    with pytest.raises(runtime.Error) as info:
        saxpy.saxpy(1.0, X, X, X, grid=1, block=limit + 32)
    assert info.value.status_name == "TSR_ERROR_INVALID_VALUE"


def test_tessera_backend_selects_opencl_for_python_and_c_hosts(opencl, tmp_path):
    """TESSERA_BACKEND=opencl makes OpenCL the default context's backend; select_backend names it too."""
    script = textwrap.dedent("""
        from tessera import runtime
        print(runtime.default_context().backend, runtime.select_backend("spirv").backend)
        """)
    env = dict(os.environ, TESSERA_BACKEND="opencl")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)  # not the checkout, whose tessera/ would shadow the installed package
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["opencl", "opencl"]


def test_no_driver_is_a_clear_status_not_a_crash(tmp_path):
    """With no ICD loader to open, asking for OpenCL says why; the CPU backend still works."""
    script = textwrap.dedent("""
        from tessera import runtime
        try:
            runtime._runtime.Context("opencl")
        except runtime.Error as e:
            print(e.status_name, e)
        print(runtime.backends())
        """)
    env = dict(os.environ, TESSERA_OPENCL_LIBRARY=str(tmp_path / "libOpenCL-missing.so"))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)  # not the checkout, whose tessera/ would shadow the installed package
    assert p.returncode == 0, p.stderr
    assert "TSR_ERROR_UNSUPPORTED" in p.stdout and "the OpenCL ICD loader could not be loaded" in p.stdout
    assert "['cpu']" in p.stdout or "'cpu'" in p.stdout


def test_no_platform_is_a_clear_status(tmp_path):
    """An ICD loader with no vendor driver registered: the message says where drivers are registered."""
    script = textwrap.dedent("""
        from tessera import runtime
        try:
            runtime._runtime.Context("opencl")
        except runtime.Error as e:
            print(e.status_name, e)
        """)
    empty = tmp_path / "vendors"
    empty.mkdir()
    env = dict(os.environ, OCL_ICD_VENDORS=str(empty))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)  # not the checkout, whose tessera/ would shadow the installed package
    assert p.returncode == 0, p.stderr
    if "ocl-icd-libopencl1" in p.stdout:  # the runtime names the package only when it cannot load the loader
        skip_without_opencl(f"no OpenCL ICD loader here (Debian/Ubuntu: ocl-icd-libopencl1): {p.stdout.strip()}")
    assert "TSR_ERROR_UNSUPPORTED" in p.stdout and "OCL_ICD_VENDORS" in p.stdout

