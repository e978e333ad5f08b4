"""Matmul and attention where a target has no kernel of its own (issue 18 item 1): the SIMT GEMM
(backends/simt_gemm.py) on SPIR-V and AMDGPU, for integer operands on ptx before sm_90a, and for bf16/f16 rows
ptx's tensor cores cannot copy (not a multiple of 16 bytes); a batched rhs as more work-groups, a 2-D lhs
broadcast over its batch; grids within 65535 work-groups a dimension for any height; i8 x i8 -> i32 exact;
flash attention decomposed into two GEMMs and a softmax on AMDGPU, SPIR-V and ptx sm_80 .. sm_89 with their
mma.sync attention kernel switched off (TESSERA_ATTENTION_SM80=0), recorded in the plan's fallbacks, its
backward too (on ptx before sm_90a also where the forward is that kernel's).

SPIR-V runs on the OpenCL CPU runtime against numpy and the interpreter; AMDGPU and ptx images are compiled
(not run: no such GPU here) and their plans and kernels checked.
"""

import numpy as np
import pytest

from tessera import compiler, executor, image, plan, runtime, tessera_frontend_compile
from tessera.backends import simt_gemm
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions
from tessera.passes import kernelgen

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SOURCE = """
from tessera import vjp


@function
def mlp(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.relu(op.matmul(A, B) + b)


@function
def batched(A: tensor[f16, "Z", "M", "K"], B: tensor[f16, "Z", "K", "N"]):
    return op.matmul(A, B)


@function
def heads(A: tensor[f32, "B", "H", "M", "K"], B: tensor[f32, "B", "H", "K", "N"], R: tensor[f32, "B", "H", "M", "N"]):
    return op.matmul(A, B) + R


@function
def broadcast(A: tensor[f32, "M", "K"], B: tensor[f32, "Z", "K", "N"]):
    return op.matmul(A, B)


@function
def folded(A: tensor[f32, "Z", "M", "K"], B: tensor[f32, "K", "N"]):
    return op.matmul(A, B)


@function
def wide(A: tensor[f64, "M", "K"], B: tensor[f64, "K", "N"]):
    return op.matmul(A, B)


@function
def int8(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return op.matmul(A, B)


@function
def causal(Q: tensor[f32, "B", "H", "S", 64], K: tensor[f32, "B", "H", "S", 64], V: tensor[f32, "B", "H", "S", 64]):
    return op.flash_attention(Q, K, V, scale=0.125, causal=True)


@function
def cross(Q: tensor[f16, "B", "S", 32], K: tensor[f16, "B", "T", 32], V: tensor[f16, "B", "T", 32]):
    return op.flash_attention(Q, K, V, scale=0.17677669529663687)


vjp_causal = vjp(causal)
"""

RNG = np.random.default_rng(18)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.fixture(scope="module")
def spirv(opencl):  # noqa: F811
    result = compiler.compile_source(SOURCE, "fallbacks.py", CompileOptions(target="spirv"))
    return result, executor.load(result.image, opencl)


@pytest.fixture(scope="module")
def reference():
    return tessera_frontend_compile(SOURCE, {"filename": "fallbacks.py"})


def test_gemm_with_epilogue(spirv):
    A, B, b = randn(37, 70), randn(70, 45), randn(45)
    np.testing.assert_allclose(spirv[1].mlp(A, B, b), np.maximum(A @ B + b, 0), rtol=1e-5, atol=1e-5)


def test_batched_rhs_runs_the_batch_as_more_work_groups(spirv):
    A, B = randn(3, 37, 50, dtype=np.float16), randn(3, 50, 45, dtype=np.float16)
    want = (A.astype(np.float32) @ B.astype(np.float32)).astype(np.float16)   # f32 accumulation, one rounding
    np.testing.assert_array_equal(spirv[1].batched(A, B), want)
    (step,) = spirv[0].metadata["plans"]["batched"]["steps"]
    assert step["env"]["Z"] == step["env"]["ZA"] == "Z" and "Z" in step["grid"][0]


def _grid(result, fn: str, env: dict) -> list[int]:
    (step,) = [s for s in result.metadata["plans"][fn]["steps"] if s.get("kernel", "").endswith("gemm0")]
    ext = {k: plan.evaluate(v, env) for k, v in step["env"].items()}
    return [plan.evaluate(g, ext) for g in step["grid"]]


@pytest.mark.parametrize("fn, env", [("mlp", {"M": 2 ** 35, "K": 2, "N": 3}),
                                     ("mlp", {"M": 5, "K": 2, "N": 2 ** 35}),
                                     ("batched", {"Z": 2 ** 20, "M": 2 ** 15, "K": 2, "N": 40})])
