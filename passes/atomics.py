"""Tile IR's atomics and fences (``ttile.atomic_rmw``, ``ttile.atomic_cas``, ``ttile.fence``) as LLVM dialect
ops, for the targets that go through LLVM: the CPU (passes/simt_to_warps.py, one atomic per active lane) and
NVPTX and AMDGPU (passes/simt_to_gpu.py, the "llvm" abi).

The element's address is computed here (the memref's aligned pointer plus its row-major offset) because the
upstream ``memref.atomic_rmw`` has neither an order nor a scope: it always lowers as acq_rel at system scope.
`SYNCSCOPES` maps Tessera's scopes to each target's LLVM syncscope names ("" is the system, LLVM's default).
On GPUs the pointer is cast to the memory's own address space (global 1, shared 3), so that the backends
emit `atom.global` / `global_atomic` rather than generic-address atomics.
"""

from __future__ import annotations

from ..dialects import tmem
from ..mlir import arith, ir, llvm, memref

ORDERS = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel",
          "seq_cst": "seq_cst"}
# A compare that fails stores nothing: it keeps the acquire part of the order, never a release.
FAILURE_ORDERS = {"relaxed": "monotonic", "acquire": "acquire", "release": "monotonic", "acq_rel": "acquire",
                  "seq_cst": "seq_cst"}
SYNCSCOPES = {
    # The CPU backend runs a block's threads on one OS thread, but system scope costs x86 nothing more.
    "cpu": {"block": "", "device": "", "system": ""},
    "nvptx": {"block": "block", "device": "device", "system": ""},
    "amdgpu": {"block": "workgroup", "device": "agent", "system": ""},
}
_ADDRESS_SPACES = {"global": 1, "workgroup": 3}


def _ordering(name: str):
    return getattr(llvm.AtomicOrdering, name)


def _attrs(op) -> tuple[str, str]:
    return ir.StringAttr(op.attributes["order"]).value, ir.StringAttr(op.attributes["scope"]).value


def element_pointer(mem: ir.Value, linear: ir.Value, target: str) -> ir.Value:
    """An LLVM pointer to element `linear` (an index, row-major) of the identity-layout memref `mem`."""
    mt = ir.MemRefType(mem.type)
    i64 = ir.IntegerType.get_signless(64)
    base = arith.IndexCastOp(i64, memref.ExtractAlignedPointerAsIndexOp(mem).result).result
    ptr = llvm.IntToPtrOp(ir.Type.parse("!llvm.ptr"), base).result
    if target != "cpu":
        space = _ADDRESS_SPACES[tmem.memory_space(mt)]
        ptr = llvm.AddrSpaceCastOp(ir.Type.parse(f"!llvm.ptr<{space}>"), ptr).result
    offset = arith.IndexCastOp(i64, linear).result
    return llvm.GEPOp(ptr.type, ptr, [offset], [-2147483648], mt.element_type, llvm.GEPNoWrapFlags.none).result


def linear_index(mem: ir.Value, indices: list[ir.Value]) -> ir.Value:
    """The row-major offset of `indices` in `mem` (scalar index values)."""
    if not indices:
        return arith.ConstantOp.create_index(0).result
    offset = indices[0]
    for k in range(1, len(indices)):
        extent = memref.DimOp(mem, arith.ConstantOp.create_index(k).result).result
        offset = arith.AddIOp(arith.MulIOp(offset, extent).result, indices[k]).result
    return offset


_PTX_SCOPES = {"block": "cta", "device": "gpu", "system": "sys"}
_PTX_SPACES = {1: "global", 3: "shared"}


def _ptx_atom(pointer: ir.Value, order: str, scope: str) -> tuple[str, str]:
    """The fence a PTX atom of `order` needs first ('' or a fence.sc), and the atom's prefix up to its
    operation: atom.<sem>.<scope>.<space>. seq_cst is PTX's mapping of a sequentially consistent RMW:
    fence.sc, then an acq_rel atom, at the scope."""
    space = _PTX_SPACES[int(str(pointer.type).split("<")[1].rstrip(">"))]
    ptx_scope = _PTX_SCOPES[scope]
    sem = "acq_rel" if order == "seq_cst" else order
    return (f"fence.sc.{ptx_scope};\n\t" if order == "seq_cst" else ""), f"atom.{sem}.{ptx_scope}.{space}"


