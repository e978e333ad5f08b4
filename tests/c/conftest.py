"""Fixtures for the C-host and binding tests: an installed libtessera, a C compiler, and the test image.

The runtime is found next to the installed `tessera._runtime` (its package directory holds lib/ and include/,
DESIGN.md §9). Without an installed one, it is built from runtime/ with CMake into a temporary prefix, so the
tests also run in a fresh checkout.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_image  # noqa: E402
from hostutil import HERE, REPO, run  # noqa: E402


@pytest.fixture(scope="session")
def cc():
    path = shutil.which("cc")
    if not path:
        pytest.skip("no C compiler: `cc` is not on PATH (Debian/Ubuntu: gcc)")
    return path


def _installed_prefix():
    try:
        from tessera import _runtime
    except ImportError:
        return None
    prefix = Path(_runtime.__file__).resolve().parent
    return prefix if (prefix / "include" / "tessera" / "tessera.h").exists() else None


@pytest.fixture(scope="session")
def runtime_prefix(tmp_path_factory):
    """A directory with include/tessera/*.h and lib/libtessera.so (and lib/pkgconfig, lib/cmake)."""
    prefix = _installed_prefix()
    if prefix:
        return prefix
    if not shutil.which("cmake"):
        pytest.skip("libtessera is not installed (import tessera._runtime failed) and cmake is missing to build it "
                    "(pip install cmake)")
    root = tmp_path_factory.mktemp("libtessera")
    run(["cmake", "-S", REPO / "runtime", "-B", root / "build", f"-DCMAKE_INSTALL_PREFIX={root / 'prefix'}",
         "-DCMAKE_INSTALL_LIBDIR=lib", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
    run(["cmake", "--build", root / "build", "--target", "install"])
    return root / "prefix"


@pytest.fixture(scope="session")
def build_host(cc, runtime_prefix, tmp_path_factory):
    """Compiles a host program from tests/c against the runtime; returns a function name -> executable path."""
    out = tmp_path_factory.mktemp("hosts")
    lib = runtime_prefix / "lib"

    def build(source, compiler=cc, flags=("-std=c11",)):
        exe = out / Path(source).stem
        run([compiler, *flags, "-Wall", "-Wextra", "-Werror", "-g", HERE / source, f"-I{runtime_prefix / 'include'}",
             f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltessera", "-lm", "-pthread", "-o", exe])
        return exe

    return build


@pytest.fixture(scope="session")
def test_image(cc, runtime_prefix, tmp_path_factory):
    """The standard test image: kernels_cpu.c compiled to a shared object and packed by make_image.py."""
    out = tmp_path_factory.mktemp("image")
    so = out / "kernels_cpu.so"
    # no start files: the C library's initializers and finalizers, which a CPU code section may not have
    run([cc, "-shared", "-fPIC", "-nostartfiles", "-O2", f"-I{runtime_prefix / 'include'}", HERE / "kernels_cpu.c",
         "-o", so])
    image = out / "test.tessera"
    image.write_bytes(make_image.build(so.read_bytes()))
    return image


@pytest.fixture(scope="session")
def fake_driver(cc, tmp_path_factory):
    """fake_driver(graphs=True, pools=True) -> a directory holding a fake libcuda.so.1 (without the graph or
    memory-pool entry points where False)."""
    made = {}

    def build(graphs=True, pools=True):
        if (graphs, pools) not in made:
            out = tmp_path_factory.mktemp("fake_cuda")
            flags = ([] if graphs else ["-DFAKE_CUDA_NO_GRAPHS"]) + ([] if pools else ["-DFAKE_CUDA_NO_POOLS"])
            run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", *flags, HERE / "fake_cuda.c", "-pthread",
                 "-o", out / "libcuda.so.1"])
            made[graphs, pools] = out
        return made[graphs, pools]

    return build


@pytest.fixture(scope="session")
def fake_nccl(cc, tmp_path_factory):
    """A fake libnccl.so.2 (fake_nccl.c) that logs each call to $FAKE_NCCL_LOG."""
    out = tmp_path_factory.mktemp("fake_nccl") / "libnccl.so.2"
    run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", HERE / "fake_nccl.c", "-ldl", "-o", out])
    return out