def test_no_grid_dimension_passes_the_limit(spirv, fn, env):
    """Work-groups are numbered across grid x, y and z (kernelgen.split_grid): 2^35 rows (2^33 blocks of 4,
    before: ceil(M/4) along y, refused past 262140 rows), 2^35 columns or 2^20 batch entries (before: along z)
    stay within 65535 a dimension, the least limit of any target, and the grid covers every work-group."""
    grid = _grid(spirv[0], fn, env)
    assert all(1 <= g <= kernelgen.GRID_LIMIT for g in grid), grid
    blocks = -(-env["N"] // 32) * -(-env["M"] // 4) * env.get("Z", 1)
    assert grid[0] * grid[1] * grid[2] >= blocks


def test_a_tall_gemm_past_65535_row_blocks(spirv):
    """300000 rows: 75000 blocks of 4, past 65535, so grid y holds the rest (on the OpenCL CPU runtime)."""
    assert _grid(spirv[0], "mlp", {"M": 300000, "K": 2, "N": 3})[:2] == [kernelgen.GRID_LIMIT, 2]
    A, B, b = randn(300000, 2), randn(2, 3), randn(3)
    want = np.maximum(A.astype(np.float64) @ B + b, 0)
    np.testing.assert_allclose(spirv[1].mlp(A, B, b), want, rtol=1e-5, atol=1e-5)


def test_batch_axes_with_a_residual(spirv):
    A, B, R = randn(2, 3, 17, 33), randn(2, 3, 33, 40), randn(2, 3, 17, 40)
    np.testing.assert_allclose(spirv[1].heads(A, B, R), A @ B + R, rtol=1e-5, atol=1e-5)


def test_a_2d_lhs_is_broadcast_and_a_2d_rhs_folds_the_lhs_batch(spirv):
    A, B = randn(20, 30), randn(4, 30, 25)
    np.testing.assert_allclose(spirv[1].broadcast(A, B), A @ B, rtol=1e-5, atol=1e-5)
    (step,) = spirv[0].metadata["plans"]["broadcast"]["steps"]
    assert step["env"]["ZA"] == "1" and step["env"]["Z"] == "Z"
    A3, B2 = randn(4, 20, 30), randn(30, 25)
    np.testing.assert_allclose(spirv[1].folded(A3, B2), A3 @ B2, rtol=1e-5, atol=1e-5)
    (step,) = spirv[0].metadata["plans"]["folded"]["steps"]
    assert step["env"]["Z"] == "1" and step["env"]["M"] == "Z*M"


def test_f64_accumulates_in_f64(spirv):
    A, B = randn(30, 200, dtype=np.float64), randn(200, 20, dtype=np.float64)
    np.testing.assert_allclose(spirv[1].wide(A, B), A @ B, rtol=1e-13, atol=1e-12)


def test_int8_is_exact_in_i32(spirv):
    A, B = (RNG.integers(-128, 128, s).astype(np.int8) for s in ((33, 1000), (1000, 40)))
    A[0], B[:, 0] = -128, -128   # the largest products: 1000 * 2^14
    out = spirv[1].int8(A, B)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, A.astype(np.int32) @ B.astype(np.int32))


def attention(q, k, v, scale, causal):
    s = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


def test_attention_is_decomposed_and_recorded(spirv):
    q, k, v = (randn(2, 3, 40, 64) for _ in range(3))
    np.testing.assert_allclose(spirv[1].causal(q, k, v), attention(q, k, v, 0.125, True), rtol=2e-4, atol=2e-5)
    q, k, v = randn(2, 24, 32, dtype=np.float16), randn(2, 50, 32, dtype=np.float16), randn(2, 50, 32, dtype=np.float16)
    np.testing.assert_allclose(spirv[1].cross(q, k, v).astype(np.float64), attention(q, k, v, 32 ** -0.5, False),
                               rtol=4e-3, atol=4e-3)
    plans = spirv[0].metadata["plans"]
    assert "flash_attention (f32) as two GEMMs and a softmax (the probabilities materialised)" in \
        plans["causal"]["fallbacks"]
    assert "flash_attention (f16) as two GEMMs and a softmax (the probabilities materialised)" in \
        plans["cross"]["fallbacks"]


