"""fp8 values a kernel makes stay one byte wide where a GEMM reads them (issue 17; passes/fp8_fallback.py
one_byte_values): on the CPU (gemm.py widens the bytes while packing, vectors at a time, through
passes/fp8_convert.py's integer widening), on SPIR-V and AMDGPU (the SIMT GEMM's loads widen them) and on ptx
sm_90a (the wgmma e4m3/e5m2 kinds read them as they are, K a multiple of 16); ptx before sm_90a keeps the f16
container (mma.sync's copies to shared memory cannot widen), recorded in the function's fallbacks.

The one-byte path computes what the container path computed (an fp8 value widens to the f32 its f16 container
held): results are compared bit for bit with the same program compiled through the containers, and the
quantized values with the interpreter's rounding; GEMM results with the interpreter within f32 accumulation
error. On the CPU and on the OpenCL CPU runtime (SPIR-V)."""

import numpy as np
import pytest

from tessera import compiler, dtypes, executor, tessera_frontend_compile
from tessera.image import read_image
from tessera.numerics.rounding import fp8_values
from tessera.options import CompileOptions
from tessera.passes import fp8_fallback
from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

SRC = """
@function
def qmm(X: tensor[f32, "M", "K"], W: tensor[f32, "K", "N"], sx: tensor[f32], sw: tensor[f32]):
    q = op.quantize(X, fp8_e4m3, scale=sx)
    return q, q @ op.quantize(W, fp8_e5m2, scale=sw)

@function
def qmmt(X: tensor[f32, "M", "K"], Wt: tensor[f32, "N", "K"], sx: tensor[f32], sw: tensor[f32]):
    return op.quantize(X, fp8_e4m3, scale=sx) @ op.transpose(op.quantize(Wt, fp8_e4m3, scale=sw))

@function
def qout(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return op.cast(op.matmul(op.cast(A, fp8_e4m3), op.cast(B, fp8_e4m3), out_dtype=fp8_e4m3), f32)

@function
def att(Q: tensor[f32, "S", 32], K: tensor[f32, "S", 32], V: tensor[f32, "S", 32]):
    q, k, v = op.cast(Q, fp8_e4m3), op.cast(K, fp8_e4m3), op.cast(V, fp8_e4m3)
    return op.cast(op.flash_attention(q, k, v, causal=True), f32)

@function
def widen(A: tensor[fp8_e4m3, "M", 64], E: tensor[fp8_e5m2, 64, 64], B: tensor[fp8_e5m2, 64, "N"]):
    return op.matmul(A, E), op.matmul(E, B)
"""
RNG = np.random.default_rng(17)
CONTAINER = "stored as f16"


def _containers(monkeypatch):
    """Compiles as before this change: fp8 values a GEMM reads in their f16 containers."""
    legalize = fp8_fallback.legalize
    monkeypatch.setattr(fp8_fallback, "legalize", lambda fn, name, one_byte=False, widens=False:
                        legalize(fn, name, one_byte=False, widens=False))


def _compile(target: str, **kw):
    # on_stage: a compile the cache cannot serve (the container compile's options are the same)
    return compiler.compile_source(SRC, "fp8.py", CompileOptions(target=target, **kw), on_stage=lambda *_: None)


def _inputs(name: str):
    x = (RNG.standard_normal((37, 48)) * 3).astype(np.float32)
    if name in ("qmm", "qout"):
        return x, RNG.standard_normal((48, 29)).astype(np.float32), *(() if name == "qout" else
                                                                      (np.float32(0.011), np.float32(0.007)))
    if name == "qmmt":
        return x, RNG.standard_normal((29, 48)).astype(np.float32), np.float32(0.011), np.float32(0.007)
    return tuple(RNG.standard_normal((20, 32)).astype(np.float32) for _ in range(3))


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view({1: np.uint8, 4: np.uint32}[a.dtype.itemsize])


@pytest.fixture(scope="module")
def images():
    with pytest.MonkeyPatch.context() as mp:
        before = _compile("cpu").image
        _containers(mp)
        return _compile("cpu").image, before


def test_the_cpus_gemms_read_kernel_made_fp8_one_byte(images):
    """No fp8 container left on the CPU: the GEMM kernels take the bytes (dtype codes 14, 15: fp8_e4m3 and
    fp8_e5m2), the quantizing kernels store them, and no fp8 fallback is recorded; compiled through the
    containers, the same functions record it."""
    _, image = images
    kernels = read_image(image).kernels
    gemms = {k.name: k for k in kernels if "__gemm" in k.name and not k.name.endswith(("518x256",))}
    assert [a.dtype for a in gemms["qmm__gemm2"].args[:3]] == [14, 15, dtypes.BY_NAME["f32"].code]
    assert all(CONTAINER not in k.props.get("fallbacks", "") for k in kernels), \
        {k.name: k.props.get("fallbacks") for k in kernels}
    old = read_image(images[0]).kernels
    assert any(CONTAINER in k.props.get("fallbacks", "") for k in old if k.name.startswith("qmm"))


