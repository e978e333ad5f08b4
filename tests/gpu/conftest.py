"""Fixtures of the GPU tests: skip unless libtessera's CUDA backend runs here; the tests' images; a CUDA
context; launch-plan steps of Graph IR functions run on device arrays.

Every test here is marked `gpu` (`pytest -m "not gpu"` leaves them out; without a GPU they skip).
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from kernels import SOURCES  # noqa: E402


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
                options = CompileOptions(target="ptx", arch=arch)
                cache[name] = compiler.compile_source(source, f"{name}.py", options).image
        return cache[name]

    return get


@pytest.fixture(scope="session")
def load(cuda, image_of):
    from tessera import runtime
    return lambda name: runtime.load(image_of(name), cuda)


def run_plan(module, name: str, *arrays):
    """Runs Graph IR function `name` of a loaded image on DeviceArrays (tessera.executor's steps, with the
    tensors in device memory); returns its results as numpy arrays."""
    from tessera import plan as plans
    from tessera.runtime import DeviceArray

    section = module.image.section(plans.SECTION)
    p = plans.decode(section)[name]
    env, store = {}, {}
    for vid, a in zip(p["args"], arrays):
        for d, n in zip(p["values"][vid]["dims"], a.shape):
            if not d.isdigit():
                env[d] = n
        store[vid] = DeviceArray.from_numpy(a, module.context)
    for step in p["steps"]:
        if "alias" in step:
            spec = p["values"][step["alias"]]
            store[step["alias"]] = store[step["of"]].reshape([plans.evaluate(d, env) for d in spec["dims"]])
            continue
        R, C = plans.evaluate(step["R"], env), plans.evaluate(step["C"], env)
        B = plans.evaluate(step.get("B", "1"), env)
        local = dict(env, R=R, C=C, B=B)
        tensors = []
        for t in step["tensors"]:
            vid = t["value"]
            if vid not in store:
                spec = p["values"][vid]
                dtype = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16}[spec["dtype"]]
                store[vid] = DeviceArray([plans.evaluate(d, env) for d in spec["dims"]], dtype, module.context)
            a = store[vid]
            view = {"matrix": (R, C), "cols": (C,), "rows": (R,), "scalar": (int(np.prod(a.shape)),),
                    "bmn": (B, R, C), "bnm": (B, C, R)}[t["view"]]
            tensors.append(a.reshape(view))
        scalars = [np.int64(plans.evaluate(e, local)) for e in step.get("scalars", [])]
        grid = tuple(plans.evaluate(g, local) for g in step["grid"])
        module.kernel(step["kernel"])(*tensors, *scalars, grid=grid, block=tuple(step["block"]))
    return [store[v].numpy() for v in p["results"]]
