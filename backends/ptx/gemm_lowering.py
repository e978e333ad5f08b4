"""GEMM fusion groups of Graph IR functions as PTX tensor-core kernels and their launch-plan steps.

A group (a matmul and its epilogue: bias, one activation, a scale, a residual add — the CPU's groups, see
backends/cpu/gemm_lowering.py) becomes one kernel, declared as generated.py says: on sm_90a the wgmma/TMA
kernel of gemm_sm90.py for bf16/f16 operands, and for fp8 ones (held in f16 containers, passes/fp8_fallback.py)
its fp8 kind after two packing steps (fp8_pack.py), and for i8 ones (i32 results) its s8 kind after one
copying B to [N, K]; on sm_80 … sm_90, and for tf32 operands on sm_90a, the
mma.sync/cp.async kernel of gemm_sm80.py (fp8 there multiplies its f16 containers). Activations are the CPU epilogues' own arithmetic
(passes/vmath.py), lowered to LLVM IR once per kernel and inlined, so both backends compute the same
function. On sm_90a a 16-bit operand the matmul reads transposed (`tessera.transpose_a/_b`: passes/
fold_transposes.py, for the dtypes the target's facts name) is passed as stored and loaded so
(gemm_sm90.py); the other kernels take operands as `op.matmul` lays them out only.

f32 operands run on FMA units (gemm_fma.py) unless the input precision is "tf32" (CompileOptions.input_precision
or the function's `@function(input_precision=)`): then on sm_90a, K static and a multiple of 4, wgmma's tf32 kind
on Cᵀ = Bᵀ·Aᵀ (gemm_sm90_tf32.py, no copy; B copied to [N, K] where N is static and not a multiple of 4,
_lower_tf32_sm90); otherwise the mma.sync kernel, with the FMA kernel where K or N is not a multiple of 4
(_lower_f32). bf16/f16 (and tf32) groups whose rows the tensor-core kernels cannot move in 16-byte units
run on the SIMT GEMM (backends/simt_gemm.py), chosen here or at the launch (_simt_fallback).
"""

from __future__ import annotations

import dataclasses
import os

from ... import plan
from ...diagnostics import LoweringError
from ...dialects.ttensor import as_read, matmul_transposes
from ...mlir import func, ir, passmanager, translate_module_to_llvmir
from ...passes import decompose, graph_shapes, schedule_ir
from ...passes.kernelgen import element_dtype
from .. import llvm_compat, simt_gemm
from ..gemm_epilogue import epilogue as _epilogue
from . import ampere, fp8_pack, gemm_common, gemm_fma, gemm_sm80, gemm_sm90, gemm_sm90_tf32, generated, transpose
from . import hopper as hp

TENSOR_CORE_ARCHS = gemm_sm80.ARCHS
# Operand dtypes whose sm_90a GEMM groups take an operand stored transposed (TargetFacts.gemm_transposes):
# 16-bit ones are read in place (gemm_sm90.py), i8 ones through _lower_int8's K-major copies
GEMM_TRANSPOSES = (*gemm_sm90.TRANSPOSABLE, "i8")


def lower(arch: str, ctx, kname: str, ops: list, precision: str = "ieee") -> list[plan.ArgsStep]:
    """The plan steps of one GEMM group on `arch`; its kernels are declared in the module (`ctx`: a
    passes.lowering_context.LoweringContext). `precision` is how f32 operands are multiplied
    (CompileOptions.input_precision, unless the function's own hint says otherwise): "ieee" on FMA units,
    "tf32" on tensor cores."""
    mm = ops[0]
    dims = ctx.dims
    if arch not in TENSOR_CORE_ARCHS:
        raise LoweringError(mm, f"matmul on the ptx target needs a tensor-core architecture (--arch "
                                f"{', '.join(TENSOR_CORE_ARCHS)}), not {arch}")
    a, b = mm.operands[0], mm.operands[1]
    transposed = matmul_transposes(mm)
    if element_dtype(a) in hp.FP8 and arch == "sm_90a":   # one-byte fp8 tensors (passes/fp8_fallback.py)
        return _lower_bytes(ctx, kname, ops, [element_dtype(a), element_dtype(b)])
    if any(transposed) and (arch != "sm_90a" or element_dtype(a) not in GEMM_TRANSPOSES or
                            "tessera.fp8_operands" in mm.attributes):
        raise LoweringError(mm, f"the {arch} GEMM for {element_dtype(a)} operands reads them as op.matmul lays "
                                "them out only, not transposed (tessera.transpose_a/_b)")
    if len(dims[b]) > 2 and len(dims[a]) != len(dims[b]):
        raise LoweringError(mm, f"the ptx GEMM multiplies batches of equal rank only (yet), not "
                                f"{dims[a][:-2]} by {dims[b][:-2]}")  # equal extents are checked at the launch
    out = ops[-1].results[0]
    dt, out_dt = element_dtype(a), element_dtype(out)
    if dt == "i8" and element_dtype(b) == dt and arch == "sm_90a":
        return _lower_bytes(ctx, kname, ops, None)
    if dt == "f32" and element_dtype(b) == dt:
        return _lower_f32(arch, _input_precision(mm, precision), ctx, kname, ops)
    if dt not in ampere.MMA or element_dtype(b) != dt:
        raise LoweringError(mm, f"the ptx GEMMs take f32, bf16, f16 or tf32 operands of one dtype, "
                                f"not {dt} @ {element_dtype(b)}")
    if arch != "sm_90a" or dt == "tf32":
        return _lower_sm80(arch, ctx, kname, ops)
    names, env, params, args, operand_dtypes = _signature(ops, ctx)
    fp8 = [ir.StringAttr(f).value for f in ir.ArrayAttr(mm.attributes["tessera.fp8_operands"])] \
        if "tessera.fp8_operands" in mm.attributes else None
    # TMA moves rows of A and B as stored, and of C, in 16-byte units (the runtime checks their tensor maps)
    rows = ("M" if transposed[0] else "K", "K" if transposed[1] else "N", "N")
    simt, alternative = _simt_fallback(ctx, kname, ops, env, args, rows, 8, transposed)
    if simt:
        return simt
    tile = _tile(mm)
    # the fp8 kernel's second set of accumulators leaves room for 128-wide tiles, or 256-wide ones promoted by
    # halves of N (16-bit results): a wider choice (the cost model's, or a hint) narrows to them (_fp8_tile)
    if fp8:
        _fp8_tile(tile, out_dt)
    tile.update(_cluster(), **_group_m())
    try:
        spec = gemm_sm90.Sm90GemmSpec(kname, dtype=fp8[0] if fp8 else dt, b_dtype=fp8[1] if fp8 else "",
                                      out_dtype=out_dt, epilogue=names, **tile, **operand_dtypes,
                                      trans_a=transposed[0], trans_b=transposed[1])
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    steps = []
    if fp8:
        steps = _pack_fp8(ctx, kname, mm, fp8, params, args, env)
    step = _sm90_step(ctx, mm, spec, params, env, args, fp8)
    if alternative:   # first: the kernel's tensor maps would refuse the rows
        step = dataclasses.replace(step, prefer=(alternative, *step.prefer))
    return steps + [step]


