"""Fixtures of the GPU tests: skip unless libtessera's CUDA backend runs here; the tests' images; a CUDA
context; modules and executor programs loaded into it.

Every test here is marked `gpu` (`pytest -m "not gpu"` leaves them out; without a GPU they skip).
"""

import os
import sys

import pytest

# A tessera that cannot be imported (the checkout's tessera/ shadowing the installed package, when Python puts
# the checkout on sys.path) is an error of the whole run, never a reason to skip every test.
import tessera  # noqa: F401

sys.path.insert(0, os.path.dirname(__file__))
from compile_env import environment  # noqa: E402
from kernels import OPTIONS, SOURCES, build_cpu, build_linked  # noqa: E402


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def cuda():
    """A context on the CUDA backend (skips the test where there is none, saying why)."""
    try:
        from tessera import _runtime
    except ImportError as e:
        pytest.skip(f"libtessera's Python module is not built: {e}")
    try:
        return _runtime.Context("cuda")
    except _runtime.Error as e:
        pytest.skip(str(e))


def _images(build):
    """A getter of image bytes by file name: read from $TESSERA_GPU_IMAGES (prebuilt by build_images.py), else
    `build()` here (skipping the test where the compiler is missing), each once."""
    cache: dict = {}

    def get(filename: str, *args) -> bytes:
        if filename not in cache:
            prebuilt = os.environ.get("TESSERA_GPU_IMAGES")
            if prebuilt:
                with open(os.path.join(prebuilt, filename), "rb") as f:
                    cache[filename] = f.read()
            else:
                try:
                    cache[filename] = build(*args)
                except ImportError as e:
                    pytest.skip(f"no compiler here ({e}) and no TESSERA_GPU_IMAGES with prebuilt images")
        return cache[filename]

    return get


@pytest.fixture(scope="session")
def image_of():
    """image_of(name) -> the image bytes of kernels.SOURCES[name]: compiled here, or prebuilt."""
    def build(name: str) -> bytes:
        from tessera import compiler
        from tessera.options import CompileOptions
        source, arch = SOURCES[name]
        options = CompileOptions(target="ptx", arch=arch, **OPTIONS.get(name, {}))
        with environment(name):
            return compiler.compile_source(source, f"{name}.py", options).image

    get = _images(build)
    return lambda name: get(f"{name}.tessera", name)


@pytest.fixture(scope="session")
def cpu_image_of():
    """cpu_image_of(name) -> the CPU image of kernels.SOURCES[name] (kernels.CPU_TWINS): compiled here, or
    prebuilt."""
    get = _images(build_cpu)
    return lambda name: get(f"{name}.cpu.tessera", name)


@pytest.fixture(scope="session")
def linked_image_of(tmp_path_factory):
    """linked_image_of(name, target) -> the image of kernels.LINKED[name] linked for target "ptx" or "cpu":
    compiled and linked here, or prebuilt by build_images.py."""
    get = _images(lambda name, target: build_linked(name, target, tmp_path_factory.mktemp(f"{name}_{target}")))
    return lambda name, target: get(f"{name}.{target}.tessera", name, target)


@pytest.fixture(scope="session")
def load(cuda, image_of):
    from tessera import runtime
    return lambda name: runtime.load(image_of(name), cuda)


@pytest.fixture(scope="session")
def program(cuda, image_of):
    """program(name) -> the image's Graph IR functions, run by tessera.executor on the GPU."""
    from tessera import executor
    return lambda name: executor.load(image_of(name), cuda)
