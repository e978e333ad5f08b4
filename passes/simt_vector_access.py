"""``tessera-simt-vector-access``: a thread's loads (stores) of 16 bytes of consecutive elements become one
16-byte access where the address is 16-byte aligned at run time.

A SIMT kernel that reads consecutive elements of a row in one thread, as the register row kernels do
(passes/kernelgen._register_row: lane l reads columns 8l … 8l + 7 of a bf16 row),

    x0 = X[r, le]; x1 = X[r, le + 1]; … x7 = X[r, le + 7]

issues eight 2-byte loads, and with them a warp keeps a eighth of the bytes in flight that 16-byte loads
would: on an H200 such a kernel reached about 1.2 TB/s. LLVM cannot merge them itself, since nothing tells it
the row is 16-byte aligned (a tensor may be a view at any element offset). This pass merges them under a test:

    if (aligned pointer of X + (r·C + le)·2) % 16 == 0:   v = vector.load X[r, le] (8 elements, align 16)
    else:                                                 the 8 loads as written
    x0 … x7 = v[0] … v[7]

and the same for VEC = 16 / (element bytes) stores of consecutive elements (the values stored as one vector,
else the stores as written, in their order). Elements and their values are exactly the program's; only the
width of the accesses changes. Which accesses form a group, in one block of the kernel:

  * loads of one memref with the same leading indices whose last index is `base + o` (or `base`, o = 0) for
    one SSA value `base` and constants o = o0 … o0 + VEC - 1, o0 a multiple of VEC, with nothing between
    the first and the last that writes memory or has other effects (only arith, math, loads, memref.dim,
    and the launch and shuffle queries of ttile); the vector load sits at the first load;
  * stores of such elements of one memref with only arith and math between them (no read, no other store),
    each element once; the vector store sits at the last store.

Memrefs of identity layout only (row-major, the kernels' tensors). The pass runs before tessera-simt-to-gpu,
not with bounds checks (which check each element's access), on PTX.
"""

from __future__ import annotations

from ..mlir import arith, ir, memref, scf, vector

VECTOR_BYTES = 16
_QUERIES = {"ttile.shuffle_xor", "ttile.shuffle_down", "ttile.thread_id", "ttile.local_id", "ttile.block_id",
            "ttile.block_dim", "ttile.grid_dim", "ttile.lane_id", "ttile.warp_id", "ttile.warp_size"}
_EQ = 0


def _pure(name: str) -> bool:
    return name.startswith("arith.") or name.startswith("math.")


def _constant(v: ir.Value) -> int | None:
    owner = v.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "arith.constant" and \
            isinstance(v.type, ir.IndexType):
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


def _split(index: ir.Value) -> tuple[ir.Value, int]:
    """(base, o) with index = base + o, o a constant (0 where index is no such sum)."""
    owner = index.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "arith.addi":
        a, b = owner.operands
        for base, off in ((a, b), (b, a)):
            o = _constant(off)
            if o is not None:
                return base, o
    return index, 0


def _identity(t: ir.MemRefType) -> bool:
    return isinstance(t.layout, ir.AffineMapAttr) and t.layout.value == ir.AffineMap.get_identity(t.rank)


def _vec(mem: ir.Value) -> int:
    """Elements of 16 bytes of memref `mem`, or 0 where its elements are not 1, 2, 4 or 8 bytes or its layout
    is not the identity."""
    t = ir.MemRefType(mem.type)
    e = t.element_type
    width = e.width if isinstance(e, (ir.IntegerType, ir.FloatType)) else 0
    if width not in (8, 16, 32, 64) or not _identity(t) or t.rank < 1:
        return 0
    return VECTOR_BYTES // (width // 8)


def _key(mem: ir.Value, indices: list) -> tuple:
    base, o = _split(indices[-1])
    return (mem, tuple(indices[:-1]), base), o


def _groups(accesses: list, at: int) -> list[list]:
    """Runs of VEC accesses (op list, in program order) at offsets o0 … o0 + VEC - 1 of one key; `at` is the
    position of the memref among the operands (0 for loads, 1 for stores)."""
    by_key: dict = {}
    position = {id(op): i for i, op in enumerate(accesses)}
    for op in accesses:
        operands = list(op.operands)
        mem = operands[at]
        if not _vec(mem):
            continue
        key, o = _key(mem, operands[at + 1:])
        slot = by_key.setdefault(key, {})
        if o in slot:          # one element accessed twice: leave this key alone
            slot["twice"] = True
        slot[o] = op
    out = []
    for (mem, _, _), slot in by_key.items():
        if slot.pop("twice", False):
            continue
        vec = _vec(mem)
        for o0 in sorted(o for o in slot if o % vec == 0):
            if all(o0 + e in slot for e in range(vec)):
                group = [slot[o0 + e] for e in range(vec)]
                place = [position[id(op)] for op in group]
                if at == 1 or place == sorted(place):   # loads in the order of their offsets (see _merge_loads)
                    out.append(group)
    return out


