"""f32 GEMMs on ptx (backends/ptx/gemm_fma.py on FMA units by default, tf32 tensor cores as the opt-in
input_precision) without a GPU: what they lower to on sm_80 and sm_90a, ptxas's view of the kernels, the
precision's option, flag and hint — and the numerics, by running the generated kernels as their plans say on
nvptx_emulator.py (float64 references; the FMA path within 1e-5 of the largest |value|, f32 with one
rounding a k; tf32 against operands cut to tf32, as the tensor cores read them). sm_90a's wgmma tf32 kernel
(static K) is checked for its plan and ptxas here, its numerics on the GPU.

Running it on a GPU: tests/gpu/test_gemm_f32_gpu.py.
"""

import numpy as np
import pytest

from test_ptx_gemm_sm80 import _Emulated, close
from tessera import compiler, image, plan
from tessera.backends.ptx import gemm_fma, gemm_sm90, ptxas
from tessera.dialects import make_context
from tessera.diagnostics import CompileError
from tessera.mlir import ir
from tessera.options import CompileOptions

RNG = np.random.default_rng(18)

SOURCE = '''
from tessera import function, op, tensor, f32, bf16


@function
def gemm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)


@function
def odd(A: tensor[f32, 130, 21], B: tensor[f32, 21, 70]) -> tensor[f32, 130, 70]:
    return op.matmul(A, B)


@function
def linear_gelu(X: tensor[f32, "T", 40], W: tensor[f32, 40, 72], b: tensor[f32, 72]) -> tensor[f32, "T", 72]:
    return op.gelu(op.bias_add(op.matmul(X, W), b))


@function
def scaled_residual(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"], R: tensor[f32, "M", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B) * 0.5 + R


@function
def to_bf16(A: tensor[f32, "M", 24], B: tensor[f32, 24, 36]) -> tensor[bf16, "M", 36]:
    return op.relu(op.matmul(A, B, out_dtype=bf16))


@function(input_precision="tf32")
def gemm_tf32(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)
'''


def _compile(source=SOURCE, arch="sm_80", on_stage=None, **kw):
    return compiler.compile_source(source, "k.py", CompileOptions(target="ptx", arch=arch, **kw), on_stage=on_stage)


def _kernels(result) -> dict:
    return {k.name: k for k in image.read_image(result.image).kernels}


@pytest.fixture(scope="module")
def sm80():
    irs = {}

    def keep(stage, text):
        if stage == "kernels":
            with make_context():
                for op in ir.Module.parse(text).body.operations:
                    if "tessera.llvm_ir" in op.attributes:
                        irs[ir.StringAttr(op.attributes["sym_name"]).value] = \
                            ir.StringAttr(op.attributes["tessera.llvm_ir"]).value

    result = _compile(on_stage=keep)
    module = _Emulated(irs)
    return result, module, lambda name, *arrays: module.run(result.metadata["plans"][name], *arrays)


def test_spec():
    s = gemm_fma.FmaGemmSpec("g")
    assert (s.bm, s.bn, s.bk, s.threads, s.min_blocks) == (128, 128, 8, 256, 2)
    assert s.stage_bytes == 8 * 132 * 4 + 8 * 128 * 4 and s.smem_bytes == 4 * s.stage_bytes
    assert s.grid(129, 128) == (2, 1, 1)
    with pytest.raises(ValueError, match="2 to 8 stages"):
        gemm_fma.FmaGemmSpec("g", stages=1)
    with pytest.raises(ValueError, match="writes bf16, f16 or f32"):
        gemm_fma.FmaGemmSpec("g", out_dtype="i8")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_f32_lowers_to_fma_by_default(arch):
    result = _compile(arch=arch)
    kernels = _kernels(result)
    k = kernels["gemm__gemm0"]
    assert k.props["input_precision"] == "ieee" and "ptx.mma" not in k.props
    assert [a.name for a in k.args] == ["A", "B", "C", "M", "K", "N"]
    # N known only at the launch: B by element, and by 16-byte chunks where N is a multiple of 4
    step = result.metadata["plans"]["gemm"]["steps"][0]
    assert step["block"] == [256, 1, 1] and "multiple_of" not in step
    assert [(a["kernel"], plan.evaluate(a["when"], {"K": 5, "N": 8}), plan.evaluate(a["when"], {"K": 5, "N": 6}))
            for a in step["prefer"]] == [("gemm__gemm0_v4", 1, -1)]
    # static N = 70: element copies only; N = 72 and 36: chunks
    assert "prefer" not in result.metadata["plans"]["odd"]["steps"][0]
    assert kernels["linear_gelu__gemm0"].props["epilogue"] == "bias,gelu"
    assert [a.name for a in kernels["scaled_residual__gemm0"].args[:5]] == ["A", "B", "C", "alpha", "residual"]
    code = image.read_image(result.image).section(".tessera.code.ptx").decode()
    for needle in ("fma.rn.f32", "ld.shared.v4.f32", "cp.async.ca.shared.global", "cp.async.cg.shared.global",
                   "bar.sync 0"):
        assert needle in code, needle


