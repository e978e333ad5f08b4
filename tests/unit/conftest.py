import textwrap

import pytest


@pytest.fixture
def build():
    """build(source) -> a loaded runtime Module of the @kernels in `source` (compiled for this CPU)."""
    from tessera import compiler, runtime

    def _build(source: str, filename: str = "test_kernel.py", **options):
        result = compiler.compile_source(textwrap.dedent(source), filename, compiler.CompileOptions(**options))
        return runtime.load(result.image)

    return _build


@pytest.fixture
def compile_error():
    """compile_error(source) -> the CompileError the compiler raises for `source`."""
    from tessera import compiler
    from tessera.diagnostics import CompileError

    def _err(source: str, filename: str = "user.py"):
        with pytest.raises(CompileError) as info:
            compiler.compile_source(textwrap.dedent(source), filename)
        return info.value

    return _err


@pytest.fixture(scope="session")
def fake_cuda(tmp_path_factory):
    """fake_cuda(script, *args) -> the CompletedProcess of Python running `script` with tests/c/fake_cuda.c
    installed as libcuda.so.1 (the CUDA backend's logic, kernels not run; 4 SMs, compute capability 9.0), for
    what only libtessera's executor does on a GPU backend. Skips without a C compiler."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build the fake CUDA driver")
    out = tmp_path_factory.mktemp("fake_cuda")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(Path(__file__).parents[1] / "c" / "fake_cuda.c"), "-pthread",
                    "-o", str(out / "libcuda.so.1")], check=True)

    def run(script: str, *args):
        env = dict(os.environ, LD_LIBRARY_PATH=str(out), FAKE_CUDA_LOG=str(out / "cuda.log"))
        env.pop("TESSERA_BACKEND", None)
        return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                              timeout=300, env=env)

    return run
