"""The backend contract: a target is one class and one registration, as the toy backend in this file shows.

The toy target's "machine code" is the kernels' Tile IR as text; everything else (the shared phases, the
image, the cache key, the stage list, errors at the user's line) comes from the driver, which names no
backend."""

from dataclasses import dataclass

import pytest

from tessera import backends
from tessera.backends import Backend
from tessera.compiler import compile_source, stage_names
from tessera.diagnostics import CompileError
from tessera.image import read_image
from tessera.options import CompileOptions, HashedOptions
from tessera.selection import backends_for
from tessera.targets import TargetFacts

SAXPY = """
@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""

MATMUL = """
@function
def f(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return A @ B
"""


@dataclass(frozen=True)
class ToyOptions(HashedOptions):
    arch: str = "toy-1"
    opt_level: int = 3


class ToyBackend(Backend):
    name = "toy"
    Options = ToyOptions
    code_section = ".tessera.code.toy"
    arch_prefixes = ("toy-",)

    @classmethod
    def option_values(cls, options, arch):
        return {"arch": arch or "toy-1", "opt_level": options.opt_level}

    def add_stages(self, stages):
        def make_text(mod, metadata):
            metadata["arch"] = self.options.arch
            return str(mod)
        stages["text"] = make_text

    def target_facts(self):
        return TargetFacts("toy", 128, 32, frozenset({"f32"}), 1)

    def entry_symbol(self, kernel):
        return f"toy_{kernel}"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(backends._registry, "toy", ToyBackend)
    monkeypatch.setenv("TESSERA_CACHE", "0")
    return ToyBackend


def test_a_registered_target_compiles_into_an_image(toy):
    image = read_image(compile_source(SAXPY, "saxpy.py", CompileOptions(target="toy")).image)
    (k,) = image.kernels
    assert (k.name, k.entry, k.target, k.arch, k.section) == ("saxpy", "toy_saxpy", "toy", "toy-1", ".tessera.code.toy")
    assert "ttile.thread_id" in image.section(".tessera.code.toy").decode()


def test_a_registered_target_takes_its_architectures_and_shares_an_image(toy):
    image = read_image(compile_source(SAXPY, "saxpy.py", CompileOptions(target="cpu,toy", arch="toy-7")).image)
    assert sorted((k.target, k.arch) for k in image.kernels)[1] == ("toy", "toy-7")
    assert backends.for_arch("toy-7") == "toy"


def test_its_stages_follow_the_shared_phases(toy):
    names = stage_names(CompileOptions(target="toy"))
    assert names[:3] == ["ttir", "canonical", "schedule"] and names[-2:] == ["text", "image"]


def test_a_group_it_cannot_lower_is_refused_at_the_users_line(toy):
    with pytest.raises(CompileError) as e:
        compile_source(MATMUL, "mm.py", CompileOptions(target="toy"))
    assert str(e.value).startswith("mm.py:4:12: error:") and "no toy lowering" in str(e.value)


def test_unknown_targets_name_every_registered_one(toy):
    with pytest.raises(CompileError, match=r"unknown target 'tpu' \(available: cpu, ptx, amdgpu, spirv, toy\)"):
        backends_for(CompileOptions(target="tpu"))


def test_the_hash_covers_options_and_tool_versions(toy, monkeypatch):
    before = ToyBackend(ToyOptions()).hash()
    assert ToyBackend(ToyOptions(opt_level=2)).hash() != before == ToyBackend(ToyOptions()).hash()
    monkeypatch.setattr(ToyBackend, "tool_versions", lambda self: ("toyas 2.0",))
    assert ToyBackend(ToyOptions()).hash() != before


def test_only_backends_register():
    with pytest.raises(TypeError, match="not a tessera.backends.Backend"):
        backends.register(object)


def test_builtin_backends_register_themselves():
    for name in backends.BUILTIN:
        cls = backends.get(name)
        assert cls.name == name and issubclass(cls, Backend)


@pytest.mark.parametrize("target, arch, units, smem", [
    ("cpu", "", set(), 0),
    ("ptx", "sm_80", {"fp16", "bf16", "tf32"}, 163 << 10),
    ("ptx", "sm_90a", {"fp16", "bf16", "tf32", "fp8_e4m3", "fp8_e5m2"}, 227 << 10),
    ("amdgpu", "gfx1100", {"fp16", "bf16"}, 64 << 10),
    ("spirv", "", set(), 32 << 10),
    ("spirv", "xe-hpc", {"fp16", "bf16"}, 128 << 10),
])
def test_builtin_targets_state_their_facts(target, arch, units, smem):
    (b,) = backends_for(CompileOptions(target=target, arch=arch))
    facts = b.target_facts()
    assert facts.name == target and set(facts.matrix_units) == units and facts.shared_memory == smem
    assert facts.cores >= 1 and facts.warp_size in (32, 64) and {"f32", "f64"} <= facts.native_dtypes