@pytest.mark.parametrize("name", ["qmm", "qmmt", "qout", "att"])
def test_one_byte_results_equal_the_container_path_and_the_interpreter(images, name):
    containers, one_byte = (executor.load(i).function(name) for i in images)
    args = _inputs(name)
    got, before = _tuple(one_byte(*args)), _tuple(containers(*args))
    for g, b in zip(got, before):
        np.testing.assert_array_equal(_bits(np.asarray(g, np.float32)), _bits(np.asarray(b, np.float32)))
    want = _tuple(tessera_frontend_compile(SRC, {"filename": "fp8.py"}).interpret(name, *args))
    if name == "qmm":   # the quantized values: the interpreter's rounding, bit for bit
        np.testing.assert_array_equal(np.asarray(got[0], np.float32), np.asarray(want[0], np.float32))
    if name in ("qmm", "qmmt"):   # f32 sums of exact products against float64 rounded once
        g, w = np.asarray(got[-1], np.float64), np.asarray(want[-1], np.float64)
        assert np.all(np.abs(g - w) <= 48 * np.finfo(np.float32).eps * np.abs(w).max()), np.abs(g - w).max()


def _finite_bytes(fmt: str) -> np.ndarray:
    b = np.arange(256, dtype=np.uint8)
    return b[np.isfinite(fp8_values(b, fmt))]


def test_every_finite_byte_widens_exactly_in_the_cpu_gemms_packing(images):
    """Products with the identity (exact) give back each operand's values: every finite e4m3 byte as A,
    every finite e5m2 byte as B, through the scalar, gathered and vector loads of both packings."""
    f = executor.load(images[1]).function("widen")
    a = np.resize(_finite_bytes("fp8_e4m3"), (5, 64))
    b = np.resize(_finite_bytes("fp8_e5m2"), (64, 7))
    eye = np.where(np.eye(64, dtype=bool), np.uint8(0x3C), np.uint8(0))   # e5m2 1.0
    ae, eb = f(a, eye, b)
    np.testing.assert_array_equal(np.asarray(ae, np.float32), fp8_values(a, "fp8_e4m3").astype(np.float32))
    np.testing.assert_array_equal(np.asarray(eb, np.float32), fp8_values(b, "fp8_e5m2").astype(np.float32))


def test_the_opencl_cpu_runtime_equals_the_cpu(opencl, images):  # noqa: F811
    """SPIR-V's SIMT GEMM reads the bytes too (no container recorded), with the CPU's results: quantized
    values bit for bit, GEMMs within f32 accumulation error (another summation order)."""
    image = _compile("spirv").image
    assert all(CONTAINER not in k.props.get("fallbacks", "") for k in read_image(image).kernels)
    mod, host = executor.load(image, opencl), executor.load(images[1])
    for name in ("qmm", "qmmt"):
        args = _inputs(name)
        got, want = _tuple(mod.function(name)(*args)), _tuple(host.function(name)(*args))
        if name == "qmm":
            np.testing.assert_array_equal(np.asarray(got[0], np.float32), np.asarray(want[0], np.float32))
        g, w = np.asarray(got[-1], np.float64), np.asarray(want[-1], np.float64)
        assert np.all(np.abs(g - w) <= 48 * np.finfo(np.float32).eps * np.abs(w).max()), np.abs(g - w).max()


STATIC = SRC.replace('"M", "K"', '"M", 64').replace('"K", "N"', '64, "N"').replace('"N", "K"', '"N", 64')


def _plan(arch: str, src: str = STATIC, name: str = "qmm") -> dict:
    return compiler.compile_source(src, "fp8.py", CompileOptions(target="ptx", arch=arch)).metadata["plans"][name]


def test_sm90a_multiplies_the_quantizing_kernels_bytes_without_packing():
    """K = 64: the quantizing kernels store e4m3/e5m2 bytes, the wgmma GEMM reads A in place and B [K, N]
    copied to [N, K] bytes unchanged (wgmma reads 8-bit operands K-major; no f16 → fp8 packing), and no
    fallback is recorded."""
    p = _plan("sm_90a")
    kinds = [s["kernel"].split("__")[-1] for s in p["steps"]]
    assert kinds == ["elementwise0", "elementwise1", "gemm2_pack_b", "gemm2"], kinds
    gemm = p["steps"][-1]
    assert [p["values"][a["value"]]["dtype"] for a in gemm["args"][:2]] == ["fp8_e4m3", "fp8_e5m2"]
    assert gemm["args"][0]["value"] == p["results"][0]   # A: the returned quantize, read in place
    assert not p.get("fallbacks")


