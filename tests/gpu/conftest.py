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
from kernels import OPTIONS, SOURCES, build_linked  # noqa: E402


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


@pytest.fixture(scope="session")
def image_of():
    """image_of(name) -> the image bytes of kernels.SOURCES[name]: compiled here, or prebuilt."""
    cache: dict = {}

    def get(name: str) -> bytes:
        if name not in cache:
            prebuilt = os.environ.get("TESSERA_GPU_IMAGES")
            if prebuilt:
                with open(os.path.join(prebuilt, f"{name}.tessera"), "rb") as f:
                    cache[name] = f.read()
            else:
                try:
                    from tessera import compiler
                    from tessera.options import CompileOptions
                except ImportError as e:
                    pytest.skip(f"no compiler here ({e}) and no TESSERA_GPU_IMAGES with prebuilt images")
                source, arch = SOURCES[name]
                options = CompileOptions(target="ptx", arch=arch, **OPTIONS.get(name, {}))
                cache[name] = compiler.compile_source(source, f"{name}.py", options).image
        return cache[name]

    return get


@pytest.fixture(scope="session")
def linked_image_of(tmp_path_factory):
    """linked_image_of(name, target) -> the image of kernels.LINKED[name] linked for target "ptx" or "cpu":
    compiled and linked here, or prebuilt by build_images.py."""
    cache: dict = {}

    def get(name: str, target: str) -> bytes:
        key = (name, target)
        if key not in cache:
            prebuilt = os.environ.get("TESSERA_GPU_IMAGES")
            if prebuilt:
                with open(os.path.join(prebuilt, f"{name}.{target}.tessera"), "rb") as f:
                    cache[key] = f.read()
            else:
                try:
                    cache[key] = build_linked(name, target, tmp_path_factory.mktemp(f"{name}_{target}"))
                except ImportError as e:
                    pytest.skip(f"no compiler here ({e}) and no TESSERA_GPU_IMAGES with prebuilt images")
        return cache[key]

    return get


@pytest.fixture(scope="session")
def load(cuda, image_of):
    from tessera import runtime
    return lambda name: runtime.load(image_of(name), cuda)


@pytest.fixture(scope="session")
def program(cuda, image_of):
    """program(name) -> the image's Graph IR functions, run by tessera.executor on the GPU."""
    from tessera import executor
    return lambda name: executor.load(image_of(name), cuda)
