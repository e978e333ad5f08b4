"""The sm_90a tensor-core GEMM without a GPU: what the generator accepts, what a Graph IR matmul lowers to,
the metadata the runtime needs (tensor maps, tile, epilogue), ptxas's view of the kernel, located refusals.

Running it needs an H100/H200: tests/gpu/test_hopper.py. The sm_80 … sm_90 kernel: test_ptx_gemm_sm80.py.
"""

import pathlib

import pytest

from tessera import compiler, dtypes, image, plan
from tessera.backends.ptx import gemm_sm90, ptxas
from tessera.diagnostics import CompileError
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "gpu" / "gemm.py"


def _compile(source: str, arch: str = "sm_90a", filename: str = "k.py"):
    return compiler.compile_source(source, filename, CompileOptions(target="ptx", arch=arch))


@pytest.fixture(scope="module")
def example():
    return compiler.compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target="ptx", arch="sm_90a"))


@pytest.mark.parametrize("kw, message", [
    ({"dtype": "f32"}, "bf16, f16 or fp8 operands"),
    ({"dtype": "bf16", "b_dtype": "fp8_e4m3"}, "fp8 kinds may mix"),
    ({"dtype": "fp8_e4m3", "bn": 256, "stages": 5}, "227 KiB"),   # 5 stages of 128x256 bytes and the staging
    ({"out_dtype": "i8"}, "writes bf16, f16 or f32"),
    ({"bn": 96}, "unsupported sm_90a GEMM tile"),
    ({"consumers": 3}, "unsupported sm_90a GEMM tile"),
    ({"stages": 5}, "227 KiB"),  # 5 stages of 128x256 need 241 KiB
    ({"epilogue": ("softmax",)}, "unknown epilogue step"),
    ({"epilogue": ("bias", "bias")}, "once each"),
])
def test_spec_refuses(kw, message):
    with pytest.raises(ValueError, match=message):
        gemm_sm90.Sm90GemmSpec("g", **kw)


def test_spec_geometry():
    s = gemm_sm90.Sm90GemmSpec("g", bn=256, consumers=2, stages=4)
    assert (s.bm, s.threads, s.stage_bytes) == (128, 384, 48 * 1024)
    # the stage ring, two 64x64 staging boxes per consumer for the bulk stores of C, mbarriers, alignment
    assert s.smem_bytes == 4 * (48 * 1024 + 16) + 2 * 2 * 8192 + 1024
    assert s.tensor_maps == "A:0:64x128:128;B:1:64x64:128;C:2:64x64:128"
    f32 = gemm_sm90.Sm90GemmSpec("g", out_dtype="f32")  # f32 results are stored directly
    assert f32.tensor_maps == "A:0:64x128:128;B:1:64x64:128" and f32.smem_bytes == 4 * (48 * 1024 + 16) + 1024
    # one CTA per tile when launched so; the kernel strides over tiles when the grid is smaller
    assert s.grid(1000, 1000) == (8 * 4, 1, 1)


def test_spec_geometry_of_192_wide_tiles():
    """BN = 192: B's shared-memory tile is three swizzled 64-column boxes, 96 fp32 accumulators a thread; four
    stages fit in 227 KiB. 16-bit operands only (the tf32 and 8-bit kernels keep 64, 128 and 256)."""
    s = gemm_sm90.Sm90GemmSpec("g", bn=192, stages=4)
    assert (s.stage_bytes, s.tensor_maps) == ((128 + 192) * 128, "A:0:64x128:128;B:1:64x64:128;C:2:64x64:128")
    assert s.smem_bytes == 4 * (40 * 1024 + 16) + 2 * 2 * 8192 + 1024
    assert s.grid(3072, 3072) == (24 * 16, 1, 1)
    gemm_sm90.Sm90GemmSpec("g", dtype="f16", bn=192, trans_a=True, trans_b=True)
    for kw in ({"dtype": "i8", "out_dtype": "i32"}, {"dtype": "tf32", "out_dtype": "f32"}):
        with pytest.raises(ValueError, match="192-wide tiles take bf16 or f16"):
            gemm_sm90.Sm90GemmSpec("g", bn=192, **kw)
    with pytest.raises(ValueError, match="227 KiB"):
        gemm_sm90.Sm90GemmSpec("g", bn=192, stages=5)


def test_fp8_spec_geometry():
    """fp8 K steps are 128 elements (one 128-byte row); B is [N, K] and read in one box a stage."""
    s = gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", b_dtype="fp8_e5m2", bn=128, stages=6)
    assert (s.bk, s.stage_bytes) == (128, 32 * 1024)
    assert s.tensor_maps == "A:0:128x128:128;B:1:128x128:128;C:2:64x64:128"


