"""passes/simt_coarsen.py: which SIMT kernels it coarsens, and that a coarsened kernel, launched as the runtime
launches it (ceil(grid.x / C) blocks, the caller's grid.x · block.x as its hidden argument), does exactly what
the kernel as written does, for every n (0, below C, not a multiple of C), launches covering less or more than
n, tensors misaligned for 16-byte accesses and tensors that alias.

Neither the CPU nor the OpenCL runtime runs a coarsened kernel (the pass serves ptx and amdgpu only: the CPU
and SPIR-V backends already vectorize across a warp's lanes, docs/language.md "Coarsened elementwise
kernels"), so the kernels run here under `_run`, a direct executor of the IR before and after the pass: one
thread after another (no kernel here has cross-thread operations), vector accesses checked for their 16-byte
alignment and bounds as the hardware would fault."""

import pathlib
import re

import numpy as np
import pytest

from tessera import compiler, image
from tessera.mlir import ir
from tessera.options import CompileOptions
from tessera.passes import simt_coarsen

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "saxpy.py"

SOURCE = """
from tessera import kernel, launch, tensor, tile, f16, i32

@kernel
def saxpy(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]

@kernel
def halves(X: tensor[f16, "N"], Out: tensor[f16, "N"], n: int):
    i = launch.thread_id()
    if i < n:
        Out[i] = X[i] * X[i] + X[i]

@kernel
def widen(X: tensor[f16, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = float(X[i]) * 2.0

@kernel
def one_row(X: tensor[float, "R", "C"], Out: tensor[float, "R", "C"]):
    i = launch.thread_id()
    if i < Out.shape[1]:
        Out[0, i] = X[0, i] * X[0, i]

@kernel
def strided(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if 2 * i < X.shape[0]:
        Out[i] = X[2 * i]

@kernel
def reversed_(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[X.shape[0] - 1 - i] = X[i]

@kernel
def shuffled(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    v = X[i]
    v += tile.warp_shuffle_down(v, 1)
    if i < X.shape[0]:
        Out[i] = v

@kernel
def barrier(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    tile.barrier()
    if i < X.shape[0]:
        Out[i] = X[i]

@kernel
def iota(Out: tensor[i32, "N"]):
    i = launch.thread_id()
    if i < Out.shape[0]:
        Out[i] = i

@kernel
def unguarded(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    Out[i] = X[i]

@kernel
def local_index(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.local_id()
    if i < X.shape[0]:
        Out[i] = X[i]
"""

COARSENED = {"saxpy": 4, "halves": 8, "widen": 8, "one_row": 4}
KEPT = ["strided", "reversed_", "shuffled", "barrier", "iota", "unguarded", "local_index"]


@pytest.fixture(scope="module")
def kernels_ir() -> str:
    """The kernels as the ptx backend receives them (after the Graph IR phases)."""
    got = {}
    compiler.compile_source(SOURCE, "k.py", CompileOptions(target="ptx"), stop_after="kernels",
                            on_stage=lambda name, art: got.setdefault(name, str(art)))
    return got["kernels"]


def _functions(module) -> dict:
    return {ir.StringAttr(op.attributes["sym_name"]).value: op for op in module.body.operations
            if op.operation.name == "func.func"}


@pytest.fixture()
def modules(kernels_ir):
    """(as written, coarsened): two parses of the kernels, the pass run on the second."""
    with compiler.make_context(), ir.Location.unknown():
        plain = ir.Module.parse(kernels_ir)
        coarse = ir.Module.parse(kernels_ir)
        done = simt_coarsen.run(coarse)
        yield _functions(plain), _functions(coarse), done


def test_elementwise_kernels_are_coarsened_to_16_bytes_a_thread(modules):
    _, coarse, done = modules
    assert done == COARSENED
    for name, factor in COARSENED.items():
        assert ir.IntegerAttr(coarse[name].attributes[simt_coarsen.FACTOR]).value == factor


