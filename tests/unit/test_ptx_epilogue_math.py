"""The divisions of the sm_90a, sm_80 and FMA GEMM epilogues' activations (erf in gelu, tanh's rational form,
sigmoid's and silu's reciprocal) compile to div.approx.f32 / rcp.approx.f32, not the IEEE div.rn.f32 /
rcp.rn.f32 sequences (gemm_lowering._approximate_divisions: the tensor cores waited for them, docs/performance.md
issue 19's transformer block); the SIMT kernels' math is untouched. No GPU needed: the PTX text is read. Their
numerics on a GPU: tests/gpu/test_block_parts_gpu.py and test_hopper.py's linear_gelu."""

import re

import pytest

from tessera import compiler, image
from tessera.options import CompileOptions

SRC = """
from tessera import bf16, f32, function, op, tensor

@function
def linear(X: tensor[bf16, 256, 128], W: tensor[bf16, 128, 256], b: tensor[f32, 256]):
    return op.{act}(op.bias_add(op.matmul(X, W, out_dtype=f32), b))

@function
def alone(X: tensor[f32, 64, 64]):
    return op.{act}(X)
"""


def _bodies(ptx: str) -> dict:
    starts = [(m.group(1), m.end()) for m in re.finditer(r"\.entry (\w+)", ptx)]
    return {name: ptx[at:(starts[i + 1][1] if i + 1 < len(starts) else len(ptx))] for i, (name, at) in enumerate(starts)}


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("act, approx", [("gelu", "div.approx.f32"), ("tanh", "div.approx.f32"),
                                         ("sigmoid", "rcp.approx.f32"), ("silu", "rcp.approx.f32")])
def test_epilogue_divisions_are_approximate(arch, act, approx):
    result = compiler.compile_source(SRC.format(act=act), "k.py", CompileOptions(target="ptx", arch=arch))
    bodies = _bodies(image.read_image(result.image).section(".tessera.code.ptx").decode())
    gemm = [b for name, b in bodies.items() if name.startswith("linear__gemm")]
    assert gemm, sorted(bodies)
    for body in gemm:
        assert approx in body and "div.rn.f32" not in body and "rcp.rn.f32" not in body
    # an elementwise kernel's activation keeps IEEE division (the SIMT math is not the epilogues')
    simt = [b for name, b in bodies.items() if name.startswith("alone__")]
    assert simt and all("div.rn.f32" in b or "rcp.rn.f32" in b for b in simt)
