"""Cooperative groups, barriers and lane reductions (tests/unit/group_kernels.py and
examples/tile/cooperative.py) against numpy on the CPU backend and on the OpenCL runtime (its SPIR-V, whose
subgroups are 32 lanes like NVIDIA's warps), and compiled for every GPU target (ptxas assembles the PTX where
it is installed). tests/gpu/test_groups_gpu.py runs the same checks on CUDA."""

import pathlib

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
    kernels = {k.name for k in image.read_image(result.image).kernels if k.target == target}
    assert kernels == {"neighbours", "quads", "halves", "reductions"} if path is KERNELS else \
        {"coop_example", "row_max", "group_sums"}
    if target == "ptx" and ptxas.find():   # ptxas assembled the module: every kernel has its registers
        assert set(result.metadata["kernel_resources"]) == kernels


def test_a_group_reduction_wider_than_the_warp_is_refused_at_its_line():
    src = ("from tessera import kernel, launch, tensor, tile\n\n@kernel\n"
           "def k(X: tensor[float, 'N']):\n    i = launch.thread_id()\n"
           "    X[i] = tile.group_reduce(X[i], 'sum', size=64)\n")
    with pytest.raises(compiler.CompileError) as e:
        compiler.compile_source(src, "wide.py", CompileOptions(target="ptx"))
    assert (e.value.filename, e.value.line) == ("wide.py", 6)
    assert "group_size 64 exceeds the target's warp of 32 lanes" in e.value.message