def test_tf32_option_flag_and_hint():
    # the option: every f32 GEMM on tensor cores where K and N allow (static K = 21 does not: FMA)
    kernels = _kernels(_compile(input_precision="tf32"))
    assert kernels["gemm__gemm0"].props["input_precision"] == "ieee"   # the fallback for K or N not multiples of 4
    assert kernels["gemm__gemm0_tf32"].props["ptx.mma"] == "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    assert kernels["gemm__gemm0_tf32"].props["input_precision"] == "tf32"
    assert kernels["linear_gelu__gemm0"].props["input_precision"] == "tf32"   # K = 40, N = 72 static
    assert kernels["odd__gemm0"].props["input_precision"] == "ieee"
    # the hint: only its function
    default = _compile()
    kernels = _kernels(default)
    assert "gemm_tf32__gemm0_tf32" in kernels and "gemm__gemm0_tf32" not in kernels
    alts = default.metadata["plans"]["gemm_tf32"]["steps"][0]["prefer"]
    assert [a["kernel"] for a in alts] == ["gemm_tf32__gemm0_tf32", "gemm_tf32__gemm0_v4"]
    assert [plan.evaluate(alts[0]["when"], {"K": k, "N": n}) > 0 for k, n in ((8, 12), (8, 10), (6, 12))] == \
        [True, False, False]
    assert CompileOptions(input_precision="tf32").hash() != CompileOptions().hash()   # the cache key sees it
    with pytest.raises(ValueError, match="input_precision must be one of ieee, tf32"):
        CompileOptions(input_precision="tf32x3")


def test_tf32_on_sm90a_with_static_k_is_wgmma():
    """K static and a multiple of 4: wgmma's tf32 kind on Cᵀ = Bᵀ·Aᵀ (gemm_sm90_tf32.py), A and B read as stored,
    no copy. A K known at the launch only keeps the mma.sync alternative."""
    result = _compile(arch="sm_90a", input_precision="tf32")
    kernels = _kernels(result)
    steps = result.metadata["plans"]["linear_gelu"]["steps"]
    assert [s["kernel"] for s in steps] == ["linear_gelu__gemm0"]
    assert [a["shape"] for a in steps[0]["args"][:2]] == [["M", "K"], ["K", "N"]]
    k = kernels["linear_gelu__gemm0"]
    assert k.props["ptx.mma"].startswith("wgmma m64n") and "k8 tf32 x tf32, A from registers" in k.props["ptx.mma"]
    assert k.props["input_precision"] == "tf32" and k.props["tile.K"] == "32"
    assert k.props["ptx.tensor_maps"] == f"A:0:32x{k.props['tile.M']}:128;B:1:32x32:128"
    assert kernels["odd__gemm0"].props["input_precision"] == "ieee"      # K = 21
    assert kernels["gemm__gemm0_tf32"].props["ptx.mma"].startswith("mma.sync")
    with pytest.raises(ValueError, match="8-bit and tf32 GEMMs read their operands as A \\[M,K\\] and B \\[N,K\\] only"):
        gemm_sm90.Sm90GemmSpec("g", dtype="tf32", out_dtype="f32", trans_b=True)