def test_fp8_wide_tile_promotes_each_k_step_by_halves_of_n():
    """fp8 tiles 256 wide (gemm_sm90.FP8_WIDE_BN): 128 fp32 sums a thread and one 64-register product, which each
    K step fills twice with m64n128k32 wgmmas (B's columns 0-127, then 128-255), each group waited for and added
    to its half of the sums; the 128-wide kernel one group of 64 a step. 4 stages fit beside the staging."""
    wide = gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=256, stages=4)
    narrow = gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=128, stages=6)
    assert (wide.fp8_halves, narrow.fp8_halves) == (True, False)
    assert wide.stage_bytes == 48 * 1024 and wide.smem_bytes <= 227 * 1024
    assert wide.tensor_maps == "A:0:128x128:128;B:1:128x256:128;C:2:64x64:128"
    for spec, groups in ((wide, 2), (narrow, 1)):
        text = gemm_sm90.generate(spec)
        assert text.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") == 4 * groups
        assert "m64n256" not in text
        assert text.count("wgmma.wait_group.sync.aligned 0") == groups
        assert text.count("= fadd float") == 64 * groups   # the product added into the sums, 64 a group
        # each group's first wgmma starts afresh: 64 result registers, scale-d from a predicate
        assert text.count("setp.ne.b32 p, $66, 0; wgmma.mma_async") == groups
    with pytest.raises(ValueError, match="192-wide tiles take bf16 or f16"):
        gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=192)
    # A from registers (a_regs): read once a K step by four ldmatrix.x4 (one a k32 slice), both halves' wgmmas
    # taking their four registers of A from there, B alone by descriptor
    text = gemm_sm90.generate(gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=256, stages=4, a_regs=True))
    assert text.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert text.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") == 8
    assert text.count("}, {$64, $65, $66, $67}, $68, p, 1, 1;") == 2   # each half's first: A in 4 registers
    assert text.count("= fadd float") == 128
    with pytest.raises(ValueError, match="fp8 GEMM's option only"):
        gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=128, stages=6, a_regs=True)


def test_fp8_promotion_every_two_k_steps():
    """promote=2: the fp8 K loop takes steps in pairs, both stages waited for, then for each half of N (the whole
    128-wide tile: one) the first step's four k32 wgmmas into a fresh product and the second's four into the same
    product, one commit and one wait, then the adds; both stages freed after (two arrives); an odd step count
    ends with one step promoted alone (the promote=1 body: its four wgmmas a half, its own wait)."""
    for bn, stages, halves in ((256, 4, 2), (128, 6, 1)):
        one = gemm_sm90.generate(gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=bn, stages=stages))
        two = gemm_sm90.generate(gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=bn, stages=stages, promote=2))
        wgmma = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
        assert one.count(wgmma) == 4 * halves and two.count(wgmma) == 8 * halves + 4 * halves
        # a pair's group and the odd step's: one commit and one wait each per half
        assert two.count("wgmma.commit_group") == one.count("wgmma.commit_group") + halves
        assert two.count("wgmma.wait_group.sync.aligned 0") == 2 * halves
        assert two.count("= fadd float") == 2 * 64 * halves
        assert two.count("setp.ne.b32 p, $66, 0; wgmma.mma_async") == 2 * halves   # fresh products only
        pair = two[two.index("\nckp:"):two.index("\nckt:")]
        assert pair.count("mbarrier.try_wait") == 2 and pair.count("mbarrier.arrive") == 2
        assert pair.index("mbarrier.try_wait", pair.index("mbarrier.try_wait") + 1) < pair.index(wgmma)
        assert pair.count("wgmma.commit_group") == halves and pair.count("wgmma.fence") == halves
        assert pair.rindex(wgmma) < pair.index("mbarrier.arrive")   # freed after the last half's wgmmas
        odd = two[two.index("\ncko:"):two.index("\nckdone:")]
        assert odd.count(wgmma) == 4 * halves and odd.count("mbarrier.arrive") == 1
    for kw in ({"promote": 3, "dtype": "fp8_e4m3", "bn": 128, "stages": 6}, {"promote": 2},
               {"promote": 2, "dtype": "fp8_e4m3", "bn": 256, "stages": 4, "a_regs": True}):
        with pytest.raises(ValueError, match="promotes its product every 1 or 2 K steps"):
            gemm_sm90.Sm90GemmSpec("g", **kw)


@pytest.mark.parametrize("bn", ["", "128"])
def test_fp8_promote_override_reaches_the_kernel_without_spills(monkeypatch, bn):
    """$TESSERA_SM90_GEMM_FP8_PROMOTE=2 (a benchmark's override, in the compile cache's key) builds both fp8
    kernels (128x256 by halves, 128x128 for f32 results or =128) promoting every two K steps; ptxas: no spills,
    the registers of the promote=1 kernels. Other values, and 2 with A from registers (256rs), are refused."""
    monkeypatch.setenv("TESSERA_CACHE", "0")
    monkeypatch.setenv("TESSERA_SM90_GEMM_FP8_BN", bn)
    monkeypatch.setenv("TESSERA_SM90_GEMM_FP8_PROMOTE", "2")
    kernels = {k.name: k for k in image.read_image(_compile(FP8_WIDE).image).kernels}
    for f in ("scaled", "f32_out"):
        k = kernels[f"{f}__gemm0"]
        assert k.props["ptx.mma"].endswith(", promoted every 2 K steps")
        if ptxas.find() is not None:
            assert "ptx.spill_bytes" not in k.props and k.regs == 168
    for setting, fp8_bn in (("3", ""), ("2", "256rs")):
        monkeypatch.setenv("TESSERA_SM90_GEMM_FP8_PROMOTE", setting)
        monkeypatch.setenv("TESSERA_SM90_GEMM_FP8_BN", fp8_bn)
        with pytest.raises(Exception, match=f"TESSERA_SM90_GEMM_FP8_PROMOTE={setting}: 1 or 2"):
            _compile(FP8_WIDE)


FP8_WIDE = """
@function
def scaled(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32],
           sb: tensor[f32]) -> tensor[bf16, "M", "N"]:
    return op.cast(op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb)), bf16)

@function
def f32_out(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32],
            sb: tensor[f32]) -> tensor[f32, "M", "N"]:
    return op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb))
"""


@pytest.mark.parametrize("setting, cluster, widths", [
    ("", "", ("256", "128")), ("256", "", ("256", "128")), ("128", "", ("128", "128")), ("256rs", "", ("256", "128")),
    ("", "2", ("128", "128")), ("256", "2", ("256", "128"))])
