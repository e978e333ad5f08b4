"""Graph IR GEMM groups on the matrix units of AMDGPU and SPIR-V: MFMA on CDNA (gfx90a, gfx942), WMMA on
RDNA 3 (gfx1100), cooperative matrices (DPAS) on SPIR-V where the device is declared (`--arch xe-hpc`).

A group (a matmul and its epilogue: bias along N, one activation, a scale by a constant, a residual add;
batches as backends/simt_gemm.py takes them) of bf16 or f16 operands of one dtype, accumulated in f32, becomes
one kernel generated as Tessera source, as the SIMT GEMM is, into which this module then writes the warp
fragment ops (``ttile.ldmatrix``, ``ttile.mma``, ``ttile.store_fragment``) that passes/tile_mma.py lowers per
target. Each work-group computes a BM x BN = 64 x 64 block of C with four waves (subgroups) in 2 x 2, each
wave a 32 x 32 quarter:

    for each K step of BK = 32:
        the work-group copies A's 64 x 32 and B's 32 x 64 panel into shared memory (LDS / SLM), zero where
        the row, column or k is past M, N or K (so any M, N, K is multiplied; the zeros add nothing)
        barrier
        each wave: acc = its quarter of the f32 block in shared memory, a, b = its panels' rows and columns,
        acc = mma(a, b, acc) (MFMA 32x32x8, WMMA 16x16x16, cooperative 8x16x16 instructions), stored back
        barrier
    the epilogue, element by element from shared memory, in f32, rounded once to C's dtype

The accumulator goes through shared memory at each K step because tile_mma's fragments live within one block
(a loop-carried fragment is refused there): correct, not the fastest form (no register-resident accumulator,
no double buffering). K is summed in steps of BK, each step's products in the matrix unit's own order, so
results are those of f32 accumulation of exact bf16/f16 products, not the SIMT GEMM's bits.

Everything else runs on the SIMT GEMM (FMA units): f32, f64, tf32, fp8 and i8 operands, bf16/f16 under the
strict numerics profile (its promise is the SIMT GEMM's order), and bf16/f16 on SPIR-V without a declared
device. Where the target has a matrix unit but a float GEMM cannot use it, or a bf16/f16 GEMM has none, the
function records it (`tessera.fallbacks`, each kernel's `fallbacks` in tessera-objdump), as other fallbacks
are; the matrix path records what each product became in its kernel's properties (`amdgpu.mma`,
`spirv.mma`, from passes/tile_mma.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import plan
from ..dialects.ttensor import matmul_transposes
from ..mlir import arith, ir
from ..passes import decompose, kernelgen
from ..passes.kernelgen import element_dtype
from . import simt_gemm
from .gemm_epilogue import epilogue as _epilogue

MATRIX_DTYPES = ("bf16", "f16")   # operand dtypes the matrix units take here (f32 accumulators)
BM, BN, BK = 64, 64, 32           # a work-group's block of C and K step
WAVES = (2, 2)                    # waves per work-group along M and N, each a WM x WN quarter
WM, WN = BM // WAVES[0], BN // WAVES[1]


@dataclass(frozen=True)
class Unit:
    """A matrix unit: tile_mma's Target.matrix, the wave (subgroup) width, the instruction shape (m, n, k) and
    how the records name it."""
    matrix: str
    wave: int
    instr: tuple[int, int, int]
    label: str


UNITS = {"mfma": Unit("mfma", 64, (32, 32, 8), "MFMA"),
         "wmma": Unit("wmma", 32, (16, 16, 16), "WMMA"),
         "coopmat": Unit("coopmat", 32, (8, 16, 16), "cooperative-matrix")}


def block(unit: Unit) -> tuple[int, int, int]:
    """The work-group: one wave along x (so a wave's lanes are local_id(0)), the waves along y."""
    return (unit.wave, WAVES[0] * WAVES[1], 1)


def takes(ops: list) -> bool:
    """Whether the matrix kernel computes the group: bf16/f16 operands of one dtype, a float result, an
    epilogue the SIMT GEMM takes too, operands as op.matmul lays them out."""
    mm = ops[0]
    dt = element_dtype(mm.operands[0])
    return dt in MATRIX_DTYPES and element_dtype(mm.operands[1]) == dt and simt_gemm.takes(ops) \
        and not any(matmul_transposes(mm)) and "tessera.fp8_operands" not in mm.attributes


def source(name: str, unit: Unit, dtype: str, out_dtype: str, steps: list, extras: list) -> str:
    """The kernel's source without its fragment ops (`_fragments` adds them between the K loop's two barriers):
    C[Z, M, N] = epilogue(A[Z', M, K] @ B[Z, K, N]), entry z of A min(z, Z' − 1)."""
    threads = unit.wave * WAVES[0] * WAVES[1]
    params = [f'A: tensor[{dtype}, "ZA", "M", "K"]', f'B: tensor[{dtype}, "Z", "K", "N"]',
              f'C: tensor[{out_dtype}, "Z", "M", "N"]']
    more, body = simt_gemm.epilogue(steps, extras, "f32", '"Z", ', "z, ", indent=16)
    params += more
    store = "acc" if out_dtype == "f32" else f"{out_dtype}(acc)"
    return "\n".join([
        "import math", "", "",
        "@kernel",
        f"def {name}({', '.join(params)}):",
        f"    SA = tile.alloc_shared(({BM}, {BK}), {dtype})",
        f"    SB = tile.alloc_shared(({BK}, {BN}), {dtype})",
        f"    SC = tile.alloc_shared(({BM}, {BN}), f32)",
        f"    g = {kernelgen.folded_block(0, 1, 2)}",
        f"    nc = (C.shape[2] + {BN - 1}) // {BN}",
        "    gz = g // nc",
        f"    c0 = (g - gz * nc) * {BN}",
        f"    nr = (C.shape[1] + {BM - 1}) // {BM}",
        "    z = gz // nr",
        f"    r0 = (gz - z * nr) * {BM}",
        f"    t = launch.local_id(1) * {unit.wave} + launch.local_id(0)",
        "    if z < C.shape[0]:",   # the same in every thread of the work-group: its barriers are met by all
        "        za = min(z, A.shape[0] - 1)",
        f"        for i in range(t, {BM * BN}, {threads}):",
        f"            SC[i // {BN}, i % {BN}] = 0.0",
        f"        for k0 in range(0, A.shape[2], {BK}):",
        f"            for i in range(t, {BM * BK}, {threads}):",
        f"                ra = r0 + i // {BK}",
        f"                ka = k0 + i % {BK}",
        "                if ra < C.shape[1] and ka < A.shape[2]:",
        f"                    SA[i // {BK}, i % {BK}] = A[za, ra, ka]",
        "                else:",
        f"                    SA[i // {BK}, i % {BK}] = 0.0",
        f"            for i in range(t, {BK * BN}, {threads}):",
        f"                kb = k0 + i // {BN}",
        f"                cb = c0 + i % {BN}",
        "                if kb < A.shape[2] and cb < C.shape[2]:",
        f"                    SB[i // {BN}, i % {BN}] = B[z, kb, cb]",
        "                else:",
        f"                    SB[i // {BN}, i % {BN}] = 0.0",
        "            tile.barrier()",
        "            tile.barrier()",
        f"        for i in range(t, {BM * BN}, {threads}):",
        f"            r = r0 + i // {BN}",
        f"            c = c0 + i % {BN}",
        "            if r < C.shape[1] and c < C.shape[2]:",
        f"                acc = SC[i // {BN}, i % {BN}]",
        *body,
        f"                C[z, r, c] = {store}", ""])


def _walk(op, name: str, out: list) -> list:
    for region in op.regions:
        for blk in region.blocks:
            for inner in blk.operations:
                if inner.operation.name == name:
                    out.append(inner)
                _walk(inner.operation, name, out)
    return out


def _fragments(fn, unit: Unit, dtype: str) -> None:
    """Writes the wave's product between the K loop's two barriers of kernel `fn` (`source`'s): its quarter of
    SC += SA's rows times SB's columns, as fragment ops of `unit`'s instruction shape."""
    entry = fn.regions[0].blocks[0]
    sa, sb, sc = (op.results[0] for op in entry.operations if op.operation.name == "memref.alloca")
    loop = next(op for op in _walk(fn.operation, "scf.for", [])
                if sum(o.operation.name == "ttile.barrier" for o in op.regions[0].blocks[0].operations) == 2)
    first = next(o for o in loop.regions[0].blocks[0].operations if o.operation.name == "ttile.barrier")
    index = ir.IndexType.get()
    frag = {role: ir.Type.parse(f'!ttile.fragment<[{r}, {c}], {e}, "{role}">')
            for role, r, c, e in (("a", WM, BK, dtype), ("b", BK, WN, dtype), ("acc", WM, WN, "f32"))}
    after = next(o for o in loop.regions[0].blocks[0].operations
                 if o.operation.name == "ttile.barrier" and o != first)
    with first.location, ir.InsertionPoint(after):
        wave = ir.Operation.create("ttile.local_id", results=[index],
                                   attributes={"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)}).result

        def const(v):
            return arith.ConstantOp.create_index(v).result

        wr = arith.MulIOp(arith.DivUIOp(wave, const(WAVES[1])).result, const(WM)).result
        wc = arith.MulIOp(arith.RemUIOp(wave, const(WAVES[1])).result, const(WN)).result
        zero = const(0)
        acc = ir.Operation.create("ttile.ldmatrix", results=[frag["acc"]], operands=[sc, wr, wc]).result
        a = ir.Operation.create("ttile.ldmatrix", results=[frag["a"]], operands=[sa, wr, zero]).result
        b = ir.Operation.create("ttile.ldmatrix", results=[frag["b"]], operands=[sb, zero, wc]).result
        shape = ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), x) for x in unit.instr])
        d = ir.Operation.create("ttile.mma", results=[frag["acc"]], operands=[a, b, acc],
                                attributes={"shape": shape}).result
        ir.Operation.create("ttile.store_fragment", operands=[d, sc, wr, wc])