TF32_N = '''
from tessera import function, op, tensor, f32


@function(input_precision="tf32")
def any_n(A: tensor[f32, "M", 64], B: tensor[f32, 64, "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)


@function(input_precision="tf32")
def odd_n(A: tensor[f32, "M", 64], B: tensor[f32, 64, 70]) -> tensor[f32, "M", 70]:
    return op.matmul(A, B)
'''


def test_tf32_on_sm90a_where_n_is_not_a_multiple_of_4():
    """B's rows go through TMA: N static and not a multiple of 4 keeps B's copy to [N, K] and gemm_sm90's tf32
    kernel; N known at the launch only takes the FMA kernel there where it is not, the transposed kernel (or its
    other tile shape) where it is."""
    result = _compile(TF32_N, arch="sm_90a")
    kernels = _kernels(result)
    plans = result.metadata["plans"]
    odd = plans["odd_n"]["steps"]
    assert [s["kernel"] for s in odd] == ["odd_n__gemm0_pack_b", "odd_n__gemm0"]
    assert [a["shape"] for a in odd[1]["args"][:2]] == [["M", "K"], ["N", "K"]]
    assert kernels["odd_n__gemm0_pack_b"].props["transpose"] == "f32 [K, N] -> [N, K]"
    assert kernels["odd_n__gemm0"].props["ptx.tensor_maps"].startswith("A:0:32x128:128;B:1:32x")
    steps = plans["any_n"]["steps"]
    assert len(steps) == 1 and steps[0]["kernel"] == "any_n__gemm0"
    alts = [a["kernel"] for a in steps[0]["prefer"]]
    assert alts[0] == "any_n__gemm0_fma" and kernels["any_n__gemm0_fma"].props["input_precision"] == "ieee"
    assert set(alts[1:]) <= {"any_n__gemm0_m128", "any_n__gemm0_m256"}
    when = steps[0]["prefer"][0]["when"]
    for n, fma in ((70, True), (72, False), (4096, False), (1, True)):
        assert (plan.evaluate(when, {"N": n, "M": 64}) > 0) == fma


def _run_i32(lines: list[str], env: dict) -> dict:
    """The i32 arithmetic of Writer lines (add, shl, lshr, and, xor, mul) evaluated on `env`."""
    ops = {"add": lambda a, b: a + b, "shl": lambda a, b: a << b, "lshr": lambda a, b: a >> b,
           "and": lambda a, b: a & b, "xor": lambda a, b: a ^ b, "mul": lambda a, b: a * b}
    vals = dict(env)
    for line in lines:
        name, expr = [x.strip() for x in line.split("=", 1)]
        op, rest = expr.split(" i32 ")
        a, b = [x.strip() for x in rest.split(",")]
        vals[name] = ops[op](*(vals[x] if x.startswith("%") else int(x) for x in (a, b))) & 0xFFFFFFFF
    return vals