def test_fp8_wide_tile_by_default_for_16_bit_results(monkeypatch, setting, cluster, widths):
    """fp8 GEMMs with 16-bit results take 128x256 tiles (4 stages), f32 results 128x128 (their plain-store
    epilogue spilled 32 bytes at 256); in clusters of two CTAs only where $TESSERA_SM90_GEMM_FP8_BN asks;
    $TESSERA_SM90_GEMM_FP8_BN=128 keeps 128x128. ptxas: no spills in the wide kernel."""
    monkeypatch.setenv("TESSERA_CACHE", "0")
    monkeypatch.setenv("TESSERA_SM90_GEMM_FP8_BN", setting)
    monkeypatch.setenv("TESSERA_SM90_GEMM_CLUSTER", cluster)
    kernels = {k.name: k for k in image.read_image(_compile(FP8_WIDE).image).kernels}
    got = tuple(kernels[f"{f}__gemm0"].props["tile.N"] for f in ("scaled", "f32_out"))
    assert got == widths
    k = kernels["scaled__gemm0"]
    assert k.props["pipeline.stages"] == ("4" if widths[0] == "256" else "6")
    assert k.props["ptx.mma"].endswith(", A from registers") == (setting == "256rs")
    if widths[0] == "256" and ptxas.find() is not None:
        assert "ptx.spill_bytes" not in k.props and k.regs == 168