def test_attention_backward_matches_the_interpreter(spirv, reference):
    q, k, v, do = (randn(1, 2, 24, 64) for _ in range(4))
    got = spirv[1].vjp_causal(q, k, v, do)
    want = reference.interpret("vjp_causal", q, k, v, do)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))
    assert "attention's backward (f32) as GEMMs (P and dS materialised)" in \
        spirv[0].metadata["plans"]["vjp_causal"]["fallbacks"]


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100", "gfx90a"])
def test_amdgpu_compiles_every_gemm_and_attention(arch):
    result = compiler.compile_source(SOURCE, "fallbacks.py", CompileOptions(target="amdgpu", arch=arch))
    kernels = {k.name for k in image.read_image(result.image).kernels}
    assert {"mlp__gemm0", "batched__gemm0", "heads__gemm0", "broadcast__gemm0", "int8__gemm0"} <= kernels
    plans = result.metadata["plans"]
    assert [s["kernel"] for s in plans["int8"]["steps"]] == ["int8__gemm0"]
    assert any("as two GEMMs and a softmax" in f for f in plans["causal"]["fallbacks"])
    assert any(k.startswith("vjp_causal__gemm") for k in kernels)


INT8 = '@function\ndef f(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):\n    return A @ B\n'


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_ptx_before_sm90a_runs_int8_on_the_simt_gemm(arch):
    result = compiler.compile_source(INT8, "user.py", CompileOptions(target="ptx", arch=arch))
    (step,) = result.metadata["plans"]["f"]["steps"]
    assert step["kernel"] == "f__gemm0" and step["block"] == [32, 4, 1]
    ptx = image.read_image(result.image).section(".tessera.code.ptx").decode()
    assert "ld.global.s8" in ptx and "st.global.b32" in ptx and "wgmma" not in ptx


BF16_ATTENTION = """
from tessera import vjp


@function
def att(Q: tensor[bf16, "B", "H", "S", 64], K: tensor[bf16, "B", "H", "T", 64], V: tensor[bf16, "B", "H", "T", 64]):
    return op.flash_attention(Q, K, V, scale=0.125, causal=True)


vjp_att = vjp(att)
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89"])
def test_ptx_before_sm90a_decomposes_attention_switched_off(arch, monkeypatch):
    monkeypatch.setenv("TESSERA_ATTENTION_SM80", "0")
    result = compiler.compile_source(BF16_ATTENTION, "user.py", CompileOptions(target="ptx", arch=arch))
    plans = result.metadata["plans"]
    assert "flash_attention (bf16) as two GEMMs and a softmax (the probabilities materialised)" in \
        plans["att"]["fallbacks"]
    assert "attention's backward (bf16) as GEMMs (P and dS materialised)" in plans["vjp_att"]["fallbacks"]
    gemms = [s["kernel"] for s in plans["att"]["steps"] if "gemm" in s.get("kernel", "")]
    assert len(gemms) == 2
    ptx = image.read_image(result.image).section(".tessera.code.ptx").decode()
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx


def test_batches_of_other_ranks_are_refused_at_the_users_line():
    src = '@function\ndef f(A: tensor[f32, 2, 3, "M", "K"], B: tensor[f32, 3, "K", "N"]):\n    return A @ B\n'
    with pytest.raises(CompileError, match="the spirv GEMM multiplies batches of equal rank or a 2-D lhs") as e:
        compiler.compile_source(src, "user.py", CompileOptions(target="spirv"))
    assert e.value.filename == "user.py" and e.value.line == 3


TF32 = ('@function\ndef f(A: tensor[tf32, "M", "K"], B: tensor[tf32, "K", "N"]) -> tensor[f32, "M", "N"]:\n'
        '    return op.matmul(A, B, out_dtype=f32)\n')


def tf32(x):
    """f32 values rounded to tf32's 10-bit fraction (to nearest even), as tf32 operands hold them."""
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return bits.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_tf32_operands_are_multiplied_in_f32(request, target):
    """The CPU's packed GEMMs and SPIR-V have no tf32 unit: the SIMT GEMM multiplies the f32 words (a recorded
    fallback, "tf32 computed in f32")."""
    context = request.getfixturevalue("opencl") if target == "spirv" else None
    result = compiler.compile_source(TF32, "user.py", CompileOptions(target=target))
    assert "tf32 computed in f32" in result.metadata["plans"]["f"]["fallbacks"]
    A, B = tf32(randn(20, 300)), tf32(randn(300, 30))
    got = executor.load(result.image, context).f(A, B)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-4)


# -- the fallback of ptx's tensor-core GEMMs for rows not a multiple of 16 bytes ---------------------------------

ROWS_SOURCE = """
@function
def static9(A: tensor[bf16, "M", 64], B: tensor[bf16, 64, 9], b: tensor[bf16, 9]):
    return op.relu(A @ B + b)

@function
def symbolic(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"]):
    return A @ B

@function
def keys(Q: tensor[bf16, 9, 64], K: tensor[bf16, 9, 64]):
    return Q @ op.transpose(K, (1, 0))

@function
def aligned(A: tensor[bf16, "M", 64], B: tensor[bf16, 64, 72]):
    return A @ B
"""