def _simt_fallback(ctx, kname: str, ops: list, env: dict, args: list, rows: tuple, chunk: int,
                   trans: tuple = (False, False)) -> tuple:
    """The SIMT GEMM (backends/simt_gemm.py) for a group whose tensor-core kernel moves rows of 16 bytes,
    where an extent of `rows` (the step's env) is not a multiple of `chunk` elements: (the plan steps running
    it instead, None) where one is known not to be at compile time; (None, an Alternative the launch takes
    where one is not) where some are known only then; (None, None) where every one is static and a multiple,
    or the SIMT GEMM does not take the group (fp8 operands' scales in the epilogue; the caller refuses or
    checks at the launch). Recorded in the function's tessera.fallbacks."""
    mm = ops[0]
    static = {d: int(env[d]) for d in rows if isinstance(env[d], int) or str(env[d]).isdigit()}
    bad = [d for d in dict.fromkeys(rows) if d in static and static[d] % chunk]
    unknown = [d for d in dict.fromkeys(rows) if d not in static]
    if not (bad or unknown) or "tessera.fp8_operands" in mm.attributes or not simt_gemm.takes(ops):
        return None, None
    fn = mm.operation.parent
    while fn.name != "func.func":
        fn = fn.parent
    dt = element_dtype(mm.operands[0])
    if bad:
        decompose.record(fn, f"{dt} GEMM rows of {bad[0]} = {static[bad[0]]} (not a multiple of 16 bytes): the "
                             f"SIMT GEMM")
        return [plan.ArgsStep(env=env, args=tuple(args), batch=_batch(env),
                              **simt_gemm.planar(ctx, kname, ops, trans))], None
    decompose.record(fn, f"{dt} GEMM rows not a multiple of 16 bytes ({', '.join(unknown)} at the launch): the "
                         f"SIMT GEMM there")
    # positive where some remainder is
    when = " + ".join(f"({d} - {chunk}*({d}//{chunk}))" for d in unknown)
    return None, plan.Alternative(when=when, **simt_gemm.planar(ctx, f"{kname}_simt", ops, trans))


def _sm90_step(ctx, mm, spec: gemm_sm90.Sm90GemmSpec, params: list, env: dict, args: list, fp8,
               multiple_of: tuple = ()) -> plan.ArgsStep:
    """The plan step launching `spec`'s kernel, declared here with the cost model's other tile shape where
    the extents are known only at the launch (the fp8 kernel has one tile shape)."""
    launch = _declare_sm90(ctx.module, mm, spec, params, fp8)
    others = _other_tiles(spec) if not fp8 and _at_launch(mm) else []
    prefer = []
    # symbolic M or N: the launch picks the tile shape the cost model prefers then. The plan takes the first
    # alternative whose `when` is positive, so each must score above the chosen tile and every later one
    for i, other in enumerate(others):
        alt = _declare_sm90(ctx.module, mm, dataclasses.replace(other, name=f"{spec.name}_n{other.bn}"), params, fp8)
        when = _prefer_when(other, spec)
        for later in others[i + 1:]:
            when = f"min({when}, {_prefer_when(other, later)})"
        prefer.append(plan.Alternative(when=when, **alt))
    prefer = tuple(prefer)
    return plan.ArgsStep(env=env, args=tuple(args), batch=_batch(env), prefer=prefer, multiple_of=multiple_of,
                         **launch)


def _declare_sm90(module, mm, spec: gemm_sm90.Sm90GemmSpec, params: list, fp8) -> dict:
    """Declares `spec`'s kernel; returns how its plan step launches it (kernel, block, smem, grid): a
    persistent grid of a CTA per multiprocessor at most, each striding over the tiles."""
    with mm.location:
        generated.declare(module, spec.name, params, gemm_sm90.generate(spec, _activations(spec.epilogue)), [2], {
            "ptx.tensor_maps": spec.tensor_maps, "tile.M": str(spec.bm), "tile.N": str(spec.bn),
            "tile.K": str(spec.bk), "pipeline.stages": str(spec.stages), "epilogue": ",".join(spec.epilogue),
            **({"ptx.mma": f"wgmma m64n{spec.bn}k32 {fp8[0]} x {fp8[1]}{_promoted(spec)}"}
               if fp8 and not spec.fp8_halves else {}),
            **({"ptx.mma": f"wgmma m64n{gemm_sm90.FP8_BN}k32 {fp8[0]} x {fp8[1]}, {spec.bn // gemm_sm90.FP8_BN} "
                           f"halves of N a K step{', A from registers' if spec.a_regs else ''}{_promoted(spec)}"}
               if fp8 and spec.fp8_halves else {}),
            **({"ptx.mma": f"wgmma m64n{spec.bn}k32 s8 x s8"} if spec.int8 else {}),
            **({"ptx.mma": f"wgmma m64n{spec.bn}k8 tf32 x tf32", "input_precision": "tf32"}
               if spec.dtype == "tf32" else {})})
    grid = f"min({_tiles(spec)}, DEVICE_UNITS)" if spec.cluster_m == 1 else \
        f"2*min(ceil(M/{2 * spec.bm})*ceil(N/{spec.bn}), DEVICE_UNITS//2)"   # whole clusters of two CTAs
    return {"kernel": spec.name, "block": (spec.threads, 1, 1), "smem": spec.smem_bytes, "grid": (grid, "1", "1")}