def test_fp8_wide_tile_override_refuses_other_widths(monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", "0")
    monkeypatch.setenv("TESSERA_SM90_GEMM_FP8_BN", "192")
    with pytest.raises(Exception, match="TESSERA_SM90_GEMM_FP8_BN=192: 128, 256 or 256rs"):
        _compile(FP8_WIDE)


FP8 = """
@function
def f(A: tensor[fp8_e4m3, "M", "K"], B: tensor[fp8_e5m2, "K", "N"], b: tensor[bf16, "N"]) -> tensor[bf16, "M", "N"]:
    return op.relu(op.bias_add(op.matmul(A, B, out_dtype=bf16), b))
"""


def test_fp8_parameters_stay_one_byte_and_feed_fp8_tensor_cores():
    """fp8 parameters only GEMMs read stay one byte wide on sm_90a (passes/fp8_fallback.py): A [M, K] is read
    in place, B [K, N] copied to [N, K] bytes unchanged (wgmma reads 8-bit operands K-major), K checked to be a
    multiple of 16 at the launch; no rounding on entry, no f16 containers."""
    result = _compile(FP8)
    p = result.metadata["plans"]["f"]
    copy_b, gemm = p["steps"]
    assert copy_b["kernel"] == "f__gemm0_pack_b" and copy_b["args"][1]["shape"] == ["N", "KP"]
    assert [p["values"][v]["dtype"] for v in p["args"][:2]] == ["fp8_e4m3", "fp8_e5m2"]
    assert p["values"][copy_b["args"][1]["value"]] == {"dims": ["N", "K"], "dtype": "fp8_e5m2"}
    assert gemm["args"][0]["value"] == p["args"][0] and gemm["args"][1]["value"] == copy_b["args"][1]["value"]
    assert gemm["multiple_of"][0][:2] == ["K", 16] and "16-byte units" in gemm["multiple_of"][0][2]
    assert not p.get("fallbacks")
    k = {k.name: k for k in image.read_image(result.image).kernels}["f__gemm0"]
    assert [a.name for a in k.args] == ["A", "B", "C", "bias", "M", "K", "N"]
    assert [dtypes.BY_CODE[a.dtype].name for a in k.args[:2]] == ["fp8_e4m3", "fp8_e5m2"]
    # a bf16 result: 128x256 tiles, the product in two halves of N, promoted every second K step
    # (gemm_lowering._fp8_tile, FP8_PROMOTE_16BIT)
    assert (k.props["ptx.mma"], k.props["tile.N"], k.props["tile.K"]) == \
        ("wgmma m64n128k32 fp8_e4m3 x fp8_e5m2, 2 halves of N a K step, promoted every 2 K steps", "256", "128")
    assert k.props["epilogue"] == "bias,relu"
    if ptxas.find() is not None:
        assert "ptx.spill_bytes" not in k.props


def test_fp8_parameters_of_a_static_k_not_a_multiple_of_16_are_packed():
    """TMA reads one-byte rows in 16-byte units: with K = 40 the parameters stay in their f16 containers,
    which the packing kernels pad to KP = 48."""
    p = _compile(FP8.replace('"M", "K"', '"M", 40').replace('"K", "N"', '40, "N"')).metadata["plans"]["f"]
    assert [s["kernel"].split("__")[-1] for s in p["steps"]][-3:] == ["gemm0_pack_a", "gemm0_pack_b", "gemm0"]
    assert [p["values"][v].get("declared") for v in p["args"][:2]] == ["fp8_e4m3", "fp8_e5m2"]


FP8_MADE = """
@function
def f(X: tensor[f32, "M", "K"], B: tensor[fp8_e5m2, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(op.cast(X, fp8_e4m3), B)
"""


def test_fp8_values_made_by_kernels_are_packed_then_multiplied_on_fp8_tensor_cores():
    """An fp8 operand an elementwise kernel makes, K symbolic, lives in its f16 container (the packing pads any
    K; with a static K a multiple of 16 it is one byte: tests/unit/test_fp8_one_byte_gemm.py): both operands
    are packed to one-byte K-major rows (K padded to 16) and the GEMM runs on wgmma's fp8 kind."""
    result = _compile(FP8_MADE)
    p = result.metadata["plans"]["f"]
    *entry, pack_a, pack_b, gemm = p["steps"]
    assert len(entry) == 2 and all("elementwise" in s["kernel"] for s in entry)  # the roundings
    # A [M, K] f16 -> [M, KP] e4m3; B [K, N] f16 -> [N, KP] e5m2, KP = K rounded up to 16 bytes
    assert pack_a["args"][1]["shape"] == ["R", "KP"] and pack_b["args"][1]["shape"] == ["N", "KP"]
    assert p["values"][pack_b["args"][1]["value"]] == {"dims": ["N", "ceil((K)/16)*16"], "dtype": "fp8_e5m2"}
    assert plan.evaluate(pack_a["env"]["KP"], {"K": 77}) == 80
    assert [a["value"] for a in gemm["args"][:2]] == [pack_a["args"][1]["value"], pack_b["args"][1]["value"]]
    k = {k.name: k for k in image.read_image(result.image).kernels}[gemm["kernel"]]
    assert [a.name for a in k.args] == ["A", "B", "C", "M", "KP", "N"]
    assert k.props["ptx.mma"] == "wgmma m64n128k32 fp8_e4m3 x fp8_e5m2"


def test_int8_spec_geometry():
    """int8 K steps are 128 bytes, as fp8's; s32 accumulators allow the 256-wide tile; i32 results leave by
    plain stores (no C map); no epilogue."""
    s = gemm_sm90.Sm90GemmSpec("g", dtype="i8", out_dtype="i32")
    assert (s.bk, s.stage_bytes, s.b_k_major, s.acc_type, s.staged_store) == (128, 48 * 1024, True, "i32", False)
    assert s.tensor_maps == "A:0:128x128:128;B:1:128x256:128"
    for kw in ({"out_dtype": "f32"}, {"out_dtype": "i32", "epilogue": ("relu",)}):
        with pytest.raises(ValueError, match="returns the i32 product alone"):
            gemm_sm90.Sm90GemmSpec("g", dtype="i8", **kw)
    with pytest.raises(ValueError, match="not transposed ones"):
        gemm_sm90.Sm90GemmSpec("g", dtype="i8", out_dtype="i32", trans_b=True)


INT8 = """
@function
def f(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B
"""


def test_int8_matmul_reads_a_as_stored_and_b_copied_k_major():
    result = _compile(INT8)
    p = result.metadata["plans"]["f"]
    pack_b, gemm = p["steps"]
    copy = pack_b["args"][1]["value"]
    assert p["values"][copy] == {"dims": ["N", "K"], "dtype": "i8"} and pack_b["env"]["KP"] == "K"
    assert [a["value"] for a in gemm["args"]] == [p["args"][0], copy, p["results"][0]]
    assert p["values"][p["results"][0]]["dtype"] == "i32"
    # both steps need K a multiple of 16 (TMA's rows, the copy's 16-byte stores), checked at the launch
    assert [m[:2] for s in (pack_b, gemm) for m in s["multiple_of"]] == [["K", 16], ["K", 16]]
    kernels = {k.name: k for k in image.read_image(result.image).kernels}
    k = kernels["f__gemm0"]
    assert [a.name for a in k.args] == ["A", "B", "C", "M", "K", "N"]
    assert (k.props["ptx.mma"], k.props["tile.K"]) == ("wgmma m64n256k32 s8 x s8", "128")
    assert kernels["f__gemm0_n128"].props["ptx.mma"] == "wgmma m64n128k32 s8 x s8"
    assert "f__gemm0_n192" not in kernels   # the 192-wide tile is the 16-bit kernel's only


def test_int8_operands_are_copied_k_major_only_where_not_stored_so():
    """wgmma reads A [M, K] and B [N, K]: A and a stored Bᵀ are read in place, a row-major B and a stored Aᵀ
    copied K-major first (the GPU tests' programs, tests/gpu/test_int8_gemm_gpu.py); ptxas: no spills."""
    result = _compile(_gpu_program("hopper_int8"))
    plans = result.metadata["plans"]
    steps = {f: [(s["kernel"], [a["shape"] for a in s["args"]]) for s in p["steps"]] for f, p in plans.items()}
    assert steps["nt"] == [("nt__gemm0", [["M", "K"], ["N", "K"], ["M", "N"]])]
    assert steps["tn"] == [("tn__gemm0_pack_a", [["K", "N"], ["N", "KP"]]),
                           ("tn__gemm0_pack_b", [["K", "N"], ["N", "KP"]]),
                           ("tn__gemm0", [["M", "K"], ["N", "K"], ["M", "N"]])]
    assert steps["batched"] == [("batched__gemm0_pack_b", [["BATCH", "K", "N"], ["BATCH", "N", "KP"]]),
                                ("batched__gemm0", [["BATCH", "M", "K"], ["BATCH", "N", "K"], ["BATCH", "M", "N"]])]
    # the copy of Aᵀ [K, M]: its N is M
    assert plans["tn"]["steps"][0]["env"] == {"K": "K", "N": "M", "KP": "K"}
    if ptxas.find():
        k = {k.name: k for k in image.read_image(result.image).kernels}["nt__gemm0"]
        assert k.regs == 168 and "ptx.spill_bytes" not in k.props


@pytest.mark.parametrize("arch, k, message", [
    ("sm_90a", "100", "K = 100 is not a multiple of 16"),
])
def test_int8_refusals_are_located(arch, k, message):
    source = f'def f(A: tensor[i8, "M", {k}], B: tensor[i8, {k}, "N"]):\n    return A @ B'
    with pytest.raises(CompileError, match=message) as e:
        _compile("@function\n" + source, arch, "user.py")
    assert e.value.filename == "user.py" and e.value.line == 3


def test_fp8_on_sm80_multiplies_the_f16_containers():
    """No fp8 kernel below sm_90a: the f16 kernel multiplies the exact containers."""
    steps = _compile(FP8, arch="sm_80").metadata["plans"]["f"]["steps"]
    assert not any("pack" in s["kernel"] for s in steps)


def test_kernels_signatures_and_properties(example):
    kernels = {k.name: k for k in image.read_image(example.image).kernels}
    k = kernels["linear_gelu__gemm0"]
    assert [a.name for a in k.args] == ["A", "B", "C", "bias", "M", "K", "N"]
    assert [a.flags & 1 for a in k.args[:4]] == [1, 1, 0, 1]  # bit 0: never written
    assert k.props["epilogue"] == "bias,gelu"
    assert k.props["ptx.tensor_maps"] == "A:0:64x128:128;B:1:64x64:128;C:2:64x64:128"
    assert (k.props["tile.M"], k.props["pipeline.stages"]) == ("128", "4")
    assert kernels["scaled_residual__gemm0"].props["epilogue"] == "scale,add"
    assert kernels["gemm_f16_f32__gemm0"].args[2].dtype == 1  # f32
    # the plan launches three warpgroups with the kernel's dynamic shared memory
    step = example.metadata["plans"]["linear_gelu"]["steps"][0]
    assert step["block"] == [384, 1, 1] and step["smem"] == gemm_sm90.Sm90GemmSpec("x").smem_bytes
    # persistent: no more CTAs than the device has multiprocessors, nor than tiles
    grid = step["grid"][0]
    assert plan.evaluate(grid, {"M": 4096, "N": 4096, "DEVICE_UNITS": 132}) == 132
    assert plan.evaluate(grid, {"M": 256, "N": 512, "DEVICE_UNITS": 132}) == 4


def test_small_problems_take_narrower_tiles():
    src = """
@function
def f(A: tensor[bf16, 256, 512], B: tensor[bf16, 512, 512]) -> tensor[bf16, 256, 512]:
    return A @ B
"""
    props = image.read_image(_compile(src).image).kernels[0].props
    assert (props["tile.N"], props["pipeline.stages"]) == ("128", "6")


@pytest.mark.skipif(ptxas.find() is None, reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")
def test_ptxas_resources(example):
    # ptxas assembled the module while compiling; its report is the kernel's metadata: no spills in the plain
    # GEMM, the 168-register cap of 384 threads at one CTA per SM (setmaxnreg moves registers at run time)
    kernels = {k.name: k for k in image.read_image(example.image).kernels}
    for name in ("gemm_bf16__gemm0", "gemm_bf16__gemm0_n192", "gemm_bf16__gemm0_n128"):
        assert kernels[name].regs == 168, name
        assert "ptx.spill_bytes" not in kernels[name].props, name


@pytest.mark.parametrize("source, arch, message", [
    ("def f(A: tensor[bf16, 'M', 'K'], B: tensor[bf16, 'K', 'N']):\n    return A @ B", "sm_75",
     "needs a tensor-core architecture"),
    ("def f(A: tensor[f64, 'M', 'K'], B: tensor[f64, 'K', 'N']):\n    return A @ B", "sm_90a",
     "f32, bf16, f16 or tf32 operands of one dtype, not f64 @ f64"),
    ("def f(A: tensor[bf16, 'B', 'M', 'K'], B: tensor[bf16, 'C', 'B', 'K', 'N']):\n    return A @ B", "sm_90a",
     "batches of equal rank only"),
])
def test_refusals_are_located(source, arch, message):
    with pytest.raises(CompileError, match=message) as e:
        _compile("@function\n" + source, arch, "user.py")
    assert e.value.filename == "user.py" and e.value.line == 3


@pytest.mark.parametrize("n, tile_n, stages", [(1024, 128, 6), (2048, 256, 4), (3072, 192, 4), (4096, 256, 4),
                                               (8192, 256, 4), (None, 256, 4)])
def test_cost_model_weighs_tile_width_against_the_last_wave(n, tile_n, stages):
    from tessera.backends.ptx.gemm_lowering import matmul_schedule
    assert matmul_schedule(n, n, n) == {"MB": 128, "NC": tile_n, "stages": stages}


STATIC_3072 = """
@function
def f(A: tensor[{dt}, 3072, 3072], B: tensor[{dt}, 3072, 3072]):
    return A @ B
"""


@pytest.mark.parametrize("dt, tile_n, mma", [("bf16", "192", ""), ("f16", "192", ""),
                                             ("i8", "128", "wgmma m64n128k32 s8 x s8")])
def test_static_3072_takes_the_192_wide_tile_where_the_kernel_has_it(dt, tile_n, mma):
    """3072³: 384 tiles of 128x192 are 2.9 waves of 132 SMs (576 of 128x128 4.4, 288 of 128x256 2.2); the int8
    kernel has no 192-wide tile and keeps the cost model's choice among its own (128x128), as before. ptxas: no
    spills in the 192-wide kernel."""
    result = _compile(STATIC_3072.format(dt=dt))
    k = image.read_image(result.image).kernels[-1]
    assert (k.name, k.props["tile.N"]) == ("f__gemm0", tile_n)
    assert k.props.get("ptx.mma", "") == mma
    step = result.metadata["plans"]["f"]["steps"][-1]
    assert all(a["kernel"].endswith("_simt") for a in step.get("prefer", ()))   # chosen at compile time
    if dt != "i8":
        assert step["smem"] == gemm_sm90.Sm90GemmSpec("x", bn=192, stages=4).smem_bytes
        if ptxas.find() is not None:
            assert "ptx.spill_bytes" not in k.props and k.regs == 168


def test_symbolic_extents_choose_the_tile_at_launch(example):
    """gemm_bf16's extents are symbolic: its plan carries the other tile shape's kernel, taken at the launch
    where the cost model, with the device's multiprocessor count, scores it higher."""
    from tessera.backends.ptx.gemm_lowering import matmul_schedule
    step = example.metadata["plans"]["gemm_bf16"]["steps"][0]
    simt, n192, n128 = step["prefer"]   # first the SIMT GEMM, for K or N not a multiple of 8 (test_simt_gemm.py)
    assert (step["kernel"], simt["kernel"], n192["kernel"], n128["kernel"]) == \
        ("gemm_bf16__gemm0", "gemm_bf16__gemm0_simt", "gemm_bf16__gemm0_n192", "gemm_bf16__gemm0_n128")
    assert n192["smem"] == gemm_sm90.Sm90GemmSpec("x", bn=192, stages=4).smem_bytes
    assert n128["smem"] == gemm_sm90.Sm90GemmSpec("x", bn=128, stages=6).smem_bytes
    assert {"gemm_bf16__gemm0_n192", "gemm_bf16__gemm0_n128"} <= {k.name for k in image.read_image(example.image).kernels}

    def picked(m, n, units=132):
        env = {"M": m, "N": n, "DEVICE_UNITS": units}
        return next((bn for bn, alt in ((192, n192), (128, n128)) if plan.evaluate(alt["when"], env) > 0), 256)

    for n in (512, 1024, 2048, 3000, 3072, 4096, 5000, 6144, 8192):
        assert picked(n, n) == matmul_schedule(n, n, n)["NC"], n
    for m, n in ((3000, 3100), (1024, 3072), (8192, 3072), (2048, 6000)):
        assert picked(m, n) == matmul_schedule(m, n, None)["NC"], (m, n)
    assert [picked(n, n) for n in (2048, 3072, 4096, 8192)] == [256, 192, 256, 256]
    assert picked(3000, 3000) == 192   # tests/gpu/test_hopper.py's ragged case of the 192-wide kernel
    # fewer multiprocessors change the waves: 4096 with 128x256 tiles is 512 tiles, 4 full waves of 128
    assert picked(4096, 4096, 128) == 256


PREFERRED_HOST = """
import sys
import numpy as np
from tessera import _runtime, executor, telemetry
prog = executor.load(open(sys.argv[1], "rb").read(), _runtime.Context("cuda"))
telemetry.enable(sys.argv[2])
for m, n in ((128, 384), (768, 768), (1024, 1024)):
    prog.gemm_bf16(np.zeros((m, 64), np.float32), np.zeros((64, n), np.float32))
telemetry.disable()
"""


def test_the_executor_launches_the_preferred_kernel(example, fake_cuda, tmp_path):
    """libtessera's executor, under tessera.executor, takes the `prefer` alternative its `when` scores higher with
    the device's multiprocessor count: on the fake CUDA driver (4 SMs), whose launches the metrics log records."""
    import json

    (tmp_path / "gemm.tessera").write_bytes(example.image)
    metrics = tmp_path / "metrics.jsonl"
    p = fake_cuda(PREFERRED_HOST, tmp_path / "gemm.tessera", metrics)
    assert p.returncode == 0, p.stdout + p.stderr
    launched = [(r["name"], tuple(r["grid"])) for r in map(json.loads, metrics.read_text().splitlines())
                if r["kind"] == "kernel"]
    step = example.metadata["plans"]["gemm_bf16"]["steps"][0]
    _, *alts = step["prefer"]   # the SIMT GEMM's is not taken: K and N are multiples of 8
    want = []
    # with 4 SMs, 128x384 scores the 128-wide tile highest (3 tiles against 2), 768x768 the 192-wide one (24
    # tiles, 6 full waves), 1024x1024 the 256-wide one (32 tiles, 8 full waves)
    for m, n in ((128, 384), (768, 768), (1024, 1024)):
        env = {"M": m, "N": n, "K": 64, "DEVICE_UNITS": 4}
        chosen = next((a for a in alts if plan.evaluate(a["when"], env) > 0), step)
        local = dict(env, **{k: plan.evaluate(e, env) for k, e in step["env"].items()})
        grid = tuple(plan.evaluate(g, local) for g in chosen.get("grid", step["grid"]))
        want.append((chosen["kernel"], grid + (1,) * (3 - len(grid))))
    assert launched == want
    assert [k for k, _ in want] == ["gemm_bf16__gemm0_n128", "gemm_bf16__gemm0_n192", "gemm_bf16__gemm0"]  # all run


@pytest.mark.parametrize("source", [
    "def f(A: tensor[bf16, 256, 512], B: tensor[bf16, 512, 512]):\n    return A @ B",   # static: chosen already
    "@function(tile=(128, 256, 64))\ndef f(A: tensor[bf16, 'M', 'K'], B: tensor[bf16, 'K', 'N']):\n"
    "    return A @ B",                                                                  # the user's tile
])
def test_a_tile_fixed_at_compile_time_is_not_chosen_again(source):
    src = source if source.startswith("@") else "@function\n" + source
    step = _compile(src).metadata["plans"]["f"]["steps"][0]
    assert all(a["kernel"].endswith("_simt") for a in step.get("prefer", ()))   # no other tile's kernel


def test_batched_products_run_per_batch_entry(example):
    step = example.metadata["plans"]["batched"]["steps"][0]
    assert step["batch"] == "BATCH" and step["env"]["BATCH"] == "B" and step["env"]["M"] == "M"
    assert [a["shape"] for a in step["args"]] == [["BATCH", "M", "K"], ["BATCH", "K", "N"], ["BATCH", "M", "N"]]


def _gpu_program(name: str) -> str:
    """The source of a program the GPU tests run (tests/gpu/kernels.py), compiled here without a GPU."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpu_kernels", REPO / "tests" / "gpu" / "kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SOURCES[name][0]


# tn, nt, tt (bf16), batched_tt (f16 -> f32), tn_bias_gelu: tests/gpu/test_transposed_gemm_gpu.py runs them
TRANSPOSED = _gpu_program("hopper_gemm_transposed")


def test_transposed_operands_are_loaded_as_stored():
    """sm_90a: one GEMM step per product (no layout kernel), the operands passed as stored ([K, M] for Aᵀ,
    [N, K] for Bᵀ), the tensor maps' boxes for those layouts (Aᵀ in 64-column boxes of 64 K-rows, as a 16-bit B
    is; Bᵀ in one box of 64 K-elements by BN rows, as A is), and ptxas's report: no spills, 168 registers."""
    result = _compile(TRANSPOSED)
    shapes = {f: [[a["shape"] for a in s["args"] if "shape" in a] for s in p["steps"]]
              for f, p in result.metadata["plans"].items()}
    assert {f: shapes[f] for f in ("nn", "tn", "nt", "tt", "batched_tt")} == {
        "nn": [[["M", "K"], ["K", "N"], ["M", "N"]]], "tn": [[["K", "M"], ["K", "N"], ["M", "N"]]],
        "nt": [[["M", "K"], ["N", "K"], ["M", "N"]]], "tt": [[["K", "M"], ["N", "K"], ["M", "N"]]],
        "batched_tt": [[["BATCH", "K", "M"], ["BATCH", "N", "K"], ["BATCH", "M", "N"]]]}
    assert shapes["tn_bias_gelu"] == [[["K", "M"], ["K", "N"], ["M", "N"], ["N"]]]
    # (symbolic extents: the SIMT GEMMs the launch takes for rows not a multiple of 16 bytes aside)
    kernels = {k.name: k for k in image.read_image(result.image).kernels if not k.name.endswith("_simt")}
    assert kernels["tn__gemm0"].props["ptx.tensor_maps"] == "A:0:64x64:128;B:1:64x64:128;C:2:64x64:128"
    assert kernels["nt__gemm0"].props["ptx.tensor_maps"] == "A:0:64x128:128;B:1:64x256:128;C:2:64x64:128"
    assert kernels["batched_tt__gemm0"].props["ptx.tensor_maps"] == "A:0:64x64:128;B:1:64x256:128"
    if ptxas.find() is not None:
        assert all(k.regs == 168 and "ptx.spill_bytes" not in k.props for k in kernels.values())
    # the launch passes the dimension arguments in order of first appearance in the tensor arguments (K first
    # where A is stored [K, M]), and the kernel must declare them so: with M, K, N it read M as K (on an H100,
    # rows past min(M, K) and K steps past it went missing)
    import re
    for name, k in kernels.items():
        want = ["K", "M", "N"] if name.startswith(("tn", "tt", "batched_tt")) else ["M", "K", "N"]
        assert [a.name for a in k.args if a.kind == 2] == want, name
        ir = gemm_sm90.generate(gemm_sm90.Sm90GemmSpec("g", trans_a=want[0] == "K"))
        assert re.findall(r"i64 %([MKN])\b", ir.split("{", 1)[0].split("define ", 1)[1]) == want


@pytest.mark.parametrize("trans_a, trans_b, bits", [(False, False, "0, 1"), (True, False, "1, 1"),
                                                     (False, True, "0, 0"), (True, True, "1, 0")])
def test_wgmma_transpose_bits_follow_the_layouts(trans_a, trans_b, bits):
    """wgmma's transpose bits (imm-trans-a, imm-trans-b): A K-major unless stored transposed; a 16-bit B
    [K, N] MN-major (bit 1) unless stored transposed ([N, K]: K-major)."""
    import re
    ptx = gemm_sm90.generate(gemm_sm90.Sm90GemmSpec("g", trans_a=trans_a, trans_b=trans_b))
    # the instruction's last operands: imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
    assert {", ".join(t) for t in re.findall(r"1, 1, ([01]), ([01]);", ptx)} == {bits}


def test_transposes_stay_layout_kernels_where_the_gemm_cannot_read_them():
    """sm_80's mma.sync kernel reads operands as op.matmul lays them out: the transposes stay kernels; an fp8
    spec refuses transposed operands."""
    steps = _compile(TRANSPOSED, arch="sm_80").metadata["plans"]["tn"]["steps"]
    assert len(steps) == 2 and "layout" in steps[0]["kernel"]
    with pytest.raises(ValueError, match="not transposed ones"):
        gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=128, stages=6, trans_a=True)


