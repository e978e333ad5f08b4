"""Kernels and @functions named by any Python identifier (`café`, `ñ`, `数据`), on every target: the kernel
record keeps the user's name, the code's symbol is one the target's toolchain and loader take (CPU and AMDGPU:
the name's UTF-8 bytes, LLVM IR quoting them; SPIR-V: the OpEntryPoint's string; PTX: a mangled ASCII .entry,
backends/symbol_names.py), and the image runs, launches by the user's name, dumps and gets a header."""

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tessera import compiler, executor, image, runtime
from tessera.backends.amdgpu import link
from tessera.backends.ptx import ptxas
from tessera.backends.symbol_names import llvm_global, ptx_identifier
from tessera.cheader import image_header
from tessera.options import CompileOptions
from tessera.tools.config import install_dirs

RNG = np.random.default_rng(1414)

SRC = """
from tessera import kernel, launch, tensor, function, op, bf16

@kernel
def café(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]

@kernel
def caf(X: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = X[i] * 3.0

@kernel
def ñ(X: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = X[i] + 1.0

@function
def 数据(A: tensor[f32, "M"], B: tensor[f32, "M"]):
    return op.relu(A) * B + 1.0
"""

# a @function whose GEMM the PTX backend writes as LLVM IR text of its own (gemm_sm80.py, gemm_sm90.py)
GEMM = """
from tessera import function, op, tensor, bf16

@function
def résumé(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"]) -> tensor[bf16, "T", "F"]:
    return op.relu(X @ W)
"""

KERNELS = ["café", "caf", "ñ", "数据__elementwise0"]
PTX_IDENT = re.compile(r"[a-zA-Z][a-zA-Z0-9_$]*|[_$%][a-zA-Z0-9_$]+")


def compile_for(target: str, source: str = SRC, **kw) -> bytes:
    return compiler.compile_source(source, "names.py", CompileOptions(target=target, **kw)).image


def records(data: bytes) -> dict[str, str]:
    return {k.name: k.entry for k in image.read_image(data).kernels}


def test_symbol_names_leave_ascii_names_alone():
    # byte-identical code for ASCII names: neither helper touches them
    for name in ("saxpy", "_k", "linear_relu__gemm0_pack_a", "K9"):
        assert llvm_global(name) == name and ptx_identifier(name) == name
    assert llvm_global("café") == '"caf\\C3\\A9"'


def test_ptx_identifiers_are_valid_and_distinct():
    names = ["café", "cafè", "caf_e9", "caf", "ñ", "ñ_", "_ñ", "数据", "数据x", "x数据", "résumé__gemm0", "ǅ"]
    idents = [ptx_identifier(n) for n in names]
    assert all(PTX_IDENT.fullmatch(i) and i.isascii() for i in idents), idents
    assert len(set(idents)) == len(names)
    assert ptx_identifier("café") == "caf$e9$"


def test_cpu_kernels_and_function_run_by_their_names():
    data = compile_for("cpu")
    assert records(data) == {n: f"tsr_cpu_{n}" for n in KERNELS}
    mod = runtime.load(data)
    assert sorted(mod.kernel_names) == sorted(KERNELS)
    X, Y = RNG.standard_normal(100, dtype=np.float32), RNG.standard_normal(100, dtype=np.float32)
    out = np.full(100, np.nan, np.float32)
    mod.kernel("café")(np.float32(2.5), X, Y, out, grid=4, block=32)
    np.testing.assert_array_equal(out, np.float32(2.5) * X + Y)
    mod.kernel("caf")(X, out, grid=4, block=32)   # the ASCII prefix of café is a kernel of its own
    np.testing.assert_array_equal(out, X * np.float32(3.0))
    mod.kernel("ñ")(X, out, grid=4, block=32)
    np.testing.assert_array_equal(out, X + np.float32(1.0))
    got = executor.load(data).function("数据")(X, Y)
    np.testing.assert_allclose(got, np.maximum(X, 0) * Y + 1.0, rtol=1e-6, atol=1e-6)


