"""The sm_80 … sm_90 tensor-core GEMM (backends/ptx/gemm_sm80.py: mma.sync, cp.async stages, ldmatrix) without
a GPU: what the generator accepts, what Graph IR matmuls lower to on each architecture, ptxas's view of the
kernels, located refusals — and its numerics, by running the generated kernels as their launch plans say on
nvptx_emulator.py (a model of the PTX it uses; float64 references, tolerances as the GPU tests'); the plans'
multiple_of checks by libtessera's executor on the fake CUDA driver.

Running it on a GPU: tests/gpu/test_ampere.py.
"""

import json
import math
import pathlib
import re

import numpy as np
import pytest

from nvptx_emulator import Kernel
from tessera import compiler, executor, image, plan
from tessera.backends.ptx import gemm_sm80, ptxas
from tessera.dialects import make_context
from tessera.diagnostics import CompileError
from tessera.mlir import ir
from tessera.numerics.rounding import round_to
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "gpu" / "gemm_ampere.py"
RNG = np.random.default_rng(11)

# the example's GEMMs, and one with 128x64 tiles of 4 warps and a 2-stage pipeline
SOURCE = EXAMPLE.read_text() + '''

@function(tile=(128, 64, 32), stages=2)
def small_tiles(A: tensor[f16, "M", "K"], B: tensor[f16, "K", "N"]) -> tensor[f16, "M", "N"]:
    return op.relu(op.matmul(A, B))
'''


def _compile(source: str, arch: str = "sm_80", filename: str = "k.py", on_stage=None):
    return compiler.compile_source(source, filename, CompileOptions(target="ptx", arch=arch), on_stage=on_stage)


@pytest.mark.parametrize("kw, message", [
    ({"dtype": "f32"}, "bf16, f16 or tf32 operands"),
    ({"out_dtype": "i8"}, "writes bf16, f16 or f32"),
    ({"bias_dtype": "f64"}, "epilogue reads bf16, f16 or f32"),
    ({"bm": 96}, "unsupported sm_80 GEMM tile"),
    ({"bn": 256}, "unsupported sm_80 GEMM tile"),
    ({"bm": 64, "bn": 64}, "unsupported sm_80 GEMM tile"),
    ({"stages": 1}, "unsupported sm_80 GEMM tile"),
    ({"stages": 7, "arch": "sm_86"}, "sm_86 has 99 KiB"),   # 7 stages of 16 KiB
    ({"arch": "sm_75"}, "targets sm_80"),
    ({"epilogue": ("softmax",)}, "unknown epilogue step"),
    ({"epilogue": ("add", "add")}, "once each"),
])
def test_spec_refuses(kw, message):
    with pytest.raises(ValueError, match=message):
        gemm_sm80.Sm80GemmSpec("g", **kw)


def test_spec_geometry():
    s = gemm_sm80.Sm80GemmSpec("g")
    # 8 warps of 32x64; a stage is A's 128 rows of 64 bytes (32 bf16) and B's 32 rows of 128 bf16
    assert (s.bm, s.bn, s.bk, s.warps, s.threads, s.chunk) == (128, 128, 32, 8, 256, 8)
    assert s.stage_bytes == 128 * 64 + 32 * 256 and s.smem_bytes == 4 * 16384
    assert s.min_blocks == 2 and s.grid(1000, 129) == (8 * 2, 1, 1)
    t = gemm_sm80.Sm80GemmSpec("g", dtype="tf32", bm=64)   # K steps of 8 f32; 16-byte chunks of 4
    assert (t.bk, t.chunk, t.threads, t.stage_bytes, t.min_blocks) == (16, 4, 128, 64 * 64 + 16 * 512, 4)


def _kernels(result) -> dict:
    return {k.name: k for k in image.read_image(result.image).kernels}


@pytest.fixture(scope="module")
def sm80():
    """The example (and a small-tile GEMM) for sm_80, with each generated kernel's LLVM IR."""
    irs = {}

    def keep(stage, text):
        if stage == "kernels":
            with make_context():
                for op in ir.Module.parse(text).body.operations:
                    if "tessera.llvm_ir" in op.attributes:
                        name = ir.StringAttr(op.attributes["sym_name"]).value
                        irs[name] = ir.StringAttr(op.attributes["tessera.llvm_ir"]).value

    result = _compile(SOURCE, on_stage=keep)
    return result, irs


