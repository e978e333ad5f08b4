"""Run-time bounds checks of GPU kernels (simt_to_gpu.py with ``bounds_checks``; CompileOptions.gpu_bounds_checks).

Every tensor access of a SIMT kernel that bounds_facts cannot prove within its tensor's extents is guarded:
``index <u extent`` for each dimension (unsigned, so a negative index fails too). Out of bounds, the access is
skipped (a load gives 0) and the first failure of the module is recorded in its fault record; the kernel goes
on. The runtime reads the record when the work has finished and fails the launch, or the stream's
synchronization, with TSR_ERROR_MEMORY_FAULT naming the kernel, the block, the tensor and the source line
(runtime/src/cuda_backend.c; docs/robustness.md, "Out-of-bounds accesses").

Two globals of the module carry it, found by name with cuModuleGetGlobal:

    __tessera_fault        u32[4] in global memory, zero: [0] 1 + the site of the first failed check (set by
                           an atomic compare-and-swap from 0, so the first one stays), [1..3] its block
    __tessera_fault_sites  constant bytes: two NUL-terminated strings per site, the kernel's entry symbol and the
                           report ("tensor 'Out' accessed outside its extents at file.py:12", the CPU's words)

A module compiled with checks always has both (a kernel may need none), which is how the runtime tells a
checked image from an unchecked one. The lowering is target-independent MLIR (scf, memref, arith, gpu).

SPIR-V's "flat" abi has no program-scope record (MLIR's SPIR-V conversion has no memref.global, nor the
compare-and-swap above), so there every kernel of a checked module takes the record as a hidden trailing
argument, a ``!spirv.ptr<i32, CrossWorkgroup>`` to FLAT_RECORD_WORDS words the runtime allocates and zeroes: [0..3] as above,
[4] the claim, set by an atomic OR (spirv.AtomicOr, built here: the conversion lowers no atomics of
CrossWorkgroup memrefs), whose first setter then stores [0..3] with plain stores
(the runtime reads them after the launch). The site table travels in the SPIR-V as OpStrings
(backends/spirv/compiler.py, docs/image-format.md).
"""

from __future__ import annotations

# numpy: imported where used (a compile that never gets there does not load it, 60-70 ms)

from ..mlir import arith, builtin, gpu, ir, memref, scf, spirv
from . import bounds_facts

RECORD = "__tessera_fault"
SITES = "__tessera_fault_sites"
_GLOBAL_MEMORY = 1  # the memory space of the globals: NVVM's (and ROCDL's) global address space
FLAT_RECORD_WORDS = 5  # the "flat" abi's hidden argument: the record and its claim word
HIDDEN = "tessera.fault_record"  # marks the placeholders of the hidden argument (hidden_records)


def _record_type() -> ir.MemRefType:
    return ir.MemRefType.get([4], ir.IntegerType.get_signless(32),
                             memory_space=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _GLOBAL_MEMORY))


class Sites:
    """The reports of a module's checks, numbered in the order the kernels need them."""

    def __init__(self, entry_symbol=None):
        # the kernel's entry symbol, as the runtime looks the failed kernel up by it (cuModuleGetFunction)
        self._symbol = entry_symbol or (lambda kernel: kernel)
        self.entries: list[tuple[str, str]] = []  # (kernel entry symbol, report)
        self._numbers: dict[tuple[str, str], int] = {}

    def number(self, kernel: str, report: str) -> int:
        key = (self._symbol(kernel), report)
        if key not in self._numbers:
            self._numbers[key] = len(self.entries)
            self.entries.append(key)
        return self._numbers[key]

    def emit(self, body: ir.Block) -> None:
        """Defines the record and the site table at the start of the module body `body` (a gpu.module's)."""
        import numpy as np
        data = b"".join(k.encode() + b"\0" + r.encode() + b"\0" for k, r in self.entries) or b"\0"
        i8 = ir.IntegerType.get_signless(8)
        sites_t = ir.MemRefType.get([len(data)], i8, memory_space=_record_type().memory_space)
        with ir.InsertionPoint.at_block_begin(body):
            memref.GlobalOp(RECORD, ir.TypeAttr.get(_record_type()), sym_visibility="public",
                            initial_value=ir.DenseElementsAttr.get_splat(
                                ir.RankedTensorType.get([4], ir.IntegerType.get_signless(32)),
                                ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 0)), alignment=16)
            memref.GlobalOp(SITES, ir.TypeAttr.get(sites_t), sym_visibility="public", constant=True,
                            initial_value=ir.DenseElementsAttr.get(np.frombuffer(data, dtype=np.int8),
                                                                   type=ir.RankedTensorType.get([len(data)], i8)))


def flat_record_type() -> ir.Type:
    return ir.Type.parse("!spirv.ptr<i32, CrossWorkgroup>")


def hidden_records(fn) -> list:
    """The placeholders of the hidden record argument that `guard(abi="flat")` left in `fn`, for the caller to
    replace by the argument (builtin.unrealized_conversion_cast without operands)."""
    found = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "builtin.unrealized_conversion_cast" and not inner.operands \
                            and HIDDEN in inner.attributes:
                        found.append(inner)
                    visit(inner)

    visit(fn.operation)
    return found


def guard(kernel, sites: Sites, abi: str = "llvm") -> None:
    """Guards the accesses of `kernel` (a func.func with the frontend's argument attributes) not proven in
    bounds; the reports go to `sites`, the failures to the module's record ("llvm") or to a placeholder of
    the hidden argument ("flat", see hidden_records)."""
    facts = bounds_facts.Facts(kernel)
    name = ir.StringAttr(kernel.attributes["sym_name"]).value
    unproven: list[tuple[object, str]] = []
    _find(kernel.regions[0].blocks[0], facts, unproven)
    for op, report in unproven:
        _guard(op, sites.number(name, report), abi)