def _promoted(spec) -> str:
    """The fp8 kernel's promotion interval where it is not every K step (gemm_sm90.Sm90GemmSpec.promote)."""
    return f", promoted every {spec.promote} K steps" if spec.promote > 1 else ""


CLUSTER_ENV = "TESSERA_SM90_GEMM_CLUSTER"   # a benchmark's override: "2" clusters the 16-bit/fp8 GEMMs, "1" not


def _cluster() -> dict:
    """The bf16/f16/fp8 sm_90a GEMM's clusters (gemm_sm90.Sm90GemmSpec.cluster_m): none unless $TESSERA_SM90_GEMM_CLUSTER
    asks for pairs (bench/gemm_gpu.py's --variant images; docs/performance.md has the measurements)."""
    v = os.environ.get(CLUSTER_ENV, "")
    if v not in ("", "1", "2"):
        raise ValueError(f"${CLUSTER_ENV}={v}: 1 or 2")
    return {"cluster_m": int(v)} if v else {}


GROUP_M_ENV = "TESSERA_SM90_GEMM_GROUP_M"   # a benchmark's override of the tile rows visited before moving right


def _group_m() -> dict:
    """The sm_90a GEMMs' tile order (gemm_sm90.Sm90GemmSpec.group_m, 8 unless $TESSERA_SM90_GEMM_GROUP_M sets
    it: bench/gemm_gpu.py's --variant images)."""
    v = os.environ.get(GROUP_M_ENV, "")
    if v and not (v.isdigit() and 1 <= int(v) <= 64):
        raise ValueError(f"${GROUP_M_ENV}={v}: a number of tile rows from 1 to 64")
    return {"group_m": int(v)} if v else {}


FP8_BN_ENV = "TESSERA_SM90_GEMM_FP8_BN"   # a benchmark's override of the fp8 GEMM's tile width: 128, 256, 256rs
# a benchmark's override of the K steps (128 elements each) the fp8 GEMM sums in its wgmma product before adding
# it to the fp32 sums (gemm_sm90.Sm90GemmSpec.promote): 1 or 2
FP8_PROMOTE_ENV = "TESSERA_SM90_GEMM_FP8_PROMOTE"
# K steps a promotion by default for 16-bit results: 2 measured 2-5 % faster end to end at 4096^3 and 8192^3 (H200,
# paired rounds, two processes; docs/performance.md), its extra error hidden by the bf16 rounding; f32 results,
# where it is not (rms error 1.65x), and the 256rs tile (A from registers) promote every step
FP8_PROMOTE_16BIT = 2


def _fp8_tile(tile: dict, out_dtype: str) -> dict:
    """`tile` narrowed for the fp8 kernel (updated in place). GEMMs with 16-bit results take 128x256 tiles that
    promote their product by halves of N every FP8_PROMOTE_16BIT K steps (gemm_sm90.FP8_WIDE_BN; measured faster
    than 128x128 on an H200, docs/performance.md), f32 results 128x128 tiles promoted every step
    (gemm_sm90.FP8_BN: their plain-store epilogue spilled 32 bytes in ptxas at 256 wide), and so do GEMMs in
    clusters of two CTAs ($TESSERA_SM90_GEMM_CLUSTER=2; the pair with 256-wide fp8 tiles ran on an H200 in
    session 34's benchmarks, not in the GPU tests) unless asked. $TESSERA_SM90_GEMM_FP8_BN (a benchmark's
    override, part of the compile cache's key): 128 keeps 128x128 tiles; 256 asks for the wide ones; 256rs for
    them with A read into registers once a K step (gemm_sm90's a_regs, measured slower)."""
    v = os.environ.get(FP8_BN_ENV, "")
    if v not in ("", str(gemm_sm90.FP8_BN), str(gemm_sm90.FP8_WIDE_BN), f"{gemm_sm90.FP8_WIDE_BN}rs"):
        raise ValueError(f"${FP8_BN_ENV}={v}: {gemm_sm90.FP8_BN}, {gemm_sm90.FP8_WIDE_BN} or "
                         f"{gemm_sm90.FP8_WIDE_BN}rs (A from registers)")
    wide = out_dtype in ("bf16", "f16") and (
        v.startswith(str(gemm_sm90.FP8_WIDE_BN)) or (not v and os.environ.get(CLUSTER_ENV, "") != "2"))
    widest, stages = (gemm_sm90.FP8_WIDE_BN, gemm_sm90.FP8_WIDE_STAGES) if wide \
        else (gemm_sm90.FP8_BN, gemm_sm90.FP8_STAGES)
    if tile.get("bn", 256) > widest:
        tile.update(bn=widest, stages=stages)
    if wide and v.endswith("rs") and tile.get("bn", 256) == widest:
        tile["a_regs"] = True
    p = os.environ.get(FP8_PROMOTE_ENV, "")
    if p not in ("", "1", "2") or (p == "2" and tile.get("a_regs")):
        raise ValueError(f"${FP8_PROMOTE_ENV}={p}: 1 or 2 K steps a promotion (2 not with "
                         f"${FP8_BN_ENV}=256rs)")
    if p:
        tile["promote"] = int(p)
    elif out_dtype in ("bf16", "f16") and not tile.get("a_regs"):
        tile["promote"] = FP8_PROMOTE_16BIT
    return tile


