"""The proof of issue 14 on the CPU: a C host (host_programs.c) runs the images of examples/graph/mlp.py and of
examples/graph/transformer_block.py through the wrappers `tessera-cc --emit-header` writes, built two ways as a
user builds one (the flags `tessera-config --cflags --libs` prints, and CMake's find_package(Tessera)); its
outputs are bit-identical to tessera.executor's on the same inputs (mlp_block's bf16 results compared as bits)."""
import shutil
import subprocess
import sys

import numpy as np
import pytest

from hostutil import HERE, REPO, run
from programs import PROGRAMS, SOURCE, run_host

# extents that are no multiple of the kernels' tiles: the edges run too
EXTENTS = {"T": 13, "S": 37}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The two images and their headers, written by tessera-cc (CPU target), and tessera.executor's programs."""
    try:
        from tessera import executor
    except ImportError as e:
        pytest.skip(f"tessera.executor is not importable: {e}")
    out = tmp_path_factory.mktemp("programs")
    images, programs = {}, {}
    for stem, _ in PROGRAMS:
        run([sys.executable, "-m", "tessera.tools.cc", REPO / "examples" / "graph" / f"{stem}.py",
             "-o", out / f"{stem}.tessera", "--emit-header", out / f"{stem}.h"], cwd="/")
        images[stem] = (out / f"{stem}.tessera").read_bytes()
        programs[stem] = executor.load(images[stem])
    return out, images, programs


def tessera_config(*flags):
    p = subprocess.run([sys.executable, "-m", "tessera.tools.config", *flags], capture_output=True, text=True,
                       cwd="/")
    if p.returncode != 0:
        pytest.skip(f"tessera-config cannot say where libtessera is: {p.stderr.strip()}")
    return p.stdout.split()


def check_equal(results):
    for name, (got, want) in results.items():
        assert len(got) == len(want) == 1, name
        assert got[0] == want[0], f"{name}: {np.count_nonzero(np.frombuffer(got[0], np.uint8) != np.frombuffer(want[0], np.uint8))} bytes differ"


def test_host_built_with_tessera_config_equals_the_python_executor(cc, built, tmp_path):
    out, images, programs = built
    exe = tmp_path / "host_programs"
    run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", SOURCE, f"-I{out}", f"-I{HERE}",
         *tessera_config("--cflags", "--libs"), "-o", exe])
    results, stdout = run_host(exe, "cpu", images, programs, EXTENTS, tmp_path, np.random.default_rng(14))
    assert "ok   the header's counts are the image's" in stdout
    assert "ok   mlp_block: result0 is the same on both calls" in stdout
    check_equal(results)
    # the check can fail: a result of other inputs differs
    other, _ = run_host(exe, "cpu", images, programs, EXTENTS, tmp_path, np.random.default_rng(15))
    assert other["transformer_block"][0] != results["transformer_block"][0]


def test_host_built_with_cmake_find_package_equals_the_python_executor(cc, built, tmp_path):
    if not shutil.which("cmake"):
        pytest.skip("cmake is not on PATH (pip install cmake: the test extra has it)")
    out, images, programs = built
    (cmake_dir,) = tessera_config("--cmakedir")
    run(["cmake", "-S", HERE / "cmake_host", "-B", tmp_path / "build", f"-DTessera_DIR={cmake_dir}",
         f"-DTESSERA_GENERATED_HEADERS={out}", f"-DCMAKE_C_COMPILER={cc}"])
    run(["cmake", "--build", tmp_path / "build"])
    results, _ = run_host(tmp_path / "build" / "host_programs", "cpu", images, programs, EXTENTS, tmp_path,
                          np.random.default_rng(16))
    check_equal(results)
