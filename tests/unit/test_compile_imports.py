"""What a fresh compile imports (docs/performance.md, compile time): a PTX GEMM compile loads no numpy (60-70 ms
of a 0.6 s compile: tessera.mlir imports the bindings' `ir` with numpy hidden, and the modules on the way import
it where they compute with it), and the four attribute builders the bindings register only with numpy give
what theirs give; nor the llvm and nvvm dialects' Python modules (22 and 15 ms), whose op classes it never
builds; nor the CPU GEMM's modules (backends/cpu/gemm*.py, ~5 ms with bytecode, ~20 without)."""

import json
import os
import subprocess
import sys
import textwrap

GEMM = '''
from tessera import function, op, tensor, bf16

@function
def gemm_bf16(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return op.matmul(A, B)
'''


def _fresh(code: str, tmp_path) -> dict:
    env = dict(os.environ, TESSERA_CACHE="0", TESSERA_PTXAS="")   # ptxas is a subprocess: not what is counted
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_ptx_gemm_compile_loads_no_numpy(tmp_path):
    (tmp_path / "gemm.py").write_text(GEMM)
    got = _fresh('''
        import json, sys
        from tessera import compiler, image
        from tessera.options import CompileOptions
        r = compiler.compile_file("gemm.py", CompileOptions(target="ptx", arch="sm_90a"))
        print(json.dumps({"numpy": "numpy" in sys.modules, "kernels": len(image.read_image(r.image).kernels),
                          "nvvm": "torch_mlir.dialects.nvvm" in sys.modules,
                          "llvm": "torch_mlir.dialects.llvm" in sys.modules,
                          "cpu_gemm": sorted(m for m in sys.modules if m.startswith("tessera.backends.cpu.gemm"))}))
    ''', tmp_path)
    # kernels: the symbolic GEMM's 256-, 192- and 128-wide wgmma kernels and the SIMT fallback (5275cd9);
    # cpu_gemm: the CPU GEMM's modules, which the SIMT fallback's epilogue brought in (backends/gemm_epilogue.py)
    assert got == {"numpy": False, "kernels": 4, "nvvm": False, "llvm": False, "cpu_gemm": []}


def test_nvvm_ops_before_and_after_the_module(tmp_path):
    """tessera.mlir answers the bindings' lookup of the nvvm dialect's Python module without importing it: its
    ops are generic OpViews (name, attributes) until the module is imported, its own classes after; the
    bindings' search prefixes are as they were."""
    got = _fresh('''
        import json, sys
        from tessera.mlir import ir
        import tessera.dialects
        text = "llvm.func @k() {\\n  %0 = nvvm.read.ptx.sreg.tid.x : i32\\n  llvm.return\\n}"

        def first_op():
            module = ir.Module.parse(text)
            for region in module.body.operations[0].regions:
                for block in region.blocks:
                    op = block.operations[0]
                    return [type(op).__name__, op.operation.name]
        out = {"search": ir._globals.dialect_search_modules}
        with tessera.dialects.make_context():
            out["before"] = first_op()
            import torch_mlir.dialects.nvvm
            out["after"] = first_op()
        print(json.dumps(out))
    ''', tmp_path)
    assert got["search"] == ["torch_mlir.dialects"]
    assert got["before"] == ["OpView", "nvvm.read.ptx.sreg.tid.x"]
    assert got["after"][1] == "nvvm.read.ptx.sreg.tid.x" and got["after"][0] != "OpView"


BUILDERS = '''
    import json, sys
    {first}
    from tessera.mlir import ir
    out = {{}}
    with ir.Context() as ctx:
        for kind in ("F64ElementsAttr", "I32ElementsAttr", "I64ElementsAttr", "IndexElementsAttr"):
            out[kind] = str(ir.AttrBuilder.get(kind)([1, -2, 3], ctx))
    print(json.dumps(out))
'''


def test_elements_builders_as_the_bindings_own(tmp_path):
    """Without numpy imported first, tessera.mlir's builders (numpy imported when called); with it, the bindings'
    own: the same attributes."""
    ours = _fresh(BUILDERS.format(first=""), tmp_path)
    theirs = _fresh(BUILDERS.format(first="import numpy"), tmp_path)
    assert ours == theirs
    assert ours["F64ElementsAttr"] == "dense<[1.000000e+00, -2.000000e+00, 3.000000e+00]> : tensor<3xf64>"
    assert ours["IndexElementsAttr"] == "dense<[1, -2, 3]> : tensor<3xindex>"
