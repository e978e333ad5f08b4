"""The PTX backend without a GPU: kernels compile to PTX that ptxas assembles, the kernel ABI, images with
several targets, and the GPU math lowering's numerics (run on the CPU, where they are the same arithmetic).

Running the PTX needs a GPU: tests/gpu/ (docs/nvidia.md, "Testing on a GPU machine").
"""

import ctypes
import math
import pathlib
import re

import numpy as np
import pytest

from tessera import compiler, image
from tessera.backends.ptx import ptxas
from tessera.options import CompileOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = [REPO / "examples" / "saxpy.py", REPO / "examples" / "graph" / "reductions.py"]

# Graph IR functions whose generated kernels cover kernelgen's elementwise, row and layout kernels and every
# unary and binary op it writes, in f32 and through the bf16/f16 fallbacks.
GRAPH = {
    "unary": """
@function
def f(X: tensor[f32, "N", "D"]):
    return (op.relu(X) + op.gelu(X) + op.gelu(X, approximate="tanh") + op.silu(X) + op.sigmoid(X) + op.tanh(X)
            + op.exp(X) + op.log(op.abs(X) + 1.0) + op.sqrt(op.abs(X)) + op.rsqrt(op.abs(X) + 1.0) - X
            + op.erf(X) + op.square(X) + op.reciprocal(X + 9.0))
""",
    "binary": """
@function
def f(X: tensor[f32, "N", "D"], Y: tensor[f32, "N", "D"], b: tensor[f32, "D"], s: tensor[f32, "N", 1]):
    return op.maximum(X, Y) - op.minimum(X, Y) + X / (op.abs(Y) + 1.0) + (op.abs(X) + 1.0) ** Y + b * s
""",
    "rows": """
@function
def f(X: tensor[f32, "N", "D"], g: tensor[f32, "D"], b: tensor[f32, "D"]):
    return op.softmax(X), op.layernorm(X, gamma=g, beta=b), op.rmsnorm(X, gamma=g), op.sum(X, axis=-1), \\
        op.max(X, axis=-1), op.mean(X, axis=-1), op.min(X, axis=-1)
""",
    "layout": """
@function
def f(X: tensor[f32, "B", "M", "N"]):
    return op.transpose(X, perm=(0, 2, 1)) * 2.0
""",
    "narrow": """
@function
def f(X: tensor[bf16, "N", "D"], Y: tensor[f16, "N", "D"]):
    return op.gelu(X) + 1.0, op.softmax(Y)
""",
    "dropout": """
@function
def f(X: tensor[f32, "N", "D"], Y: tensor[bf16, "N", "D"]):
    return (op.dropout(X * 2.0, 0.3, 0x0123456789ABCDEF, offset=4294967290) - X, op.dropout(op.softmax(X), 0.1, 7),
            op.dropout(Y, 0.5, 3))
""",
}

needs_ptxas = pytest.mark.skipif(ptxas.find() is None,
                                 reason="ptxas (CUDA's PTX assembler) is not installed (the CUDA toolkit)")


def compile_ptx(source: str, filename: str, arch: str = "sm_80", **kw):
    return compiler.compile_source(source, filename, CompileOptions(target="ptx", arch=arch), **kw)


def ptx_of(result) -> str:
    return image.read_image(result.image).section(".tessera.code.ptx").decode()


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_assemble(path, arch):
    """Compilation runs ptxas on the PTX; the registers it reports land in every kernel record."""
    img = image.read_image(compile_ptx(path.read_text(), str(path), arch).image)
    assert img.kernels and all(k.target == "ptx" and k.arch == arch and k.regs > 0 for k in img.kernels)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", GRAPH)
def test_graph_kernels_assemble(name, arch):
    result = compile_ptx(GRAPH[name], f"{name}.py", arch)
    img = image.read_image(result.image)
    steps = [s["kernel"] for s in result.metadata["plans"]["f"]["steps"] if "kernel" in s]
    assert steps and sorted(k.name for k in img.kernels) == sorted(steps)
    assert all(k.regs > 0 for k in img.kernels)
    # no libdevice: every function the PTX calls is defined in it
    assert ".extern" not in ptx_of(result)


def test_entry_parameters_are_the_launch_signature():
    """saxpy(a, X, Y, Out) + three extents: f32 by value, three global pointers, three u64 dimensions, and
    the caller's thread count the runtime adds to a coarsened kernel (passes/simt_coarsen.py)."""
    ptx = ptx_of(compile_ptx((REPO / "examples" / "saxpy.py").read_text(), "saxpy.py"))
    params = re.search(r"\.visible \.entry saxpy\((.*?)\)", ptx, re.S).group(1)
    kinds = [p.split()[1] for p in params.strip().split(",\n")]
    assert kinds == [".f32", ".u64", ".u64", ".u64", ".u64", ".u64", ".u64", ".u64"]
    assert params.count(".ptr .global") == 3