@pytest.mark.parametrize("arch, stages", [("sm_80", "4"), ("sm_86", "3"), ("sm_90", "4")])
def test_lowering_per_arch(arch, stages):
    result = _compile(EXAMPLE.read_text(), arch)
    kernels = _kernels(result)
    k = kernels["linear_gelu__gemm0"]
    assert [a.name for a in k.args] == ["A", "B", "C", "bias", "M", "K", "N"]
    assert [a.flags & 1 for a in k.args[:4]] == [1, 1, 0, 1]   # bit 0: never written
    assert k.props["epilogue"] == "bias,gelu" and "ptx.tensor_maps" not in k.props
    assert (k.props["tile.M"], k.props["tile.N"], k.props["tile.K"]) == ("128", "128", "32")
    assert k.props["pipeline.stages"] == stages   # sm_86 has 100 KiB an SM: 3 stages let two CTAs share it
    assert k.props["ptx.mma"] == "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    assert kernels["gemm_tf32__gemm0"].props["ptx.mma"] == "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    assert kernels["gemm_tf32__gemm0"].props["tile.K"] == "16"
    assert [a.name for a in kernels["scaled_residual__gemm0"].args[:5]] == ["A", "B", "C", "alpha", "residual"]
    step = result.metadata["plans"]["linear_gelu"]["steps"][0]
    assert step["block"] == [256, 1, 1] and step["smem"] == int(stages) * 16384
    assert plan.evaluate(step["grid"][0], {"M": 300, "N": 264}) == 3 * 3   # one CTA per 128x128 tile
    # K and N known at the launch: the SIMT GEMM where either is not a multiple of a 16-byte chunk's elements
    # (no multiple_of refusal: test_unaligned_extents_take_the_simt_gemm_at_the_launch)
    (simt,) = step["prefer"]
    assert "multiple_of" not in step and simt["kernel"] == "linear_gelu__gemm0_simt"
    assert [plan.evaluate(simt["when"], {"K": k, "N": n}) > 0 for k, n in ((64, 72), (60, 72), (64, 9))] == \
        [False, True, True]
    tf32 = result.metadata["plans"]["gemm_tf32"]["steps"][0]
    assert plan.evaluate(tf32["prefer"][0]["when"], {"K": 8, "N": 12}) == 0 < \
        plan.evaluate(tf32["prefer"][0]["when"], {"K": 8, "N": 6})


