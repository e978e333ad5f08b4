"""The proof of issue 14 on an H100 or H200: tests/c/host_programs.c, built with tessera-config's flags, runs the
ptx images of examples/graph's mlp_block and transformer_block through the CUDA backend (its BACKEND argument),
in device memory, and its outputs are bit-identical to tessera.executor's on the same GPU and inputs."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "c"))
from programs import HERE, SOURCE, run_host, write_headers  # noqa: E402

# image file stems of host_programs.c -> the images of kernels.SOURCES
IMAGES = {"mlp": "graph_mlp", "transformer_block": "transformer_block"}


@pytest.mark.parametrize("extents", [{"T": 96, "S": 200}, {"T": 128, "S": 256}], ids=["edges", "whole-tiles"])
def test_program_host_on_cuda_equals_the_python_executor(cuda, image_of, program, tmp_path, extents):
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler: `cc` is not on PATH (Debian/Ubuntu: gcc)")
    if cuda.properties["arch"] != "sm_90":
        pytest.skip(f"the transformer block's image is sm_90a (flash attention); this GPU is {cuda.properties['arch']}")
    config = subprocess.run([sys.executable, "-m", "tessera.tools.config", "--cflags", "--libs"], capture_output=True,
                            text=True, cwd="/")
    assert config.returncode == 0, config.stderr
    images = {stem: image_of(name) for stem, name in IMAGES.items()}
    write_headers(images, tmp_path)
    exe = tmp_path / "host_programs"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", str(SOURCE), f"-I{tmp_path}", f"-I{HERE}",
                    *config.stdout.split(), "-o", str(exe)], check=True)
    programs = {stem: program(name) for stem, name in IMAGES.items()}
    results, stdout = run_host(exe, "cuda", images, programs, extents, tmp_path, np.random.default_rng(14))
    assert "ok   mlp_block on a stream" in stdout and "ok   transformer_block on a stream" in stdout, stdout
    for name, (got, want) in results.items():
        assert got == want, f"{name}: the C host's outputs differ from tessera.executor's"
