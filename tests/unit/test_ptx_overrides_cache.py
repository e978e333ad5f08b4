"""The sm_90a kernels' benchmark overrides read from the environment at compile time are part of the PTX
backend's hash, hence of the compile cache's key (backends/ptx/options.py OVERRIDE_ENVS): an image built under
TESSERA_SM90_GEMM_CLUSTER=2 is never served to a compile without it (regression: before, variant builds needed
TESSERA_CACHE=0)."""

import pathlib
import re

import pytest

from tessera.backends.ptx import options as ptx_options
from tessera.backends.ptx.backend import PTXBackend
from tessera.options import CompileOptions

PTX = pathlib.Path(ptx_options.__file__).parent
# variables the backend reads that reach the key another way: ptxas's identity (tool_versions) and the two
# read into PTXOptions fields of their own
ELSEWHERE = {"TESSERA_PTXAS", "TESSERA_ATTENTION_FUSED_DQ", "TESSERA_ATTENTION_SM80"}


def _hash() -> str:
    return PTXBackend.from_options(CompileOptions(target="ptx"), "sm_90a").hash()


def test_every_environment_variable_the_ptx_backend_reads_reaches_the_key():
    read = set()
    for path in PTX.glob("*.py"):
        read |= set(re.findall(r'"(TESSERA_[A-Z0-9_]+)"', path.read_text()))
    assert read, "found no TESSERA_ variable in backends/ptx: the scan is broken"
    missing = read - ELSEWHERE - set(ptx_options.OVERRIDE_ENVS)
    assert not missing, f"read by backends/ptx but not in OVERRIDE_ENVS (so not in the cache key): {sorted(missing)}"


@pytest.mark.parametrize("name", ptx_options.OVERRIDE_ENVS)
def test_an_override_changes_the_backend_hash(monkeypatch, name):
    monkeypatch.delenv(name, raising=False)
    plain = _hash()
    monkeypatch.setenv(name, {"TESSERA_SM90_GEMM_CLUSTER": "2", "TESSERA_SM90_GEMM_FP8_BN": "128",
                              "TESSERA_SM90_GEMM_FP8_PROMOTE": "2", "TESSERA_SM90_GEMM_GROUP_M": "16"}.get(name, "stages=2"))
    assert _hash() != plain
    monkeypatch.setenv(name, "")   # empty is unset
    assert _hash() == plain


def test_group_m_override_reaches_the_kernel_and_refuses_nonsense(monkeypatch):
    from tessera.backends.ptx import gemm_lowering
    monkeypatch.setenv(gemm_lowering.GROUP_M_ENV, "16")
    assert gemm_lowering._group_m() == {"group_m": 16}
    monkeypatch.setenv(gemm_lowering.GROUP_M_ENV, "0")
    with pytest.raises(ValueError, match="TESSERA_SM90_GEMM_GROUP_M=0"):
        gemm_lowering._group_m()
    monkeypatch.delenv(gemm_lowering.GROUP_M_ENV)
    assert gemm_lowering._group_m() == {}
