"""autotune.search on a CUDA device (tessera/autotune.py): each ptx schedule compiled here, timed through the
runtime in device memory, the fastest stored and taken by a later compile for the same arch."""

import types

import numpy as np
import pytest

SOURCE = """\
from tessera import bf16, function, op, tensor


@function
def mm(A: tensor[bf16, 512, 384], B: tensor[bf16, 384, 256]):
    return op.matmul(A, B)
"""


def test_a_ptx_search_times_on_the_device_and_is_remembered(cuda, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSERA_TUNE_DIR", raising=False)   # tests/conftest.py's: the cache directory's here
    try:
        from tessera import autotune, compiler, executor, tuning
        from tessera.image import read_image
        from tessera.options import CompileOptions
        compiler.compile_source("", "empty.py")
    except ImportError as e:
        pytest.skip(f"searching compiles each schedule, and there is no compiler here ({e})")
    arch = cuda.properties["arch"]
    arch = arch + "a" if arch == "sm_90" else arch   # Hopper's wgmma GEMM is sm_90a's
    path = tmp_path / "mm.py"
    path.write_text(SOURCE)
    kernel = types.SimpleNamespace(filename=str(path), name="mm")
    result = autotune.search(kernel, {"BN": [64, 128], "stages": [2, 3]}, target="ptx", arch=arch, repeat=3,
                             persist=True, progress=False)
    assert len(result.trials) == 4 and all(0 < s < 1 for _, s in result.trials)
    (_, record), = tuning.records()
    assert record["key"]["target"] == "ptx" and record["key"]["arch"] == arch
    image = compiler.compile_file(str(path), CompileOptions(target="ptx", arch=arch)).image
    assert {k.props.get("autotune") for k in read_image(image).kernels} == \
        {f"stored: NC={result['BN']} stages={result['stages']}"}
    rng = np.random.default_rng(0)
    A = rng.standard_normal((512, 384)).astype(np.float32)
    B = rng.standard_normal((384, 256)).astype(np.float32)
    out = executor.load(image, cuda).mm(A, B)
    bf = lambda x: (x.view(np.uint32) + 0x8000 & 0xFFFF0000).view(np.float32)   # noqa: E731 (round to bf16)
    np.testing.assert_allclose(out, bf(A) @ bf(B), rtol=2e-2, atol=2e-1)
