"""The AMDGPU backend without a GPU: kernels compile to HSACO code objects whose NT_AMDGPU_METADATA note
says what HIP will see (kernel names, kernarg layout, wavefront size), for CDNA (wave64) and RDNA (wave32).

Linking needs ld.lld ≥ 16 (`pip install ziglang`, in the test extra); without one the linking tests skip.
"""

import pathlib
import re

import pytest

from tessera import compiler, image
from tessera.backends.amdgpu import link
from tessera.backends.amdgpu.metadata import code_object_metadata
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = [REPO / "examples" / "saxpy.py", REPO / "examples" / "graph" / "reductions.py"]
WAVE = {"gfx942": 64, "gfx90a": 64, "gfx1100": 32}

GRAPH = """
@function
def f(X: tensor[f32, "N", "D"], g: tensor[f32, "D"], b: tensor[f32, "D"], Y: tensor[bf16, "N", "D"]):
    return (op.softmax(X), op.layernorm(X, gamma=g, beta=b), op.sum(X, axis=-1), op.max(X, axis=-1),
            op.gelu(X) + op.exp(X) * b + op.log(op.abs(X) + 1.0) + op.tanh(X) ** 2.0,
            op.transpose(X, perm=(1, 0)), op.gelu(Y) + 1.0, op.dropout(op.softmax(X), 0.1, 7), op.dropout(X, 0.3, 5))
"""

needs_lld = pytest.mark.skipif(link.find() is None, reason="no ld.lld >= 16 (pip install ziglang)")


def compile_amdgpu(source: str, filename: str, arch: str = "gfx942", **kw):
    return compiler.compile_source(source, filename, CompileOptions(target="amdgpu", arch=arch), **kw)


def hsaco_of(result) -> bytes:
    return image.read_image(result.image).section(".tessera.code.amdgpu")


def kernarg_size(sig) -> int:
    """The kernarg segment the launch signature needs: each argument at its natural alignment."""
    size = 0
    for a in sig.args:
        n = 8 if a.kind != 0 else {"bool": 1, "i32": 4, "f32": 4}.get(a.dtype.name, 8)
        size = (size + n - 1) // n * n + n
    return size


@needs_lld
@pytest.mark.parametrize("arch", WAVE)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_link_to_code_objects(path, arch):
    result = compile_amdgpu(path.read_text(), str(path), arch)
    img = image.read_image(result.image)
    md = code_object_metadata(hsaco_of(result))
    assert md["amdhsa.target"] == f"amdgcn-amd-amdhsa--{arch}"
    kernels = {k[".name"]: k for k in md["amdhsa.kernels"]}
    sigs = {s.name: s for s in result.metadata["signatures"]}
    assert sorted(kernels) == sorted(k.name for k in img.kernels) == sorted(sigs)
    for rec in img.kernels:
        k = kernels[rec.name]
        assert (rec.target, rec.arch, rec.warp_size) == ("amdgpu", arch, WAVE[arch])
        assert k[".wavefront_size"] == WAVE[arch] and k[".symbol"] == rec.name + ".kd"
        # the launch signature, and nothing hidden: the kernels read block extents from the dispatch packet;
        # a coarsened kernel (passes/simt_coarsen.py) also the caller's thread count, an i64 the runtime adds
        hidden = 1 if "simt.coarsen" in rec.props else 0
        assert k[".kernarg_segment_size"] == kernarg_size(sigs[rec.name]) + 8 * hidden
        assert len(k[".args"]) == len(sigs[rec.name].args) + hidden
        assert k[".max_flat_workgroup_size"] == 1024
        assert rec.regs == k[".vgpr_count"] > 0


@needs_lld
@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_generated_kernels_follow_the_wavefront(arch):
    """Row kernels run one wavefront per row: 64 lanes on CDNA, 32 on RDNA, and reduce across all of them."""
    seen = {}
    result = compile_amdgpu(GRAPH, "g.py", arch, on_stage=lambda n, a: seen.setdefault(n, a))
    rows = [s for s in result.metadata["plans"]["f"]["steps"] if "row" in s.get("kernel", "")]
    assert rows and all(s["block"][0] == WAVE[arch] for s in rows)
    # every shuffle spans the wavefront, and the butterflies start at half of it
    shuffles = re.findall(r"gpu\.shuffle xor %\S+, %c(\d+)_i32, %c(\d+)_i32", seen["gpu"])
    assert shuffles and {int(w) for _, w in shuffles} == {WAVE[arch]}
    assert max(int(o) for o, _ in shuffles) == WAVE[arch] // 2
    assert "__oc" not in seen["llir"]  # no ROCm device library
    md = code_object_metadata(hsaco_of(result))
    assert {k[".wavefront_size"] for k in md["amdhsa.kernels"]} == {WAVE[arch]}


def test_architectures_go_to_their_targets():
    with pytest.raises(CompileError, match="unknown AMD GPU architecture 'gfx000'"):
        compile_amdgpu("", "e.py", arch="gfx000")
    with pytest.raises(CompileError, match="architecture 'gfx942' is for none of the targets cpu,ptx"):
        compiler.compile_source("", "e.py", CompileOptions(target="cpu,ptx", arch="gfx942"))
    with pytest.raises(CompileError, match="'sm_80' and 'sm_90a' both name the ptx target"):
        compiler.compile_source("", "e.py", CompileOptions(target="ptx", arch="sm_80,sm_90a"))


def test_code_object_metadata_needs_the_note():
    with pytest.raises(ValueError, match="not a little-endian ELF64"):
        code_object_metadata(b"nope")
