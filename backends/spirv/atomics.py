"""Tile IR's atomics and fences as SPIR-V (OpenCL kernels), built before convert-gpu-to-spirv, which has no
conversion of them: the upstream ``memref.atomic_rmw`` lowering fixes acq_rel at device scope and has no
compare-and-swap. The pointer is the tensor's address (``memref.extract_aligned_pointer_as_index``, which the
conversion makes OpConvertPtrToU) made a pointer again: a spirv op cannot take the memref itself before the
conversion, nor be matched to one after it.

After simt_to_gpu's "flat" abi each atomic addresses a 1-D ``memref<?xT>`` at a linear offset. It becomes
``OpPtrAccessChain`` on the tensor's CrossWorkgroup pointer and the atomic
with its scope (block Workgroup, device Device, system CrossDevice) and memory semantics (the order, plus the
memory class it orders: CrossWorkgroupMemory, or WorkgroupMemory for shared memory; a relaxed atomic is
None). i32/i64 add and max are OpAtomicIAdd / OpAtomicSMax; f32 add and max, with no core SPIR-V instruction
(SPV_EXT_shader_atomic_float_add / _min_max are extensions OpenCL drivers may lack), are a compare-and-swap
loop on the value's bits (max: arith.maximumf, IEEE maximum: a NaN wins); a fence is OpMemoryBarrier.
"""

from __future__ import annotations

from ...diagnostics import LoweringError
from ...dialects import tmem
from ...mlir import arith, ir, memref, scf, spirv

SCOPES = {"block": "Workgroup", "device": "Device", "system": "CrossDevice"}
ORDERS = {"relaxed": "None", "acquire": "Acquire", "release": "Release", "acq_rel": "AcquireRelease",
          "seq_cst": "SequentiallyConsistent"}
# A compare that fails stores nothing: OpenCL forbids Release and AcquireRelease for the unequal semantics.
FAILURE = {"relaxed": "relaxed", "acquire": "acquire", "release": "relaxed", "acq_rel": "acquire",
           "seq_cst": "seq_cst"}
_STORAGE = {"global": ("CrossWorkgroup", "CrossWorkgroupMemory"), "workgroup": ("Workgroup", "WorkgroupMemory")}


def _scope(name: str) -> ir.Attribute:
    return ir.Attribute.parse(f"#spirv.scope<{SCOPES[name]}>")


def _semantics(order: str, memory: str) -> ir.Attribute:
    sem = ORDERS[order]
    return ir.Attribute.parse(f"#spirv.memory_semantics<{sem if sem == 'None' else sem + '|' + memory}>")


def _walk(op, found: list) -> list:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if inner.operation.name in ("ttile.atomic_rmw", "ttile.atomic_cas", "ttile.fence"):
                    found.append(inner)
                _walk(inner.operation, found)
    return found


def run(module: ir.Module) -> bool:
    """Lowers every ttile atomic and fence of `module`'s kernels (see the module docstring). Returns whether an
    atomic is 64 bits wide: the module then needs Int64Atomics (`declare_int64_atomics`)."""
    wide = False
    for op in _walk(module.operation, []):
        name = op.operation.name
        order = ir.StringAttr(op.attributes["order"]).value
        scope = _scope(ir.StringAttr(op.attributes["scope"]).value)
        with op.location, ir.InsertionPoint(op):
            if name == "ttile.fence":
                spirv.MemoryBarrierOp(scope, _semantics(order, "CrossWorkgroupMemory|WorkgroupMemory"))
                op.operation.erase()
                continue
            operands = list(op.operands)
            mem_at = 1 if name == "ttile.atomic_rmw" else 2
            mem, index = operands[mem_at], operands[mem_at + 1]
            mt = ir.MemRefType(mem.type)
            storage, memory = _STORAGE[tmem.memory_space(mt)]
            et = mt.element_type
            wide = wide or et == ir.IntegerType.get_signless(64)
            ptr_t = ir.Type.parse(f"!spirv.ptr<{et}, {storage}>")
            i64 = ir.IntegerType.get_signless(64)
            address = arith.IndexCastOp(i64, memref.ExtractAlignedPointerAsIndexOp(mem).result).result
            base = spirv.ConvertUToPtrOp(ptr_t, address).result
            offset = arith.IndexCastOp(i64, index).result
            pointer = spirv.PtrAccessChainOp(ptr_t, base, offset, []).result
            sem = _semantics(order, memory)
            if name == "ttile.atomic_cas":
                fail = _semantics(FAILURE[order], memory)
                result = spirv.AtomicCompareExchangeOp(pointer, scope, sem, fail, operands[1], operands[0]).result
            elif isinstance(et, ir.F32Type):
                combine = arith.MaximumFOp if ir.StringAttr(op.attributes["kind"]).value == "max" else arith.AddFOp
                result = _float_rmw(pointer, storage, scope, sem, _semantics(FAILURE[order], memory), operands[0],
                                    combine)
            elif ir.StringAttr(op.attributes["kind"]).value == "max":
                result = spirv.AtomicSMaxOp(pointer, scope, sem, operands[0]).result
            else:
                result = spirv.AtomicIAddOp(pointer, scope, sem, operands[0]).result
        op.results[0].replace_all_uses_with(result)
        op.operation.erase()
    return wide


def declare_int64_atomics(module: ir.Module) -> None:
    """Adds the Int64Atomics capability to every spirv.module's requirements: MLIR's atomic ops do not list it
    for 64-bit values, so spirv-update-vce leaves it out and spirv-val refuses the module."""
    for gm in module.body.operations:
        if gm.operation.name != "gpu.module":
            continue
        for sm in gm.regions[0].blocks[0].operations:
            if sm.operation.name == "spirv.module" and "vce_triple" in sm.attributes:
                vce = str(sm.attributes["vce_triple"])
                if "Int64Atomics" not in vce:
                    sm.attributes["vce_triple"] = ir.Attribute.parse(vce.replace("[", "[Int64Atomics, ", 1))


def _float_rmw(pointer, storage: str, scope, sem, fail, value, combine) -> ir.Value:
    """`*pointer = combine(*pointer, value)` (f32; `combine` an arith op class: AddFOp, MaximumFOp) as a
    compare-and-swap loop on the bits: read, combine, swap if unchanged, else retry with the value found.
    Returns the value the successful swap replaced."""
    i32, f32 = ir.IntegerType.get_signless(32), ir.F32Type.get()
    bits_ptr = spirv.BitcastOp(ir.Type.parse(f"!spirv.ptr<i32, {storage}>"), pointer).result
    first = spirv.AtomicLoadOp(bits_ptr, scope, fail, results=[i32]).result
    loop = scf.WhileOp([i32, i32], [first, first])
    before = loop.before.blocks.append(i32, i32)
    with ir.InsertionPoint(before):
        expected = before.arguments[0]
        new = arith.BitcastOp(i32, combine(arith.BitcastOp(f32, expected).result, value).result).result
        found = spirv.AtomicCompareExchangeOp(bits_ptr, scope, sem, fail, new, expected).result
        retry = arith.CmpIOp(arith.CmpIPredicate.ne, found, expected).result
        scf.ConditionOp(retry, [found, expected])
    after = loop.after.blocks.append(i32, i32)
    with ir.InsertionPoint(after):
        scf.YieldOp([after.arguments[0], after.arguments[1]])
    return arith.BitcastOp(f32, loop.results[1]).result
