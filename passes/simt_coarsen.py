"""``tessera-simt-coarsen``: elementwise SIMT kernels do several consecutive elements per thread.

A kernel written one element per thread, as README's saxpy is,

    i = launch.thread_id()
    if i < n:
        Out[i] = a * X[i] + Y[i]

moves 4 bytes per thread and access: the GPU's memory system then reaches ~80% of what 16-byte accesses
reach. This pass makes such a kernel do C = 16 / (smallest element size) consecutive elements per thread
(4 for f32, 8 for 16-bit types, 2 for f64), and the runtime launches it over ceil(grid.x / C) blocks:

    t     = thread_id(0)                        (of the smaller launch)
    base  = t · C
    bound = min(n, T)                           T: grid.x · block.x of the launch the caller asked for,
                                                   a hidden trailing i64 argument the runtime passes
    if base + C <= bound and every tensor accessed at [i] is 16-byte aligned:
        the guarded body for i = base … base + C - 1, in lockstep (each operation for every i before the
        next operation), the tensors marked 16-byte aligned: LLVM merges the C loads and the C stores of
        each tensor into one 128-bit access (ld.global.v4.f32)
    else:
        for k < C: i = base + k; if i < bound: the guarded body      (tail, unaligned tensors)

Elements i < min(n, T) are done, each once, as with the kernel as written whatever the launch (T need not
be a multiple of C, n may be 0 or exceed T). Lockstep order is one the hardware may run C threads in, so
results are identical, also when tensors alias. The pass applies only where that reasoning is sound; it
leaves a kernel unchanged unless all of this holds (``elementwise`` says which rule failed):

  * its operations are arith, math, memref load/store/dim, scf.if and one ``ttile.thread_id`` of axis 0:
    no shuffles, barriers, shared memory, atomics, loops, calls or other launch queries;
  * the thread index is used only as the index of loads and stores of 1-D tensors (``X[i]``), and once in
    the guard ``i < n`` (signed or unsigned), ``n`` independent of the thread;
  * the kernel's body is the guard's ``if`` (no else) after thread-independent, side-effect-free
    operations; every store is at ``[i]``, inside the guard.
"""

from __future__ import annotations

from ..mlir import arith, builtin, ir, memref, scf, vector

THREADS = "tessera.launched_threads"   # marks the placeholders of the hidden thread-count argument
FACTOR = "tessera.coarsen"             # on a coarsened kernel: its elements per thread
VECTOR_BYTES = 16
_SLT, _ULT = 2, 6                      # arith.cmpi predicates
_BODY_OPS = {"memref.load", "memref.store", "memref.dim", "scf.if", "scf.yield"}
_TOP_OPS = {"memref.load", "memref.dim", "ttile.thread_id", "arith.cmpi", "scf.if", "func.return"}


class _Refused(Exception):
    pass


def _walk(block: ir.Block):
    for op in block.operations:
        yield op
        for region in op.regions:
            for b in region.blocks:
                yield from _walk(b)


def _pure(name: str) -> bool:
    return name.startswith("arith.") or name.startswith("math.")


def _element_bytes(t: ir.Type) -> int:
    width = t.width if isinstance(t, (ir.IntegerType, ir.FloatType)) else 0
    if width not in (8, 16, 32, 64):
        raise _Refused(f"a tensor of {t} elements")
    return width // 8


def elementwise(fn) -> tuple[int, tuple] | str:
    """(C, (thread id, guard compare, guard if, tensors accessed at [i])) for a kernel this pass coarsens,
    else the rule it breaks, in words."""
    try:
        return _match(fn)
    except _Refused as e:
        return str(e)