@pytest.mark.parametrize("kw", [{"cluster_m": 3}, {"cluster_m": 2, "dtype": "i8", "out_dtype": "i32", "bn": 128}])
def test_cluster_spec_refuses(kw):
    with pytest.raises(ValueError, match="cluster_m"):
        gemm_sm90.Sm90GemmSpec("g", **kw)


def test_cluster_grid_is_whole_pairs():
    """Clusters of two CTAs on vertically adjacent tiles: the grid counts pairs of tile rows, so 300 rows (3 tile
    rows) take 2 pairs, the second's lower tile wholly past M."""
    s = gemm_sm90.Sm90GemmSpec("g", cluster_m=2)
    assert s.grid(300, 1000) == (2 * 2 * 4, 1, 1) and s.grid(256, 256) == (2, 1, 1)
    single = gemm_sm90.Sm90GemmSpec("g")
    assert (s.smem_bytes, s.tensor_maps) == (single.smem_bytes, single.tensor_maps)
    # B read K-major (fp8's [N, K], a stored Bᵀ) comes in two boxes of half the tile's rows, one from each CTA
    fp8 = gemm_sm90.Sm90GemmSpec("g", dtype="fp8_e4m3", bn=128, stages=6, cluster_m=2)
    assert fp8.tensor_maps == "A:0:128x128:128;B:1:128x64:128;C:2:64x64:128"
    assert gemm_sm90.Sm90GemmSpec("g", trans_b=True, cluster_m=2).tensor_maps.split(";")[1] == "B:1:64x128:128"


