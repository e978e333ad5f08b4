"""Numerics profiles (tessera/numerics/profiles.py, docs/portability.md "Numerics profiles"): their names and
selection (numerics.profile, CompileOptions, tessera-cc --profile, a function's numerics= hint), the image's
record of the profile (each kernel's `numerics` property, shown by tessera-objdump), the cache key, and what
`deterministic` refuses or turns off: float atomics (at the user's line) and the sm_90a attention backward's
atomic dQ."""

import dataclasses

import pytest

from tessera import cache, compiler, image, numerics
from tessera.backends.ptx.backend import PTXBackend
from tessera.diagnostics import CompileError
from tessera.numerics import profiles
from tessera.options import CompileOptions
from tessera.tools import cc, objdump

ELEMENTWISE = """
@function
def axpy(X: tensor[f32, "N"], Y: tensor[f32, "N"]):
    return X * 2.0 + Y
"""

ATOMIC = """
@kernel
def scatter(X: tensor[{dtype}, "N"], Y: tensor[{dtype}, "M"]):
    i = launch.thread_id(0)
    if i < X.shape[0]:
        tile.atomic_{kind}(Y[0], X[i])
"""


def test_names_aliases_and_order():
    assert profiles.PROFILES == ("fast", "deterministic", "strict")
    assert CompileOptions().numerics == "fast"
    assert CompileOptions(numerics="default").numerics == "fast"   # the old name of "fast"
    assert profiles.strictest("fast", "strict", "deterministic") == "strict"
    assert [profiles.deterministic(p) for p in ("default", "fast", "deterministic", "strict")] == \
        [False, False, True, True]
    with numerics.profile("deterministic"):
        with numerics.profile("strict"):
            assert CompileOptions().numerics == "strict"
        assert CompileOptions().numerics == "deterministic"
    assert CompileOptions().numerics == "fast"
    with pytest.raises(ValueError, match="unknown numerics profile 'exact'; the profiles are fast, "
                                         "deterministic, strict"):
        CompileOptions(numerics="exact")
    with pytest.raises(ValueError, match="unknown numerics profile"):
        with numerics.profile("reproducible"):
            pass


def test_the_profile_keys_the_cache():
    key = lambda o: cache.key("src", "f.py", o, [])  # noqa: E731
    fast = CompileOptions()
    assert key(CompileOptions(numerics="default")) == key(fast)
    keys = {key(dataclasses.replace(fast, numerics=p)) for p in profiles.PROFILES}
    assert len(keys) == 3


@pytest.mark.parametrize("profile", ["fast", "deterministic", "strict"])
def test_the_image_records_the_profile(profile):
    img = image.read_image(compiler.compile_source(ELEMENTWISE, "p.py", CompileOptions(numerics=profile)).image)
    assert img.kernels and {k.props["numerics"] for k in img.kernels} == {profile}
    assert f"numerics: {profile}" in objdump.render(img, show_ir=False)


def test_a_hint_makes_the_compilation_stricter():
    hinted = ELEMENTWISE.replace("@function", '@function(numerics="deterministic")')
    img = image.read_image(compiler.compile_source(hinted, "p.py", CompileOptions()).image)
    assert {k.props["numerics"] for k in img.kernels} == {"deterministic"}
    # the options' stricter profile stays: a hint never relaxes
    img = image.read_image(compiler.compile_source(hinted, "p.py", CompileOptions(numerics="strict")).image)
    assert {k.props["numerics"] for k in img.kernels} == {"strict"}
    kernel_hint = ATOMIC.format(dtype="i32", kind="add").replace("@kernel", '@kernel(numerics="strict")')
    img = image.read_image(compiler.compile_source(kernel_hint, "k.py", CompileOptions()).image)
    assert {k.props["numerics"] for k in img.kernels} == {"strict"}


@pytest.mark.parametrize("value, why", [('"exact"', "unknown numerics profile 'exact'"), ("3", "not '3'")])
def test_an_unknown_hint_is_refused_at_its_value(value, why):
    bad = ELEMENTWISE.replace("@function", f"@function(numerics={value})")
    with pytest.raises(CompileError) as e:
        compiler.compile_source(bad, "p.py", CompileOptions())
    assert str(e.value).startswith(f"p.py:2:20: error: numerics= takes a profile name: {why}; the profiles are "
                                   f"fast, deterministic, strict")


