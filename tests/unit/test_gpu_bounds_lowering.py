"""Bounds checks of GPU kernels without a GPU (passes/gpu_bounds_checks.py): which accesses the PTX guards,
the fault record and site table the runtime reads, ptxas accepting the result, and the option's defaults.
The read-back runs against a fake driver in tests/c/test_cuda_fake.py, and on a GPU in
tests/gpu/test_gpu_bounds_checks.py."""

import re
import subprocess

import pytest

from tessera import compiler, image
from tessera.backends.ptx import ptxas
from tessera.backends.ptx.backend import PTXBackend
from tessera.backends.spirv import spirv_val
from tessera.options import CompileOptions
from tessera.tools import cc

SOURCE = """
@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]

@kernel
def rows(X: tensor[float, "M", "N"], Out: tensor[float, "M", "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        for j in range(X.shape[1]):
            Out[i, j] = X[i, j] * 2.0

@kernel
def shift(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i + 1] = X[i]
"""


def ptx(source: str = SOURCE, arch: str = "sm_80", checks: bool = True) -> str:
    result = compiler.compile_source(source, "k.py", CompileOptions(target="ptx", arch=arch, gpu_bounds_checks=checks))
    return image.read_image(result.image).section(".tessera.code.ptx").decode()


def sites(text: str) -> list[tuple[str, str]]:
    """The site table's (kernel, report) pairs."""
    m = re.search(r"\.b8 __tessera_fault_sites\[(\d+)\]( = \{([^}]*)\})?;", text)
    data = bytes(int(b) for b in m.group(3).split(",")) if m.group(3) else b""  # an all-zero one has none
    data = data.ljust(int(m.group(1)), b"\0")
    strings = [s.decode() for s in data.split(b"\0")[:-1]]
    return list(zip(strings[::2], strings[1::2]))


def test_only_unproven_accesses_are_guarded_and_each_is_a_site():
    """saxpy's X[i] is proven by its guard; Y and Out have extents of their own. rows' accesses are proven by
    the guard and the loop (shared dimension names); shift's Out[i + 1] is not."""
    text = ptx()
    assert ".visible .global .align 16 .b8 __tessera_fault[16];" in text
    assert sites(text) == [("saxpy", "tensor 'Y' accessed outside its extents at k.py:6"),
                           ("saxpy", "tensor 'Out' accessed outside its extents at k.py:6"),
                           ("shift", "tensor 'Out' accessed outside its extents at k.py:19")]
    # one compare-and-swap per report: the first failure stays
    assert len(re.findall(r"atom\.[a-z_.]*global\.cas\.b32", text)) == 3


def test_without_checks_nothing_changes():
    text = ptx(checks=False)
    assert "__tessera_fault" not in text and "atom." not in text


def test_a_module_without_simt_kernels_still_says_it_was_checked():
    # static, whole 16-byte rows: mma.sync alone (symbolic or unaligned extents add a SIMT GEMM alternative,
    # a SIMT kernel with sites of its own, since 18c5ab3 — as examples/gpu/gemm_ampere.py, this test's before)
    text = ptx('@function\ndef mm(A: tensor[bf16, 64, 64], B: tensor[bf16, 64, 32]):\n    return A @ B\n')
    assert "mma.sync" in text and "__tessera_fault[16]" in text and sites(text) == []


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_checked_kernels_assemble(arch):
    """Compilation runs ptxas where it is installed."""
    warp_ops = (__import__("pathlib").Path(__file__).parents[2] / "examples" / "warp_ops.py").read_text()
    for source in (SOURCE, warp_ops):
        assert "__tessera_fault" in ptx(source, arch)


def amdgpu_symbols(checks: bool) -> dict[str, int]:
    """The HSACO's dynamic data symbols (name: size), which hipModuleGetGlobal finds."""
    from elftools.elf.elffile import ELFFile  # lazy: only these tests read ELF symbols
    from tessera.backends.amdgpu import link
    if link.find() is None:
        pytest.skip("no ld.lld >= 16 to link the HSACO (pip install ziglang)")
    result = compiler.compile_source(SOURCE, "k.py", CompileOptions(target="amdgpu", gpu_bounds_checks=checks))
    elf = ELFFile(__import__("io").BytesIO(image.read_image(result.image).section(".tessera.code.amdgpu")))
    return {s.name: s["st_size"] for s in elf.get_section_by_name(".dynsym").iter_symbols()
            if s["st_info"]["type"] == "STT_OBJECT" and not s.name.endswith(".kd")}


def test_amdgpu_code_objects_export_the_record():
    assert amdgpu_symbols(True) == {"__tessera_fault": 16, "__tessera_fault_sites": len(
        b"".join(k.encode() + b"\0" + r.encode() + b"\0" for k, r in sites(ptx())))}
    assert amdgpu_symbols(False) == {}


def test_the_option_defaults_to_debug_mode_and_is_part_of_the_key(monkeypatch):
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    assert CompileOptions().gpu_bounds_checks is False
    monkeypatch.setenv("TESSERA_DEBUG", "1")
    assert CompileOptions().gpu_bounds_checks is True
    monkeypatch.setenv("TESSERA_DEBUG", "0")
    assert CompileOptions().gpu_bounds_checks is False
    keys = {PTXBackend.from_options(CompileOptions(target="ptx", gpu_bounds_checks=c), None).options.hash()
            for c in (False, True)}
    assert len(keys) == 2
    with pytest.raises(TypeError, match="gpu_bounds_checks"):
        CompileOptions(gpu_bounds_checks=1)


def test_tessera_cc_flag(tmp_path, monkeypatch):
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    src = tmp_path / "k.py"
    src.write_text(SOURCE)
    for flag, checked in (("--gpu-bounds-checks", True), ("--no-gpu-bounds-checks", False)):
        out = tmp_path / "k.tessera"
        assert cc.main([str(src), "--target", "ptx", flag, "-o", str(out)]) == 0
        assert ("__tessera_fault" in image.read_image(out.read_bytes()).section(".tessera.code.ptx").decode()) == checked


def test_checked_spirv_passes_spirv_val_with_the_record_as_a_hidden_last_parameter():
    """The "flat" abi: every kernel takes the record last (a CrossWorkgroup u32 pointer), claimed by an
    OpAtomicOr; the compile runs spirv-val. The site table is tests/unit/test_opencl_bounds_checks.py's."""
    if spirv_val.find() is None:
        pytest.skip("no spirv-val here (pip install the test extra)")
    spv = image.read_image(compiler.compile_source(
        SOURCE, "k.py", CompileOptions(target="spirv", gpu_bounds_checks=True)).image).section(".tessera.code.spirv")
    text = subprocess.run([spirv_val.find("spirv-dis"), "-"], input=spv, capture_output=True, check=True).stdout.decode()
    assert 'OpString "__tessera_fault_sites"' in text and "OpAtomicOr" in text
    for kernel in ("saxpy", "rows", "shift"):
        params = re.search(rf"%{kernel} = OpFunction %void None (%\w+)", text).group(1)
        assert re.search(rf"{params} = OpTypeFunction .* %_ptr_CrossWorkgroup_uint\n", text), kernel
