"""The CPU GEMM generator (backends/cpu/gemm.py), launched through tessera.runtime and checked against numpy.

Tolerances. References are computed in float64 from the same (f32, f16 or bf16) inputs.
- GEMM: elementwise |C - A·B| <= 2e-6 · sqrt(K) · (|A|·|B|). fp32 summation error grows like sqrt(K) · 2^-24
  · (|A|·|B|) for random data, so this is about 30 times the expected error, and far below what a skipped or
  doubled product (about (|A|·|B|) / K) would give for the shapes here.
- Epilogues: the GEMM bound times the step's largest slope (1.2 for gelu and silu, |alpha| for scale), plus
  the approximation error of the vector math, 1e-6 · (1 + |x|) + 2e-6 · |f(x)| (passes/vmath.py: erf
  and tanh are within 5e-7 absolute, exp 1e-7 relative; gelu multiplies erf's error by x/2).
"""

import math

import numpy as np
import pytest

from tessera import abi, runtime
from tessera.backends.cpu import gemm
from tessera.backends.cpu.gemm_schedule import Schedule, choose_schedule, vector_isa
from tessera.backends.cpu.target import HostTarget, cache_sizes
from tessera.dialects import make_context
from tessera.image import read_image
from tessera.mlir import ir
from tessera.tools import kernels

RNG = np.random.default_rng(2024)

# A small schedule: every test shape spans several blocks, A blocks (the last one partial), K chunks and
# edge tiles of it.
SMALL = Schedule(mb=30, nc=32, mc=12, kc=8, mr=6, nr=16, vector_width=8)

_images: dict = {}


def load(spec: gemm.GemmSpec):
    if spec not in _images:
        _images[spec] = runtime.load(kernels.compile_gemm(spec))
    return getattr(_images[spec], spec.name)


def run(spec, A, B, *extras, grid=None):
    M, N = A.shape[0], B.shape[1]
    C = np.full((M, N), np.nan, dtype=np.float32)
    load(spec)(A, B, C, *extras, grid=grid or gemm.gemm_grid(spec, M, N), block=1)
    return C


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def gemm_bound(A, B):
    K = A.shape[1]
    return 2e-6 * math.sqrt(max(K, 1)) * (np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64))


def check_gemm(C, A, B):
    ref = A.astype(np.float64) @ B.astype(np.float64)
    err = np.abs(C - ref)
    bound = gemm_bound(A, B)
    assert np.all(err <= bound), f"max error {err.max():.3g}, worst error/bound {np.max(err / (bound + 1e-30)):.3g}"


_erf = np.vectorize(math.erf)
REFERENCE = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
}
SLOPE = {"relu": 1.0, "gelu": 1.2, "gelu_tanh": 1.2, "silu": 1.2, "sigmoid": 0.25, "tanh": 1.0}


def check_activation(out, x, step, slack=0.0):
    """out ≈ f(x) for f64 inputs x, with `slack` the error already in x."""
    ref = REFERENCE[step](x)
    tol = SLOPE[step] * slack + 1e-6 * (1.0 + np.abs(x)) + 2e-6 * np.abs(ref)
    err = np.abs(out - ref)
    assert np.all(err <= tol), f"{step}: max error {err.max():.3g} at x = {x.flat[np.argmax(err - tol)]:.6g}"


# -- plain GEMM ---------------------------------------------------------------------------------------------

SHAPES = [(1, 1, 1), (97, 131, 59), (1, 300, 7), (300, 1, 7), (1000, 5, 64), (5, 1000, 300), (513, 17, 1000),
          (64, 64, 64), (7, 33, 257)]


@pytest.mark.parametrize("M, N, K", SHAPES + [(512, 512, 512)])
def test_gemm_default_schedule(M, N, K):
    spec = gemm.GemmSpec("mm")
    A, B = f32(M, K), f32(K, N)
    check_gemm(run(spec, A, B), A, B)