def _tiles(spec) -> str:
    return f"ceil(M/{spec.bm})*ceil(N/{spec.bn})"


def _at_launch(mm) -> bool:
    """Whether the schedule phase's tile is the cost model's guess for extents known only at run time."""
    return schedule_ir.schedule_of(mm).get("at_launch") == 1


def _other_tiles(spec: gemm_sm90.Sm90GemmSpec) -> list:
    """The cost model's other tile shapes for `spec`, in the table's order (none when `spec`'s is not one of
    them)."""
    if spec.consumers != 2 or (spec.bn, spec.stages) not in {(bn, st) for bn, st, _ in _SM90_TILES}:
        return []
    return [dataclasses.replace(spec, bn=bn, stages=stages) for bn, stages, _ in _SM90_TILES
            if bn != spec.bn and (spec.dtype in gemm_sm90.TRANSPOSABLE or bn not in _SIXTEEN_BIT_ONLY)]


def _prefer_when(alt, chosen) -> str:
    """An extent expression positive when the cost model (`matmul_schedule`, with the device's own count of
    multiprocessors) scores `alt`'s tile above `chosen`'s."""
    return _score_above(alt.bn, _tiles(alt), chosen.bn, _tiles(chosen))


def _score_above(width_a: int, tiles_a: str, width_c: int, tiles_c: str) -> str:
    """Positive when tiles `width_a` wide (`tiles_a` of them) score above `width_c` wide ones in
    `matmul_schedule`: rate / (rounds × width), both sides multiplied out so that it stays in integers."""
    rate = {bn: round(100 * r) for bn, _, r in _SM90_TILES}
    return (f"{rate[width_a] * width_c}*ceil(({tiles_c})/DEVICE_UNITS) - "
            f"{rate[width_c] * width_a}*ceil(({tiles_a})/DEVICE_UNITS)")


def _pack_fp8(ctx, kname: str, mm, fp8: list, params: list, args: list, env: dict) -> list[plan.ArgsStep]:
    """The steps packing a GEMM's fp8 operands (formats `fp8`: A's, B's) from their f16 containers
    (fp8_pack.py): A to [.., KP] and B transposed to [.., N, KP], one-byte elements, K padded with zeros to KP
    (a multiple of 16). Rewrites the GEMM's `params`, `args` and `env` to read the packed operands: A (M, KP),
    B (N, KP)."""
    fa, fb = fp8
    a, b = mm.operands[0], mm.operands[1]
    da, db = ctx.dims[a], ctx.dims[b]
    kp = fp8_pack.padded(da[-1])
    lead = ("BATCH",) if "BATCH" in env else ()
    pa = ctx.temporary(args[0].value, fa, [*da[:-1], kp])
    pb = ctx.temporary(args[1].value, fb, [*db[:-2], db[-1], kp], "_t")
    steps = []
    for name, dt, transpose, src, dst, senv in (
            (f"{kname}_pack_a", fa, False, args[0].value, pa,
             {"R": graph_shapes.product(da[:-1]), "K": da[-1]}),
            (f"{kname}_pack_b", fb, True, args[1].value, pb,
             {"K": db[-2], "N": db[-1], **({"BATCH": env["BATCH"]} if lead else {})})):
        senv["KP"] = fp8_pack.padded(senv["K"])  # env entries see the function's extents, not each other
        shapes = (("K", "N"), ("N", "KP")) if transpose else (("R", "K"), ("R", "KP"))
        with mm.location:
            generated.declare(ctx.module, name, [("src", "f16", shapes[0]), ("dst", dt, shapes[1])],
                              fp8_pack.generate(name, dt, transpose), [1], {"fp8.pack": "cols" if transpose else "rows"})
        steps.append(fp8_pack.step(name, transpose, src, dst, senv, lead if transpose else ()))
    env["KP"] = fp8_pack.padded(env["K"])
    params[0], params[1] = ("A", fa, ("M", "KP")), ("B", fb, ("N", "KP"))
    args[0] = plan.TensorArg(pa, (*lead, "M", "KP"))
    args[1] = plan.TensorArg(pb, (*lead, "N", "KP"))
    return steps


