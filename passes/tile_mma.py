"""``tessera-tile-mma``: Tile IR's warp-level matrix ops — ``ttile.fill``, ``ttile.ldmatrix``, ``ttile.mma``,
``ttile.store_fragment`` — in the kernels of a GPU module, as matrix-core instructions where the target has
them and as vector FMAs where it does not (portability guide §4.1).

A fragment is held by the lanes of one wave (W lanes); each lane keeps its share as scalars, in the order of
the layout below, and the ops become per-lane loads, stores and arithmetic at lane-dependent indices
(``gpu.lane_id``). Two layouts:

**MFMA** (AMD CDNA: gfx90a, gfx942, gfx950; W = 64; f16 or bf16 inputs, f32 accumulator; instruction
shapes 32x32x8 and 16x16x16): the registers of ``v_mfma_f32_{32x32x8,16x16x16}{f16,bf16_1k}``, as AMD's
matrix instruction calculator gives them. With l the lane and r the register:

    A (m x k):  row = l % m,                        col = 4 (l / m) + r          r < 4
    B (k x n):  row = 4 (l / n) + r,                col = l % n                  r < 4
    D (m x n):  32x32: row = 8 (r / 4) + 4 (l / 32) + r % 4,  col = l % 32      r < 16
                16x16: row = 4 (l / 16) + r,        col = l % 16                 r < 4

**WMMA** (AMD RDNA 3: gfx11xx; W = 32; f16 or bf16, 16x16x16): ``v_wmma_f32_16x16x16_{f16,bf16}``, whose
A and B are replicated in the two half-waves:

    A (16 x 16): row = l % 16, col = r    B: row = r, col = l % 16    r < 16
    D (16 x 16): row = 2 r + l / 16,      col = l % 16                r < 8

A fragment larger than the instruction is a grid of instruction tiles (tile-major, then register), and a
``ttile.mma`` issues one instruction per (row tile, column tile, k tile) — ``llvm.amdgcn.mfma.*`` or
``llvm.amdgcn.wmma.*`` through ``llvm.call_intrinsic``.

**Cooperative matrices** (SPIR-V where the device is declared to have them, ``matrix=coopmat``: Intel
Xe-HPC's DPAS through ``SPV_KHR_cooperative_matrix``; f16 or bf16 inputs, f32 accumulator, instruction
8x16x16 on subgroups of 32): no lane layout at all. A fragment is a grid of subgroup-scope matrices
(``!gpu.mma_matrix``, tile-major) that the driver distributes over the lanes; ``ttile.ldmatrix``,
``ttile.mma``, ``ttile.fill`` and ``ttile.store_fragment`` become ``gpu.subgroup_mma_load_matrix`` (one per
tile, row-major, or column-major for a ``transpose`` load), ``gpu.subgroup_mma_compute``,
``gpu.subgroup_mma_constant_matrix`` and ``gpu.subgroup_mma_store_matrix``, which the upstream conversion
makes ``OpCooperativeMatrixLoadKHR``/``MulAddKHR``/``StoreKHR``. The gpu dialect has no bf16 matrices (nor
loads from bf16 memrefs), so a bf16 tile is loaded as an f16 matrix from the bf16 memory seen as f16
through ``builtin.unrealized_conversion_cast``: a placeholder the SPIR-V backend resolves (a matrix loaded
through a bf16 pointer is a bf16 one). Only accumulators are filled or stored there, from and to memory
with a static row stride.

**FMA** (every other target: SPIR-V without a declared matrix extension, any other dtype or shape):
for a product with an M x N accumulator and W lanes (N divides W, G = W / N lanes per column), lane l owns
column j = l % N of rows v G + l / N (v < M / G) of the accumulator and of A, and column j of B. The
product is K steps of FMAs on vectors of up to 4 accumulator elements (``math.fma`` on ``vector<4xf32>``:
vector FMAs in SPIR-V and LLVM), inputs widened to f32 first. Every element of A is loaded by each lane of
its row group: simple, not fast — the matrix-unit paths are the fast ones.

Fragments must be used within one block, by these ops only (a loop-carried accumulator is refused at its
op: carry it through memory). A fragment's layout is the one its ``ttile.mma`` uses, so an ``a``/``b`` fragment must feed
``ttile.mma`` ops of one instruction shape and accumulator width.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import LoweringError
from ..dialects import tmem
from ..dialects.ttile_tile import FragmentType
from ..mlir import arith, builtin, gpu, ir, llvm, math, memref, vector

MFMA_ARCHS = ("gfx90a", "gfx942", "gfx950")


@dataclass(frozen=True)
class Instr:
    """One matrix-core instruction: its intrinsic, the wave it runs on, registers per lane of A, B and D, and
    where element (row, col) of each operand's tile sits: `place_x(e, lane, r)` -> (row, col) of register r."""
    intrinsic: str
    wave: int
    a_regs: int
    b_regs: int
    d_regs: int
    place_a: object
    place_b: object
    place_d: object
    mfma: bool   # the MFMA form, with cbsz/abid/blgp operands; WMMA takes A, B and C only