def test_bool_and_integer_scalars_keep_their_c_size():
    src = """
@kernel
def k(flag: bool, n: int, X: tensor[float, "N"]):
    i = launch.thread_id()
    if flag and i < n:
        X[i] = 1.0
"""
    ptx = ptx_of(compile_ptx(src, "k.py"))
    params = re.search(r"\.visible \.entry k\((.*?)\)", ptx, re.S).group(1)
    assert [p.split()[1] for p in params.strip().split(",\n")] == [".u8", ".u32", ".u64", ".u64"]


def test_one_image_for_cpu_and_ptx(monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", "0")  # per-target metadata comes from a compilation, not a cached image
    path = REPO / "examples" / "saxpy.py"
    result = compiler.compile_source(path.read_text(), str(path), CompileOptions(target="cpu,ptx"))
    img = image.read_image(result.image)
    assert sorted((k.name, k.target) for k in img.kernels) == [
        ("saxpy", "cpu"), ("saxpy", "ptx"), ("warp_reduce_sum", "cpu"), ("warp_reduce_sum", "ptx")]
    assert img.section(".tessera.code.cpu") and img.section(".tessera.code.ptx")
    assert set(result.metadata["targets"]) == {"cpu", "ptx"}
    assert compiler.stage_names(CompileOptions(target="cpu,ptx"))[-5:] == [
        "ptx.gpu", "ptx.nvvm", "ptx.llir", "ptx.ptx", "image"]


def test_a_stage_of_one_target_of_several():
    path = REPO / "examples" / "saxpy.py"
    seen = {}
    compiler.compile_source(path.read_text(), str(path), CompileOptions(target="cpu,ptx"),
                            stop_after="ptx.llir", on_stage=lambda n, a: seen.setdefault(n, a))
    assert "cpu.so" in seen and "ptx.llir" in seen and "ptx.ptx" not in seen
    assert "nvptx64-nvidia-cuda" in seen["ptx.llir"]


def test_unknown_arch_and_bad_target_lists_are_refused():
    from tessera.diagnostics import CompileError
    with pytest.raises(CompileError, match="unknown NVIDIA architecture 'sm_99'"):
        compile_ptx("", "e.py", arch="sm_99")
    with pytest.raises(CompileError, match="names a target twice"):
        compiler.compile_source("", "e.py", CompileOptions(target="ptx,ptx"))


def test_unsupported_math_is_refused_at_the_users_line(compile_error):
    from tessera.diagnostics import CompileError
    src = """
@kernel
def k(X: tensor[float, "N"]):
    i = launch.thread_id()
    X[i] = math.sin(X[i])
"""
    with pytest.raises(CompileError) as info:
        compile_ptx(src, "user.py")
    e = info.value
    assert (e.filename, e.line) == ("user.py", 5) and "'math.sin' on f32 has no GPU lowering yet" in e.message


# -- the math lowering's numerics, on the CPU ----------------------------------------------------------------

def _jit_unary(op: str, dtype: str = "f32", strict: bool = False):
    """A host function f(x) -> y of the GPU lowering of `math.<op>` (llvm.call_intrinsic and arith only);
    `strict`: under the strict profile's widening first (passes/strict_math.py)."""
    import llvmlite.binding as llvm
    from tessera.backends import llvm_compat
    from tessera.backends.cpu.target import init_llvm
    from tessera.dialects import make_context
    from tessera.mlir import ir, passmanager, translate_module_to_llvmir
    from tessera.passes import gpu_math, strict_math

    args = "%x: f32, %y: f32" if op == "powf" else "%x: f32"
    operands = "%x, %y" if op == "powf" else "%x"
    with make_context(), ir.Location.unknown():
        m = ir.Module.parse(f"""
func.func @f({args}) -> f32 attributes {{llvm.emit_c_interface}} {{
  %r = math.{op} {operands} : f32
  return %r : f32
}}""")
        if strict:
            strict_math.run(m, gpu=True)
        gpu_math.run(m)
        passmanager.PassManager.parse("builtin.module(convert-arith-to-llvm,convert-func-to-llvm,"
                                      "reconcile-unrealized-casts)").run(m.operation)
        text = llvm_compat.downgrade(str(translate_module_to_llvmir(m.operation)))
    init_llvm()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    lmod = llvm.parse_assembly(text)
    lmod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(lmod, tm)
    engine.finalize_object()
    nargs = 2 if op == "powf" else 1
    fn = ctypes.CFUNCTYPE(ctypes.c_float, *[ctypes.c_float] * nargs)(engine.get_function_address("f"))
    fn.engine = engine  # keep the code alive with the function
    return fn


def _ulp_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    want32 = want.astype(np.float32)
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want32)).astype(np.float64)