@pytest.mark.parametrize("M, N, K", SHAPES + [(37, 71, 29), (30, 32, 8), (31, 33, 9), (29, 31, 7), (12, 16, 4)])
def test_gemm_small_blocks(M, N, K):
    """Shapes that are not multiples of MB, NC, MC, KC, MR, NR or the k unroll, and exact multiples."""
    spec = gemm.GemmSpec("mm", schedule=SMALL)
    A, B = f32(M, K), f32(K, N)
    check_gemm(run(spec, A, B), A, B)


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("M, N, K", SHAPES + [(37, 71, 29), (30, 32, 8), (31, 33, 17), (12, 16, 4), (50, 15, 33),
                                     (6, 160, 64), (7, 9, 0)])
def test_gemm_multi_buffered_b_panel(stages, M, N, K):
    """The next chunks' B panels packed into rotating copies during the micro-kernels: shapes with one chunk,
    several, a short last one, no full NR strip (N < NR: only the finishing pass packs), empty K, and blocks
    with too few micro-kernel trips to pack a panel (the rest is packed after the chunk)."""
    import dataclasses
    spec = gemm.GemmSpec("mm", schedule=dataclasses.replace(SMALL, stages=stages))
    A, B = f32(M, K), f32(K, N)
    check_gemm(run(spec, A, B), A, B)




def run_transposed(spec, A, B):
    """C = A·B with A, B passed as stored: Aᵀ (a contiguous copy) where spec.trans_a, Bᵀ where spec.trans_b."""
    At = np.ascontiguousarray(A.T) if spec.trans_a else A
    Bt = np.ascontiguousarray(B.T) if spec.trans_b else B
    M, N = A.shape[0], B.shape[1]
    C = np.full((M, N), np.nan, dtype=np.float32)
    load(spec)(At, Bt, C, grid=gemm.gemm_grid(spec, M, N), block=1)
    return C


