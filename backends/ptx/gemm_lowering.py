"""GEMM fusion groups of Graph IR functions as PTX tensor-core kernels and their launch-plan steps.

A group (a matmul and its epilogue: bias, one activation, a scale, a residual add — the CPU's groups, see
backends/cpu/gemm_lowering.py) becomes one kernel of gemm_sm90.py on sm_90a, declared as generated.py says.
Activations are the CPU epilogues' own arithmetic (backends/cpu/vmath.py), lowered to LLVM IR once per
kernel and inlined, so both backends compute the same function.
"""

from __future__ import annotations

from ...mlir import func, ir, passmanager, translate_module_to_llvmir
from ...passes import graph_shapes
from ...passes.kernelgen import UnsupportedOnCPU, element_dtype
from .. import llvm_compat
from ..cpu import gemm as cpu_gemm
from ..cpu.gemm_lowering import _epilogue
from . import gemm_sm90, generated

TENSOR_CORE_ARCHS = ("sm_90a",)


def lower(arch: str, kname: str, ops: list, dims: dict, record, temporary, compile_source, module) -> list[dict]:
    """The plan steps of one GEMM group on `arch` (its kernel is added to `module`)."""
    mm = ops[0]
    if arch not in TENSOR_CORE_ARCHS:
        raise UnsupportedOnCPU(mm, f"matmul on the ptx target needs --arch {' or '.join(TENSOR_CORE_ARCHS)} "
                                   f"(its tensor-core GEMM), not {arch}")
    a, b = mm.operands[0], mm.operands[1]
    da, db = dims[a], dims[b]
    if len(db) > 2:
        raise UnsupportedOnCPU(mm, "the ptx GEMM multiplies by a 2-D rhs only (yet); batch axes of the lhs "
                                   "fold into its rows")
    out = ops[-1].results[0]
    dt, out_dt = element_dtype(a), element_dtype(out)
    if dt not in ("bf16", "f16") or element_dtype(b) != dt:
        raise UnsupportedOnCPU(mm, f"the ptx tensor-core GEMM takes bf16 or f16 operands of one dtype, not "
                                   f"{dt} @ {element_dtype(b)}")
    steps, extras = _epilogue(ops)
    names = tuple(s[0] for s in steps)
    M, K, N = graph_shapes.product(da[:-1]), da[-1], db[-1]
    params = [("A", dt, ("M", "K")), ("B", dt, ("K", "N")), ("C", out_dt, ("M", "N"))]
    args = [{"value": record(a), "shape": ["M", "K"]}, {"value": record(b), "shape": ["K", "N"]},
            {"value": record(out), "shape": ["M", "N"]}]
    operand_dtypes = {}
    for role, v in extras:
        if role == "alpha":
            params.append(("alpha", "f32", None))
            args.append({"f32": v})
            continue
        shape = ("N",) if role == "bias" else ("M", "N")
        operand_dtypes[f"{role}_dtype"] = element_dtype(v)
        params.append((role, element_dtype(v), shape))
        args.append({"value": record(v), "shape": list(shape)})
    try:
        spec = gemm_sm90.Sm90GemmSpec(kname, dtype=dt, out_dtype=out_dt, epilogue=names, **_tile(mm),
                                      **operand_dtypes)
    except ValueError as e:
        raise UnsupportedOnCPU(mm, str(e)) from None
    with mm.location:
        generated.declare(module, kname, params, gemm_sm90.generate(spec, _activations(spec.epilogue)), [2], {
            "ptx.tensor_maps": spec.tensor_maps, "tile.M": str(spec.bm), "tile.N": str(spec.bn),
            "tile.K": str(gemm_sm90.BK), "pipeline.stages": str(spec.stages), "epilogue": ",".join(spec.epilogue)})
    # persistent: a CTA per multiprocessor at most, each striding over the tiles
    tiles = f"min(ceil(M/{spec.bm})*ceil(N/{spec.bn}), DEVICE_UNITS)"
    return [{"kernel": kname, "env": {"M": M, "K": K, "N": N}, "args": args, "block": [spec.threads, 1, 1],
             "grid": [tiles, "1", "1"], "smem": spec.smem_bytes}]


def matmul_schedule(m: int | None, n: int | None, k: int | None) -> dict:
    """The cost model: 128×256 tiles keep two consumer warpgroups' wgmmas at their widest; a problem with
    fewer such tiles than an H100 has SMs (132) takes 128×128 tiles, twice as many CTAs. Four stages of
    128×256 fill 192 KiB of the 227 KiB of shared memory; 128×128 tiles afford six."""
    tiles = -(-(m or 4096) // 128) * -(-(n or 4096) // 256)
    return {"MB": 128, "NC": 128, "stages": 6} if tiles < 132 else {"MB": 128, "NC": 256, "stages": 4}


def _tile(mm) -> dict:
    """The schedule phase's blocking (cost model or hints: `tile=(M, N, K)`, `stages=`) as the kernel's."""
    if "tessera.schedule" not in mm.attributes:
        return {}
    d = {na.name: ir.IntegerAttr(na.attr).value for na in ir.DictAttr(mm.attributes["tessera.schedule"])}
    out = {}
    if "NC" in d:
        out["bn"] = d["NC"]
    if "MB" in d:
        if d["MB"] not in (64, 128):
            raise UnsupportedOnCPU(mm, f"the ptx GEMM tiles M by 64 or 128 rows (a warpgroup each), not {d['MB']}")
        out["consumers"] = d["MB"] // 64
    if "stages" in d:
        out["stages"] = d["stages"]
    return out


def _activations(steps: tuple) -> str:
    """LLVM IR definitions of the activations among `steps`, from the CPU epilogues' arithmetic."""
    names = [s for s in steps if s in gemm_sm90.ACTIVATIONS]
    if not names:
        return ""
    f32 = ir.F32Type.get()
    mod = ir.Module.create()
    with ir.InsertionPoint(mod.body):
        for n in names:
            fn = func.FuncOp(f"tsr_act_{n}", ir.FunctionType.get([f32], [f32]))
            fn.attributes["llvm.linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
            entry = fn.add_entry_block()
            with ir.InsertionPoint(entry):
                func.ReturnOp([cpu_gemm._ACTIVATIONS[n](entry.arguments[0])])
    passmanager.PassManager.parse("builtin.module(convert-arith-to-llvm,convert-func-to-llvm,"
                                  "reconcile-unrealized-casts)").run(mod.operation)
    text = llvm_compat.downgrade(str(translate_module_to_llvmir(mod.operation)))
    # the definitions only: the kernel's module states the target
    return "\n" + "\n".join(line for line in text.splitlines()
                             if not line.startswith(("target ", "source_filename", "; ModuleID")))