def test_ptx_instructions():
    code = image.read_image(_compile(EXAMPLE.read_text(), "sm_86").image).section(".tessera.code.ptx").decode()
    assert ".target sm_86" in code
    for needle in ("cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group 1", "bar.sync 0",
                   "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                   "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32"):
        assert needle in code, needle
    assert "wgmma" not in code and "cp.async.bulk" not in code


def test_sm90a_keeps_wgmma_and_runs_tf32_on_mma_sync():
    kernels = _kernels(_compile(EXAMPLE.read_text(), "sm_90a"))
    assert "ptx.tensor_maps" in kernels["gemm_bf16__gemm0"].props            # the wgmma/TMA kernel
    assert kernels["gemm_tf32__gemm0"].props["ptx.mma"].startswith("mma.sync.aligned.m16n8k8")


def test_small_problems_take_64_row_tiles():
    src = "@function\ndef f(A: tensor[bf16, 256, 512], B: tensor[bf16, 512, 512]) -> tensor[bf16, 256, 512]:\n" \
          "    return A @ B\n"
    k = _kernels(_compile(src))["f__gemm0"]
    assert (k.props["tile.M"], k.props["tile.N"]) == ("64", "128")   # 8 tiles of 128x128 would leave SMs idle
    if ptxas.find():
        assert 0 < k.regs <= 128 and "ptx.spill_bytes" not in k.props


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90"])
def test_ptxas_no_spills(arch):
    # ptxas assembled every kernel while compiling: within the 128 registers that let two 256-thread CTAs
    # (or four of 128 threads) share an SM, and nothing spilled (the small-problem 64x128 tile: test below)
    for k in _kernels(_compile(SOURCE, arch)).values():
        assert 0 < k.regs <= 128, (k.name, k.regs)
        assert "ptx.spill_bytes" not in k.props and "ptx.stack_bytes" not in k.props, k.name


@pytest.mark.parametrize("source, arch, message", [
    ("def f(A: tensor[f64, 'M', 'K'], B: tensor[f64, 'K', 'N']):\n    return A @ B", "sm_90",
     "bf16, f16 or tf32 operands of one dtype, not f64 @ f64$"),
    ("def f(A: tensor[bf16, 'M', 'K'], B: tensor[bf16, 'K', 'N']):\n    return A @ B", "sm_75",
     "needs a tensor-core architecture"),
])
def test_refusals_are_located(source, arch, message):
    with pytest.raises(CompileError, match=message) as e:
        _compile("@function\n" + source, arch, "user.py")
    assert e.value.filename == "user.py" and e.value.line == 3


def test_bad_tile_hints_are_located():
    src = "@function(tile=(256, 128, 32))\ndef f(A: tensor[bf16, 'M', 'K'], B: tensor[bf16, 'K', 'N']):\n" \
          "    return A @ B\n"
    with pytest.raises(CompileError, match="unsupported sm_80 GEMM tile: 256x128") as e:
        _compile(src, "sm_80", "user.py")
    assert e.value.line == 3


# -- numerics on the emulator -----------------------------------------------------------------------------

class _Emulated:
    """The GEMM kernels' LLVM IR on the emulator. libtessera's executor cannot launch them (they are no code of
    any backend), so `run` launches a one-step GEMM plan here: the arguments in the plan's storage (the executor's
    own conversion, executor._to_storage), the step's extents, kernel, grid and arguments from the plan (C,
    argument 2, is first filled with NaN bytes, so an element the kernel misses shows)."""

    def __init__(self, irs: dict):
        self.kernels = {name: Kernel(text) for name, text in irs.items()}

    def run(self, doc: dict, *arrays):
        p = plan.Plan.from_json(doc)
        (step,) = p.steps
        env, store = {}, {}
        for vid, a in zip(p.args, arrays):
            env.update({d: n for d, n in zip(p.values[vid].dims, a.shape) if not d.isdigit()})
            store[vid] = executor._to_storage(a, p.values[vid].dtype)
        scope = dict(env, DEVICE_UNITS=4)
        local = dict(scope, **{k: plan.evaluate(e, scope) for k, e in step.env.items()})
        step = plan.chosen(step, local)
        args = []
        for a in step.args:
            if not isinstance(a, plan.TensorArg):
                args.append(np.float32(a.f32) if isinstance(a, plan.F32Arg) else np.int64(plan.evaluate(a.i64, local)))
                continue
            v = p.values[a.value]
            if a.value not in store:
                store[a.value] = np.empty([plan.evaluate(d, env) for d in v.dims], executor._NUMPY[v.dtype])
            args.append(store[a.value].reshape([plan.evaluate(d, local) for d in a.shape]))
        args[2].view(np.uint8)[...] = 0xFF
        (M, K), N = args[0].shape, args[1].shape[1]   # the extents after the arguments, as the runtime adds them
        grid = [plan.evaluate(g, local) for g in step.grid]
        self.kernels[step.kernel].launch([*args, np.int64(M), np.int64(K), np.int64(N)], grid, step.block,
                                         step.smem)
        (result,) = p.results
        return executor._from_storage(store[result], p.values[result].dtype)


@pytest.fixture(scope="module")
def emulated(sm80):
    result, irs = sm80
    module = _Emulated(irs)
    return lambda name: lambda *arrays: module.run(result.metadata["plans"][name], *arrays), module


def rounded(x, dt):
    return round_to(np.asarray(x, np.float64), dt)


def close(got, want, rel):
    scale = np.abs(want).max() + 1e-30
    err = np.abs(np.asarray(got, np.float64) - want).max() / scale
    assert err <= rel, f"max error {err:.3g} of the largest |value| {scale:.3g} exceeds {rel:.3g}"


@pytest.mark.parametrize("M, K, N", [(70, 40, 72), (129, 72, 136)])
def test_emulated_bf16(emulated, M, K, N):
    fn, module = emulated
    A, B = RNG.standard_normal((M, K)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    close(fn("gemm_bf16")(A, B), rounded(A, "bf16") @ rounded(B, "bf16"), 2 ** -8)
    assert module.kernels["gemm_bf16__gemm0"].conflicts == {"ldmatrix": 0, "ld.shared": 0, "cp.async": 0}


def test_emulated_f16_to_f32(emulated):
    fn, _ = emulated
    A, B = (RNG.standard_normal(s).astype(np.float16) for s in ((33, 96), (96, 40)))
    close(fn("gemm_f16_f32")(A, B), A.astype(np.float64) @ B.astype(np.float64), 1e-6)


def test_emulated_tf32(emulated):
    """f32 inputs are rounded to tf32 by the executor; products of tf32 values are exact, sums in fp32."""
    fn, module = emulated
    A, B = RNG.standard_normal((45, 36)).astype(np.float32), RNG.standard_normal((36, 132)).astype(np.float32)
    close(fn("gemm_tf32")(A, B), rounded(A, "tf32") @ rounded(B, "tf32"), 1e-6)
    assert module.kernels["gemm_tf32__gemm0"].conflicts == {"ldmatrix": 0, "ld.shared": 0, "cp.async": 0}


def test_emulated_fused_epilogues(emulated):
    fn, _ = emulated
    X, W, b = (x.astype(np.float32) for x in (RNG.standard_normal((50, 64)), RNG.standard_normal((64, 136)) / 8,
                                             RNG.standard_normal(136)))
    h = rounded(X, "bf16") @ rounded(W, "bf16") + rounded(b, "bf16")
    close(fn("linear_gelu")(X, W, b), 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))), 2 ** -8)
    A, B, R = (RNG.standard_normal(s).astype(np.float32) for s in ((40, 48), (48, 24), (40, 24)))
    close(fn("scaled_residual")(A, B, R), 0.5 * (rounded(A, "bf16") @ rounded(B, "bf16")) + rounded(R, "bf16"),
          2 ** -8)