@pytest.mark.parametrize("name", KEPT)
def test_other_kernels_are_left_as_written(modules, name):
    plain, coarse, _ = modules
    assert simt_coarsen.FACTOR not in coarse[name].attributes
    assert str(coarse[name]) == str(plain[name])
    assert isinstance(simt_coarsen.elementwise(plain[name]), str)   # the rule it breaks, in words


# ---- a direct executor of the kernels' IR ------------------------------------------------------------------

class Buffer:
    """A tensor at a device address (`misalign` bytes past a 256-byte boundary)."""

    def __init__(self, array: np.ndarray, misalign: int = 0):
        self.array = array
        self.address = (1 << 20) + misalign


_CMP = {0: lambda a, b: a == b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b, 6: lambda a, b: a < b,
        7: lambda a, b: a <= b}
_BIN = {"arith.addi": lambda a, b: a + b, "arith.muli": lambda a, b: a * b, "arith.subi": lambda a, b: a - b,
        "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b, "arith.minsi": min, "arith.minui": min,
        "arith.addf": lambda a, b: a + b, "arith.mulf": lambda a, b: a * b, "arith.subf": lambda a, b: a - b}


def _run_block(block, env: dict, tid: int, threads: int) -> None:
    for op in block.operations:
        name = op.operation.name
        args = [env[v] for v in op.operands]
        if name in ("func.return", "scf.yield"):
            return
        if name == "arith.constant":
            attr = op.attributes["value"]
            value = ir.FloatAttr(attr).value if isinstance(attr, ir.FloatAttr) else ir.IntegerAttr(attr).value
            out = np.dtype(_np_type(op.result.type)).type(value) if not isinstance(op.result.type, ir.IndexType) else value
        elif name == "ttile.thread_id":
            out = tid
        elif name == "builtin.unrealized_conversion_cast":
            assert simt_coarsen.THREADS in op.attributes
            out = threads
        elif name in _BIN:
            out = _BIN[name](*args)
        elif name == "arith.cmpi":
            out = _CMP[ir.IntegerAttr(op.attributes["predicate"]).value](*args)
        elif name in ("arith.extf", "arith.truncf", "arith.sitofp", "arith.index_cast", "arith.extsi", "arith.trunci"):
            t = op.result.type
            out = args[0] if isinstance(t, ir.IndexType) else np.dtype(_np_type(t)).type(args[0])
        elif name == "memref.dim":
            out = args[0].array.shape[args[1]]
        elif name == "memref.load":
            at = tuple(args[1:])
            assert all(0 <= i < d for i, d in zip(at, args[0].array.shape)), f"out-of-bounds load at {at}"
            out = args[0].array[at]
        elif name == "memref.store":
            at = tuple(args[2:])
            assert all(0 <= i < d for i, d in zip(at, args[1].array.shape)), f"out-of-bounds store at {at}"
            args[1].array[at] = args[0]
        elif name == "memref.extract_aligned_pointer_as_index":
            out = args[0].address
        elif name in ("vector.load", "vector.store"):
            buf, at = (args[0], args[1:]) if name == "vector.load" else (args[1], args[2:])
            width = ir.VectorType((op.result if name == "vector.load" else op.operands[0]).type).shape[0]
            align = ir.IntegerAttr(op.attributes["alignment"]).value
            flat = int(np.ravel_multi_index(tuple(at), buf.array.shape)) if buf.array.size else at[-1]
            row = buf.array.reshape(-1)
            assert (buf.address + flat * buf.array.itemsize) % align == 0, "a misaligned vector access"
            assert 0 <= at[-1] and at[-1] + width <= buf.array.shape[-1], f"an out-of-bounds vector access at {at}"
            if name == "vector.load":
                out = row[flat:flat + width].copy()
            else:
                row[flat:flat + width] = args[0]
        elif name == "vector.extract":
            out = args[0][op.attributes["static_position"][0]]
        elif name == "vector.from_elements":
            out = np.array(args)
        elif name == "scf.if":
            region = op.regions[0] if args[0] else op.regions[1]
            if len(region.blocks):
                _run_block(region.blocks[0], env, tid, threads)
            continue
        else:
            raise NotImplementedError(name)
        if len(op.results):
            env[op.result] = out