def _match(fn):
    entry = fn.regions[0].blocks[0]
    ids = []
    for op in _walk(entry):
        name = op.operation.name
        if name == "ttile.thread_id":
            ids.append(op)
        elif not (_pure(name) or name in _BODY_OPS or name == "func.return"):
            raise _Refused(f"it has {name}")
    if len(ids) != 1 or ir.IntegerAttr(ids[0].attributes["dim"]).value != 0:
        raise _Refused("it does not read thread_id(0) exactly once")
    tid_op = ids[0]
    tid = tid_op.result
    top = list(entry.operations)
    if tid_op.operation.parent.name != fn.operation.name:
        raise _Refused("thread_id is read inside a branch")
    dependent = _dependents(entry, tid)
    guards = [op for op in top if op.operation.name == "arith.cmpi" and tid in list(op.operands)]
    if len(guards) != 1:
        raise _Refused("the thread index is not compared with a bound exactly once")
    cmp = guards[0]
    pred = ir.IntegerAttr(cmp.attributes["predicate"]).value
    lhs, rhs = cmp.operands
    if lhs != tid or pred not in (_SLT, _ULT) or _key(rhs) in dependent:
        raise _Refused("the guard is not `i < n` with n independent of the thread")
    ifs = [op for op in top if op.operation.name == "scf.if" and op.operands[0] == cmp.result]
    uses = [u for op in _walk(entry) for u in op.operands if u == cmp.result]
    if len(ifs) != 1 or len(uses) != 1 or len(ifs[0].results) or \
            len(list(ifs[0].regions[1].blocks)) and len(list(ifs[0].regions[1].blocks[0].operations)) > 1:
        raise _Refused("the guard is not one `if` without results or else")
    guard = ifs[0]
    if top.index(guard) != len(top) - 2:
        raise _Refused("operations follow the guarded body")
    for op in top:
        name = op.operation.name
        if op in (tid_op, cmp, guard) or name == "func.return":
            continue
        if name not in _TOP_OPS and not _pure(name) or any(_key(r) in dependent for r in op.results):
            raise _Refused(f"{name} outside the guard depends on the thread or has effects")
    tensors = []
    for op in _walk(entry):
        name = op.operation.name
        operands = list(op.operands)
        if name in ("memref.load", "memref.store"):
            at = 1 if name == "memref.store" else 0
            mem, indices = operands[at], operands[at + 1:]
            if name == "memref.store" and operands[0] == tid:
                raise _Refused("the thread index is stored as a value")
            if tid in indices or name == "memref.store":
                t = ir.MemRefType(mem.type)
                if indices[-1:] != [tid] or not all(map(_zero, indices[:-1])) or not _identity(t):
                    raise _Refused(f"{name} is not at [i] of a 1-D tensor (or [0, …, 0, i])")
                if not _inside(op, guard):
                    raise _Refused(f"{name} at [i] outside the guard")
                if not any(mem == m for m in tensors):
                    tensors.append(mem)
            elif any(_key(v) in dependent for v in indices):
                raise _Refused(f"{name} at an index computed from the thread index")
        elif tid in operands and op != cmp:
            raise _Refused(f"the thread index feeds {name}, not only [i]")
    if not tensors:
        raise _Refused("no tensor is accessed at [i]")
    smallest = min(_element_bytes(ir.MemRefType(m.type).element_type) for m in tensors)
    return VECTOR_BYTES // smallest, (tid, cmp, guard, tensors)


def _identity(t: ir.MemRefType) -> bool:
    return isinstance(t.layout, ir.AffineMapAttr) and t.layout.value == ir.AffineMap.get_identity(t.rank)


def _zero(v: ir.Value) -> bool:
    """Whether `v` is the index constant 0 (a leading index of a row-major tensor with one row)."""
    owner = v.owner
    return isinstance(owner, ir.OpView) and owner.operation.name == "arith.constant" and \
        isinstance(v.type, ir.IndexType) and ir.IntegerAttr(owner.attributes["value"]).value == 0


def _key(v: ir.Value) -> ir.Value:
    return v


def _dependents(entry: ir.Block, tid: ir.Value) -> set:
    """Hashes of the values computed from the thread index (a region's op depends on what its body reads)."""
    dep = {_key(tid)}

    def visit(op) -> bool:
        inner = False
        for region in op.regions:
            for b in region.blocks:
                for o in b.operations:
                    inner |= visit(o)
        if inner or any(_key(v) in dep for v in op.operands):
            dep.update(_key(r) for r in op.results)
            return True
        return False

    for op in entry.operations:
        visit(op)
    return dep


def _inside(op, guard) -> bool:
    parent = op.operation.parent
    while parent is not None:
        if parent == guard.operation:
            return True
        parent = parent.parent
    return False


def _clone(op, mapping: dict) -> ir.OpView:
    """`op` cloned at the insertion point, its operands (nested ones too) read through `mapping`."""
    new = op.operation.clone()
    todo = [new]
    while todo:
        o = todo.pop()
        for i, v in enumerate(list(o.operands)):
            if _key(v) in mapping:
                o.operands[i] = mapping[_key(v)]
        for region in o.regions:
            for b in region.blocks:
                todo.extend(x.operation for x in b.operations)
    for old, r in zip(op.results, new.results):
        mapping[_key(old)] = r
    return new


def _body(guard) -> list:
    return [op for op in guard.regions[0].blocks[0].operations if op.operation.name != "scf.yield"]


def _index(v: int) -> ir.Value:
    return arith.ConstantOp.create_index(v).result


def _widen(op, tid: ir.Value, base: ir.Value, maps: list[dict]) -> None:
    """`op` for each element of `maps`; an access at [i] as one vector access of them all at [base], the
    16-byte alignment its tensor was checked for."""
    name, operands = op.operation.name, list(op.operands)
    at = {"memref.load": 1, "memref.store": 2}.get(name)
    if at is None or operands[-1] != tid:
        for mp in maps:
            _clone(op, mp)
        return
    # the leading indices are 0 (elementwise), the same for every element: the first element's
    indices = [maps[0].get(_key(v), v) for v in operands[at:-1]] + [base]
    if name == "memref.load":
        vtype = ir.VectorType.get([len(maps)], op.result.type)
        v = vector.LoadOp(vtype, operands[0], indices, alignment=VECTOR_BYTES).result
        for k, mp in enumerate(maps):
            mp[_key(op.result)] = vector.ExtractOp(v, [], [k]).result
    else:
        value = operands[0]
        vtype = ir.VectorType.get([len(maps)], value.type)
        v = vector.FromElementsOp(vtype, [mp.get(_key(value), value) for mp in maps]).result
        vector.StoreOp(v, operands[1], indices, alignment=VECTOR_BYTES)


