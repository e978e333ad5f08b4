"""The compile cache's key changes with every input that can change an image, and with nothing else.

Each key is the one `compile_source` computes (its look-up is intercepted), so no test here compiles.
"""

import dataclasses
import os

import pytest

from tessera import cache, compiler
from tessera.backends.amdgpu import link as amdgpu_link
from tessera.backends.cpu import link as cpu_link
from tessera.backends.cpu import target as cpu_target
from tessera.backends.cpu.backend import CPUBackend
from tessera.backends.ptx import ptxas
from tessera.options import CompileOptions

SOURCE = """
from tessera import kernel, launch, tensor

@kernel
def copy(X: tensor[float], Y: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Y[i] = X[i]
"""

# What each compile option is changed to, from the defaults (or from the base options given).
OPTION_CHANGES = {
    "target": ({}, "ptx"),
    "kernels": ({}, ("copy",)),
    "include": ({}, ("/usr/include/lib",)),
    "cpu": ({}, "generic"),
    "arch": ({"target": "ptx"}, "sm_90a"),
    "opt_level": ({}, 1),
    "warp_size": ({}, 16),
    "hints": ({}, (("MB", 64),)),
    "numerics": ({}, "strict"),
    "bounds_checks": ({}, False),
    "tuned": ({}, False),
    "gpu_bounds_checks": ({"target": "ptx", "gpu_bounds_checks": False}, True),
    "bucket_bytes": ({}, 1 << 20),
    "collective_chunks": ({}, 3),
    "input_precision": ({"target": "ptx"}, "tf32"),
}


class _Looked(Exception):
    pass


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """The cache on, and the tool probes (cached for a process, whose environment does not change) forgotten
    before and after each test, which changes the environment."""
    monkeypatch.setenv("TESSERA_CACHE", "1")
    probes = (ptxas.version, cpu_link.identity, amdgpu_link.identity)
    for probe in probes:
        probe.cache_clear()
    yield
    for probe in probes:
        probe.cache_clear()


def key(options: CompileOptions = CompileOptions(), source: str = SOURCE, filename: str = "a.py") -> str:
    """The key `compile_source` looks up for this compilation."""
    def lookup(k):
        raise _Looked(k)
    mp = pytest.MonkeyPatch()
    mp.setattr(cache, "lookup", lookup)
    try:
        compiler.compile_source(source, filename, options)
    except _Looked as looked:
        return looked.args[0]
    finally:
        mp.undo()
    raise AssertionError("compile_source did not look in the cache")


def tool(tmp_path, name: str, version_line: str) -> str:
    """An executable that prints `version_line` for --version."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho 'Copyright (c) its maker'\necho '{version_line}'\n")
    path.chmod(0o755)
    return str(path)


def test_the_same_inputs_give_the_same_key():
    assert key() == key()


def test_source_and_file_name():
    assert key(source=SOURCE + "\n# edit\n") != key()
    assert key(filename="b.py") != key()       # locations are part of the IR


def test_every_option_field_is_covered():
    assert set(OPTION_CHANGES) == {f.name for f in dataclasses.fields(CompileOptions)}


@pytest.mark.parametrize("field", sorted(OPTION_CHANGES))
def test_each_option(field):
    base, value = OPTION_CHANGES[field]
    options = CompileOptions(**base)
    assert key(dataclasses.replace(options, **{field: value})) != key(options)


def test_backend_hashes():
    options = CompileOptions()
    assert cache.key(SOURCE, "a.py", options, ["x"]) != cache.key(SOURCE, "a.py", options, ["y"])
    assert cache.key(SOURCE, "a.py", options, ["x", "y"]) != cache.key(SOURCE, "a.py", options, ["y", "x"])


def test_backend_tool_versions(monkeypatch):
    before = key()
    monkeypatch.setattr(CPUBackend, "tool_versions", lambda self: ("another linker",))
    assert key() != before


def test_build_machine(monkeypatch):
    """`native` code is the build machine's, and so is the GEMM register tile of every CPU target."""
    native, generic = key(), key(CompileOptions(cpu="generic"))
    monkeypatch.setattr(cpu_target, "host_identity", lambda: "another machine")
    assert key() != native
    assert key(CompileOptions(cpu="generic")) != generic


def test_ptxas_version(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_PTXAS", tool(tmp_path, "ptxas", "Cuda compilation tools, release 12.4, V12.4.131"))
    assert ptxas.version() == "Cuda compilation tools, release 12.4, V12.4.131"
    before = key(CompileOptions(target="ptx"))
    (tmp_path / "ptxas").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    ptxas.version.cache_clear()   # a new process would see the upgrade
    assert key(CompileOptions(target="ptx")) != before


def test_tessera_ptxas(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_PTXAS", "")
    assert ptxas.version() == "none"
    without = key(CompileOptions(target="ptx"))
    ptxas.version.cache_clear()
    monkeypatch.setenv("TESSERA_PTXAS", tool(tmp_path, "ptxas", "Cuda compilation tools, release 12.4, V12.4.131"))
    assert key(CompileOptions(target="ptx")) != without


def test_cc(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", tool(tmp_path, "cc-a", "cc (A) 12.2.0"))
    before = key()
    cpu_link.identity.cache_clear()
    monkeypatch.setenv("CC", tool(tmp_path, "cc-b", "cc (B) 14.1.0"))
    assert key() != before


def test_tessera_ld_lld(tmp_path, monkeypatch):
    options = CompileOptions(target="amdgpu")
    monkeypatch.setenv("TESSERA_LD_LLD", tool(tmp_path, "ld.lld-a", "LLD 17.0.6 (compatible with GNU linkers)"))
    before = key(options)
    amdgpu_link.identity.cache_clear()
    monkeypatch.setenv("TESSERA_LD_LLD", tool(tmp_path, "ld.lld-b", "LLD 19.1.0 (compatible with GNU linkers)"))
    assert key(options) != before


def test_thread_count(monkeypatch):
    """The CPU GEMM cost model fits the blocking to the thread count."""
    monkeypatch.setenv("TESSERA_NUM_THREADS", "1")
    one = key()
    monkeypatch.setenv("TESSERA_NUM_THREADS", "2")
    assert key() != one


def test_spirv_validator(tmp_path, monkeypatch):
    """spirv-val decides whether a module is accepted: an entry compiled without it (or with another one)
    must not stand for a compile with it."""
    options = CompileOptions(target="spirv")
    monkeypatch.setenv("TESSERA_SPIRV_VAL", "")
    before = key(options)
    monkeypatch.setenv("TESSERA_SPIRV_VAL", tool(tmp_path, "spirv-val", "SPIRV-Tools v2025.5"))
    assert key(options) != before


def test_what_cannot_change_an_image_keeps_the_key(tmp_path, monkeypatch):
    """The cache's own settings, and any other variable, are no input."""
    options = CompileOptions(target="spirv")
    before, cpu = key(options), key()
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("TESSERA_SOMETHING_ELSE", "1")
    monkeypatch.setenv("LANG", "C" if os.environ.get("LANG") != "C" else "C.UTF-8")
    assert key(options) == before
    assert key() == cpu