def _function(mm):
    fn = mm.operation.parent
    while fn.name != "func.func":
        fn = fn.parent
    return fn


def _kernel(module: ir.Module, name: str):
    return next(op for op in module.body.operations
                if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name)


def lower_matrix(ctx, kname: str, ops: list, unit: Unit) -> list[plan.ArgsStep]:
    """The plan step of one GEMM group `takes` accepts, on `unit`; its kernel is added to the module."""
    mm = ops[0]
    a, b = mm.operands[0], mm.operands[1]
    da, db = ctx.dims[a], ctx.dims[b]
    out = ops[-1].results[0]
    dt = element_dtype(a)
    batched = len(db) > 2
    if batched and len(da) > 2 and len(da) != len(db):   # refused as the SIMT GEMM refuses it
        return simt_gemm.lower(ctx, kname, ops)
    steps, extras = _epilogue(ops)
    text = source(kname, unit, dt, element_dtype(out), steps, extras)
    ctx.build(text, f"<tessera:{kname}>")
    _fragments(_kernel(ctx.module, kname), unit, dt)
    return [simt_gemm.gemm_step(ctx, kname, text, ops, extras, block(unit), BN, BM)]


def _why_not(ops: list, unit: Unit | None, target: str, strict: bool) -> str | None:
    """Why a float GEMM group runs on FMA units where it might have used a matrix unit (None: nothing to
    record — integer, f64 and fp8 GEMMs, which no matrix path here takes, and f32 ones on a target without
    one)."""
    mm = ops[0]
    dt, dt_b = element_dtype(mm.operands[0]), element_dtype(mm.operands[1])
    sixteen = dt in MATRIX_DTYPES
    if unit is None:
        return f"{dt} GEMM on FMA units (the SIMT GEMM): no matrix unit declared for {target} " \
               f"(--arch xe-hpc declares cooperative matrices)" if sixteen and dt_b == dt else None
    if dt in ("f32", "tf32"):
        return f"{dt} GEMM on FMA units (the SIMT GEMM): the {unit.label} GEMM takes bf16/f16 operands"
    if not sixteen:
        return None
    if strict:
        return f"{dt} GEMM on FMA units (the SIMT GEMM): the strict numerics profile"
    return f"{dt} GEMM on FMA units (the SIMT GEMM): its form ({dt} @ {dt_b}, its epilogue or layout) is not " \
           f"the {unit.label} GEMM's"


def lowering(unit: Unit | None, target: str, strict: bool = False):
    """A target's GEMM lowering: groups `takes` accepts on `unit` (None: no matrix unit), unless `strict`; the
    others on the SIMT GEMM, recorded where `_why_not` says."""
    def lower(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
        if unit is not None and not strict and takes(ops):
            return lower_matrix(ctx, kname, ops, unit)
        note = _why_not(ops, unit, target, strict)
        if note:
            decompose.record(_function(ops[0]), note)
        return simt_gemm.lower(ctx, kname, ops)
    return lower