def test_tessera_cc_profile(tmp_path, capsys):
    src = tmp_path / "p.py"
    src.write_text(ELEMENTWISE)
    out = tmp_path / "p.tessera"
    assert cc.main([str(src), "-o", str(out), "--profile", "deterministic"]) == 0
    assert objdump.main([str(out), "--no-ir"]) == 0
    assert "      numerics: deterministic\n" in capsys.readouterr().out
    assert cc.main([str(src), "-o", str(out), "--profile", "default"]) == 0
    assert {k.props["numerics"] for k in image.read_image(out.read_bytes()).kernels} == {"fast"}
    with pytest.raises(SystemExit):
        cc.main([str(src), "-o", str(out), "--profile", "exact"])
    assert "invalid choice: 'exact'" in capsys.readouterr().err


@pytest.mark.parametrize("profile", ["deterministic", "strict"])
def test_float_atomics_are_refused_at_their_line(profile):
    with pytest.raises(CompileError) as e:
        compiler.compile_source(ATOMIC.format(dtype="f32", kind="add"), "scatter.py",
                                CompileOptions(numerics=profile))
    assert str(e.value).startswith(f"scatter.py:6:9: error: tile.atomic_add on f32 elements is refused under the "
                                   f"'{profile}' numerics profile")
    # integer additions commute exactly: allowed
    compiler.compile_source(ATOMIC.format(dtype="i32", kind="add"), "scatter.py",
                            CompileOptions(numerics=profile))


def test_float_atomic_max_is_refused_too():
    """A maximum is order-free, but which NaN (or which of -0.0 and +0.0) wins is not: refused as well."""
    with pytest.raises(CompileError, match="tile.atomic_max on f32 elements is refused under the 'deterministic'"):
        compiler.compile_source(ATOMIC.format(dtype="f32", kind="max"), "scatter.py",
                                CompileOptions(numerics="deterministic"))


def test_float_atomics_compile_under_fast():
    img = image.read_image(compiler.compile_source(ATOMIC.format(dtype="f32", kind="add"), "scatter.py").image)
    assert [k.name for k in img.kernels] == ["scatter"]


@pytest.mark.parametrize("env", ["", "0", "1"])
def test_deterministic_profiles_never_fuse_the_attention_backwards_dq(monkeypatch, env):
    """dQ's bulk f32 reductions add in an order that varies from run to run (backends/ptx/options.py)."""
    monkeypatch.setenv("TESSERA_ATTENTION_FUSED_DQ", env)
    for profile in ("deterministic", "strict"):
        assert PTXBackend.option_values(CompileOptions(target="ptx", numerics=profile), "sm_90a")["fused_dq"] \
            == "never"
    assert PTXBackend.option_values(CompileOptions(target="ptx"), "sm_90a")["fused_dq"] == \
        {"": "faster", "0": "never", "1": "always"}[env]


def test_deterministic_autotuning_keeps_the_k_chunk():
    """BK decides where the CPU GEMM adds a K chunk's partial sums into C: searching it would pick the
    rounding by timing (tessera/autotune.py)."""
    from tessera import autotune
    kernel = type("K", (), {"filename": "never-read.py", "name": "gemm"})
    for profile in ("deterministic", "strict"):
        with numerics.profile(profile), pytest.raises(ValueError, match=f"the '{profile}' numerics profile "
                                                                        f"searches only schedules that keep"):
            autotune.search(kernel=kernel, params={"BM": [64], "BK": [16, 32]})
    with numerics.profile("deterministic"), pytest.raises(FileNotFoundError):   # one BK: the search goes on
        autotune.search(kernel=kernel, params={"BM": [64, 128], "BK": [32, 32]})
    with pytest.raises(FileNotFoundError):   # fast: every schedule
        autotune.search(kernel=kernel, params={"BK": [16, 32]})


ARITHMETIC = """
@function
def f(X: tensor[f32, "N"], Y: tensor[f32, "N"], Z: tensor[f32, "N"]):
    return X * Y + Z, X / Y, op.sqrt(X)
"""


def test_strict_ptx_is_correctly_rounded_and_uncontracted():
    """NVPTX writes mul.rn/add.rn (which ptxas never fuses), div.rn and sqrt.rn: no .approx, no fma."""
    import re
    r = compiler.compile_source(ARITHMETIC, "s.py", CompileOptions(target="ptx", numerics="strict"))
    ptx = image.read_image(r.image).section(".tessera.code.ptx").decode()
    found = set(re.findall(r"\b(?:fma|mul|add|div|sqrt|ex2|lg2|rcp|rsqrt)\.[a-z0-9.]*f32", ptx))
    assert {"mul.rn.f32", "add.rn.f32", "div.rn.f32", "sqrt.rn.f32"} <= found
    assert not any(".approx" in f or f.startswith(("fma", "ex2", "lg2", "rcp", "rsqrt")) for f in found), found