# The accesses checked, by where their memref operand is (the indices follow it).
_ACCESSES = {"memref.load": 0, "memref.store": 1, "ttile.atomic_rmw": 1, "ttile.atomic_cas": 2}


def _access(op) -> tuple[ir.Value, list[ir.Value]]:
    """(memref, indices) of a memref.load or memref.store, or of an atomic."""
    first = _ACCESSES[op.operation.name]
    return op.operands[first], list(op.operands)[first + 1:]


def _find(block: ir.Block, facts: bounds_facts.Facts, out: list) -> None:
    """The unproven accesses of `block`, with their reports, under the facts its guards and loops give."""
    for op in block.operations:
        name = op.operation.name
        if name in _ACCESSES:
            mem, indices = _access(op)
            if not facts.in_bounds(mem, indices):
                out.append((op, facts.report(op, mem)))
        elif name == "scf.if":
            assumed = facts.assume(op.operands[0])
            _find_region(op.regions[0], facts, out)
            facts.forget(assumed)
            _find_region(op.regions[1], facts, out)
        elif name == "scf.for":
            bounds = bounds_facts.loop_bounds(op)
            assumed = facts.assume_below(*bounds) if bounds else 0
            _find_region(op.regions[0], facts, out)
            facts.forget(assumed)
        else:
            for region in op.regions:
                _find_region(region, facts, out)


def _find_region(region, facts, out) -> None:
    for block in region.blocks:
        _find(block, facts, out)


def _guard(op, site: int, abi: str) -> None:
    """Moves the access `op` under ``if in bounds``; the other side reports `site` (and a load or an atomic
    gives 0)."""
    mem, indices = _access(op)
    load = len(op.results) == 1
    with op.location, ir.InsertionPoint(op):
        ok = None
        for k, i in enumerate(indices):
            extent = memref.DimOp(mem, arith.ConstantOp.create_index(k).result).result
            below = arith.CmpIOp(arith.CmpIPredicate.ult, i, extent).result
            ok = below if ok is None else arith.AndIOp(ok, below).result
        results = [op.results[0].type] if load else []
        branch = scf.IfOp(ok, results, has_else=True)
        if load:
            op.results[0].replace_all_uses_with(branch.results[0])
        with ir.InsertionPoint(branch.then_block):
            end = scf.YieldOp(list(op.results))
        with ir.InsertionPoint(branch.else_block):
            (_report if abi == "llvm" else _report_flat)(site)
            scf.YieldOp([_zero(results[0])] if load else [])
    op.operation.move_before(end)


def _report(site: int) -> None:
    """Records `site` and this block in the module's fault record, unless a failure is recorded already."""
    i32 = ir.IntegerType.get_signless(32)
    record = memref.GetGlobalOp(_record_type(), RECORD).result
    rmw = memref.GenericAtomicRMWOp(i32, record, [arith.ConstantOp.create_index(0).result])
    body = rmw.regions[0].blocks.append(i32)
    with ir.InsertionPoint(body):
        current = body.arguments[0]
        zero = arith.ConstantOp(i32, 0).result
        empty = arith.CmpIOp(arith.CmpIPredicate.eq, current, zero).result
        memref.AtomicYieldOp(arith.SelectOp(empty, arith.ConstantOp(i32, site + 1).result, current).result)
    first = arith.CmpIOp(arith.CmpIPredicate.eq, rmw.result, arith.ConstantOp(i32, 0).result).result
    record_block = scf.IfOp(first)
    with ir.InsertionPoint(record_block.then_block):
        for k, d in enumerate((gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)):
            block_id = arith.IndexCastOp(i32, gpu.BlockIdOp(d).result).result
            memref.StoreOp(block_id, record, [arith.ConstantOp.create_index(1 + k).result])
        scf.YieldOp([])


def _report_flat(site: int) -> None:
    """`_report` through the hidden argument, in SPIR-V's own ops (the conversion lowers no atomic of
    CrossWorkgroup memrefs): claimed by an atomic OR of its last word, then filled by plain stores."""
    i32 = ir.IntegerType.get_signless(32)
    placeholder = builtin.UnrealizedConversionCastOp([flat_record_type()], [])
    placeholder.attributes[HIDDEN] = ir.UnitAttr.get()
    record = placeholder.result

    def word(k: int) -> ir.Value:
        return spirv.PtrAccessChainOp(record.type, record, _i32(k), []).result

    old = spirv.AtomicOrOp(word(FLAT_RECORD_WORDS - 1), ir.Attribute.parse("#spirv.scope<Device>"),
                           ir.Attribute.parse("#spirv.memory_semantics<None>"), _i32(1)).result
    first = arith.CmpIOp(arith.CmpIPredicate.eq, old, _i32(0)).result
    record_block = scf.IfOp(first)
    with ir.InsertionPoint(record_block.then_block):
        spirv.StoreOp(word(0), _i32(site + 1))
        for k, d in enumerate((gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)):
            spirv.StoreOp(word(1 + k), arith.IndexCastOp(i32, gpu.BlockIdOp(d).result).result)
        scf.YieldOp([])


def _i32(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result


def _zero(t: ir.Type) -> ir.Value:
    if isinstance(t, ir.IndexType):
        return arith.ConstantOp.create_index(0).result
    if isinstance(t, ir.IntegerType):
        return arith.ConstantOp(t, 0).result
    return arith.ConstantOp(t, 0.0).result