def _lower_bytes(ctx, kname: str, ops: list, fp8: list | None) -> list[plan.ArgsStep]:
    """A matmul of one-byte operands: i8 x i8 -> i32 on wgmma's s8 kind (`fp8` None), or one-byte fp8 tensors
    (formats `fp8`: A's, B's) on its e4m3/e5m2 kinds with the epilogue's steps (a scaled fp8 GEMM's two
    scales, passes/decompose.py). wgmma reads A as [M,K] and B as [N,K] (8-bit operands are K-major only): A
    as stored and a stored Bᵀ (`tessera.transpose_b`) are read in place; B [K,N] and a stored Aᵀ [K,M] are
    first copied transposed (fp8_pack.py's `cols`, bytes unchanged). TMA reads rows of a multiple of 16
    bytes, so K must be a multiple of 16: refused here when static, by the plan at the launch (before the
    copies, whose 16-byte stores need it too) when not."""
    mm = ops[0]
    names, env, params, args, operand_dtypes = _signature(ops, ctx)
    if fp8:   # the kinds may mix: B's own format
        params[1] = ("B", fp8[1], params[1][2])
    kind = "fp8" if fp8 else "int8"
    why = f"the sm_90a {kind} GEMM reads rows of A [M, K] and of B transposed [N, K] by TMA, in 16-byte units"
    k = env["K"]
    if (isinstance(k, int) or str(k).isdigit()) and int(k) % 16:
        raise LoweringError(mm, f"K = {k} is not a multiple of 16: {why}")
    tile = _narrow_to_any_dtype(_tile(mm), env)
    if fp8:   # as _pack_fp8's GEMM: 128-wide tiles (or 256, _fp8_tile)
        _fp8_tile(tile, params[2][1])
    if fp8:
        tile.update(_cluster(), **_group_m())
    try:
        spec = gemm_sm90.Sm90GemmSpec(kname, dtype=fp8[0] if fp8 else "i8", b_dtype=fp8[1] if fp8 else "",
                                      out_dtype=params[2][1], epilogue=names, **tile, **operand_dtypes)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    check = (plan.MultipleOf("K", 16, why),)
    lead = ("BATCH",) if "BATCH" in env else ()
    steps = []
    trans_a, trans_b = matmul_transposes(mm)
    for i, role, copy in ((0, "A", trans_a), (1, "B", not trans_b)):
        if not copy:
            continue
        # stored [.., K, X] -> [.., X, K]: the copying kernel's N is X, its KP (the row length) K itself
        d = ctx.dims[mm.operands[i]]
        dt = params[i][1]
        packed = ctx.temporary(args[i].value, dt, [*d[:-2], d[-1], d[-2]], "_t")
        name = f"{kname}_pack_{role.lower()}"
        with mm.location:
            generated.declare(ctx.module, name, [("src", dt, ("K", "N")), ("dst", dt, ("N", "KP"))],
                              fp8_pack.generate(name, "i8", True), [1], {"fp8.pack": "cols"})
        senv = {"K": d[-2], "N": d[-1], "KP": d[-2], **({"BATCH": env["BATCH"]} if lead else {})}
        steps.append(dataclasses.replace(fp8_pack.step(name, True, args[i].value, packed, senv, lead),
                                         multiple_of=check))
        rows = "M" if role == "A" else "N"
        params[i] = (role, dt, (rows, "K"))
        args[i] = plan.TensorArg(packed, (*lead, rows, "K"))
    return steps + [_sm90_step(ctx, mm, spec, params, env, args, fp8, check)]


def _batch(env: dict) -> str | None:
    return "BATCH" if "BATCH" in env else None


def _signature(ops: list, ctx) -> tuple:
    """(epilogue step names, the step's env, the kernel's parameters, the step's arguments, the bias and
    residual dtypes) of a GEMM group: A, B, C, then the epilogue's operands in step order, then M, K, N.
    Batch axes of the lhs alone fold into its rows; batches of both (equal rank) make the step run once per
    batch entry (the plan's "batch", as on the CPU)."""
    mm = ops[0]
    a, b, out = mm.operands[0], mm.operands[1], ops[-1].results[0]
    trans_a, trans_b = matmul_transposes(mm)
    dt, da, db = element_dtype(a), as_read(ctx.dims[a], trans_a), as_read(ctx.dims[b], trans_b)
    steps, extras = _epilogue(ops)
    if [s[0] for s in steps].count("scale_by") == 2:   # a scaled fp8 GEMM's two scales: two parameters
        second = [i for i, s in enumerate(steps) if s[0] == "scale_by"][1]
        steps[second] = ("scale_by2",)
        k = [i for i, (role, _) in enumerate(extras) if role == "factor"][1]
        extras[k] = ("factor2", extras[k][1])
    batched = len(db) > 2
    lead = ("BATCH",) if batched else ()
    env = {"M": da[-2] if batched else graph_shapes.product(da[:-1]), "K": da[-1], "N": db[-1]}
    if batched:
        env["BATCH"] = graph_shapes.product(da[:-2])
    # as stored: a transposed operand's extents swapped
    a_dims, b_dims = ("K", "M") if trans_a else ("M", "K"), ("N", "K") if trans_b else ("K", "N")
    params = [("A", dt, a_dims), ("B", dt, b_dims), ("C", element_dtype(out), ("M", "N"))]
    args = [plan.TensorArg(ctx.record(a), (*lead, *a_dims)), plan.TensorArg(ctx.record(b), (*lead, *b_dims)),
            plan.TensorArg(ctx.record(out), (*lead, "M", "N"))]
    operand_dtypes = {}
    for role, v in extras:
        if role == "alpha":
            params.append(("alpha", "f32", None))
            args.append(plan.F32Arg(v))
            continue
        if role in ("factor", "factor2"):   # 0-d f32 (fusion checks) as [1], one value for every batch entry
            params.append((role, "f32", (1,)))
            args.append(plan.TensorArg(ctx.record(v), ("ONE",)))
            env["ONE"] = "1"
            continue
        shape = ("N",) if role == "bias" else ("M", "N")
        operand_dtypes[f"{role}_dtype"] = element_dtype(v)
        params.append((role, element_dtype(v), shape))
        args.append(plan.TensorArg(ctx.record(v), (*(lead if role != "bias" else ()), *shape)))
    return tuple(s[0] for s in steps), env, params, args, operand_dtypes