def test_cluster_off_leaves_the_kernel_as_it_was():
    """cluster_m=1 (the default) emits no cluster instruction and no cluster attribute."""
    ir = gemm_sm90.generate(gemm_sm90.Sm90GemmSpec("g", cluster_m=1))
    assert ir == gemm_sm90.generate(gemm_sm90.Sm90GemmSpec("g"))
    assert "cluster_dim" not in ir and "multicast" not in ir and "mapa" not in ir and "barrier.cluster" not in ir


@pytest.mark.parametrize("bn, kw", [(256, {}), (192, {}), (128, {}), (256, {"trans_b": True}),
                                   (128, {"dtype": "fp8_e4m3", "b_dtype": "fp8_e5m2", "out_dtype": "f32"})])
def test_cluster_ptx(bn, kw):
    """The 2-CTA cluster kernel's PTX: the cluster shape fixed at compile time (so a plain launch forms the
    clusters), B's 64-column boxes multicast to both CTAs, each box from one of them (bn/64 multicast copies,
    predicated on the CTA's rank; two halves of a K-major B's box of rows), A's box loaded alone, the stages
    freed on both CTAs' `empty` barriers (mapa + a remote arrive, the barriers' count doubled), cluster
    barriers after the barriers' initialization and before exit; ptxas: no spills, 168 registers."""
    import re

    from tessera.backends.ptx import compiler as ptx_compiler
    from tessera.backends.ptx.options import PTXOptions
    spec = gemm_sm90.Sm90GemmSpec("g", bn=bn, stages=6 if bn == 128 else 4, cluster_m=2, **kw)
    ir = gemm_sm90.generate(spec)
    assert '"nvvm.cluster_dim"="2,1,1"' in ir
    counts = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[\$0\], (\d+);", ir)
    assert counts == ["1"] * spec.stages + ["4"] * spec.stages   # full; empty: 2 consumers x 2 CTAs
    import llvmlite.binding as llvm
    options = PTXOptions(arch="sm_90a")
    lmod = llvm.parse_assembly(ir)   # make_llir's optimization, then make_ptx (which runs ptxas where found)
    tm = ptx_compiler._target_machine(options)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=options.opt_level))
    pb.getModulePassManager().run(lmod, pb)
    metadata = {"signatures": []}
    ptx = ptx_compiler.make_ptx(str(lmod), metadata, options)
    assert ".explicitcluster" in ptx and ".reqnctapercluster 2, 1, 1" in ptx
    a_loads = ptx.count("mbarrier::complete_tx::bytes [")   # one a K step (LLVM copies the producer's loop)
    assert a_loads >= 1 and ptx.count(".multicast::cluster") == (2 if spec.b_k_major else bn // 64) * a_loads
    remote = ptx.count("mbarrier.arrive.shared::cluster.b64")
    assert ptx.count("mapa.shared::cluster.u32") == remote >= 2 and "mbarrier.arrive.shared::cta" not in ptx
    # both roles' (which LLVM may hoist into one before the branch), and the exit's, where threads arrive apart
    assert ptx.count("barrier.cluster.arrive.release.aligned;") in (1, 2)
    assert ptx.count("barrier.cluster.arrive.release;") == 1
    assert "fence.mbarrier_init.release.cluster;" in ptx
    if ptxas.find() is not None:
        r = metadata["kernel_resources"]["g"]
        assert r["regs"] == 168 and "ptx.spill_bytes" not in metadata.get("kernel_props", {}).get("g", {})


CLUSTER_SOURCE = """
@function
def f(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return A @ B

@function
def t(A: tensor[bf16, "M", "K"], B: tensor[bf16, "N", "K"]) -> tensor[bf16, "M", "N"]:
    return A @ op.transpose(B, (1, 0))
"""


def test_cluster_override_launches_whole_clusters(monkeypatch):
    """$TESSERA_SM90_GEMM_CLUSTER=2 (a benchmark's override; the cache does not key on it) clusters the bf16
    GEMM's kernels (each tile width the launch may take; a stored Bᵀ's too) and launches an even grid of at most
    one CTA per SM: 2·min(pairs, DEVICE_UNITS // 2)."""
    monkeypatch.setenv("TESSERA_SM90_GEMM_CLUSTER", "2")
    monkeypatch.setenv("TESSERA_CACHE", "0")
    result = _compile(CLUSTER_SOURCE)
    step = result.metadata["plans"]["f"]["steps"][0]
    grids = [step["grid"][0]] + [alt["grid"][0] for alt in step.get("prefer", []) if "simt" not in alt["kernel"]]
    assert len(grids) == 3
    for env, want in (({"M": 8192, "N": 8192}, 132), ({"M": 300, "N": 256}, 4), ({"M": 4096, "N": 4096}, 132)):
        assert plan.evaluate(step["grid"][0], {**env, "DEVICE_UNITS": 132}) == want
    for grid in grids:
        assert plan.evaluate(grid, {"M": 8192, "N": 8192, "DEVICE_UNITS": 131}) == 130
    tstep = result.metadata["plans"]["t"]["steps"][0]
    assert tstep["grid"][0].startswith("2*min(")
    monkeypatch.setenv("TESSERA_SM90_GEMM_CLUSTER", "4")
    with pytest.raises(Exception, match="TESSERA_SM90_GEMM_CLUSTER=4"):
        _compile(CLUSTER_SOURCE)