def test_strict_amdgpu_llvm_ir_has_no_fast_math():
    stages = {}
    compiler.compile_source(ARITHMETIC, "s.py", CompileOptions(target="amdgpu", numerics="strict"),
                            on_stage=lambda name, artifact: stages.__setitem__(name, artifact))
    arithmetic = [line for line in stages["llir"].splitlines() if any(f" {i} " in line for i in
                                                                       ("fmul", "fadd", "fdiv"))]
    assert len(arithmetic) >= 3 and "llvm.sqrt.f32" in stages["llir"]
    for flag in ("fast", "contract", "afn", "arcp", "reassoc", "!fpmath"):
        assert not any(flag in line for line in arithmetic), flag


TRANSCENDENTAL = """
@function
def f(X: tensor[f32, "N", "D"], Y: tensor[f32, "N", "D"]):
    a = X * Y
    return a + 1.0, {call}
"""


@pytest.mark.parametrize("target", ["ptx", "amdgpu"])
@pytest.mark.parametrize("call", ["op.exp(a)", "op.gelu(a)", "op.softmax(a)", "a ** Y", "op.tanh(a) / Y"])
def test_strict_gpu_math_is_exact(target, call):
    """Under strict ptx and amdgpu compute exp, erf, tanh, pow in f64 and round once (passes/strict_math.py,
    f64_math.py), where they once refused them: no approximate instruction, no contraction, division and sqrt
    correctly rounded in f32; deterministic keeps the f32 approximations."""
    stage = "ptx" if target == "ptx" else "llir"

    def code(profile):
        stages = {}
        compiler.compile_source(TRANSCENDENTAL.format(call=call), "t.py", CompileOptions(target=target,
                                numerics=profile), on_stage=lambda name, artifact: stages.__setitem__(name, artifact))
        return stages[stage]
    strict, deterministic = code("strict"), code("deterministic")
    if target == "ptx":
        assert "cvt.f64.f32" in strict and "cvt.rn.f32.f64" in strict and "cvt.f64.f32" not in deterministic
        for inexact in ("approx", "fma.rn.f32", "div.full", ".ftz"):
            assert inexact not in strict, inexact
        assert "fma.rn.f32" in deterministic   # vmath's contracted f32 polynomials
    else:
        assert "fpext float" in strict and "fptrunc double" in strict and "fpext float" not in deterministic
        for flag in (" fast ", " contract ", " afn ", " arcp ", " reassoc ", "fpmath", "llvm.amdgcn.exp"):
            assert flag not in strict, flag


def test_strict_cpu_runs_the_one_product_one_sum_gemm():
    """Under strict the CPU's GEMM is the SIMT kernel of one product and one sum per k (ascending), the
    sequential f32 loop's bits; under fast its blocked FMA kernel."""
    import numpy as np
    from tessera import executor
    src = '@function\ndef mm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):\n    return op.matmul(A, B)\n'
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((33, 700)).astype(np.float32), rng.standard_normal((700, 40)).astype(np.float32)
    want = np.zeros((33, 40), np.float32)
    for k in range(700):
        want = want + A[:, k:k + 1] * B[k:k + 1, :]
    strict = executor.load(compiler.compile_source(src, "mm.py", CompileOptions(numerics="strict")).image)
    np.testing.assert_array_equal(strict.mm(A, B), want)
    fast = executor.load(compiler.compile_source(src, "mm.py", CompileOptions()).image)
    assert not np.array_equal(fast.mm(A, B), want)   # FMAs round once per product and sum


def test_strict_keeps_int8_gemms_on_the_targets_kernels():
    """Strict's SIMT GEMM is for float GEMMs; an i8 x i8 -> i32 GEMM is exact in any order, so it keeps the
    CPU's int8 kernel and ptx's wgmma s8 (the SIMT kernel refuses integers)."""
    import numpy as np
    from tessera import executor, image
    src = ('@function\ndef mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):\n'
           '    return op.matmul(A, B, out_dtype=i32)\n')
    rng = np.random.default_rng(4)
    A, B = rng.integers(-128, 128, (33, 300)).astype(np.int8), rng.integers(-128, 128, (300, 40)).astype(np.int8)
    cpu = executor.load(compiler.compile_source(src, "mm.py", CompileOptions(numerics="strict")).image)
    np.testing.assert_array_equal(cpu.mm(A, B), A.astype(np.int32) @ B.astype(np.int32))
    ptx = compiler.compile_source(src, "mm.py", CompileOptions(target="ptx", arch="sm_90a", numerics="strict"))
    assert "wgmma.mma_async.sync.aligned.m64n" in image.read_image(ptx.image).section(".tessera.code.ptx").decode()