def test_sm90a_reads_a_transposed_quantize_in_place():
    """q @ transpose(qt): the transpose of one-byte values folds into the GEMM (tessera.transpose_b), which
    reads qt [N, K] as wgmma wants B: three kernels, the two quantizes and the GEMM, no copy of B at all."""
    p = _plan("sm_90a", name="qmmt")
    kinds = [s["kernel"].split("__")[-1] for s in p["steps"]]
    assert kinds == ["elementwise0", "elementwise1", "gemm3"], kinds
    quant_b, gemm = p["steps"][1], p["steps"][2]
    assert gemm["args"][1]["value"] == quant_b["tensors"][-1]["value"] and gemm["args"][1]["shape"] == ["N", "K"]
    assert not p.get("fallbacks")


def test_sm90a_rounds_a_gemms_fp8_result_to_bytes():
    """The GEMM writes f32; a kernel of its own rounds it to e4m3 bytes, which the cast to f32 reads."""
    p = _plan("sm_90a", name="qout")
    kinds = [s["kernel"].split("__")[-1] for s in p["steps"]]
    assert kinds[2:4] == ["gemm2_pack_b", "gemm2"], kinds
    rounding, widening = p["steps"][4:]
    assert [p["values"][t["value"]]["dtype"] for t in rounding["tensors"]] == ["f32", "fp8_e4m3"]
    assert [p["values"][t["value"]]["dtype"] for t in widening["tensors"]] == ["fp8_e4m3", "f32"]
    assert not p.get("fallbacks")


def test_sm90a_keeps_the_containers_where_the_gemm_could_not_read_a_symbolic_k():
    """With a symbolic K the container path multiplied any K (its packing pads K to 16 bytes): kernel-made
    values keep it there rather than refuse the launch."""
    p = _plan("sm_90a", SRC)
    assert [s["kernel"].split("__")[-1] for s in p["steps"]][-3:] == ["gemm2_pack_a", "gemm2_pack_b", "gemm2"]
    assert any(CONTAINER in f for f in p["fallbacks"])


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_mma_sync_reads_the_f16_container(arch):
    p = _plan(arch)
    assert any(f.startswith("fp8_e4m3 stored as f16") for f in p["fallbacks"]), p["fallbacks"]
    gemm = p["steps"][-1]
    assert {p["values"][a["value"]]["dtype"] for a in gemm["args"][:2]} == {"f16"}


@pytest.mark.parametrize("target, arch", [("cpu", None), ("spirv", None), ("ptx", "sm_80"), ("ptx", "sm_90a")])
def test_flash_attention_fp8_keeps_no_fp8_in_a_container(target, arch):
    """op.flash_attention_fp8 quantizes its bf16/f32 inputs itself: its fallback's quantize-dequantize pairs
    fuse into elementwise kernels, and sm_90a's kernel keeps Q, K, Vᵀ as one-byte plan values; nothing is
    stored in an f16 container on any target."""
    src = """
@function
def f(Q: tensor[bf16, "S", 128], K: tensor[bf16, "S", 128], V: tensor[bf16, "S", 128]):
    return op.flash_attention_fp8(Q, K, V)
"""
    p = compiler.compile_source(src, "a.py", CompileOptions(target=target, **({"arch": arch} if arch else {}))
                                ).metadata["plans"]["f"]
    assert not any(CONTAINER in f for f in p.get("fallbacks", [])), p.get("fallbacks")


def test_an_unused_fp8_parameter_stays_one_byte():
    """Regression: an fp8 parameter nothing reads was given the container and a rounding kernel without an
    output, which kernelgen failed on (IndexError) on every target."""
    src = """
@function
def f(E: tensor[fp8_e4m3, "N", "N"], F: tensor[fp8_e5m2, "N", "N"]):
    return op.cast(E, f32) * 2.0
"""
    for target, kw in (("cpu", {}), ("ptx", {"arch": "sm_80"})):
        p = compiler.compile_source(src, "u.py", CompileOptions(target=target, **kw)).metadata["plans"]["f"]
        assert [p["values"][v]["dtype"] for v in p["args"]] == ["fp8_e4m3", "fp8_e5m2"] and not p.get("fallbacks")
    e = np.array([[0x38, 0xB8], [0x7E, 0]], np.uint8)   # 1, -1, 448, 0
    got = executor.load(compiler.compile_source(src, "u.py").image).function("f")(e, e)
    np.testing.assert_array_equal(np.asarray(got), fp8_values(e, "fp8_e4m3").astype(np.float32) * 2)