def _ptx_rmw(kind: str, pointer: ir.Value, value: ir.Value, order: str, scope: str) -> ir.Value:
    """The PTX atom itself, through inline assembly: LLVM's NVPTX backend (22) drops an atomicrmw's order and
    syncscope (it emits a relaxed `atom.global.add` at the default .gpu scope whatever they are)."""
    t = value.type
    bits = ir.FloatType(t).width if isinstance(t, ir.FloatType) else ir.IntegerType(t).width
    suffix = "f32" if isinstance(t, ir.F32Type) else ("s" if kind == "max" else "u") + str(bits)
    reg = {"f32": "f", 32: "r", 64: "l"}["f32" if suffix == "f32" else bits]
    fence_first, atom = _ptx_atom(pointer, order, scope)
    asm = f"{fence_first}{atom}.{kind}.{suffix} $0, [$1], $2;"
    return llvm.InlineAsmOp(t, [pointer, value], asm, f"={reg},l,{reg},~{{memory}}", has_side_effects=True).result


# A quiet NaN with the sign bit clear: PTX's f32 max (below) stores a NaN operand as this one.
CANONICAL_NAN = 0x7FC00000


def _ptx_float_max(pointer: ir.Value, value: ir.Value, order: str, scope: str) -> ir.Value:
    """f32 atomic max on PTX, which has no atom.max.f32: a float's bits ordered as signed integers are the
    floats' order where the sign bit is clear (+0 < ... < +inf < NaN), and reversed as unsigned integers where
    it is set, so a value with the sign clear is stored by atom.max.s32 and one with it set by atom.min.u32
    (either compared with whatever the element holds: a negative element's bits are negative as s32, a
    positive one's smaller as u32). A NaN is made CANONICAL_NAN first (a negative NaN would lose to every
    negative float as u32). The result is IEEE maximum's: a NaN wins, -0 < +0."""
    i32 = ir.IntegerType.get_signless(32)
    bits = arith.BitcastOp(i32, value).result
    nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
    bits = arith.SelectOp(nan, arith.ConstantOp(i32, CANONICAL_NAN).result, bits).result
    fence_first, atom = _ptx_atom(pointer, order, scope)
    asm = (f"{{\n\t.reg .pred p;\n\tsetp.ge.s32 p, $2, 0;\n\t{fence_first}"
           f"@p {atom}.max.s32 $0, [$1], $2;\n\t@!p {atom}.min.u32 $0, [$1], $2;\n\t}}")
    old = llvm.InlineAsmOp(i32, [pointer, bits], asm, "=r,l,r,~{memory}", has_side_effects=True).result
    return arith.BitcastOp(value.type, old).result


def rmw(op, pointer: ir.Value, value: ir.Value, target: str) -> ir.Value:
    """The old value, after `ttile.atomic_rmw` `op`'s update of *pointer by `value`. f32 max is IEEE
    maximum (a NaN wins, -0 < +0): LLVM's atomicrmw fmaximum, which the CPU and AMDGPU backends expand to a
    compare-and-swap loop where they have no instruction; on PTX _ptx_float_max."""
    order, scope = _attrs(op)
    kind = ir.StringAttr(op.attributes["kind"]).value
    is_float = isinstance(value.type, ir.FloatType)
    if target == "nvptx" and kind == "max" and is_float:
        return _ptx_float_max(pointer, value, order, scope)
    if target == "nvptx":
        return _ptx_rmw(kind, pointer, value, order, scope)
    bin_op = {("add", False): llvm.AtomicBinOp.add, ("add", True): llvm.AtomicBinOp.fadd,
              ("max", False): llvm.AtomicBinOp.max, ("max", True): llvm.AtomicBinOp.fmaximum}[kind, is_float]
    return llvm.AtomicRMWOp(bin_op, pointer, value, _ordering(ORDERS[order]),
                            syncscope=SYNCSCOPES[target][scope] or None).result


def cas(op, pointer: ir.Value, compare: ir.Value, value: ir.Value, target: str) -> ir.Value:
    """The old value of *pointer, which became `value` where it equalled `compare` (`ttile.atomic_cas` `op`)."""
    order, scope = _attrs(op)
    pair = llvm.AtomicCmpXchgOp(pointer, compare, value, _ordering(ORDERS[order]),
                                _ordering(FAILURE_ORDERS[order]), syncscope=SYNCSCOPES[target][scope] or None)
    return llvm.ExtractValueOp(value.type, pair.result, [0]).result


def fence(op, target: str) -> None:
    order, scope = _attrs(op)
    llvm.FenceOp(_ordering(ORDERS[order]), syncscope=SYNCSCOPES[target][scope] or None)