LAYOUTS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("trans_a, trans_b", LAYOUTS, ids=["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize("M, N, K", SHAPES + [(37, 71, 29), (30, 32, 8), (31, 33, 9), (6, 160, 64), (7, 9, 0)])
def test_gemm_transposed_operands(trans_a, trans_b, stages, M, N, K):
    """Aᵀ and Bᵀ read in place while packing, at shapes that leave partial strips, blocks and chunks (and
    with the next B panel packed ahead, which for Bᵀ is packed whole)."""
    import dataclasses
    spec = gemm.GemmSpec("mm", schedule=dataclasses.replace(SMALL, stages=stages), trans_a=trans_a, trans_b=trans_b)
    A, B = f32(M, K), f32(K, N)
    check_gemm(run_transposed(spec, A, B), A, B)


@pytest.mark.parametrize("trans_a, trans_b", LAYOUTS[1:], ids=["tn", "nt", "tt"])
def test_gemm_transposed_default_schedule_bf16(trans_a, trans_b):
    """The cost model's blocking, and bf16 operands widened as they are read transposed."""
    spec = gemm.GemmSpec("mmt", dtype="bf16", trans_a=trans_a, trans_b=trans_b)
    A, B = to_bf16_bits(f32(300, 129)), to_bf16_bits(f32(129, 257))
    check_gemm(run_transposed(spec, A, B), from_bf16_bits(A), from_bf16_bits(B))


# Register tiles of the other ISAs, compiled for this host (wider vectors are split by LLVM): the generated
# loops are the same whatever the tile, so their numerics are checked here.
OTHER_TILES = pytest.mark.parametrize("schedule", [
    Schedule(mb=28, nc=64, mc=28, kc=16, mr=14, nr=32, vector_width=16),              # AVX-512
    Schedule(mb=32, nc=24, mc=16, kc=12, mr=8, nr=12, vector_width=4),                # NEON
    Schedule(mb=12, nc=16, mc=12, kc=8, mr=6, nr=8, vector_width=4, fma=False),       # SSE: multiply, add
    Schedule(mb=6, nc=16, mc=6, kc=5, mr=6, nr=16, vector_width=8, k_unroll=1),
], ids=["avx512", "neon", "sse", "no-unroll"])


@OTHER_TILES
def test_gemm_other_register_tiles(schedule):
    spec = gemm.GemmSpec("mm", schedule=schedule)
    for M, N, K in [(1, 1, 1), (45, 70, 37), (29, 100, 16)]:
        A, B = f32(M, K), f32(K, N)
        check_gemm(run(spec, A, B), A, B)


@OTHER_TILES
def test_gemm_transposed_other_register_tiles(schedule):
    """Aᵀ's strips are copied a vector at a time: MR wider than a vector (NEON's 8 of 4 lanes), narrower
    (AVX-512's 14 of 16), and not a multiple (SSE's 6 of 4)."""
    spec = gemm.GemmSpec("mmt", schedule=schedule, trans_a=True, trans_b=True)
    for M, N, K in [(1, 1, 1), (45, 70, 37), (29, 100, 16)]:
        A, B = f32(M, K), f32(K, N)
        check_gemm(run_transposed(spec, A, B), A, B)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("trans_b", [False, True], ids=["n", "t"])
def test_avx512_strips_packed_by_register_transposes(dtype, trans_b):
    """The 16-lane tile packs A (and Bᵀ) 16 values of k at a time by transposing row vectors in registers,
    the chunk's remaining k by gathers: strips full and partial (rows past M or N are zeros), chunks of
    multiples of 16 and not, operands widened from f16 and bf16."""
    schedule = Schedule(mb=56, nc=64, mc=28, kc=48, mr=14, nr=32, vector_width=16)
    spec = gemm.GemmSpec(f"mmx_{dtype}", dtype=dtype, schedule=schedule, trans_b=trans_b)
    for M, N, K in [(29, 45, 53), (14, 32, 16), (15, 33, 64), (70, 100, 97), (3, 5, 17)]:
        A, B = f32(M, K), f32(K, N)
        if dtype == "f16":
            A, B = A.astype(np.float16), B.astype(np.float16)
            Af, Bf = A.astype(np.float32), B.astype(np.float32)
        elif dtype == "bf16":
            A, B = to_bf16_bits(A), to_bf16_bits(B)
            Af, Bf = from_bf16_bits(A), from_bf16_bits(B)
        else:
            Af, Bf = A, B
        Bt = np.ascontiguousarray(B.T) if trans_b else B
        C = np.full((M, N), np.nan, dtype=np.float32)
        load(spec)(A, Bt, C, grid=gemm.gemm_grid(spec, M, N), block=1)
        check_gemm(C, Af, Bf)


def test_gemm_f16_inputs_are_widened_while_packing():
    spec = gemm.GemmSpec("mm16", dtype="f16", schedule=SMALL)
    A, B = f32(41, 23).astype(np.float16), f32(23, 50).astype(np.float16)
    check_gemm(run(spec, A, B), A.astype(np.float32), B.astype(np.float32))


def to_bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16, as the runtime takes bf16 tensors), rounding to nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def test_gemm_bf16_inputs_are_widened_while_packing():
    spec = gemm.GemmSpec("mmbf", dtype="bf16", schedule=SMALL)
    A, B = to_bf16_bits(f32(41, 23)), to_bf16_bits(f32(23, 50))
    check_gemm(run(spec, A, B), from_bf16_bits(A), from_bf16_bits(B))


def test_empty_k_writes_the_epilogue_of_zero():
    spec = gemm.GemmSpec("mmb", epilogue=(("bias",),), schedule=SMALL)
    bias = f32(40)
    C = run(spec, np.zeros((20, 0), np.float32), np.zeros((0, 40), np.float32), bias)
    np.testing.assert_array_equal(C, np.broadcast_to(bias, (20, 40)))


def test_stores_stay_inside_c():
    """Edge tiles are masked: the floats after C in its buffer are untouched."""
    spec = gemm.GemmSpec("mm", schedule=SMALL)
    M, N, K = 19, 37, 11
    A, B = f32(M, K), f32(K, N)
    backing = np.full(M * N + 64, 7.0, dtype=np.float32)
    C = backing[:M * N].reshape(M, N)
    load(spec)(A, B, C, grid=gemm.gemm_grid(spec, M, N), block=1)
    check_gemm(C, A, B)
    assert np.all(backing[M * N:] == 7.0)


def test_blocks_past_the_matrix_do_nothing():
    spec = gemm.GemmSpec("mm", schedule=SMALL)
    A, B = f32(30, 9), f32(9, 40)
    gx, gy, _ = gemm.gemm_grid(spec, 30, 40)
    check_gemm(run(spec, A, B, grid=(gx + 2, gy + 3, 2)), A, B)


# -- epilogues ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("step", list(REFERENCE))
def test_activation_over_its_whole_range(step):
    """I·X = X exactly, so the activation alone is checked, on values from -100 to 100."""
    spec = gemm.GemmSpec(f"act_{step}", epilogue=((step,),), schedule=SMALL)
    X = np.concatenate([np.linspace(-100, 100, 1001), np.linspace(-9, 9, 1001), [0.0, 1e-6, -1e-6, 1e-3, -1e-3,
                        88.0, -88.0, 90.0, -90.0]]).astype(np.float32)
    X = np.concatenate([X, np.zeros(-len(X) % 48, np.float32)]).reshape(-1, 48)
    eye = np.eye(X.shape[0], dtype=np.float32)
    check_activation(run(spec, eye, X), X.astype(np.float64), step)


@pytest.mark.parametrize("step", list(REFERENCE))
def test_activation_after_gemm(step):
    spec = gemm.GemmSpec(f"act_{step}", epilogue=((step,),), schedule=SMALL)
    A, B = f32(37, 50, scale=0.5), f32(50, 45, scale=0.5)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    check_activation(run(spec, A, B), ref, step, slack=gemm_bound(A, B))


def test_scale():
    spec = gemm.GemmSpec("mms", epilogue=(("scale",),), schedule=SMALL)
    A, B = f32(30, 21), f32(21, 50)
    alpha = np.float32(-2.5)
    C = run(spec, A, B, alpha)
    check_gemm(C / alpha, A, B)


def test_bias():
    spec = gemm.GemmSpec("mmb", epilogue=(("bias",),), schedule=SMALL)
    A, B, bias = f32(30, 21), f32(21, 50), f32(50)
    check_gemm(run(spec, A, B, bias) - bias, A, B)


def test_residual_add():
    spec = gemm.GemmSpec("mma", epilogue=(("add",),), schedule=SMALL)
    A, B, R = f32(30, 21), f32(21, 50), f32(30, 50)
    C = run(spec, A, B, R)
    check_gemm(C - R, A, B)


def test_bias_gelu_chain():
    spec = gemm.GemmSpec("mlp_up", epilogue=(("bias",), ("gelu",)), schedule=SMALL)
    A, B, bias = f32(45, 33, scale=0.5), f32(33, 70, scale=0.5), f32(70)
    x = A.astype(np.float64) @ B.astype(np.float64) + bias
    check_activation(run(spec, A, B, bias), x, "gelu", slack=gemm_bound(A, B))


def test_scale_add_chain():
    """Parameters follow the step order: alpha, then the residual."""
    spec = gemm.GemmSpec("mm_sa", epilogue=(("scale",), ("add",)), schedule=SMALL)
    A, B, R = f32(25, 40), f32(40, 35), f32(25, 35)
    alpha = np.float32(0.5)
    C = run(spec, A, B, alpha, R)
    check_gemm((C - R) / alpha, A, B)


def test_sgd_update_epilogue():
    """scale_by then sub_from: W − lr·(A·B), lr a one-element tensor read at run time, W the minuend;
    several K chunks (SMALL's KC is 8), so only the last chunk's store applies them."""
    spec = gemm.GemmSpec("mm_sgd", epilogue=("scale_by", "sub_from"), schedule=SMALL)
    A, B, W = f32(31, 37), f32(37, 45), f32(31, 45)
    lr = np.array([0.25], np.float32)
    C = run(spec, A, B, lr, W)
    err = np.abs(C - (W - 0.25 * (A.astype(np.float64) @ B.astype(np.float64))))
    assert np.all(err <= 0.25 * gemm_bound(A, B) + 1e-6 * np.abs(W))


@pytest.mark.parametrize("step", ["gelu_grad", "gelu_tanh_grad"])
def test_gelu_derivative_epilogue(step):
    """(A·B) ∘ gelu'(Z), the cotangent through a GELU, against f64 numpy of the derivative's closed form
    (erf and tanh forms); several K chunks, edge tiles, Z over the range where gelu' bends (|Z| ≤ 5)."""
    spec = gemm.GemmSpec(f"mm_{step}", epilogue=(step,), schedule=SMALL)
    A, B = f32(31, 37), f32(37, 45)
    Z = np.linspace(-5.0, 5.0, 31 * 45, dtype=np.float32).reshape(31, 45)
    z = Z.astype(np.float64)
    if step == "gelu_grad":
        d = 0.5 * (1.0 + _erf(z / math.sqrt(2.0))) + z * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    else:
        c, k = math.sqrt(2.0 / math.pi), 0.044715
        t = np.tanh(c * (z + k * z ** 3))
        d = 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * c * (1.0 + 3.0 * k * z * z)
    dh = A.astype(np.float64) @ B.astype(np.float64)
    C = run(spec, A, B, Z)
    # |gelu'| ≤ 1.13: the product's error scaled by it, plus the vector math's (erf/tanh 5e-7, exp 1e-7)
    # times |dH|·(1 + |Z|)
    err = np.abs(C - dh * d)
    assert np.all(err <= 1.13 * gemm_bound(A, B) + 2e-6 * np.abs(dh) * (1.0 + np.abs(z))), err.max()


def test_long_chain_in_step_order():
    """scale, bias, relu, then add: relu sees the biased product, the residual comes after it."""
    spec = gemm.GemmSpec("mm_chain", epilogue=("scale", "bias", "relu", "add"), schedule=SMALL)
    A, B, bias, R = f32(31, 17), f32(17, 43), f32(43), f32(31, 43)
    alpha = np.float32(1.5)
    C = run(spec, A, B, alpha, bias, R)
    x = 1.5 * (A.astype(np.float64) @ B.astype(np.float64)) + bias
    err = np.abs(C - (np.maximum(x, 0) + R))
    assert np.all(err <= 1.5 * gemm_bound(A, B) + 1e-6 * np.abs(R))


# -- the kernel's interface ---------------------------------------------------------------------------------

def test_signature_and_image_properties():
    spec = gemm.GemmSpec("mlp", epilogue=(("scale",), ("bias",), ("gelu",), ("add",)), schedule=SMALL)
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        fn = gemm.build_gemm(module, spec)
        sig = abi.signature_of(fn)
        assert "tessera.tile_kernel" in fn.attributes
    params = [(a.name, a.kind, a.readonly) for a in sig.params]
    assert params == [("A", abi.TENSOR, True), ("B", abi.TENSOR, True), ("C", abi.TENSOR, False),
                      ("alpha", abi.SCALAR, False), ("bias", abi.TENSOR, True), ("residual", abi.TENSOR, True)]
    assert [a.name for a in sig.args if a.kind == abi.DIM] == ["M", "K", "N"]
    (record,) = read_image(kernels.compile_gemm(spec)).kernels
    assert record.props["block"] == "30x32" and record.props["cache_blocks"] == "12x8"
    assert record.props["micro_tile"] == "6x16"
    assert record.props["epilogue"] == "scale,bias,gelu,add"


def test_grid():
    spec = gemm.GemmSpec("mm", schedule=SMALL)
    assert gemm.gemm_grid(spec, 1, 1) == (1, 1, 1)
    assert gemm.gemm_grid(spec, 61, 33) == (2, 3, 1)   # x over N tiles of 32, y over M tiles of 30
    assert gemm.gemm_grid(spec, 0, 0) == (1, 1, 1)


@pytest.mark.parametrize("bad, message", [
    (dict(epilogue=(("softmax",),)), "unknown epilogue step"),
    (dict(epilogue=(("bias",), ("bias",))), "appear once"),
    (dict(dtype="f64"), "input dtype"),
    (dict(name="my gemm"), "not an identifier"),
])
def test_spec_refusals(bad, message):
    with pytest.raises(ValueError, match=message):
        gemm.GemmSpec(**{"name": "mm", "schedule": SMALL, **bad})


@pytest.mark.parametrize("fields, message", [
    (dict(mb=12, nc=32, mc=12, kc=8, mr=6, nr=12, vector_width=8), "multiple of vector_width"),
    (dict(mb=12, nc=32, mc=10, kc=8, mr=6, nr=16, vector_width=8), "mc=10 must be a multiple of mr=6"),
    (dict(mb=14, nc=32, mc=12, kc=8, mr=6, nr=16, vector_width=8), "mb=14 must be a multiple of mr=6"),
    (dict(mb=12, nc=40, mc=12, kc=8, mr=6, nr=16, vector_width=8), "nc=40 must be a multiple of nr=16"),
    (dict(mb=12, nc=32, mc=12, kc=0, mr=6, nr=16, vector_width=8), "kc must be positive"),
])
def test_schedule_refusals(fields, message):
    with pytest.raises(ValueError, match=message):
        Schedule(**fields)


# -- the schedule -------------------------------------------------------------------------------------------

ZEN3 = HostTarget("x86_64", "x86_64-unknown-linux-gnu", "znver3", "+avx,+avx2,+fma,+sse4.2")
SKX = HostTarget("x86_64", "x86_64-unknown-linux-gnu", "skylake-avx512", "+avx,+avx2,+fma,+avx512f")
CACHES = {1: 32 << 10, 2: 512 << 10, 3: 32 << 20}


@pytest.mark.parametrize("target, tile", [
    (ZEN3, (8, 6, 16, True)), (SKX, (16, 14, 32, True)),
    (HostTarget("aarch64", "aarch64-unknown-linux-gnu", "neoverse-n1", "+neon"), (4, 8, 12, True)),
    (HostTarget("x86_64", "x86_64-unknown-linux-gnu", "x86-64", "+sse2"), (4, 6, 8, False)),
])
def test_register_tile_per_isa(target, tile):
    isa = vector_isa(target)
    assert (isa.vector_width, isa.mr, isa.nr, isa.fma) == tile


@pytest.mark.parametrize("M, N, K", [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (1, 1, 1),
                                     (97, 131, 59), (4096, 64, 4096), (64, 4096, 100)])
@pytest.mark.parametrize("threads", [1, 2, 16])
def test_choose_schedule_respects_caches_and_cores(M, N, K, threads):
    s = choose_schedule(M, N, K, ZEN3, threads=threads, caches=CACHES)
    assert (s.mr, s.nr, s.vector_width) == (6, 16, 8)
    assert s.kc * s.nr * 4 <= CACHES[1] * 2 // 3, "the B micro-panel must fit in two thirds of L1"
    assert s.mc * s.kc * 4 <= CACHES[2] // 3 or s.mc == s.mr, "the packed A block must fit in a third of L2"
    gx, gy, _ = gemm.gemm_grid(gemm.GemmSpec("mm", schedule=s), M, N)
    if M * N >= 512 * 512:
        assert gx * gy >= threads, "every core gets a block"
    assert s.mc <= s.mb
    # No block is mostly padding: tiles are balanced over the matrix.
    assert s.mb < M + s.mr and s.nc < N + s.nr


@pytest.mark.parametrize("K, kc", [(512, 512), (1024, 1024), (2048, 1024), (1500, 752)])
def test_avx512_b_micro_panel_streams_from_l2(K, kc):
    """The 16-lane tile's B micro-panel may take 8/3 of a 48 KiB L1 (KC up to 1024, K split evenly), where
    the AVX2 tile keeps two thirds; the A block still fits a third of L2."""
    caches = {1: 48 << 10, 2: 1 << 20, 3: 32 << 20}
    s = choose_schedule(K, K, K, SKX, threads=2, caches=caches)
    assert s.kc == kc
    assert s.mc * s.kc * 4 <= caches[2] // 3
    assert choose_schedule(K, K, K, ZEN3, threads=2, caches=caches).kc * 16 * 4 <= caches[1] * 2 // 3


def test_choose_schedule_splits_k_evenly():
    s = choose_schedule(512, 512, 500, ZEN3, threads=2, caches=CACHES)
    assert s.kc == 252   # two chunks of 250 (rounded up to the k unroll), not 340 + 160


def test_cache_sizes_from_sysfs(tmp_path):
    """Data and unified caches by level, instruction caches skipped; defaults where sysfs says nothing."""
    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                                 (2, "Unified", "2048K"), (3, "Unified", "105M")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert cache_sizes(str(tmp_path)) == {1: 48 << 10, 2: 2 << 20, 3: 105 << 20}
    assert cache_sizes(str(tmp_path / "absent")) == {1: 32 << 10, 2: 512 << 10, 3: 8 << 20}


ZEN5_CACHES = {1: 48 << 10, 2: 1 << 20, 3: 32 << 20}


@pytest.mark.parametrize("n, block", [(1024, (1036, 512)), (2048, (2058, 1024))])
def test_avx512_two_threads_one_block_each(n, block):
    """With the 16-lane tile, two threads get one block each at 1024³ and 2048³ (each packs its A rows and B
    columns once; the 2×2 and 3×2 grids the half-block tail term chose packed them again in every block of
    their row and column), split along N: the smaller B panel (docs/performance.md, session 31)."""
    s = choose_schedule(n, n, n, SKX, threads=2, caches=ZEN5_CACHES)
    gx, gy, _ = gemm.gemm_grid(gemm.GemmSpec("mm", schedule=s), n, n)
    assert (gx, gy) == (2, 1) and (s.mb, s.nc) == block
    # The AVX2 tile keeps the half-block term: more blocks than threads there.
    z = choose_schedule(n, n, n, ZEN3, threads=2, caches=ZEN5_CACHES)
    zx, zy, _ = gemm.gemm_grid(gemm.GemmSpec("mm", schedule=z), n, n)
    assert zx * zy > 2


@pytest.mark.parametrize("threads", [1, 2, 16])
def test_avx512_every_core_gets_a_block(threads):
    for n in (512, 1024, 2048):
        s = choose_schedule(n, n, n, SKX, threads=threads, caches=ZEN5_CACHES)
        gx, gy, _ = gemm.gemm_grid(gemm.GemmSpec("mm", schedule=s), n, n)
        assert gx * gy >= threads


@pytest.mark.parametrize("epilogue", [(), ("bias", "gelu_tanh"), ("add",)], ids=["plain", "bias-gelu", "add"])
@pytest.mark.parametrize("trans_b", [False, True], ids=["n", "t"])
def test_avx512_short_last_strip_kernels(epilogue, trans_b):
    """With the 16-lane tile, a last strip of fewer than 14 rows runs a micro-kernel of 2, 4 or 8 rows
    (gemm.EDGE_ROWS) or the full one: every remainder 1..13, A blocks ending mid-block, two K chunks (the
    partial sums read back from C), edge columns, and epilogues with a parameter of C's extents."""
    schedule = Schedule(mb=56, nc=64, mc=28, kc=24, mr=14, nr=32, vector_width=16)
    spec = gemm.GemmSpec(f"mme_{len(epilogue)}_{int(trans_b)}", schedule=schedule, epilogue=epilogue,
                         trans_b=trans_b)
    K, N = 40, 45
    for M in [14 * q + r for q in (0, 2) for r in range(1, 14)] + [14, 56 + 3]:
        A, B = f32(M, K), f32(K, N)
        extras, want = [], A.astype(np.float64) @ B.astype(np.float64)
        if "bias" in epilogue:
            bias = f32(N)
            extras.append(bias)
            want = REFERENCE["gelu_tanh"](want + bias)
        if "add" in epilogue:
            residual = f32(M, N)
            extras.append(residual)
            want = want + residual
        Bt = np.ascontiguousarray(B.T) if trans_b else B
        C = np.full((M, N), np.nan, dtype=np.float32)
        load(spec)(A, Bt, C, *extras, grid=gemm.gemm_grid(spec, M, N), block=1)
        tol = 2.5 * gemm_bound(A, B) + 1e-6 * (1.0 + np.abs(want))
        assert np.all(np.abs(C - want) <= tol), f"M={M}: max error {np.nanmax(np.abs(C - want)):.3g}"