def test_ptx_entries_are_mangled_and_records_keep_the_names():
    data = compile_for("ptx", gpu_bounds_checks=True)
    assert records(data) == {n: ptx_identifier(n) for n in KERNELS}
    ptx = image.read_image(data).section(".tessera.code.ptx").decode()
    assert ptx.isascii()
    assert sorted(re.findall(r"\.entry (\S+)\(", ptx)) == sorted(ptx_identifier(n) for n in KERNELS)
    # the bounds checks' site table names each kernel by its entry, which the runtime looks a fault up by
    sites = re.search(r"__tessera_fault_sites\[\d+\] = \{([\d, ]+)\}", ptx).group(1)
    table = bytes(int(b) for b in sites.split(",")).split(b"\0")
    assert set(table[0::2]) - {b""} <= {ptx_identifier(n).encode() for n in KERNELS}
    assert b"caf$e9$" in table[0::2]


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptxas_assembles_the_mangled_entries(arch):
    """Compilation runs ptxas; the resources it reports by entry land in the records named by the user."""
    for source in (SRC, GEMM):
        kernels = image.read_image(compile_for("ptx", source, arch=arch)).kernels
        assert kernels and all(k.regs > 0 for k in kernels), [(k.name, k.entry) for k in kernels]
    assert {k.name for k in kernels} >= {"résumé__gemm0"}


def test_ptx_gemm_kernels_of_a_unicode_function():
    data = compile_for("ptx", GEMM, arch="sm_90a")
    assert records(data)["résumé__gemm0"] == "r$e9$sum$e9$__gemm0"
    assert ".entry r$e9$sum$e9$__gemm0(" in image.read_image(data).section(".tessera.code.ptx").decode()


@pytest.mark.skipif(link.find() is None, reason="no ld.lld >= 16 (pip install ziglang)")
def test_amdgpu_code_object_has_the_utf8_symbols():
    data = compile_for("amdgpu", SRC.split("@function")[0])
    assert records(data) == {n: n for n in ("café", "caf", "ñ")}
    hsaco = image.read_image(data).section(".tessera.code.amdgpu")
    for n in ("café", "ñ"):   # hipModuleGetFunction finds NAME by its descriptor NAME.kd
        assert b"\0" + n.encode() + b".kd\0" in hsaco
    assert all(k.regs > 0 for k in image.read_image(data).kernels)   # metadata read back by name


def test_spirv_entry_points_are_the_names():
    data = compile_for("spirv")
    assert records(data) == {n: n for n in KERNELS}
    spv = image.read_image(data).section(".tessera.code.spirv")
    assert "café".encode() + b"\0" in spv   # OpEntryPoint's literal string, UTF-8


def test_spirv_kernel_runs_on_opencl_by_its_name():
    from tessera import opencl_icd
    opencl_icd.register()
    try:
        ctx = runtime._runtime.Context("opencl")
    except runtime.Error as e:
        pytest.skip(f"the OpenCL backend cannot run here: {e}")
    mod = runtime.load(compile_for("spirv"), ctx)
    X, Y = RNG.standard_normal(64, dtype=np.float32), RNG.standard_normal(64, dtype=np.float32)
    out = runtime.DeviceArray.from_numpy(np.zeros(64, np.float32), ctx)
    mod.kernel("café")(np.float32(-2.0), runtime.DeviceArray.from_numpy(X, ctx),
                       runtime.DeviceArray.from_numpy(Y, ctx), out, grid=2, block=32)
    np.testing.assert_array_equal(out.numpy(), np.float32(-2.0) * X + Y)


def test_objdump_shows_names_and_entries(tmp_path):
    path = tmp_path / "names.tessera"
    path.write_bytes(compile_for("cpu,ptx"))
    for env in ({"LC_ALL": "C"}, {"LC_ALL": "C.UTF-8"}):
        r = subprocess.run([sys.executable, "-m", "tessera.tools.objdump", str(path)], capture_output=True,
                           cwd="/", env={"PATH": "/usr/bin:/bin", **env})
        assert r.returncode == 0, r.stderr
        text = r.stdout.decode("utf-8")
        assert "  - name: café\n    target: cpu\n    arch:" in text and "    entry: tsr_cpu_café\n" in text
        assert "  - name: 数据__elementwise0\n    target: ptx\n" in text
        assert '    entry: "caf$e9$"\n' in text


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (the system package gcc or clang)")
def test_header_names_distinct_and_compiles(tmp_path):
    # an image of two targets records each kernel twice: still one launcher per kernel
    header = image_header(compile_for("cpu,ptx"), "names.py", "names")
    launchers = re.findall(r"static inline tsr_status_t (\w+)_launch\(", header)
    assert len(launchers) == len(set(launchers)) == len(KERNELS)   # café and caf differ in C too
    assert '#define CAF_KERNEL_NAME "caf\\303\\251"' in header and '#define CAF__KERNEL_NAME "caf"' in header
    assert "tessera_" in header and '"\\346\\225\\260\\346\\215\\256"' in header   # 数据's wrapper
    inc, _ = install_dirs()
    (tmp_path / "names.h").write_text(header)
    (tmp_path / "use.c").write_text('#include "names.h"\nint main(void) { return 0; }\n')
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", f"-I{inc}", f"-I{tmp_path}",
                        str(tmp_path / "use.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
