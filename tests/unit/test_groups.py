"""Cooperative groups, barriers, lane reductions and shared arrays (tests/unit/group_kernels.py and
examples/tile/cooperative.py) against numpy on the CPU backend and on the OpenCL runtime (its SPIR-V, whose
subgroups are 32 lanes like NVIDIA's warps), and compiled for every GPU target (ptxas assembles the PTX where
it is installed). tests/gpu/test_groups_gpu.py runs the same checks on CUDA."""

import pathlib
import re

import numpy as np
import pytest

from tessera import compiler, image, runtime
from tessera.backends.ptx import ptxas
from tessera.options import CompileOptions

from group_checks import CHECKS, check_example, device_launcher
from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

REPO = pathlib.Path(__file__).resolve().parents[2]
KERNELS = pathlib.Path(__file__).with_name("group_kernels.py")
EXAMPLE = REPO / "examples" / "tile" / "cooperative.py"
GPU_TARGETS = [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx942"), ("amdgpu", "gfx1100"), ("spirv", None)]


def _compile(path: pathlib.Path, target: str, arch=None):
    options = CompileOptions(target=target, **({"arch": arch} if arch else {}))
    return compiler.compile_source(path.read_text(), str(path), options)


def _cpu(path):
    mod = runtime.load(_compile(path, "cpu").image)

    def launch(name, *arrays, grid, block):
        getattr(mod, name)(*arrays, grid=grid, block=block)
    return launch


def _opencl(path, ctx):
    return device_launcher(runtime.load(_compile(path, "spirv").image, ctx), ctx)


@pytest.mark.parametrize("check", CHECKS + [check_example], ids=lambda c: c.__name__)
def test_on_the_cpu(check):
    check(_cpu(EXAMPLE if check is check_example else KERNELS))


@pytest.mark.parametrize("check", CHECKS + [check_example], ids=lambda c: c.__name__)
def test_on_opencl(check, opencl):  # noqa: F811
    check(_opencl(EXAMPLE if check is check_example else KERNELS, opencl))


@pytest.mark.parametrize("target, arch", GPU_TARGETS)
@pytest.mark.parametrize("path", [KERNELS, EXAMPLE], ids=["group_kernels", "cooperative"])
def test_compiles_for_every_gpu_target(path, target, arch):
    result = _compile(path, target, arch)
    records = [k for k in image.read_image(result.image).kernels if k.target == target]
    kernels = {k.name for k in records}
    assert kernels == {"neighbours", "quads", "halves", "reductions", "reverse_blocks", "transpose_tiles",
                       "rotate_wide_and_narrow"} if path is KERNELS else \
        {"coop_example", "row_max", "group_sums"}
    if target == "ptx" and ptxas.find():   # ptxas assembled the module: every kernel has its registers
        # read from the image's records (a compile served by the cache has no compile-time metadata)
        assert all(k.regs > 0 for k in records), [(k.name, k.regs) for k in records]


def test_a_group_reduction_wider_than_the_warp_is_refused_at_its_line():
    src = ("from tessera import kernel, launch, tensor, tile\n\n@kernel\n"
           "def k(X: tensor[float, 'N']):\n    i = launch.thread_id()\n"
           "    X[i] = tile.group_reduce(X[i], 'sum', size=64)\n")
    with pytest.raises(compiler.CompileError) as e:
        compiler.compile_source(src, "wide.py", CompileOptions(target="ptx"))
    assert (e.value.filename, e.value.line) == ("wide.py", 6)
    assert "group_size 64 exceeds the target's warp of 32 lanes" in e.value.message


SHARED_ERRORS = [
    ("    if X[0] > 0.0:\n        S = tile.alloc_shared((8,), float)\n", 7,
     "tile.alloc_shared belongs at the kernel's top level"),
    ("    S = tile.alloc_shared((8, n), float)\n", 6, "takes constant positive extents"),
    ("    S = tile.alloc_shared((8,), u8)\n", 6, "a shared array holds floats or signed integers"),
    ("    S = tile.alloc_shared((8192,), float)\n    T = tile.alloc_shared((4097,), float)\n", 7,
     "the kernel's shared arrays take 49156 bytes, more than the 49152"),
    ("    S = tile.alloc_shared((8,), float)\n    tile.cp_async(X[0], S[0])\n", 7,
     "the destination is an element of a tile.alloc_shared array"),
    ("    S = tile.alloc_shared((8,), float)\n    T = tile.alloc_shared((8,), float)\n    tile.cp_async(S[0], T[0])\n",
     8, "the source is an element of a tensor parameter"),
    ("    S = tile.alloc_shared((8,), float64)\n    tile.cp_async(S[0], X[0])\n", 7,
     "tile.cp_async copies between equal element types, not f32 into f64"),
]


@pytest.mark.parametrize("body, line, message", SHARED_ERRORS)
def test_shared_array_errors_are_located(body, line, message):
    src = ("from tessera import float64, kernel, launch, tensor, tile, u8\n\n@kernel\n"
           "def k(X: tensor[float, 'N'], n: int):\n    i = launch.thread_id()\n" + body)
    with pytest.raises(compiler.CompileError) as e:
        compiler.compile_source(src, "shared.py", CompileOptions(target="cpu"))
    assert (e.value.filename, e.value.line) == ("shared.py", line), str(e.value)
    assert message in e.value.message, str(e.value)


OUT_OF_BOUNDS = """
from tessera import kernel, launch, tensor, tile

@kernel
def oob(X: tensor[float, "N"]):
    S = tile.alloc_shared((128,), float)
    S[launch.local_id() + 1] = 1.0
    tile.barrier()
    X[launch.thread_id()] = S[launch.local_id()]
"""


def test_a_shared_array_out_of_bounds_is_reported_by_name(opencl):  # noqa: F811
    """The CPU's checks (on by default) and the GPU ones (gpu_bounds_checks, here on OpenCL) name the array."""
    message = re.escape("kernel 'oob' block (0, 0, 0): tensor 'S' accessed outside its extents at oob.py:7")
    cpu = runtime.load(compiler.compile_source(OUT_OF_BOUNDS, "oob.py", CompileOptions(target="cpu")).image)
    with pytest.raises(runtime.Error, match=message):
        cpu.oob(np.zeros(128, np.float32), grid=1, block=128)
    image = compiler.compile_source(OUT_OF_BOUNDS, "oob.py", CompileOptions(target="spirv", gpu_bounds_checks=True))
    device = runtime.load(image.image, opencl)
    with pytest.raises(runtime.Error, match=message):
        device.oob(runtime.DeviceArray.from_numpy(np.zeros(128, np.float32), opencl), grid=1, block=128)
