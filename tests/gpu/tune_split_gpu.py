"""Candidates of test_tune_split_gpu.py: a split autotuning search's first half (tessera-tune
--export-candidates) for a bf16 GEMM and a flash attention on sm_90a, built here by build_images.py (or by the
test where the compiler is), timed on the GPU by the runtime alone."""

import os
import pathlib
import types

SOURCE = """\
from tessera import bf16, function, op, tensor


@function
def gemm(A: tensor[bf16, 1024, 512], B: tensor[bf16, 512, 768]):
    return op.matmul(A, B)


@function
def attn(Q: tensor[bf16, 2, 4, 512, 128], K: tensor[bf16, 2, 4, 512, 128], V: tensor[bf16, 2, 4, 512, 128]):
    return op.flash_attention(Q, K, V, scale=0.088)
"""
SPACES = {"gemm": {"BM": [64, 128], "BN": [128, 256], "stages": [4]}, "attn": {"BN": [64, 128], "stages": [2, 3]}}
FOLDER = "tune_split"


def build(out: str) -> None:
    """Each function's candidates into `out`/tune_split/<function>/ (tests/gpu/build_images.py)."""
    from tessera import autotune  # lazy: the compiler, where the candidates are built
    root = pathlib.Path(out) / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    source = root / "tune_split.py"
    source.write_text(SOURCE)
    for name, space in SPACES.items():
        found = autotune.export_candidates(types.SimpleNamespace(filename=str(source), name=name), space,
                                           root / name, target="ptx", arch="sm_90a", repeat=3)
        print(f"{FOLDER}/{name}: {len(found['candidates'])} candidates")


def candidates(tmp_path) -> tuple[pathlib.Path, bool]:
    """The folder of the candidates: $TESSERA_GPU_IMAGES's, else built into `tmp_path` where the compiler is;
    and whether they were built here (by this compiler: its import takes their records)."""
    import pytest
    prebuilt = os.environ.get("TESSERA_GPU_IMAGES")
    if prebuilt:
        return pathlib.Path(prebuilt) / FOLDER, False
    try:
        build(str(tmp_path))
    except ImportError as e:
        pytest.skip(f"no compiler here ({e}) and no TESSERA_GPU_IMAGES with prebuilt candidates")
    return tmp_path / FOLDER, True
