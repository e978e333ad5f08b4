"""The scaled fp8 GEMM fed from one-byte tensors (issue 17, items 1 and 2): on ptx sm_90a,
``dequantize(a, sa) @ transpose(dequantize(bt, sb))`` with per-tensor scales is one wgmma e4m3/e5m2 kernel
reading the one-byte parameters in place, the two scales and the cast to bf16 in its epilogue
(passes/decompose.py scaled_fp8_matmuls, passes/fusion.py, passes/fp8_fallback.py one_byte_values,
backends/ptx/gemm_lowering.py). Other targets keep the decomposition and the f16 container, and match the
interpreter. Also the executor's one-byte fp8 arguments: float32 values rounded and encoded as the
interpreter rounds, uint8 bit patterns, ml_dtypes arrays.

Running the kernel needs an H100/H200: tests/gpu/test_scaled_fp8_gpu.py.
"""

import numpy as np
import pytest

from tessera import compiler, dtypes, executor, image, plan, tessera_frontend_compile
from tessera.backends.ptx import ptxas
from tessera.diagnostics import CompileError
from tessera.numerics.rounding import fp8_bits, fp8_values, round_to
from tessera.options import CompileOptions

RNG = np.random.default_rng(1726)

SOURCE = """
from tessera import *

@function
def mm(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32], sb: tensor[f32]):
    return op.cast(op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb)), bf16)

@function
def mm_f32(A: tensor[fp8_e4m3, "M", "K"], B: tensor[fp8_e5m2, "K", "N"], sa: tensor[f32], sb: tensor[f32]):
    return op.dequantize(A, sa) @ op.dequantize(B, sb)
"""

CHANNELS = """
from tessera import *

@function
def mm_channels(A: tensor[fp8_e4m3, "M", "K"], Bt: tensor[fp8_e4m3, "N", "K"], sa: tensor[f32, "M"], sb: tensor[f32]):
    return op.dequantize(A, sa, axis=0) @ op.transpose(op.dequantize(Bt, sb))
"""


def _ptx(source: str = SOURCE):
    return compiler.compile_source(source, "s.py", CompileOptions(target="ptx", arch="sm_90a"))


@pytest.fixture(scope="module")
def sm90():
    return _ptx()


def _kernels(result) -> dict:
    return {k.name: k for k in image.read_image(result.image).kernels}


def test_one_wgmma_kernel_reads_the_one_byte_parameters(sm90):
    """One step: no rounding on entry, no packing; A [M, K] and Bᵀ [N, K] one byte an element, read in place;
    the scales are two 0-d operands of the epilogue; the result leaves as bf16 (the cast is the store's)."""
    p = sm90.metadata["plans"]["mm"]
    [gemm] = p["steps"]
    assert [p["values"][v]["dtype"] for v in p["args"]] == ["fp8_e4m3", "fp8_e4m3", "f32", "f32"]
    assert [a["value"] for a in gemm["args"]] == [p["args"][0], p["args"][1], p["results"][0], p["args"][2],
                                                  p["args"][3]]
    assert p["values"][p["results"][0]]["dtype"] == "bf16" and not p.get("fallbacks")
    k = _kernels(sm90)[gemm["kernel"]]
    assert [(a.name, dtypes.BY_CODE[a.dtype].name) for a in k.args if a.kind == 1] == \
        [("A", "fp8_e4m3"), ("B", "fp8_e4m3"), ("C", "bf16"), ("factor", "f32"), ("factor2", "f32")]
    assert (k.props["ptx.mma"], k.props["epilogue"]) == \
        ("wgmma m64n128k32 fp8_e4m3 x fp8_e4m3, 2 halves of N a K step, promoted every 2 K steps",
         "scale_by,scale_by2")   # 128x256 tiles, two K steps a promotion
    # K is read by TMA in 16-byte rows: checked at the launch
    assert gemm["multiple_of"][0][:2] == ["K", 16]
    if ptxas.find():   # ptxas assembled it while compiling: the fp8 GEMM's registers, no spills
        assert k.regs == 168 and "ptx.spill_bytes" not in k.props


def test_a_row_major_b(sm90):
    """A B stored [K, N] (e5m2: the kinds mix) is copied to [N, K], bytes unchanged, then multiplied; the
    result is f32."""
    p = sm90.metadata["plans"]["mm_f32"]
    copy_b, gemm = p["steps"]
    assert copy_b["kernel"].endswith("_pack_b") and p["values"][copy_b["args"][1]["value"]]["dtype"] == "fp8_e5m2"
    k = _kernels(sm90)[gemm["kernel"]]
    assert k.props["ptx.mma"] == "wgmma m64n128k32 fp8_e4m3 x fp8_e5m2"
    assert k.props["epilogue"] == "scale_by,scale_by2"


def test_per_channel_scales_keep_the_decomposition():
    """A per-channel scale is not a common factor of the sum: the dequantizes stay elementwise kernels in
    front of an f32 GEMM, which ptx runs on FMA units (gemm_fma.py), not an fp8 wgmma."""
    kernels = _kernels(_ptx(CHANNELS))
    assert kernels["mm_channels__gemm4"].props["input_precision"] == "ieee"
    assert not any("wgmma" in k.props.get("ptx.mma", "") for k in kernels.values())


