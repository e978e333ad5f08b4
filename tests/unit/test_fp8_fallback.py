"""fp8 on targets without it (portability guide §5, normative; passes/fp8_fallback.py): e4m3/e5m2 rounded as
fp8 rounds, one byte wide where elementwise kernels or a GEMM that widens bytes read them
(tests/unit/test_fp8_memory.py has the byte conversions, tests/unit/test_fp8_one_byte_gemm.py the GEMMs), else
stored in f16 with the fallback in the kernel metadata and tessera-objdump, and fp32 accumulation of
mixed-precision GEMM and attention on every backend.

Numerics run on the CPU against the reference interpreter (which computes in float64 and rounds once to each
op's type): casts and elementwise results bit-exact, GEMMs within f32 accumulation error. The GPU targets are
checked structurally: the same Graph IR legalization, recorded in their kernels' metadata."""

import subprocess
import sys

import numpy as np
import pytest

from tessera import compiler, executor, tessera_frontend_compile
from tessera.backends.amdgpu import link
from tessera.image import read_image
from tessera.numerics import matrix_units
from tessera.options import CompileOptions

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(7)

SRC = """
@function
def quantize(X: tensor[f32, "N", "D"]):
    return op.cast(op.cast(X, fp8_e4m3), f32), op.cast(op.cast(X, fp8_e5m2), f32)

@function
def fp8_params(X: tensor[fp8_e4m3, "N", "D"], Y: tensor[fp8_e5m2, "N", "D"]):
    return op.cast(op.relu(X), f32) + op.cast(Y, f32)

@function
def fp8_gemm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    A8 = op.cast(A, fp8_e4m3 @ accum(fp32))
    B8 = op.cast(B, fp8_e5m2 @ accum(fp32))
    return op.cast(A8, f32) @ op.cast(B8, f32)

@function
def fp8_matmul(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return op.cast(A, fp8_e4m3 @ accum(fp32)) @ op.cast(B, fp8_e4m3 @ accum(fp32))

@function
def fp8_mixed(A: tensor[fp8_e4m3, "M", "K"], B: tensor[fp8_e5m2, "K", "N"]):
    return op.matmul(A, B)

@function
def fp8_out(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    A8, B8 = op.cast(A, fp8_e4m3), op.cast(B, fp8_e4m3)
    return op.cast(op.matmul(A8, B8, out_dtype=fp8_e4m3), f32)
"""

E4M3 = "fp8_e4m3 stored as f16 (exact; rounded to fp8_e4m3 and saturated at ±448)"
E5M2 = "fp8_e5m2 stored as f16 (exact; rounded to fp8_e5m2 and saturated at ±57344)"


@pytest.fixture(scope="module")
def programs():
    image = compiler.compile_source(SRC, "fp8.py").image
    return executor.load(image), tessera_frontend_compile(SRC, {"filename": "fp8.py"}), image


def edge_values() -> np.ndarray:
    """Values across both formats' ranges, with their edges: subnormals, ties between neighbours (which must
    round to even), the largest finite values and past them (saturating), zeros and infinities."""
    x = (RNG.standard_normal((40, 64)) * np.exp2(RNG.integers(-18, 17, (40, 64)))).astype(np.float32)
    special = [448, 464, 480, 512, -1e6, 57344, 61440, 65536, np.inf, -np.inf, 0.0, -0.0,
               2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -10, 2.0 ** -16, 2.0 ** -17, 1.0625, 1.1875, 1.125, 1.375, -1.0625,
               2.0 ** -6 * 1.0625, 17.0, 19.0, 0.3, -0.3]
    x.flat[:len(special)] = special
    return x