def test_emulated_small_tiles(emulated):
    """128x64 tiles, 4 warps, two stages: every K tile waits for the copy issued one tile earlier."""
    fn, module = emulated
    A, B = (RNG.standard_normal(s).astype(np.float16) for s in ((100, 104), (104, 72)))
    want = np.maximum(A.astype(np.float64) @ B.astype(np.float64), 0)
    close(fn("small_tiles")(A, B).astype(np.float64), want, 2 ** -10)
    assert module.kernels["small_tiles__gemm0"].conflicts == {"ldmatrix": 0, "ld.shared": 0, "cp.async": 0}


UNALIGNED_HOST = """
import json, sys
import numpy as np
from tessera import _runtime, executor, telemetry
prog = executor.load(open(sys.argv[1], "rb").read(), _runtime.Context("cuda"))
telemetry.enable(sys.argv[2])
for name, shapes in (("gemm_bf16", ((16, 100), (100, 16))), ("gemm_tf32", ((16, 8), (8, 6))),
                     ("gemm_bf16", ((16, 64), (64, 16)))):
    getattr(prog, name)(*(np.ones(s, np.float32) for s in shapes))
telemetry.disable()
print(json.dumps([r["name"] for r in telemetry.load(sys.argv[2]) if r["kind"] == "kernel"]))
"""


def test_unaligned_extents_take_the_simt_gemm_at_the_launch(sm80, fake_cuda, tmp_path):
    """Extents known at the launch: where K or N is not a multiple of a 16-byte chunk's elements, libtessera's
    executor launches the plan's SIMT GEMM alternative (on the fake CUDA driver); the mma.sync kernel where
    they are. Before: the step's multiple_of refused the call (ArgumentError)."""
    result, _ = sm80
    (tmp_path / "sm80.tessera").write_bytes(result.image)
    p = fake_cuda(UNALIGNED_HOST, tmp_path / "sm80.tessera", tmp_path / "metrics.jsonl")
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout.splitlines()[-1]) == ["gemm_bf16__gemm0_simt", "gemm_tf32__gemm0_simt",
                                                     "gemm_bf16__gemm0"]
    assert "SIMT GEMM there" in " ".join(result.metadata["plans"]["gemm_bf16"]["fallbacks"])