def test_a_static_k_not_a_multiple_of_16_is_refused_at_the_line():
    src = """
from tessera import *

@function
def f(A: tensor[fp8_e4m3, "M", 40], Bt: tensor[fp8_e4m3, "N", 40], sa: tensor[f32], sb: tensor[f32]):
    return op.dequantize(A, sa) @ op.transpose(op.dequantize(Bt, sb))
"""
    with pytest.raises(CompileError, match=r"s.py:6:\d+: .*K = 40 is not a multiple of 16"):
        _ptx(src)


def test_other_targets_keep_the_decomposition_and_match_the_interpreter():
    """On the CPU the dequantizes are elementwise kernels reading the one-byte parameters (no f16 container,
    no fp8 fallback) and the product an f32 GEMM: its result equals the interpreter's up to the GEMM's order of
    summation (relative 1e-5 of |A|·|B|), and the numpy reference."""
    r = compiler.compile_source(SOURCE, "s.py")
    mod = executor.load(r.image)
    ref = tessera_frontend_compile(SOURCE, {"filename": "s.py"})
    assert not any("fp8" in f for f in r.metadata["plans"]["mm"]["fallbacks"])
    a = round_to(RNG.standard_normal((37, 64)) * 30, "fp8_e4m3").astype(np.float32)
    bt = round_to(RNG.standard_normal((45, 64)) * 30, "fp8_e4m3").astype(np.float32)
    b5 = round_to(RNG.standard_normal((64, 45)) * 30, "fp8_e5m2").astype(np.float32)
    sa, sb = np.float32(0.0125), np.float32(3.5)
    want = (a.astype(np.float64) * sa) @ (b5.astype(np.float64) * sb)
    bound = 1e-5 * (np.abs(a) * sa) @ (np.abs(b5) * sb)
    got, interp = mod.function("mm_f32")(a, b5, np.array(sa), np.array(sb)), \
        ref.interpret("mm_f32", a, b5, np.array(sa), np.array(sb))
    assert (np.abs(got - want) <= bound).all() and (np.abs(interp - want) <= bound).all()
    got16 = mod.function("mm")(a, bt, np.array(sa), np.array(sb))
    np.testing.assert_array_equal(got16, ref.interpret("mm", a, bt, np.array(sa), np.array(sb)))


def test_fp8_bits():
    """The encoding the executor applies to float32 values of a one-byte fp8 parameter: rounded as the
    interpreter rounds (ties to even, saturating, NaN kept), then spelled as OCP fp8 bits."""
    x = np.array([1.0, -0.0, 448.0, 464.0, 1e9, -np.inf, np.nan, 2.0 ** -9, 2.0 ** -10, 1.5 * 2.0 ** -9, 0.3])
    assert fp8_bits(x, "fp8_e4m3").tolist() == [0x38, 0x80, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F, 0x01, 0x00, 0x02, 0x2A]
    assert fp8_bits(x, "fp8_e5m2").tolist() == [0x3C, 0x80, 0x5F, 0x5F, 0x7B, 0xFB, 0x7E, 0x18, 0x14, 0x1A, 0x35]
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        v = RNG.standard_normal(10000) * 10.0 ** RNG.integers(-5, 6, 10000)
        np.testing.assert_array_equal(fp8_values(fp8_bits(v, fmt), fmt), round_to(v, fmt))
        codes = np.arange(256, dtype=np.uint8)
        values = fp8_values(codes, fmt)
        finite = np.isfinite(values)
        np.testing.assert_array_equal(fp8_bits(values[finite], fmt), codes[finite])


def test_fp8_bits_against_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for fmt, md in (("fp8_e4m3", ml_dtypes.float8_e4m3fn), ("fp8_e5m2", ml_dtypes.float8_e5m2)):
        v = RNG.standard_normal(10000) * 10.0 ** RNG.integers(-6, 7, 10000)
        top = float(ml_dtypes.finfo(md).max)
        np.testing.assert_array_equal(fp8_bits(v, fmt), np.clip(v, -top, top).astype(md).view(np.uint8))


def test_the_executor_takes_values_bits_and_ml_dtypes_for_one_byte_fp8():
    """What a call takes for a parameter the plan stores one byte wide (ptx sm_90a): float32 values (rounded
    and encoded), uint8 bit patterns as they are; other dtypes are refused naming what it takes."""
    assert executor._accepted("fp8_e4m3", "fp8_e4m3") == (np.dtype(np.float32), np.dtype(np.uint8))
    assert executor._accepted("fp8_e4m3", "f16") == (np.dtype(np.float32),)   # the container: values only
    x = np.array([1.0, 500.0, -0.3], dtype=np.float32)
    np.testing.assert_array_equal(executor._to_storage(x, "fp8_e4m3"), fp8_bits(x, "fp8_e4m3"))
    assert "ml_dtypes float8_e4m3fn" in executor._takes("fp8_e4m3", "fp8_e4m3")
    fn = executor.Function.__new__(executor.Function)
    fn.name = "mm"
    with pytest.raises(TypeError, match="argument 'A' of 'mm'.*float32 values or fp8_e4m3 bit patterns as uint8"):
        fn._check_dtype("A", np.zeros(3, np.float16), plan.Value("fp8_e4m3", ("M",)))