def _lower_sm80(arch: str, ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The group as gemm_sm80's kernel: one CTA per tile. Its copies move 16-byte chunks of A's and B's
    rows, so K and N must be multiples of a chunk's elements: refused here when static, checked by the
    plan (`multiple_of`) at the launch when not."""
    mm = ops[0]
    names, env, params, args, operand_dtypes = _signature(ops, ctx)
    # f32 operands under input_precision "tf32": the tf32 kernel, whose tensor cores read each f32 word's top
    # 19 bits (_lower_f32)
    dt, out_dt = "tf32" if params[0][1] == "f32" else params[0][1], params[2][1]
    # sm_90a runs this kernel for tf32 only; the schedule phase chose for the wgmma kernel then
    tile = _tile_sm80(mm) if arch != "sm_90a" else {}
    try:
        spec = gemm_sm80.Sm80GemmSpec(kname, dtype=dt, out_dtype=out_dt, epilogue=names, arch=arch,
                                      **{**_default_sm80(arch), **tile}, **operand_dtypes)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    why = f"the sm_80 GEMM copies {dt} rows of A [M, K] and B [K, N] in 16-byte chunks"
    # f32 words under input precision tf32: _lower_f32's FMA kernel is their fallback
    simt, alternative = _simt_fallback(ctx, kname, ops, env, args, ("K", "N"), spec.chunk) \
        if params[0][1] != "f32" else (None, None)
    if simt:
        return simt
    for d in ("K", "N"):
        v = env[d]
        if (isinstance(v, int) or str(v).isdigit()) and int(v) % spec.chunk:
            raise LoweringError(mm, f"{d} = {v} is not a multiple of {spec.chunk}: {why}")
    mma, t = ampere.MMA[dt]
    with mm.location:
        generated.declare(ctx.module, kname, params, gemm_sm80.generate(spec, _activations(spec.epilogue)), [2], {
            "tile.M": str(spec.bm), "tile.N": str(spec.bn), "tile.K": str(spec.bk),
            "pipeline.stages": str(spec.stages), "epilogue": ",".join(spec.epilogue),
            "ptx.mma": f"mma.sync.aligned.{mma}.row.col.f32.{t}.{t}.f32",
            **({"input_precision": "tf32"} if params[0][1] == "f32" else {})})
    return [plan.ArgsStep(kname, env=env, args=tuple(args), block=(spec.threads, 1, 1), smem=spec.smem_bytes,
                          grid=(f"ceil(M/{spec.bm})*ceil(N/{spec.bn})", "1", "1"), batch=_batch(env),
                          prefer=(alternative,) if alternative else (),
                          multiple_of=() if alternative else (plan.MultipleOf("K", spec.chunk, why),
                                                              plan.MultipleOf("N", spec.chunk, why)))]


def _input_precision(mm, default: str) -> str:
    """The precision f32 operands of `mm` are multiplied in: its function's `@function(input_precision=)`
    hint (the function's `tessera.input_precision`), else the compile options' `default`."""
    op = mm.operation.parent
    while op is not None and op.name != "func.func":
        op = op.parent
    if op is not None and "tessera.input_precision" in op.attributes:
        return ir.StringAttr(op.attributes["tessera.input_precision"]).value
    return default


def _lower_f32(arch: str, precision: str, ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """An f32 GEMM group: gemm_fma's kernel on FMA units ("ieee"), or with "tf32" the tf32 tensor-core kernel
    (gemm_sm80's mma.sync, on sm_90a too), whose 16-byte copies need K and N multiples of 4: where they are
    not, the FMA kernel runs (chosen here when the extents are static, at the launch when not). The FMA
    kernel copies B in 16-byte chunks where N is a multiple of 4, by element otherwise."""
    mm = ops[0]
    names, env, params, args, operand_dtypes = _signature(ops, ctx)
    static = {d: int(env[d]) for d in ("K", "N") if isinstance(env[d], int) or str(env[d]).isdigit()}
    if precision == "tf32" and arch == "sm_90a" and static.get("K", 1) % 4 == 0:
        return _lower_tf32_sm90(ctx, kname, ops)
    tf32 = precision == "tf32" and not any(v % 4 for v in static.values())
    if tf32 and len(static) == 2:
        return _lower_sm80(arch, ctx, kname, ops)
    try:
        spec = gemm_fma.FmaGemmSpec(kname, out_dtype=params[2][1], epilogue=names,
                                    vec_b="N" in static and static["N"] % 4 == 0, **operand_dtypes)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    step = _declare_fma(ctx, mm, spec, params, env, args)
    prefer = []
    if tf32:
        tc = _lower_sm80(arch, ctx, f"{kname}_tf32", ops)[-1]
        prefer.append(plan.Alternative(when=_multiples_of_4([d for d in ("K", "N") if d not in static]),
                                       kernel=tc.kernel, grid=tc.grid,
                                       block=tc.block, smem=tc.smem))
    if "N" not in static:
        alt = _declare_fma(ctx, mm, dataclasses.replace(spec, name=f"{kname}_v4", vec_b=True), params, env, args)
        prefer.append(plan.Alternative(when=_multiples_of_4(("N",)), kernel=alt.kernel, grid=alt.grid,
                                       block=alt.block, smem=alt.smem))
    return [dataclasses.replace(step, prefer=tuple(prefer))]


def _lower_tf32_sm90(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """An f32 GEMM group on sm_90a's wgmma tf32 kind, for K a multiple of 4 known at compile time (TMA reads
    A's rows in place, in 16-byte units). wgmma reads tf32 operands K-major only: gemm_sm90_tf32.py's kernel
    computes Cᵀ = Bᵀ·Aᵀ, reading A as stored into shared memory and B as stored into registers, so neither is
    copied; it reads B's rows by TMA too, so N must be a multiple of 4. Where N is static and is not, B [K, N] is
    first copied to [N, K] (transpose.py, the f32 words unchanged), as the int8 GEMM's is, for gemm_sm90.py's tf32
    kernel; where N is known at the launch only, a launch with N not a multiple of 4 takes the FMA kernel (as the
    mma.sync tf32 path does on sm_80 … sm_90)."""
    mm = ops[0]
    names, env, params, args, operand_dtypes = _signature(ops, ctx)
    n = env["N"]
    n_static = isinstance(n, int) or str(n).isdigit()
    if not (n_static and int(n) % 4):
        return [_tf32_transposed_step(ctx, kname, ops, names, env, params, args, operand_dtypes, not n_static)]
    try:
        spec = gemm_sm90.Sm90GemmSpec(kname, dtype="tf32", out_dtype=params[2][1], epilogue=names, **_narrow_to_any_dtype(_tile(mm), env),
                                      **operand_dtypes)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    lead = ("BATCH",) if "BATCH" in env else ()
    d = ctx.dims[mm.operands[1]]
    packed = ctx.temporary(args[1].value, "f32", [*d[:-2], d[-1], d[-2]], "_t")
    name = f"{kname}_pack_b"
    with mm.location:
        generated.declare(ctx.module, name, [("src", "f32", ("K", "N")), ("dst", "f32", ("N", "KP"))],
                          transpose.generate(name), [1], {"transpose": "f32 [K, N] -> [N, K]"})
    senv = {"K": d[-2], "N": d[-1], "KP": d[-2], **({"BATCH": env["BATCH"]} if lead else {})}
    pack = transpose.step(name, args[1].value, packed, senv, lead)
    params[1] = ("B", "f32", ("N", "K"))
    args[1] = plan.TensorArg(packed, (*lead, "N", "K"))
    return [pack, _sm90_step(ctx, mm, spec, params, env, args, None)]


def _tf32_transposed_step(ctx, kname: str, ops: list, names, env: dict, params: list, args: list,
                          operand_dtypes: dict, n_at_launch: bool) -> plan.ArgsStep:
    """The plan step of gemm_sm90_tf32's kernel (Cᵀ = Bᵀ·Aᵀ, no copy). The schedule phase's tile (MB rows ×
    NC columns, for gemm_sm90's kernel) is taken transposed: NC rows of C (wgmma's N) × MB columns (64 a
    consumer), as many tiles of as many products. Where the extents are known at the launch only, the cost
    model's other tile shape is an alternative, and before it, where N turns out not to be a multiple of 4
    (`n_at_launch`), the FMA kernel."""
    mm = ops[0]
    tile = _narrow_to_any_dtype(_tile(mm), env)
    try:
        spec = gemm_sm90_tf32.Sm90Tf32Spec(kname, out_dtype=params[2][1], epilogue=names, bm=tile.get("bn", 256),
                                           consumers=tile.get("consumers", 2), stages=tile.get("stages", 4),
                                           **operand_dtypes)
    except ValueError as e:
        raise LoweringError(mm, str(e)) from None
    prefer = []
    if n_at_launch:
        fma = _declare_fma(ctx, mm, gemm_fma.FmaGemmSpec(f"{kname}_fma", out_dtype=params[2][1], epilogue=names,
                                                         vec_b=False, **operand_dtypes), params, env, args)
        prefer.append(plan.Alternative(when=f"N - 4*(N//4)", kernel=fma.kernel, grid=fma.grid, block=fma.block,
                                       smem=fma.smem))
    launch = _declare_tf32(ctx.module, mm, spec, params)
    shapes = {(bn, st) for bn, st, _ in _SM90_TILES if bn not in _SIXTEEN_BIT_ONLY}
    if _at_launch(mm) and spec.consumers == 2 and (spec.bm, spec.stages) in shapes:
        bm, stages = next((bn, st) for bn, st, _ in _SM90_TILES if bn != spec.bm and bn not in _SIXTEEN_BIT_ONLY)
        other = dataclasses.replace(spec, name=f"{kname}_m{bm}", bm=bm, stages=stages)
        alt = _declare_tf32(ctx.module, mm, other, params)
        prefer.append(plan.Alternative(when=_score_above(other.bm, _tiles(other), spec.bm, _tiles(spec)), **alt))
    return plan.ArgsStep(env=env, args=tuple(args), batch=_batch(env), prefer=tuple(prefer), **launch)


def _declare_tf32(module, mm, spec: gemm_sm90_tf32.Sm90Tf32Spec, params: list) -> dict:
    """Declares gemm_sm90_tf32's kernel `spec`; returns how its plan step launches it (a persistent grid)."""
    with mm.location:
        generated.declare(module, spec.name, params, gemm_sm90_tf32.generate(spec, _activations(spec.epilogue)),
                          [2], {"ptx.tensor_maps": spec.tensor_maps, "tile.M": str(spec.bm), "tile.N": str(spec.bn),
                                "tile.K": str(spec.bk), "pipeline.stages": str(spec.stages),
                                "epilogue": ",".join(spec.epilogue), "input_precision": "tf32",
                                "ptx.mma": f"wgmma m64n{spec.bm}k8 tf32 x tf32, A from registers (C^T = B^T A^T)"})
    return {"kernel": spec.name, "block": (spec.threads, 1, 1), "smem": spec.smem_bytes,
            "grid": (f"min({_tiles(spec)}, DEVICE_UNITS)", "1", "1")}


def _multiples_of_4(dims) -> str:
    """An extent expression positive exactly where every extent of `dims` is a multiple of 4."""
    return "1" + "".join(f" - ({d} - 4*({d}//4))" for d in dims)


def _declare_fma(ctx, mm, spec: gemm_fma.FmaGemmSpec, params: list, env: dict, args: list) -> plan.ArgsStep:
    with mm.location:
        generated.declare(ctx.module, spec.name, params, gemm_fma.generate(spec, _activations(spec.epilogue)),
                          [2], {"tile.M": str(spec.bm), "tile.N": str(spec.bn), "tile.K": str(spec.bk),
                                "pipeline.stages": str(spec.stages), "epilogue": ",".join(spec.epilogue),
                                "input_precision": "ieee", "ptx.fma": "fma.rn.f32 8x8 a thread"})
    return plan.ArgsStep(spec.name, env=env, args=tuple(args), block=(spec.threads, 1, 1), smem=spec.smem_bytes,
                         grid=(f"ceil(M/{spec.bm})*ceil(N/{spec.bn})", "1", "1"), batch=_batch(env))


# (N of the tile, stages, throughput of a busy SM relative to 128×256 tiles: measured on an H200; 192's is
# put between its neighbours', and is what the 3072³ measurement in docs/performance.md checks)
_SM90_TILES = ((256, 4, 1.0), (192, 4, 0.96), (128, 6, 0.93))
_SIXTEEN_BIT_ONLY = (192,)   # tile widths of the bf16/f16 kernel only (gemm_sm90.Sm90GemmSpec)
_SMS = 132  # an H100's or H200's SMs: the compiler does not know the device


def matmul_schedule(m: int | None, n: int | None, k: int | None, tiles: tuple = _SM90_TILES) -> dict:
    """The cost model: 128×256 tiles keep two consumer warpgroups' wgmmas at their widest; 128×192 and
    128×128 tiles (six stages fit beside the latter) waste less of the last wave of tiles. A tile takes time
    in proportion to its width over its SMs' relative throughput, and the SMs run ceil(tiles / SMs) rounds of
    them: each shape scores rate / (rounds × width), the inverse of its time (columns past N, a ragged last
    tile's, count as work done). An unknown extent counts as 4096. On an H200, 3072³ ran 686 TFLOP/s with
    128×128 tiles and 588 with 128×256: 576 tiles of 128×128 are 5 rounds of 132 SMs, 288 of 128×256 3 rounds
    of twice the width, 384 of 128×192 3 rounds of 1.5 times it; 2048³, 4096³ and 8192³ favour 128×256."""
    def score(shape):
        bn, _, rate = shape
        tiles = -(-(m or 4096) // 128) * -(-(n or 4096) // bn)
        return rate / (-(-tiles // _SMS) * bn)
    bn, stages, _ = max(tiles, key=score)
    return {"MB": 128, "NC": bn, "stages": stages}


def _narrow_to_any_dtype(tile: dict, env: dict) -> dict:
    """`tile` for the kernels other than the bf16/f16 one (tf32, int8): a width only that one has (the cost
    model's choice or a hint) becomes the cost model's choice among the others, for the extents known now."""
    if tile.get("bn") not in _SIXTEEN_BIT_ONLY:
        return tile
    static = [int(env[d]) if isinstance(env[d], int) or str(env[d]).isdigit() else None for d in ("M", "N")]
    s = matmul_schedule(*static, None, tuple(t for t in _SM90_TILES if t[0] not in _SIXTEEN_BIT_ONLY))
    return dict(tile, bn=s["NC"], stages=s["stages"])


def matmul_schedule_sm80(arch: str, m: int | None, n: int | None, k: int | None) -> dict:
    """The sm_80 kernel's cost model: 128×128 tiles of 8 warps; a problem with fewer such tiles than an
    A100 has SMs (108) takes 64×128 tiles, twice as many CTAs. Four stages (64 KiB) let two CTAs share an
    SM of sm_80/sm_87/sm_90; sm_86 and sm_89 have 100 KiB an SM, where three stages (48 KiB) do."""
    stages = 3 if arch in ("sm_86", "sm_89") else 4
    tiles = -(-(m or 4096) // 128) * -(-(n or 4096) // 128)
    return {"MB": 64 if tiles < 108 else 128, "NC": 128, "stages": stages}


def _default_sm80(arch: str) -> dict:
    s = matmul_schedule_sm80(arch, None, None, None)
    return {"bm": s["MB"], "bn": s["NC"], "stages": s["stages"]}


def _tile_sm80(mm) -> dict:
    """The schedule phase's blocking (cost model or hints) as the sm_80 kernel's; Sm80GemmSpec checks it."""
    d = schedule_ir.schedule_of(mm)
    return {key: d[name] for name, key in (("MB", "bm"), ("NC", "bn"), ("stages", "stages")) if name in d}


def _tile(mm) -> dict:
    """The schedule phase's blocking (cost model or hints: `tile=(M, N, K)`, `stages=`) as the kernel's."""
    d = schedule_ir.schedule_of(mm)
    out = {}
    if "NC" in d:
        out["bn"] = d["NC"]
    if "MB" in d:
        if d["MB"] not in (64, 128):
            raise LoweringError(mm, f"the ptx GEMM tiles M by 64 or 128 rows (a warpgroup each), not {d['MB']}")
        out["consumers"] = d["MB"] // 64
    if "stages" in d:
        out["stages"] = d["stages"]
    return out


def _approximate_divisions(mod: ir.Module) -> None:
    """Marks the activations' divisions `afn`, which NVPTX emits as div.approx.f32 (2 ulp; the quotients here,
    rational approximations' P/Q, have denominators far from 0 and from overflow) instead of div.rn.f32, a
    dozen instructions with a slow path: in a GEMM epilogue every element of C takes one (erf in gelu, exp's
    reciprocal in sigmoid and silu, tanh), and the tensor cores wait for it. Measured on an H200: a bf16
    [8192, 4096] x [4096, 16384] GEMM with bias and gelu took 1.84 ms with div.rn, the same block's
    [8192, 16384] x [16384, 4096] one (as many FLOPs) with bias and a residual add 1.47 ms (docs/performance.md,
    issue 19's transformer block). The strict numerics profile runs
    float GEMMs as SIMT kernels, so these epilogues only serve the fast and deterministic profiles."""
    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "arith.divf":
                        inner.operation.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<afn>")
                    walk(inner.operation)
    walk(mod.operation)


def _activations(steps: tuple) -> str:
    """LLVM IR definitions of the activations among `steps`, from the CPU epilogues' arithmetic."""
    names = [s for s in steps if s in gemm_common.ACTIVATIONS]
    if not names:
        return ""
    from ..cpu import gemm as cpu_gemm   # lazy: the CPU GEMM's kernel builders, for an epilogue's activation
    f32 = ir.F32Type.get()
    mod = ir.Module.create()
    with ir.InsertionPoint(mod.body):
        for n in names:
            fn = func.FuncOp(f"tsr_act_{n}", ir.FunctionType.get([f32], [f32]))
            fn.attributes["llvm.linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
            entry = fn.add_entry_block()
            with ir.InsertionPoint(entry):
                func.ReturnOp([cpu_gemm._ACTIVATIONS[n](entry.arguments[0])])
    _approximate_divisions(mod)
    passmanager.PassManager.parse("builtin.module(convert-arith-to-llvm,convert-func-to-llvm,"
                                  "reconcile-unrealized-casts)").run(mod.operation)
    text = llvm_compat.downgrade(str(translate_module_to_llvmir(mod.operation)))
    # the definitions only: the kernel's module states the target
    return "\n" + "\n".join(line for line in text.splitlines()
                             if not line.startswith(("target ", "source_filename", "; ModuleID")))
