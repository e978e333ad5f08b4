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