def coarsen(fn, factor: int, parts: tuple) -> None:
    """Rewrites `fn` (matched by `elementwise`) to do `factor` elements per thread."""
    tid, cmp, guard, tensors = parts
    pred = ir.IntegerAttr(cmp.attributes["predicate"]).value
    body = _body(guard)
    with guard.location, ir.InsertionPoint(guard):
        placeholder = builtin.UnrealizedConversionCastOp([ir.IndexType.get()], [])
        placeholder.attributes[THREADS] = ir.UnitAttr.get()
        n = cmp.operands[1]
        bound = (arith.MinSIOp if pred == _SLT else arith.MinUIOp)(n, placeholder.result).result
        c = _index(factor)
        base = arith.MulIOp(tid, c).result
        elements = [base] + [arith.AddIOp(base, _index(k)).result for k in range(1, factor)]
        whole = arith.CmpIOp(_SLE if pred == _SLT else _ULE, arith.AddIOp(base, c).result, bound)
        address = None
        for m in tensors:
            p = memref.ExtractAlignedPointerAsIndexOp(m).result
            address = p if address is None else arith.OrIOp(address, p).result
        aligned = arith.CmpIOp(_EQ, arith.AndIOp(address, _index(VECTOR_BYTES - 1)).result, _index(0))
        fast = scf.IfOp(arith.AndIOp(whole.result, aligned.result).result, has_else=True)
        with ir.InsertionPoint(fast.then_block):
            maps = [{_key(tid): e} for e in elements]
            for op in body:           # lockstep: each operation for every element before the next
                _widen(op, tid, base, maps)
            scf.YieldOp([])
        with ir.InsertionPoint(fast.else_block):
            for e in elements:
                inside = scf.IfOp(arith.CmpIOp(pred, e, bound).result)
                with ir.InsertionPoint(inside.then_block):
                    mp = {_key(tid): e}
                    for op in body:
                        _clone(op, mp)
                    scf.YieldOp([])
            scf.YieldOp([])
    guard.operation.erase()
    cmp.operation.erase()
    fn.attributes[FACTOR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), factor)


_SLE, _ULE, _EQ = 3, 7, 0


def run(module) -> dict[str, int]:
    """Coarsens every kernel of `module` that `elementwise` accepts; returns {kernel name: elements per thread}.
    Call before simt_to_gpu, and `bind_thread_count` after it."""
    op = module.operation if isinstance(module, ir.Module) else module
    done = {}
    for fn in list(op.regions[0].blocks[0].operations):
        if fn.operation.name != "func.func" or "tessera.kernel" not in fn.attributes or \
                "tessera.llvm_ir" in fn.attributes or "tessera.tile_kernel" in fn.attributes:
            continue
        found = elementwise(fn)
        if isinstance(found, tuple):
            coarsen(fn, *found)
            done[ir.StringAttr(fn.attributes["sym_name"]).value] = found[0]
    return done


def bind_thread_count(module) -> None:
    """Gives each coarsened gpu.func (after simt_to_gpu) its hidden trailing i64 argument, the caller's
    grid.x · block.x, in place of the placeholders `coarsen` left."""
    op = module.operation if isinstance(module, ir.Module) else module
    i64 = ir.IntegerType.get_signless(64)
    for gm in op.regions[0].blocks[0].operations:
        if gm.operation.name != "gpu.module":
            continue
        for fn in gm.regions[0].blocks[0].operations:
            if fn.operation.name != "gpu.func" or FACTOR not in fn.attributes:
                continue
            ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
            fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([*ftype.inputs, i64], []))
            entry = fn.regions[0].blocks[0]
            threads = entry.add_argument(i64, fn.location)
            for inner in list(_walk(entry)):
                if inner.operation.name == "builtin.unrealized_conversion_cast" and THREADS in inner.attributes:
                    with inner.location, ir.InsertionPoint(inner):
                        count = arith.IndexCastOp(ir.IndexType.get(), threads).result
                    inner.result.replace_all_uses_with(count)
                    inner.operation.erase()


def record(metadata: dict, coarsened: dict[str, int]) -> None:
    """The kernels' `simt.coarsen` property (docs/image-format.md): the runtime launches such a kernel over
    ceil(grid.x / C) blocks and passes grid.x · block.x after its arguments."""
    props = metadata.setdefault("kernel_props", {})
    for name, factor in coarsened.items():
        props.setdefault(name, {})["simt.coarsen"] = str(factor)