@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
def test_the_planar_kernel_on_the_cpu(trans):
    """The non-batched form ptx's steps launch (simt_gemm.planar: A [M, K] or stored [K, M], B [K, N] or [N, K],
    C [M, N]), compiled for the CPU from the same source and launched on the grid the plan gives it."""
    text = simt_gemm.source("g", "f32", "f32", [("relu",)], [], batched=False, trans=trans)
    mod = runtime.load(compiler.compile_source(text, "planar.py", CompileOptions(target="cpu")).image)
    M, K, N = 37, 5, 45
    A, B = randn(M, K), randn(K, N)
    C = np.full((M, N), np.nan, np.float32)
    grid = [plan.evaluate(g, {"M": M, "N": N})
            for g in kernelgen.split_grid(f"ceil(N/{simt_gemm.BLOCK[0]})*ceil(M/{simt_gemm.BLOCK[1]})", 3)]
    mod.g(np.ascontiguousarray(A.T) if trans[0] else A, np.ascontiguousarray(B.T) if trans[1] else B, C,
          grid=tuple(grid), block=simt_gemm.BLOCK)
    np.testing.assert_allclose(C, np.maximum(A.astype(np.float64) @ B, 0), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module", params=["sm_80", "sm_90a"])
def ptx_rows(request):
    return request.param, compiler.compile_source(ROWS_SOURCE, "rows.py",
                                                  CompileOptions(target="ptx", arch=request.param)).metadata["plans"]


def _gemm_step(plans, fn):
    (step,) = [s for s in plans[fn]["steps"] if "gemm" in s.get("kernel", "")]
    return step


def test_static_rows_not_16_bytes_take_the_simt_gemm(ptx_rows):
    """N = 9 bf16 (18-byte rows of B and C): the sm_80 mma.sync kernel refused it at compile time ('N = 9 is not a
    multiple of 8') and sm_90a's TMA kernel at the call (ArgumentError); now the SIMT GEMM, recorded. Kᵀ read
    in place on sm_90a (tessera.transpose_b): the SIMT kernel reads B as [N, K] there."""
    arch, plans = ptx_rows
    for fn in ("static9", "keys"):
        step = _gemm_step(plans, fn)
        assert tuple(step["block"]) == (32, 4, 1) and "prefer" not in step and "multiple_of" not in step, step
        assert "bf16 GEMM rows of N = 9 (not a multiple of 16 bytes): the SIMT GEMM" in plans[fn]["fallbacks"]
    assert "fallbacks" not in plans["aligned"] or not plans["aligned"]["fallbacks"]
    assert tuple(_gemm_step(plans, "aligned")["block"]) != (32, 4, 1)


@pytest.mark.parametrize("M, K, N, simt", [(64, 100, 64, True), (64, 64, 9, True), (3, 64, 64, False)])
def test_symbolic_rows_choose_at_the_launch(ptx_rows, M, K, N, simt):
    """Extents known at the launch: the SIMT GEMM is the step's first alternative, taken where K or N is not
    a multiple of 8 (no multiple_of refusal left on the step); the tensor-core kernel otherwise."""
    arch, plans = ptx_rows
    step = plan.Plan.from_json(plans["symbolic"]).steps[-1]
    assert not step.multiple_of and step.prefer[0].kernel == "symbolic__gemm0_simt"
    env = {"M": M, "K": K, "N": N, "DEVICE_UNITS": 132}
    chosen = plan.chosen(step, {**env, **{k: plan.evaluate(e, env) for k, e in step.env.items()}})
    assert (chosen.kernel == "symbolic__gemm0_simt") == simt, chosen.kernel
    assert any("SIMT GEMM there" in f for f in plans["symbolic"]["fallbacks"])


def test_decomposed_attention_with_nine_keys_compiles_on_sm80(monkeypatch):
    """Decomposed attention's Q·Kᵀ has N = S = 9 keys (bf16, 18-byte rows): refused before, the SIMT GEMM now."""
    monkeypatch.setenv("TESSERA_ATTENTION_SM80", "0")   # by default the mma.sync attention kernel takes any length
    src = ("@function\ndef att(Q: tensor[bf16, 1, 9, 64], K: tensor[bf16, 1, 9, 64], V: tensor[bf16, 1, 9, 64]):\n"
           "    return op.flash_attention(Q, K, V, scale=0.125)\n")
    plans = compiler.compile_source(src, "att.py", CompileOptions(target="ptx", arch="sm_80")).metadata["plans"]
    assert any("the SIMT GEMM" in f and "not a multiple of 16 bytes" in f for f in plans["att"]["fallbacks"])
