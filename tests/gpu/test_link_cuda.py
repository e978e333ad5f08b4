"""Linked images on the CUDA backend: two modules compiled apart for ptx, one exporting a function the other
calls through a plan call step, linked by tessera-link and run by tessera.executor (libtessera's executor) on
the GPU, against the same sources compiled, linked and run on the CPU, and numpy."""
import numpy as np
import pytest

BLOCKS = '''
from tessera import f32, function, op, tensor


@function(export=True)
def norm_gate(X: tensor[f32, "R", "C"], g: tensor[f32, "C"]):
    return op.layernorm(X) * g
'''

MODEL = '''
from tessera import f32, function, op, tensor
from blocks import norm_gate


@function(export=True)
def head(X: tensor[f32, "R", "C"], g: tensor[f32, "C"]):
    return op.relu(norm_gate(X + 1.0, g)) * 2.0
'''


def _linked(tmp_path, **options) -> bytes:
    compiler = pytest.importorskip("tessera.compiler")
    from tessera.options import CompileOptions
    from tessera.tools import link
    (tmp_path / "blocks.py").write_text(BLOCKS)
    (tmp_path / "model.py").write_text(MODEL)
    inputs = [link._read_bytes(f"{name}.tessera", compiler.compile_file(str(tmp_path / f"{name}.py"),
                                                                       CompileOptions(**options)).image)
              for name in ("model", "blocks")]
    return link.link(inputs)


def test_a_linked_image_runs_on_cuda_as_on_the_cpu(cuda, tmp_path):
    from tessera import executor
    rng = np.random.default_rng(14)
    X = rng.standard_normal((77, 96)).astype(np.float32)
    g = rng.standard_normal(96).astype(np.float32)
    (tmp_path / "gpu").mkdir()
    (tmp_path / "cpu").mkdir()
    gpu = executor.load(_linked(tmp_path / "gpu", target="ptx", arch="sm_80"), cuda).function("head")(X, g)
    cpu = executor.load(_linked(tmp_path / "cpu")).function("head")(X, g)
    x = X.astype(np.float64) + 1.0
    ref = np.maximum((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g, 0) * 2.0
    gpu = np.asarray(gpu)
    np.testing.assert_allclose(gpu, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5)
