"""tsrFunctionCall on the CUDA backend: tests/c/host_function.c (built with tessera-config's flags) runs f32
`@function`s of kernels.SOURCES from C on device memory (--backend cuda; its checks of bad calls included),
and its outputs are bit-identical to tessera.executor's on the same GPU and inputs."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

C_TESTS = Path(__file__).resolve().parents[1] / "c"
sys.path.insert(0, str(C_TESTS))
from hostutil import run_host_function  # noqa: E402


@pytest.fixture(scope="module")
def host_function(tmp_path_factory):
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler: `cc` is not on PATH (Debian/Ubuntu: gcc)")
    config = subprocess.run([sys.executable, "-m", "tessera.tools.config", "--cflags", "--libs"], capture_output=True,
                            text=True, cwd="/")
    assert config.returncode == 0, config.stderr
    exe = tmp_path_factory.mktemp("host_function") / "host_function"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", str(C_TESTS / "host_function.c"),
                    f"-I{C_TESTS}", *config.stdout.split(), "-o", str(exe)], check=True)
    return exe


# (program of kernels.SOURCES, its f's inputs' shapes: T or N = 77 rows, which no tile divides, D = 96)
CASES = {"mlp_tail": [(77, 96), (96,), (96,)], "rows": [(77, 96), (96,), (96,)], "elementwise": [(77, 96), (96,)]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_function_from_c_on_cuda_equals_the_python_executor(cuda, image_of, program, host_function, tmp_path, name):
    rng = np.random.default_rng(14)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in CASES[name]]
    want = program(name).f(*inputs)   # tessera.executor on the same GPU
    want = want if isinstance(want, tuple) else (want,)
    got, stdout = run_host_function(host_function, image_of(name), "f", inputs, [w.shape for w in want], tmp_path,
                                    ["--bad", "--backend", "cuda"])
    assert "ok   call on a stream" in stdout, stdout
    for g, w in zip(got, want):
        assert g == np.ascontiguousarray(w, np.float32).tobytes(), f"{name}: C differs from tessera.executor"
