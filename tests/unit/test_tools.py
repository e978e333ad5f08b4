"""The command-line tools as a user runs them."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
EXAMPLE = os.path.join(ROOT, "examples", "saxpy.py")


def tool(name, *args):
    # Run outside the checkout: from its root, `python -m` would import the source folder `tessera/`, which is
    # not the installed package (that one also holds dialects/, tools/ … and the runtime).
    return subprocess.run([sys.executable, "-m", f"tessera.tools.{name}", *args], capture_output=True, text=True,
                          cwd=os.sep)


def test_cc_writes_image_and_header(tmp_path):
    out, header = tmp_path / "saxpy.tessera", tmp_path / "saxpy.h"
    r = tool("cc", EXAMPLE, "-o", str(out), "--emit-header", str(header))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"
    h = header.read_text()
    assert "static inline tsr_status_t saxpy_launch(tsr_kernel_t kernel, tsr_stream_t stream, tsr_launch_t launch," in h
    assert "float a, const float* X, const float* Y, float* Out, int64_t X_shape_0" in h
    assert "#define WARP_REDUCE_SUM_NARGS 4" in h


def test_header_compiles_as_c_and_cpp(tmp_path):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler: `cc` is not on PATH (Debian/Ubuntu: gcc)")
    from tessera.tools.config import install_dirs
    inc, _ = install_dirs()
    header = tmp_path / "k.h"
    assert tool("cc", EXAMPLE, "-o", str(tmp_path / "k.tessera"), "--emit-header", str(header)).returncode == 0
    (tmp_path / "use.c").write_text('#include "k.h"\nint main(void) { return SAXPY_NARGS == 7 ? 0 : 1; }\n')
    r = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", f"-I{inc}", str(tmp_path / "use.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cxx = shutil.which("c++")
    if cxx:
        r = subprocess.run([cxx, "-x", "c++", "-Wall", "-Werror", "-fsyntax-only", f"-I{inc}", str(tmp_path / "use.c")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("example,function,tensors", [("mlp", "mlp_block", 7), ("mlp", "swiglu", 5),
                                                      ("transformer_block", "transformer_block", 12)])
@pytest.mark.parametrize("std", ["c11", "c++17"])
def test_function_wrappers_compile_as_c11_and_cpp17(tmp_path, example, function, tensors, std):
    """The header of an image of @functions: its call wrapper and lookup, used as a host uses them, compile
    with -Wall -Wextra -Werror as C11 and as C++17."""
    compiler = shutil.which("cc" if std == "c11" else "c++")
    if compiler is None:
        pytest.skip(f"no {'C' if std == 'c11' else 'C++'} compiler (Debian/Ubuntu: gcc, g++)")
    from tessera.tools.config import install_dirs
    inc, _ = install_dirs()
    header = tmp_path / "h.h"
    r = tool("cc", os.path.join(ROOT, "examples", "graph", f"{example}.py"), "-o", str(tmp_path / "x.tessera"),
             "--emit-header", str(header))
    assert r.returncode == 0, r.stderr
    upper = function.upper()
    args = ", ".join(["&t"] * tensors)
    (tmp_path / "use.c").write_text(f"""#include "h.h"