def test_casts_round_exactly_as_the_interpreter(programs):
    mod, ref, _ = programs
    x = edge_values()
    got, want = mod.function("quantize")(x), ref.interpret("quantize", x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
    e4m3 = np.asarray(got[0], np.float32).ravel()
    assert e4m3[0] == 448 and e4m3[1] == 448 and e4m3[3] == 448 and e4m3[4] == -448   # saturated
    assert (e4m3[17], e4m3[18], e4m3[19]) == (1.0, 1.25, 1.125)                         # ties to even
    assert (e4m3[13], e4m3[14]) == (0.0, 2.0 ** -8)                                     # subnormal ties


def test_fp8_parameters_are_rounded_once_on_entry(programs):
    mod, ref, _ = programs
    x, y = edge_values(), edge_values()[::-1].copy()
    np.testing.assert_array_equal(np.asarray(mod.function("fp8_params")(x, y), np.float32),
                                  np.asarray(ref.interpret("fp8_params", x, y), np.float32))


@pytest.mark.parametrize("name", ["fp8_gemm", "fp8_matmul", "fp8_mixed", "fp8_out"])
def test_fp8_gemms_accumulate_in_f32(programs, name):
    mod, ref, _ = programs
    a = RNG.standard_normal((37, 50)).astype(np.float32)
    b = RNG.standard_normal((50, 29)).astype(np.float32)
    got, want = np.asarray(mod.function(name)(a, b), np.float64), np.asarray(ref.interpret(name, a, b), np.float64)
    if name == "fp8_out":  # rounded to e4m3 once from the f32 sum: equal, or one e4m3 step apart
        step = np.exp2(np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -6))) - 3)
        assert np.all(np.abs(got - want) <= step), np.abs(got - want).max()
        return
    # f32 accumulation of 50 products against float64 rounded once: a few ulp of the largest partial sum
    bound = 50 * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b))
    assert np.all(np.abs(got - want) <= bound)
    assert np.abs(got - a.astype(np.float64) @ b).max() > 1e-2  # the inputs really were rounded to fp8


def test_fp8_attention_on_the_cpu():
    """The CPU runs attention as two GEMMs and a softmax whose probabilities are rounded to the inputs' type
    before the product with V (passes/decompose.py), where the interpreter rounds once at the end. With e4m3
    that rounding (relative error up to 2^-4 per probability) moves the output by up to 2^-4 * max|V|, and
    the final rounding by one e4m3 step."""
    src = """
@function
def att(Q: tensor[f32, "S", 32], K: tensor[f32, "S", 32], V: tensor[f32, "S", 32]):
    q, k, v = op.cast(Q, fp8_e4m3), op.cast(K, fp8_e4m3), op.cast(V, fp8_e4m3)
    return op.cast(op.flash_attention(q, k, v, causal=True), f32)
"""
    q, k, v = (RNG.standard_normal((20, 32)).astype(np.float32) for _ in range(3))
    got = np.asarray(executor.load(compiler.compile_source(src, "a.py").image).function("att")(q, k, v), np.float64)
    want = np.asarray(tessera_frontend_compile(src, {"filename": "a.py"}).interpret("att", q, k, v), np.float64)
    step = np.exp2(np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -6))) - 3)
    assert np.all(np.abs(got - want) <= 2.0 ** -4 * np.abs(v).max() + step), np.abs(got - want).max()


def test_the_fallback_is_in_the_metadata_and_objdump_where_a_gemm_reads_the_container(programs, tmp_path):
    """fp8 that elementwise kernels or the CPU's GEMM read stays one byte (passes/fp8_convert.py; gemm.py widens
    the bytes while packing): no fallback, the GEMMs take fp8 arguments. ptx before sm_90a multiplies on
    mma.sync, whose copies to shared memory cannot widen: what its GEMM reads is in the f16 container, recorded
    in the kernel metadata and shown by tessera-objdump."""
    _, _, image = programs
    kernels = read_image(image).kernels
    assert not any("fp8" in k.props.get("fallbacks", "") for k in kernels), {k.name: k.props for k in kernels}
    params = next(k for k in kernels if k.name.startswith("fp8_params"))
    assert [a.dtype for a in params.args[:2]] == [14, 15]   # fp8_e4m3 and fp8_e5m2 (dtypes.py codes): one byte
    gemms = {k.name.split("__")[0]: [a.dtype for a in k.args[:2]] for k in kernels if "__gemm" in k.name}
    assert gemms["fp8_matmul"] == [14, 14] and gemms["fp8_mixed"] == [14, 15], gemms
    path = tmp_path / "fp8.tessera"
    path.write_bytes(compiler.compile_source(SRC, "fp8.py", CompileOptions(target="ptx", arch="sm_80")).image)
    out = subprocess.run([sys.executable, "-m", "tessera.tools.objdump", str(path), "--no-ir"], capture_output=True,
                         text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip().startswith("fallbacks:")]
    assert f'fallbacks: "{E4M3}; {E5M2}"' in lines, lines   # fp8_mixed's kernels
    assert f'fallbacks: "{E4M3}"' in lines, lines           # fp8_matmul's


@pytest.mark.parametrize("target,arch", [("ptx", "sm_80"), ("ptx", "sm_90a"), ("amdgpu", "gfx90a"),
                                         ("amdgpu", "gfx942"), ("amdgpu", "gfx1100"), ("spirv", "")])