def test_log_is_within_two_ulp():
    f = _jit_unary("log")
    x = np.concatenate([np.geomspace(1e-44, 1e38, 4000), np.linspace(0.5, 2.0, 2001)]).astype(np.float32)
    got = np.array([f(v) for v in x], dtype=np.float32)
    assert _ulp_error(got, np.log(x.astype(np.float64))).max() <= 2
    special = [f(v) for v in (0.0, -1.0, float("inf"), float("nan"))]
    assert special[0] == -np.inf and np.isnan(special[1]) and special[2] == np.inf and np.isnan(special[3])


def _specials(n: int, lo: float, hi: float, rng) -> np.ndarray:
    return np.concatenate([rng.uniform(lo, hi, n), rng.uniform(-1, 1, n), rng.standard_normal(n) * 1e-3,
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1.0, 2.0, 8.0, 0.5, 3.4e38,
                            -3.4e38]]).astype(np.float32)


@pytest.mark.parametrize("op, lo, hi, ref", [
    ("exp", -105.0, 90.0, np.exp), ("exp2", -152.0, 130.0, np.exp2), ("log", 0.0, 1e4, np.log),
    ("log2", 0.0, 100.0, np.log2), ("tanh", -12.0, 12.0, np.tanh), ("erf", -5.0, 5.0, np.vectorize(math.erf))])
def test_strict_gpu_math_is_the_cpus_correctly_rounded_f32(op, lo, hi, ref):
    """Under strict, ptx and amdgpu compute f32 math in f64 (passes/f64_math.py) and round once: the bits
    the CPU's strict code (glibc's f64 function, rounded to f32) gives, subnormals, infinities and NaN
    included; the fast lowering's approximations differ from them."""
    rng = np.random.default_rng(5)
    x = _specials(6000, lo, hi, rng)
    if op.startswith("log"):
        x = np.concatenate([x, np.geomspace(1e-44, 3e38, 3000).astype(np.float32)])
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    strict, fast = _jit_unary(op, strict=True), _jit_unary(op)
    got = np.array([strict(v) for v in x], dtype=np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (x[~same][:5], got[~same][:5], want[~same][:5])
    approximate = np.array([fast(v) for v in x], dtype=np.float32)
    assert not np.array_equal(approximate.view(np.uint32), want.view(np.uint32))


def test_strict_gpu_pow_is_the_cpus():
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.uniform(0, 10, 4000), rng.uniform(-4, 4, 1000).round()]).astype(np.float32)
    y = np.concatenate([rng.uniform(-8, 8, 4000), rng.uniform(-5, 5, 1000).round()]).astype(np.float32)
    # C's edges: 1^NaN = 1, (-1)^inf = 1, 0^-1 = inf, 0^0 = 1, (-2)^0.5 = NaN, overflow, NaN^0 = 1, and -inf's
    # powers, ±0 or ±inf whatever y (NaN on the GPU before its first run)
    x = np.concatenate([x, np.float32([1.0, -1.0, 0.0, 0.0, -2.0, 2.0, np.nan, -np.inf, -np.inf, -np.inf, -np.inf])])
    y = np.concatenate([y, np.float32([np.nan, np.inf, -1.0, 0.0, 0.5, 200.0, 0.0, -0.5, 0.5, 3.0, -3.0])])
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    f = _jit_unary("powf", strict=True)
    got = np.array([f(a, b) for a, b in zip(x, y)], dtype=np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (x[~same][:5], y[~same][:5], got[~same][:5], want[~same][:5])


def test_pow_signs_and_edges_follow_c():
    f = _jit_unary("powf")
    cases = [(2.0, 10.0), (-2.0, 3.0), (-2.0, 2.0), (-2.0, 0.5), (0.0, 2.0), (0.0, -1.0), (5.0, 0.0),
             (-3.0, 0.0), (1.5, -2.25), (10.0, -3.0)]
    for x, y in cases:
        with np.errstate(divide="ignore", invalid="ignore"):
            want = np.float32(np.power(np.float64(x), np.float64(y)))
        got = f(x, y)
        if np.isnan(want):
            assert np.isnan(got), (x, y)
        else:
            assert got == pytest.approx(float(want), rel=3e-6), (x, y)