def test_tf32_fragments_read_b_as_wgmma_wants_without_bank_conflicts():
    """The transposed kernel's fragment loads (gemm_sm90_tf32.fragment_offsets, evaluated for every thread) read,
    from B's tile as TMA swizzles it, Bᵀ's register fragment of m64nNk8 tf32 (rows g, g+8 of the warp's 16 at
    k = t, t + 4) with rows g and g+8 being columns n and n + 1 of the consumer's 64, each column once; and each
    8-byte load of the warp touches every bank at most twice (256 bytes: two wavefronts, the minimum)."""
    from tessera.backends.ptx import gemm_sm90_tf32 as tf
    from tessera.backends.ptx.nvvm_text import Writer
    w = Writer()
    offs, n_col = tf.fragment_offsets(w, "%c", "%warp", "%lane")
    for c in range(2):
        seen = set()
        for warp in range(4):
            for q in range(2):
                banks = {}
                for lane in range(32):
                    v = _run_i32(w.lines, {"%c": c, "%warp": warp, "%lane": lane})
                    g, t, n = lane >> 2, lane & 3, v[n_col]
                    assert 64 * c <= n < 64 * (c + 1) and n % 2 == 0
                    for s in range(4):
                        at = v[offs[q]] + 1024 * s
                        for e in range(2):   # what TMA's 128-byte swizzle put at `at`: B[k][column]
                            a = at + 4 * e
                            box, r = a // tf.BOX_BYTES, a % tf.BOX_BYTES // 128
                            column = 32 * box + (((a % 128) // 16) ^ (r % 8)) * 4 + (a % 16) // 4
                            assert (r, column) == (8 * s + t + 4 * q, n + e)
                        if s == 0:
                            for word in range(2):
                                banks.setdefault((at // 4 + word) % 32, set()).add(at // 4 + word)
                    seen.add(n)
                assert max(len(x) for x in banks.values()) == 2
        assert seen == set(range(64 * c, 64 * c + 64, 2))


def test_bad_hint_is_located():
    src = "from tessera import *\n@function(input_precision='fp16')\ndef f(A: tensor[f32, 'M', 'K']):\n    return A\n"
    with pytest.raises(CompileError, match="input_precision= takes 'ieee' or 'tf32'") as e:
        compiler.compile_source(src, "user.py", CompileOptions(target="ptx"))
    assert e.value.filename == "user.py" and e.value.line == 2


def test_strict_keeps_the_simt_kernel():
    kernels = _kernels(_compile(numerics="strict", input_precision="tf32", kernels=("gemm",)))
    assert all("input_precision" not in k.props and "ptx.mma" not in k.props for k in kernels.values())


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptxas_registers(arch):
    # two 256-thread CTAs an SM: 128 registers; the 64 accumulators and a k's operands fit without spills
    for k in _kernels(_compile(arch=arch, kernels=("gemm", "odd", "linear_gelu"))).values():
        assert 0 < k.regs <= 128, (k.name, k.regs)
        if k.name.endswith("_v4") or k.name.startswith(("odd", "linear_gelu")):   # the vectorized copies
            assert "ptx.spill_bytes" not in k.props, k.name


@pytest.mark.parametrize("M, K, N", [(1, 1, 4), (130, 21, 68), (40, 33, 129)])
def test_emulated_fma(sm80, M, K, N):
    _, module, run = sm80
    A, B = RNG.standard_normal((M, K)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    close(run("gemm", A, B), A.astype(np.float64) @ B.astype(np.float64), 1e-5)
    kernel = "gemm__gemm0_v4" if N % 4 == 0 else "gemm__gemm0"
    assert module.kernels[kernel].conflicts["ld.shared"] == 0
    assert module.kernels[kernel].conflicts["cp.async"] == 0


def test_emulated_epilogues(sm80):
    _, _, run = sm80
    X, W, b = RNG.standard_normal((50, 40)), RNG.standard_normal((40, 72)) / 6, RNG.standard_normal(72)
    X, W, b = (x.astype(np.float32) for x in (X, W, b))
    h = X.astype(np.float64) @ W + b
    from math import erf, sqrt
    close(run("linear_gelu", X, W, b), 0.5 * h * (1 + np.vectorize(erf)(h / sqrt(2))), 1e-5)
    A, B, R = (RNG.standard_normal(s).astype(np.float32) for s in ((40, 48), (48, 24), (40, 24)))
    close(run("scaled_residual", A, B, R), 0.5 * (A.astype(np.float64) @ B) + R, 1e-5)
    A, B = RNG.standard_normal((17, 24)).astype(np.float32), RNG.standard_normal((24, 36)).astype(np.float32)
    close(run("to_bf16", A, B), np.maximum(A.astype(np.float64) @ B, 0), 2 ** -8)


def test_emulated_tf32_truncates(sm80):
    """The tensor cores read each f32 word's top 19 bits: operands cut (not rounded) to tf32."""
    _, _, run = sm80
    A, B = RNG.standard_normal((45, 36)).astype(np.float32), RNG.standard_normal((36, 132)).astype(np.float32)
    cut = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    close(run("gemm_tf32", A, B), cut(A) @ cut(B), 1e-6)