def test_every_gpu_target_keeps_elementwise_fp8_one_byte_and_records_the_gemms_fallback(target, arch):
    """Every target's generated kernels load and store fp8 one byte wide (cvt on ptx sm_90+, integer
    arithmetic elsewhere): fp8_params takes no fallback. The matmul of fp8 values (symbolic K) reads them one
    byte wide where the GEMM widens them as it loads (the SIMT GEMM of AMDGPU and SPIR-V); ptx's GEMMs read
    the f16 container (mma.sync before sm_90a; sm_90a's wgmma where K is not known to be a multiple of 16:
    tests/unit/test_fp8_one_byte_gemm.py), recorded."""
    if target == "amdgpu" and link.find() is None:
        pytest.skip("no ld.lld >= 16 to link the HSACO (pip install ziglang)")
    src = "@function" + SRC.split("@function")[2] + "@function" + SRC.split("@function")[4]  # fp8_params, fp8_matmul
    image = compiler.compile_source(src, "fp8.py", CompileOptions(target=target, arch=arch)).image
    kernels = read_image(image).kernels
    assert kernels and all(k.target == target for k in kernels)
    for k in kernels:
        if k.name.startswith("fp8_params"):
            assert "fp8" not in k.props.get("fallbacks", ""), (k.name, k.props)
            assert [a.dtype for a in k.args[:2]] == [14, 15], k.args
        elif k.name.startswith("fp8_matmul") and target == "ptx":
            assert E4M3 in k.props["fallbacks"], (k.name, k.props)
        elif k.name.startswith("fp8_matmul"):
            assert "fp8" not in k.props.get("fallbacks", ""), (k.name, k.props)
            if "gemm" in k.name:
                assert [a.dtype for a in k.args[:2]] == [14, 14], k.args


@pytest.mark.parametrize("dtype", ["bf16", "f16", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("target, arch", [("cpu", None), ("ptx", None), ("ptx", "sm_90a"), ("spirv", None)])
def test_mixed_precision_gemm_and_attention_accumulate_in_f32(dtype, target, arch):
    """Portability guide §5: fp32 accumulation by default, on every backend — the Graph IR each lowers: every
    matmul (a decomposed attention's two included: on the CPU, spirv, and for what ptx's fused kernels do not
    take, fp8 here) accumulates in f32; a flash_attention op that stays whole (the bf16/f16 kernels of sm_90a
    and, by default, of sm_80: ptx's default arch) accumulates in f32 by its definition (dialects/ttensor.py)."""
    src = f"""
@function
def f(Q: tensor[f32, "S", 64], K: tensor[f32, "S", 64], V: tensor[f32, "S", 64], W: tensor[f32, 64, 64]):
    q, k, v = op.cast(Q, {dtype}), op.cast(K, {dtype}), op.cast(V, {dtype})
    return op.cast(op.flash_attention(q, k, v), f32), op.cast(op.matmul(q, op.cast(W, {dtype})), f32)
"""
    seen = {}
    compiler.compile_source(src, "f.py", CompileOptions(target=target, **({"arch": arch} if arch else {})),
                            stop_after="quantize",
                            on_stage=lambda stage, mod: seen.setdefault(stage, str(mod)))
    lines = seen["quantize"].splitlines()
    matmuls = [line for line in lines if '"ttensor.matmul"' in line]
    whole = target == "ptx" and dtype in ("bf16", "f16")
    assert len(matmuls) == (1 if whole else 3), matmuls
    assert all("accum = f32" in line for line in matmuls), matmuls


def test_which_architectures_compute_fp8():
    assert [a for a in ("sm_80", "sm_89", "sm_90a", "gfx90a", "gfx942", "gfx950", "gfx1100", "x86_64",
                        "spirv1.3") if matrix_units.has_fp8(a)] == ["sm_89", "sm_90a", "gfx942", "gfx950"]


def test_the_spirv_fallback_runs_through_opencl(opencl):  # noqa: F811
    """The same fallback in SPIR-V, run on the OpenCL backend (Intel's CPU runtime in CI): casts and fp8
    parameters bit-exact against the interpreter."""
    image = compiler.compile_source(SRC, "fp8.py", CompileOptions(target="spirv")).image
    mod, ref = executor.load(image, opencl), tessera_frontend_compile(SRC, {"filename": "fp8.py"})
    x = edge_values()
    for name, args in (("quantize", (x,)), ("fp8_params", (x, x[::-1].copy()))):
        got, want = mod.function(name)(*args), ref.interpret(name, *args)
        got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
