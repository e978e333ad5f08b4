"""Compile options are checked before a backend or LLVM sees them: an unknown CPU name once reached LLVM as six
warnings and a fatal error that ended the calling process; bad types and ranges once became AttributeErrors,
assertions in LLVM, or hangs (a warp of 2^40 lanes)."""

import os
import platform
import subprocess
import sys

import pytest

import tessera
from tessera.backends.cpu import target
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

SAXPY = """
@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""

x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 CPU names")


def test_llvm_lists_the_host_targets_cpus():
    cpus = target.known_cpus()
    assert "generic" in cpus and "help" not in cpus and len(cpus) > 10
    if platform.machine() == "x86_64":
        assert {"skylake", "x86-64-v3", "znver4"} <= set(cpus)


@pytest.mark.parametrize("cpu", ["bogus", "", "help", "cortex-a72" if platform.machine() == "x86_64" else "znver4"])
def test_an_unknown_cpu_is_a_compile_error_naming_the_known_ones(cpu):
    with pytest.raises(CompileError, match=rf"unknown cpu '{cpu}' .*known: native, .*generic"):
        tessera.compile(SAXPY, cpu=cpu)


@x86
def test_a_misspelt_cpu_gets_suggestions():
    with pytest.raises(CompileError, match="did you mean 'skylake'"):
        tessera.compile(SAXPY, cpu="skylak")


@x86
def test_a_named_cpu_compiles():
    assert tessera.compile(SAXPY, cpu="x86-64-v3").startswith(b"\x7fELF")


@pytest.mark.parametrize("tool", [["tessera-cc", "SRC", "-o", "OUT"], ["tessera-gemm", "-o", "OUT"],
                                  ["tessera-gemm", "--schedule", "48,64,24,32,6,16,8", "-o", "OUT"]])
def test_the_tools_refuse_an_unknown_cpu_and_live(tool, tmp_path):
    src, out = tmp_path / "s.py", tmp_path / "out.tessera"
    src.write_text(SAXPY)
    argv = [str(src) if a == "SRC" else str(out) if a == "OUT" else a for a in tool]
    bin_dir = os.path.dirname(sys.executable)
    p = subprocess.run([os.path.join(bin_dir, argv[0]), *argv[1:], "--cpu", "bogus"], capture_output=True,
                       text=True, env=dict(os.environ, TESSERA_CACHE="0"))
    assert p.returncode in (1, 2) and "unknown cpu 'bogus'" in p.stderr, p.stderr
    assert "LLVM" not in p.stderr and "not a recognized processor" not in p.stderr and not out.exists()


@pytest.mark.parametrize("options, error, message", [
    ({"cpu": 5}, TypeError, "cpu must be a str"),
    ({"target": None}, TypeError, "target must be a str"),
    ({"arch": None}, TypeError, "arch must be a str"),
    ({"kernels": "saxpy"}, TypeError, "kernels must be a tuple"),
    ({"hints": {"MB": 1}}, TypeError, "hints must be"),
    ({"opt_level": "3"}, TypeError, "opt_level must be an int"),
    ({"opt_level": 7}, ValueError, "opt_level must be 0, 1, 2 or 3"),
    ({"opt_level": -1}, ValueError, "opt_level must be 0, 1, 2 or 3"),
    ({"warp_size": 2.0}, TypeError, "warp_size must be an int"),
])
def test_bad_option_values_are_refused_by_name(options, error, message):
    with pytest.raises(error, match=message):
        CompileOptions(**options)


@pytest.mark.parametrize("warp", [0, -4, 7, 128, 1 << 40])
def test_the_cpu_warp_is_a_power_of_two_up_to_64(warp):
    with pytest.raises(CompileError, match=f"warp_size must be a power of two from 1 to 64, not {warp}"):
        tessera.compile(SAXPY, warp_size=warp)


@pytest.mark.parametrize("value, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("25MB", TypeError)])
def test_the_bucket_threshold_is_a_positive_byte_count(value, error):
    with pytest.raises(error, match="bucket_bytes"):
        CompileOptions(bucket_bytes=value)