def _aligned(mem: ir.Value, indices: list) -> ir.Value:
    """i1: the address of element `indices` of row-major `mem` is 16-byte aligned."""
    t = ir.MemRefType(mem.type)
    lin = indices[0]
    for d in range(1, t.rank):
        size = memref.DimOp(mem, arith.ConstantOp.create_index(d).result).result
        lin = arith.AddIOp(arith.MulIOp(lin, size).result, indices[d]).result
    nbytes = t.element_type.width // 8
    addr = arith.AddIOp(memref.ExtractAlignedPointerAsIndexOp(mem).result,
                        arith.MulIOp(lin, arith.ConstantOp.create_index(nbytes).result).result).result
    low = arith.AndIOp(addr, arith.ConstantOp.create_index(VECTOR_BYTES - 1).result).result
    return arith.CmpIOp(_EQ, low, arith.ConstantOp.create_index(0).result).result


def _merge_loads(group: list) -> None:
    """`group`: the loads by offset, which is also their program order: the vector load takes the first's
    place and indices, which the later loads' uses follow."""
    first = group[0]
    operands = list(first.operands)
    mem, indices = operands[0], operands[1:]
    elem = ir.MemRefType(mem.type).element_type
    vtype = ir.VectorType.get([len(group)], elem)
    with first.location, ir.InsertionPoint(first):
        branch = scf.IfOp(_aligned(mem, indices), [vtype], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([vector.LoadOp(vtype, mem, indices, alignment=VECTOR_BYTES).result])
        with ir.InsertionPoint(branch.else_block):
            last = indices[-1]
            each = [memref.LoadOp(mem, [*indices[:-1], last if e == 0 else
                                        arith.AddIOp(last, arith.ConstantOp.create_index(e).result).result]).result
                    for e in range(len(group))]
            scf.YieldOp([vector.FromElementsOp(vtype, each).result])
        parts = [vector.ExtractOp(branch.results[0], [], [e]).result for e in range(len(group))]
    for op, v in zip(group, parts):
        op.result.replace_all_uses_with(v)
        op.operation.erase()


def _merge_stores(group: list, order: list) -> None:
    """`group`: the stores by offset; `order`: the same stores in program order (the last is the latest)."""
    last = order[-1]
    first = list(group[0].operands)
    mem, indices = first[1], first[2:]
    elem = ir.MemRefType(mem.type).element_type
    vtype = ir.VectorType.get([len(group)], elem)
    with last.location, ir.InsertionPoint(last):
        branch = scf.IfOp(_aligned(mem, indices), has_else=True)
        with ir.InsertionPoint(branch.then_block):
            v = vector.FromElementsOp(vtype, [op.operands[0] for op in group]).result
            vector.StoreOp(v, mem, indices, alignment=VECTOR_BYTES)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            for op in order:
                ops = list(op.operands)
                memref.StoreOp(ops[0], ops[1], ops[2:])
            scf.YieldOp([])
    for op in group:
        op.operation.erase()


def _block(block: ir.Block) -> int:
    """Merges the groups of `block` (and of the blocks nested in it); returns how many."""
    merged = 0
    for op in list(block.operations):
        for region in op.regions:
            for b in region.blocks:
                merged += _block(b)
    # loads: segments between operations that write memory or have other effects
    segment: list = []
    loads: list[list] = []
    for op in block.operations:
        name = op.operation.name
        if name == "memref.load":
            segment.append(op)
        elif not (_pure(name) or name in _QUERIES or name == "memref.dim"):
            loads.append(segment)
            segment = []
    loads.append(segment)
    for seg in loads:
        for group in _groups(seg, 0):
            _merge_loads(group)
            merged += 1
    # stores: runs of stores to one memref with only arith and math between them
    runs: list[list] = []
    run: list = []
    for op in block.operations:
        name = op.operation.name
        if name == "memref.store":
            if run and run[0].operands[1] != op.operands[1]:
                runs.append(run)
                run = []
            run.append(op)
        elif not _pure(name):
            runs.append(run)
            run = []
    runs.append(run)
    for r in runs:
        for group in _groups(r, 1):
            members = {id(op) for op in group}   # hashing ops: by identity of the Python views held in `r`
            place = [i for i, op in enumerate(r) if id(op) in members]
            if len(place) != place[-1] - place[0] + 1:
                continue   # another store to the memref between them (it may write one of their elements)
            _merge_stores(group, [r[i] for i in place])
            merged += 1
    return merged


def run(module) -> dict[str, int]:
    """Merges the vector-sized groups of every SIMT kernel of `module`; returns {kernel: groups merged} for the
    kernels that had any."""
    op = module.operation if isinstance(module, ir.Module) else module
    done = {}
    for fn in list(op.regions[0].blocks[0].operations):
        if fn.operation.name != "func.func" or "tessera.kernel" not in fn.attributes or \
                "tessera.llvm_ir" in fn.attributes or "tessera.tile_kernel" in fn.attributes or \
                not len(fn.regions[0].blocks):
            continue
        n = _block(fn.regions[0].blocks[0])
        if n:
            done[ir.StringAttr(fn.attributes["sym_name"]).value] = n
    return done