int use(tsr_module_t module, tsr_stream_t stream, DLTensor t);
int use(tsr_module_t module, tsr_stream_t stream, DLTensor t) {{
  tsr_function_t fn;
  if (tessera_{function}_lookup(module, &fn) != TSR_SUCCESS) return 1;
  return (int)tessera_{function}(fn, stream, {args}) + TESSERA_{upper}_NUM_INPUTS + TESSERA_{upper}_NUM_OUTPUTS;
}}
""")
    lang = ["-std=c11"] if std == "c11" else ["-x", "c++", "-std=c++17"]
    r = subprocess.run([compiler, *lang, "-Wall", "-Wextra", "-Werror", "-c", f"-I{inc}", str(tmp_path / "use.c"),
                        "-o", str(tmp_path / "use.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + header.read_text()


def test_cc_reports_errors_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("@kernel\ndef k(X, Out):\n    Out[0] = nope\n")
    out = tmp_path / "bad.tessera"
    r = tool("cc", str(bad), "-o", str(out))
    assert r.returncode == 1
    assert r.stderr.strip() == f"{bad}:3:14: error: name 'nope' is not defined in this kernel"
    assert not out.exists()
    r = tool("cc", str(tmp_path / "missing.py"))
    assert r.returncode == 1 and "No such file" in r.stderr


def test_dump_ir_after_all(tmp_path):
    d = tmp_path / "dump"
    r = tool("cc", EXAMPLE, "-o", str(tmp_path / "x.tessera"), "--dump-ir-after-all", str(d))
    assert r.returncode == 0, r.stderr
    names = sorted(os.listdir(d))
    assert names == ["00-ttir.mlir", "01-canonical.mlir", "02-schedule.mlir", "03-vectorize.mlir",
                     "04-memory.mlir", "05-fusion.mlir", "06-quantize.mlir", "07-kernels.mlir", "08-warps.mlir",
                     "09-llvm.mlir", "10-llir.ll", "11-obj.o", "12-so.so", "13-image.tessera"]
    assert 'loc("' in (d / "00-ttir.mlir").read_text()   # user source locations are kept
    assert "llvm.func" in (d / "09-llvm.mlir").read_text()


def test_objdump_yaml(tmp_path):
    out = tmp_path / "s.tessera"
    assert tool("cc", EXAMPLE, "-o", str(out)).returncode == 0
    r = tool("objdump", str(out))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text.startswith("abi_version: 1.0\nsections:\n")
    assert "  - name: saxpy\n    target: cpu\n" in text
    assert "{index: 1, name: X, kind: tensor, dtype: f32, shape: [\"X.shape[0]\"], access: read}" in text
    assert "graph_ir: |\n  module {" in text and '"ttile.shuffle_down"' in text
    assert tool("objdump", str(tmp_path / "none")).returncode == 1
    (tmp_path / "junk").write_bytes(b"not an image")
    r = tool("objdump", str(tmp_path / "junk"))
    assert r.returncode == 1 and "not an ELF file" in r.stderr


def test_readelf_agrees(tmp_path):
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("no readelf (Debian/Ubuntu: binutils)")
    out = tmp_path / "s.tessera"
    assert tool("cc", EXAMPLE, "-o", str(out)).returncode == 0
    r = subprocess.run([readelf, "-S", "-n", "-W", str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr
    for section in (".note.tessera", ".tessera.meta", ".tessera.strtab", ".tessera.ops", ".tessera.code.cpu"):
        assert section in r.stdout
    assert "Tessera" in r.stdout


def test_opt_lists_and_runs_passes(tmp_path):
    r = tool("opt", "--list-passes")
    assert r.returncode == 0 and "--tessera-simt-to-warps" in r.stdout
    src = tmp_path / "bad.mlir"
    src.write_text('func.func @f() -> index {\n  %0 = "ttile.thread_id"() {dim = 7 : i64} : () -> index\n'
                   '  return %0 : index\n}\n')
    r = tool("opt", str(src))
    assert r.returncode == 1
    assert f"{src}:2:8: error: 'ttile.thread_id' axis must be 0 (x), 1 (y) or 2 (z), got 7" in r.stderr


def test_config_points_at_installed_files():
    r = tool("config", "--cflags", "--libs")
    assert r.returncode == 0, r.stderr
    inc = tool("config", "--includedir").stdout.strip()
    lib = tool("config", "--libdir").stdout.strip()
    assert os.path.isfile(os.path.join(inc, "tessera", "tessera.h"))
    assert os.path.isfile(os.path.join(lib, "libtessera.so"))
    assert f"-I{inc}" in r.stdout and "-ltessera" in r.stdout