def _mfma_instr(name: str, m: int) -> Instr:
    """v_mfma_f32_{32x32x8,16x16x16}: A[i][k] in lane i + m (k / 4), register k % 4; B[k][j] in lane
    j + n (k / 4); D[i][j] in lane j + 32 ((i / 4) % 2), register i % 4 + 4 (i / 8) for 32x32, lane
    j + 16 (i / 4), register i % 4 for 16x16."""
    if m == 32:
        def place_d(e, lane, r):
            return e.plus(e.mul(e.div(lane, 32), 4), 8 * (r // 4) + r % 4), e.rem(lane, 32)
    else:
        def place_d(e, lane, r):
            return e.plus(e.mul(e.div(lane, 16), 4), r), e.rem(lane, 16)
    return Instr(name, 64, 4, 4, m * m // 64,
                 lambda e, lane, r: (e.rem(lane, m), e.plus(e.mul(e.div(lane, m), 4), r)),
                 lambda e, lane, r: (e.plus(e.mul(e.div(lane, m), 4), r), e.rem(lane, m)), place_d, True)


def _wmma_instr(name: str) -> Instr:
    """v_wmma_f32_16x16x16 (RDNA 3, wave32): lanes l and l + 16 both hold row l % 16 of A and column l % 16 of
    B, all 16 k; D[i][j] in lane j + 16 (i % 2), register i / 2."""
    return Instr(name, 32, 16, 16, 8,
                 lambda e, lane, r: (e.rem(lane, 16), e.const(r)),
                 lambda e, lane, r: (e.const(r), e.rem(lane, 16)),
                 lambda e, lane, r: (e.plus(e.div(lane, 16), 2 * r), e.rem(lane, 16)), False)


# (matrix unit, input dtype, m, n, k) -> the instruction
INSTRUCTIONS = {
    ("mfma", "f16", 32, 32, 8): _mfma_instr("llvm.amdgcn.mfma.f32.32x32x8f16", 32),
    ("mfma", "f16", 16, 16, 16): _mfma_instr("llvm.amdgcn.mfma.f32.16x16x16f16", 16),
    ("mfma", "bf16", 32, 32, 8): _mfma_instr("llvm.amdgcn.mfma.f32.32x32x8bf16.1k", 32),
    ("mfma", "bf16", 16, 16, 16): _mfma_instr("llvm.amdgcn.mfma.f32.16x16x16bf16.1k", 16),
    ("wmma", "f16", 16, 16, 16): _wmma_instr("llvm.amdgcn.wmma.f32.16x16x16.f16"),
    ("wmma", "bf16", 16, 16, 16): _wmma_instr("llvm.amdgcn.wmma.f32.16x16x16.bf16"),
}
# (input dtype, m, n, k) of the cooperative-matrix products (matrix=coopmat): Intel's joint-matrix
# combination for Xe-HPC on subgroups of 32 (IGC takes 8x16x16 there; 16x16x16 only on subgroups of 16)
COOPMAT_SHAPES = {("f16", 8, 16, 16), ("bf16", 8, 16, 16)}
FMA_WIDTH = 4   # accumulator elements per vector FMA
FRAGMENT_OPS = ("ttile.fill", "ttile.ldmatrix", "ttile.mma", "ttile.store_fragment")


@dataclass(frozen=True)
class Target:
    wave: int          # lanes of a wave / subgroup
    matrix: str = ""   # "mfma" (AMD CDNA), "wmma" (AMD RDNA 3), "coopmat" (SPIR-V, declared), "" for FMAs


def target_for_amdgpu(arch: str, wave: int) -> Target:
    return Target(wave, "mfma" if arch in MFMA_ARCHS else "wmma" if arch.startswith("gfx11") else "")


# -- fragments ----------------------------------------------------------------------------------------------

def _frag_type(t) -> tuple[int, int, str, str]:
    f = FragmentType(t) if not isinstance(t, FragmentType) else t
    rows, cols = (ir.IntegerAttr(a).value for a in ir.ArrayAttr(f.shape))
    elem = str(ir.TypeAttr(f.elem).value)
    return rows, cols, elem, ir.StringAttr(f.role).value


@dataclass
class Plan:
    """How one fragment value is laid out: by the matrix instruction `unit` (None: FMAs), the instruction
    shape (m, n, k) and the accumulator width it is used with."""
    unit: Instr | None
    instr: tuple[int, int, int]
    acc_cols: int
    coop: bool = False   # cooperative matrices (held as gpu.mma_matrix tiles, not per-lane scalars)


class _Emitter:
    """Index arithmetic on the lane id, emitted at the current insertion point."""

    def const(self, v: int) -> ir.Value:
        return arith.ConstantOp.create_index(v).result

    def lane(self) -> ir.Value:
        return gpu.LaneIdOp(results=[ir.IndexType.get()]).result

    @staticmethod
    def add(a, b):
        return arith.AddIOp(a, b).result

    def mul(self, a, k: int):
        return a if k == 1 else arith.MulIOp(a, self.const(k)).result

    def div(self, a, k: int):
        return a if k == 1 else arith.DivUIOp(a, self.const(k)).result

    def rem(self, a, k: int):
        return arith.RemUIOp(a, self.const(k)).result

    def plus(self, a, k: int):
        return a if k == 0 else self.add(a, self.const(k))


def _positions(plan: Plan, role: str, rows: int, cols: int, lane, e: _Emitter, wave: int) -> list:
    """(row, col) index values of each element a lane holds of a rows x cols fragment of `role`."""
    m, n, k = plan.instr
    u = plan.unit
    if u is not None:  # a grid of instruction tiles, tile-major, then register
        tile, place, regs = {"acc": ((m, n), u.place_d, u.d_regs), "a": ((m, k), u.place_a, u.a_regs),
                             "b": ((k, n), u.place_b, u.b_regs)}[role]
        out = []
        for ti in range(rows // tile[0]):
            for tj in range(cols // tile[1]):
                for r in range(regs):
                    row, col = place(e, lane, r)
                    out.append((e.plus(row, ti * tile[0]), e.plus(col, tj * tile[1])))
        return out
    # FMA: G lanes per column; lane l: column l % N, rows v G + l / N
    g = wave // plan.acc_cols
    col, row0 = e.rem(lane, plan.acc_cols), e.div(lane, plan.acc_cols)
    if role == "acc":
        return [(e.plus(row0, v * g), col) for v in range(rows // g)]
    if role == "a":
        return [(e.plus(row0, v * g), e.const(kk)) for v in range(rows // g) for kk in range(cols)]
    return [(e.const(kk), col) for kk in range(rows)]


def _plan_mma(op, target: Target) -> Plan:
    """The layout of a ttile.mma's fragments on `target`."""
    ar, ak, aelem, _ = _frag_type(op.operands[0].type)
    _, bn, _, _ = _frag_type(op.operands[1].type)
    instr = tuple(ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["shape"]))
    if target.matrix == "coopmat" and (aelem, *instr) in COOPMAT_SHAPES:
        return Plan(None, instr, bn, coop=True)
    unit = INSTRUCTIONS.get((target.matrix, aelem, *instr))
    if unit is not None and unit.wave == target.wave:
        return Plan(unit, instr, bn)
    if bn > target.wave or target.wave % bn or ar % (target.wave // bn):
        raise LoweringError(op, f"an {ar}x{bn} accumulator has no FMA layout on {target.wave} lanes: its columns "
                                f"must divide the wave and its rows be a multiple of {target.wave} / columns")
    return Plan(None, instr, bn)


def _plans(block, target: Target) -> dict:
    """The layout of every fragment value of the block, from the ttile.mma ops that use it."""
    plans: dict = {}

    def agree(value, plan: Plan, op):
        old = plans.get(value)
        if old is not None and old != plan:
            raise LoweringError(op, "a fragment feeds ttile.mma ops of different shapes; load it once for each")
        plans[value] = plan

    mmas = [op for op in block.operations if op.operation.name == "ttile.mma"]
    for op in mmas:
        plan = _plan_mma(op, target)
        for v in list(op.operands) + [op.results[0]]:
            agree(v, plan, op)
    for op in block.operations:
        if op.operation.name == "ttile.fill" and op.results[0] not in plans:
            raise LoweringError(op, "a ttile.fill whose fragment feeds no ttile.mma has no layout here")
    return plans


def _check_block_local(op, block) -> None:
    for r in op.results:
        for use in r.uses:
            owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            if owner.block != block or owner.name not in FRAGMENT_OPS:
                raise LoweringError(op, f"a fragment may be used only by ttile.mma and ttile.store_fragment in the "
                                        f"block that makes it, not by '{owner.name}' (a loop-carried accumulator, "
                                        f"say): carry it through memory instead")


def _call(name: str, result: ir.Type, args: list) -> ir.Value:
    return llvm.CallIntrinsicOp(result, name, args, [], []).results[0]


def _vector(values: list, elem: ir.Type) -> ir.Value:
    return vector.FromElementsOp(ir.VectorType.get([len(values)], elem), values).result


def _elements(vec: ir.Value, count: int) -> list:
    return [vector.ExtractOp(vec, [], [i]).result for i in range(count)]


def _matrix_unit(a: list, b: list, c: list, plan: Plan, shapes) -> list:
    """The product as one instruction per (row tile, column tile, k tile)."""
    (ar, ak, aelem), (kb, bn), (cr, cc) = shapes
    m, n, k = plan.instr
    u = plan.unit
    f32 = ir.F32Type.get()
    in_elem = ir.F16Type.get() if aelem == "f16" else ir.IntegerType.get_signless(16)
    extra = [arith.ConstantOp(ir.IntegerType.get_signless(32), 0).result] * 3 if u.mfma else []
    out = list(c)
    ktiles, ntiles = ak // k, bn // n
    for ti in range(cr // m):
        for tj in range(cc // n):
            base = (ti * ntiles + tj) * u.d_regs
            acc = _vector(out[base:base + u.d_regs], f32)
            for tk in range(ktiles):
                av = a[(ti * ktiles + tk) * u.a_regs:(ti * ktiles + tk + 1) * u.a_regs]
                bv = b[(tk * ntiles + tj) * u.b_regs:(tk * ntiles + tj + 1) * u.b_regs]
                if aelem == "bf16":  # the bf16 forms take bf16 as i16 bit patterns
                    av = [arith.BitcastOp(in_elem, x).result for x in av]
                    bv = [arith.BitcastOp(in_elem, x).result for x in bv]
                acc = _call(u.intrinsic, ir.VectorType.get([u.d_regs], f32),
                            [_vector(av, in_elem), _vector(bv, in_elem), acc, *extra])
            out[base:base + u.d_regs] = _elements(acc, u.d_regs)
    return out


def _fma(a: list, b: list, c: list, k_steps: int) -> list:
    f32 = ir.F32Type.get()

    def wide(x):
        return x if x.type == f32 else arith.ExtFOp(f32, x).result

    out = list(c)
    rows = len(c)
    for start in range(0, rows, FMA_WIDTH):
        width = min(FMA_WIDTH, rows - start)
        acc = _vector(out[start:start + width], f32)
        for kk in range(k_steps):
            av = _vector([wide(a[v * k_steps + kk]) for v in range(start, start + width)], f32)
            bv = vector.BroadcastOp(ir.VectorType.get([width], f32), wide(b[kk])).result
            acc = math.FmaOp(av, bv, acc).result
        out[start:start + width] = _elements(acc, width)
    return out


# -- cooperative matrices (SPIR-V) ---------------------------------------------------------------------------

_USE = {"a": "AOp", "b": "BOp", "acc": "COp"}


def _coop_tile(plan: Plan, role: str) -> tuple[int, int]:
    m, n, k = plan.instr
    return {"a": (m, k), "b": (k, n), "acc": (m, n)}[role]


def _coop_type(plan: Plan, role: str, elem: str) -> ir.Type:
    rows, cols = _coop_tile(plan, role)
    carried = "f16" if elem == "bf16" else elem   # a placeholder for bf16 (module doc)
    return ir.Type.parse(f'!gpu.mma_matrix<{rows}x{cols}x{carried}, "{_USE[role]}">')


def _row_stride(op, mem: ir.Value, what: str) -> int:
    """The static distance between rows of `mem`, which a cooperative-matrix load or store takes as a
    constant."""
    steps, _ = tmem.strides(ir.MemRefType(mem.type))
    if steps[-1] != 1 or steps[-2] is None:
        raise LoweringError(op, f"a cooperative-matrix {what} needs memory with contiguous rows and a static row "
                                f"stride, got {mem.type}")
    return steps[-2]


def _coop_fill(op, plan: Plan, rows: int, cols: int, role: str) -> list:
    if role != "acc":
        raise LoweringError(op, f"fills a fragment of role '{role}': on the cooperative-matrix path only "
                                f"accumulators are filled (load A and B with ttile.ldmatrix)")
    tr, tc = _coop_tile(plan, role)
    value = gpu.SubgroupMmaConstantMatrixOp(_coop_type(plan, role, "f32"), op.operands[0]).result
    return [value] * ((rows // tr) * (cols // tc))


def _coop_load(op, plan: Plan, rows: int, cols: int, elem: str, role: str, e: _Emitter) -> list:
    src, *idx = op.operands
    lead, r0, c0 = list(idx[:-2]), idx[-2], idx[-1]
    transposed = "transpose" in op.attributes
    stride = _row_stride(op, src, "load")
    tr, tc = _coop_tile(plan, role)
    t = _coop_type(plan, role, elem)
    if elem == "bf16":   # the placeholder of the module doc
        mt = ir.MemRefType(src.type)
        f16_view = ir.MemRefType.get(mt.shape, ir.F16Type.get(), mt.layout, mt.memory_space)
        src = builtin.UnrealizedConversionCastOp([f16_view], [src]).results[0]
    out = []
    for ti in range(rows // tr):
        for tj in range(cols // tc):
            # element (i, j) of a transposed fragment is source[r0 + j, c0 + i]: each tile is a column-major
            # matrix at the same row stride, starting at its first column's row
            dr, dc = (tj * tc, ti * tr) if transposed else (ti * tr, tj * tc)
            out.append(gpu.SubgroupMmaLoadMatrixOp(t, src, lead + [e.plus(r0, dr), e.plus(c0, dc)], stride,
                                                   transpose=transposed or None).result)
    return out


def _coop_mma(a: list, b: list, c: list, plan: Plan, shapes) -> list:
    """One subgroup matrix multiply-add per (row tile, column tile, k tile), k tiles in ascending order."""
    (ar, ak), bn = shapes
    m, n, k = plan.instr
    ktiles, ntiles = ak // k, bn // n
    out = list(c)
    for ti in range(ar // m):
        for tj in range(ntiles):
            acc = out[ti * ntiles + tj]
            for tk in range(ktiles):
                acc = gpu.SubgroupMmaComputeOp(a[ti * ktiles + tk], b[tk * ntiles + tj], acc,
                                               results=[acc.type]).result
            out[ti * ntiles + tj] = acc
    return out


def _coop_store(op, plan: Plan, held: list, rows: int, cols: int, role: str, e: _Emitter) -> None:
    if role != "acc":
        raise LoweringError(op, f"stores a fragment of role '{role}': on the cooperative-matrix path only "
                                f"accumulators are stored")
    value, dest, *idx = op.operands
    lead, r0, c0 = list(idx[:-2]), idx[-2], idx[-1]
    stride = _row_stride(op, dest, "store")
    tr, tc = _coop_tile(plan, role)
    for ti in range(rows // tr):
        for tj in range(cols // tc):
            gpu.SubgroupMmaStoreMatrixOp(held[ti * (cols // tc) + tj], dest,
                                         lead + [e.plus(r0, ti * tr), e.plus(c0, tj * tc)], stride)


# -- the pass -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Lowered:
    """How one ttile.mma was done: its instruction shape, input dtype, and "mfma", "wmma", "cooperative
    matrix" or "vector FMAs"."""
    shape: tuple[int, int, int]
    dtype: str
    how: str

    def __str__(self) -> str:
        return f"{'x'.join(map(str, self.shape))} {self.dtype}: {self.how}"


def _describe(plan: Plan, elem: str) -> Lowered:
    how = "cooperative matrix" if plan.coop else "vector FMAs" if plan.unit is None else \
        plan.unit.intrinsic.split(".")[2]
    return Lowered(plan.instr, elem, how)


def _lower_block(block, target: Target) -> list[Lowered]:
    """Lowers the block's fragment ops; returns how each ttile.mma was done (`_describe`)."""
    ops = [op for op in block.operations if op.operation.name in FRAGMENT_OPS]
    if not ops:
        return []
    for op in ops:
        _check_block_local(op, block)
    plans = _plans(block, target)
    held: dict = {}   # fragment value -> its lane's scalars, or its tiles (cooperative matrices)
    done = []
    e = _Emitter()
    for op in ops:
        name = op.operation.name
        with op.location, ir.InsertionPoint(op):
            if name == "ttile.fill":
                rows, cols, _, role = _frag_type(op.results[0].type)
                plan = plans[op.results[0]]
                if plan.coop:
                    held[op.results[0]] = _coop_fill(op, plan, rows, cols, role)
                else:
                    count = len(_positions(plan, role, rows, cols, e.lane(), e, target.wave))
                    held[op.results[0]] = [op.operands[0]] * count
            elif name == "ttile.ldmatrix":
                rows, cols, elem, role = _frag_type(op.results[0].type)
                if op.results[0] not in plans:
                    raise LoweringError(op, "a fragment loaded by ttile.ldmatrix feeds no ttile.mma")
                plan = plans[op.results[0]]
                if plan.coop:
                    held[op.results[0]] = _coop_load(op, plan, rows, cols, elem, role, e)
                    continue
                src, *idx = op.operands
                lead, r0, c0 = list(idx[:-2]), idx[-2], idx[-1]
                transposed = "transpose" in op.attributes
                vals = []
                for row, col in _positions(plan, role, rows, cols, e.lane(), e, target.wave):
                    i, j = (col, row) if transposed else (row, col)
                    vals.append(memref.LoadOp(src, lead + [e.add(r0, i), e.add(c0, j)]).result)
                held[op.results[0]] = vals
            elif name == "ttile.mma":
                a, b, c = (held[v] for v in op.operands)
                plan = plans[op.results[0]]
                ar, ak, aelem, _ = _frag_type(op.operands[0].type)
                kb, bn, _, _ = _frag_type(op.operands[1].type)
                cr, cc, _, _ = _frag_type(op.operands[2].type)
                if plan.coop:
                    held[op.results[0]] = _coop_mma(a, b, c, plan, ((ar, ak), bn))
                elif plan.unit is not None:
                    held[op.results[0]] = _matrix_unit(a, b, c, plan, ((ar, ak, aelem), (kb, bn), (cr, cc)))
                else:
                    held[op.results[0]] = _fma(a, b, c, ak)
                done.append(_describe(plan, aelem))
            else:  # store_fragment
                value, dest, *idx = op.operands
                rows, cols, _, role = _frag_type(value.type)
                if plans[value].coop:
                    _coop_store(op, plans[value], held[value], rows, cols, role, e)
                    continue
                lead, r0, c0 = list(idx[:-2]), idx[-2], idx[-1]
                for x, (row, col) in zip(held[value], _positions(plans[value], role, rows, cols, e.lane(), e,
                                                                 target.wave)):
                    memref.StoreOp(x, dest, lead + [e.add(r0, row), e.add(c0, col)])
    for op in reversed(ops):
        op.operation.erase()
    return done


def _function_name(block) -> str:
    op = block.owner.operation
    while op is not None and op.name not in ("gpu.func", "func.func", "llvm.func"):
        op = op.parent.operation if op.parent is not None else None
    return ir.StringAttr(op.attributes["sym_name"]).value if op is not None else ""


def run(module_op, target: Target) -> dict[str, list[Lowered]]:
    """Lowers the fragment ops of every block of `module_op` (a module or a function). Returns, per function,
    how each of its ttile.mma ops was done."""
    blocks = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                if any(o.operation.name in FRAGMENT_OPS for o in block.operations):
                    blocks.append(block)
                for inner in block.operations:
                    visit(inner.operation)

    visit(module_op)
    done: dict[str, list[Lowered]] = {}
    for block in blocks:
        lowered = _lower_block(block, target)
        if lowered:
            done.setdefault(_function_name(block), []).extend(lowered)
    return done