def _np_type(t: ir.Type):
    return {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32, "i64": np.int64}[str(t)]


def _run(fn, args: list, grid: int, block: int, threads: int) -> None:
    """Every thread of a 1-D launch of `grid` × `block`, one after another."""
    entry = fn.regions[0].blocks[0]
    for tid in range(grid * block):
        env = dict(zip(entry.arguments, args))
        _run_block(entry, env, tid, threads)


def _launch_both(plain, coarse, name: str, make_args, grid: int, block: int):
    """The kernel as written over grid × block threads, and coarsened as the runtime launches it."""
    factor = COARSENED[name]
    a_plain, a_coarse = make_args(), make_args()
    _run(plain[name], a_plain, grid, block, 0)
    _run(coarse[name], a_coarse, -(-grid // factor), block, grid * block)
    return a_plain, a_coarse


def _same(a_plain, a_coarse):
    for p, c in zip(a_plain, a_coarse):
        if isinstance(p, Buffer):
            np.testing.assert_array_equal(c.array, p.array)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 7, 8, 9, 31, 64, 65, 130])
@pytest.mark.parametrize("block", [4, 32])
@pytest.mark.parametrize("cover", ["all", "fewer", "more"])
@pytest.mark.parametrize("misalign", [0, 4])
def test_coarsened_saxpy_is_the_kernel_as_written(modules, n, block, cover, misalign):
    """Identical results (bit for bit: the same operations per element); `fewer`: the caller launched fewer
    threads than n, which the kernel as written leaves the rest of Out untouched for."""
    plain, coarse, _ = modules
    grid = {"all": max(1, -(-n // block)), "fewer": max(1, n // block // 2), "more": -(-n // block) + 3}[cover]
    rng = np.random.default_rng(n * 7 + block)
    X, Y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    def args():
        return [np.float32(1.5), Buffer(X.copy(), misalign), Buffer(Y.copy()),
                Buffer(np.full(n, -7.0, np.float32))]

    a_plain, a_coarse = _launch_both(plain, coarse, "saxpy", args, grid, block)
    _same(a_plain, a_coarse)
    done = min(n, grid * block)
    np.testing.assert_array_equal(a_plain[3].array[:done], np.float32(1.5) * X[:done] + Y[:done])
    assert (a_plain[3].array[done:] == -7.0).all()


def test_coarsened_saxpy_in_place(modules):
    """Out is X: each element reads its own X before writing it, as one thread per element does."""
    plain, coarse, _ = modules
    n = 37
    X = np.arange(n, dtype=np.float32)

    def args():
        x = Buffer(X.copy())
        return [np.float32(2.0), x, Buffer(np.ones(n, np.float32)), x]

    a_plain, a_coarse = _launch_both(plain, coarse, "saxpy", args, 3, 16)
    _same(a_plain, a_coarse)
    np.testing.assert_array_equal(a_coarse[1].array, 2 * X + 1)


@pytest.mark.parametrize("n", [0, 1, 4, 6, 33])
@pytest.mark.parametrize("rows", [1, 3])
def test_coarsened_one_row_kernel_is_the_kernel_as_written(modules, n, rows):
    """A generated kernel's shape (kernelgen._one_row): [0, i] of a row-major tensor, other rows untouched."""
    plain, coarse, _ = modules
    X = np.random.default_rng(n).standard_normal((rows, n)).astype(np.float32)

    def args():
        return [Buffer(X.copy()), Buffer(np.full((rows, n), 5.0, np.float32))]

    a_plain, a_coarse = _launch_both(plain, coarse, "one_row", args, max(1, -(-n // 4)), 4)
    _same(a_plain, a_coarse)
    np.testing.assert_array_equal(a_coarse[1].array[0], X[0] * X[0])
    assert (a_coarse[1].array[1:] == 5.0).all()


@pytest.mark.parametrize("n", [0, 5, 8, 17, 64])
@pytest.mark.parametrize("bound", ["n", "less"])
@pytest.mark.parametrize("misalign", [0, 2])
def test_coarsened_f16_kernels_are_the_kernels_as_written(modules, n, bound, misalign):
    """Eight 16-bit elements a thread; the bound a scalar argument (possibly below the extent), or mixed
    widths (f16 in, f32 out: one 16-byte and two 16-byte accesses)."""
    plain, coarse, _ = modules
    X = np.random.default_rng(n).standard_normal(n).astype(np.float16)
    count = n if bound == "n" else n // 2

    def halves():
        return [Buffer(X.copy(), misalign), Buffer(np.zeros(n, np.float16)), count]

    def widen():
        return [Buffer(X.copy(), misalign), Buffer(np.zeros(n, np.float32))]

    for name, make in (("halves", halves), ("widen", widen)):
        _same(*_launch_both(plain, coarse, name, make, max(1, -(-n // 8)), 8))


# ---- through the ptx backend ----------------------------------------------------------------------------------

def _ptx(source: str, **options) -> tuple[str, image.Image]:
    result = compiler.compile_source(source, "k.py", CompileOptions(target="ptx", **options))
    img = image.read_image(result.image)
    return img.section(".tessera.code.ptx").decode(), img


def _entry(ptx: str, name: str) -> str:
    return re.search(rf"\.entry {name}\(.*?\n}}", ptx, re.S).group(0)


def test_ptx_saxpy_moves_128_bits_per_access():
    """examples/saxpy.py as written: ld.global.v4 of X and Y and st.global.v4 of Out (ptxas assembled it, as
    every ptx compilation does where ptxas is installed); the warp reduction beside it is left alone."""
    ptx, img = _ptx(EXAMPLE.read_text())
    saxpy = _entry(ptx, "saxpy")
    assert saxpy.count("ld.global.v4.b32") == 2 and saxpy.count("st.global.v4.b32") == 1
    props = {k.name: k.props for k in img.kernels}
    assert props["saxpy"]["simt.coarsen"] == "4"
    assert "simt.coarsen" not in props["warp_reduce_sum"]
    assert ".v4" not in _entry(ptx, "warp_reduce_sum")


def test_bounds_checks_keep_one_element_per_thread():
    """The checks (debug mode) guard each access as written: no coarsening then."""
    ptx, img = _ptx(SOURCE, gpu_bounds_checks=True)
    assert all("simt.coarsen" not in k.props for k in img.kernels)
    assert ".v4" not in _entry(ptx, "saxpy")


@pytest.mark.parametrize("target", ["cpu", "spirv"])
def test_cpu_and_spirv_kernels_are_not_coarsened(target):
    result = compiler.compile_source(SOURCE, "k.py", CompileOptions(target=target))
    assert all("simt.coarsen" not in k.props for k in image.read_image(result.image).kernels)


def test_one_image_for_every_target_marks_only_the_gpu_records():
    """The property is per target: the CPU and SPIR-V records of one image run the kernel as written."""
    result = compiler.compile_source(EXAMPLE.read_text(), "saxpy.py", CompileOptions(target="cpu,ptx,amdgpu,spirv"))
    got = {(k.target, k.name): k.props.get("simt.coarsen") for k in image.read_image(result.image).kernels}
    assert got == {(t, n): ("4" if t in ("ptx", "amdgpu") and n == "saxpy" else None)
                   for t in ("cpu", "ptx", "amdgpu", "spirv") for n in ("saxpy", "warp_reduce_sum")}
