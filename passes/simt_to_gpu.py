"""``tessera-simt-to-gpu``: SIMT kernels become GPU kernels whose parameters are their launch signature.

On a GPU the SIMT model is the hardware's own, so, unlike the CPU's warp vectorization (simt_to_warps.py),
the body stays as written and only the ``ttile`` launch queries and warp operations change, into the ``gpu``
dialect that ``convert-gpu-to-nvvm``, ``-rocdl`` and ``-spirv`` take to their targets. With W the target's
warp width (32 on NVIDIA, 64 on AMD CDNA, 32 on AMD RDNA and our SPIR-V subgroups):

    thread_id(d)  = block_id(d) · block_dim(d) + local_id(d)       local_id(d) = gpu.thread_id
    lane_id       = gpu.lane_id                                     warp_size   = W
    warp_id       = (linear block index) · (warps per block) + (linear thread index in the block) / W
    shuffle_down  = gpu.shuffle down, width W (every lane of the warp takes part: shfl.sync, full mask)
    shuffle_xor   = gpu.shuffle xor,  width W
    warp_reduce   = xor shuffles by W/2, …, 1, each combined (group_reduce of N: by N/2, …, 1; N <= W)
    thread_rank   = (linear thread index in the block) mod N, for a cooperative group of N (erased: its
                    users read its size)
    barrier       = gpu.barrier (bar.sync; s_barrier between workgroup fences), or on SPIR-V
                    OpControlBarrier at Workgroup scope ordering Workgroup and CrossWorkgroup memory
    group_sync    = the block's barrier for a group of whole warps (N > W); within a warp bar.warp.sync on
                    the group's lanes (NVIDIA), a wavefront-scope fence (AMDGPU), OpControlBarrier at Subgroup
                    scope (SPIR-V)

Warps are formed from the linear thread index (x fastest), as the hardware does. For blocks whose x extent
is a multiple of W (or 1-D blocks) that is the CPU backend's grouping too; otherwise a GPU warp spans rows
where the CPU starts a partial warp per row, and per-warp results differ between the two.

The kernel's parameters (tessera/abi.py, docs/nvidia.md "The kernel ABI") are exactly ``tsrLaunch``'s
argument slots, in order: a scalar by value (bool as a byte), a tensor as a bare global-memory pointer, a
dimension argument as i64. Shapes are dynamic, so the kernel rebuilds each tensor from its pointer and its
extents (static, or dimension arguments) with row-major strides, in one of two ways (``abi``):

    "llvm"   (NVVM, ROCDL) the memref descriptor is assembled in the LLVM dialect and cast to the memref
             type; the casts cancel once the memref ops are lowered to LLVM.
    "flat"   (SPIR-V, whose conversion takes memrefs, not LLVM pointers) the parameter is a 1-D
             ``memref<?xT>`` (an OpenCL ``__global T*``) and every load and store of the tensor indexes it
             at the row-major linear offset; ``memref.dim`` is the extent. Kernels use their tensors only
             through loads, stores and dims (the frontend and kernelgen write nothing else); any other use
             is refused at its line.

The kernels move into ``gpu.module @tessera_kernels``; the module becomes a ``gpu.container_module``. With
``bounds_checks``, the tensor accesses not proven in bounds are guarded and a failure is recorded for the
runtime first (gpu_bounds_checks.py; the "flat" abi gives every kernel a hidden trailing argument, the
record); without, the lowering is exactly the unchecked one.
"""

from __future__ import annotations

from ..abi import DIM, TENSOR, signature_of
from ..diagnostics import LoweringError
from ..dialects import tmem
from ..mlir import arith, builtin, func, gpu, ir, llvm, memref, spirv
from . import atomics, gpu_bounds_checks
from .simt_to_warps import combiner, group_size, is_shared_alloca, philox_uniform

GPU_MODULE = "tessera_kernels"
WARP_SIZE = 32   # NVIDIA's, the default
ABIS = ("llvm", "flat")


def _i64(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(64), value).result


def _index(value: int) -> ir.Value:
    return arith.ConstantOp.create_index(value).result


class _Prologue:
    """Builds, at the start of the kernel, the values its old parameters stood for."""

    def __init__(self, sig, old_types: list[ir.Type], args: list[ir.Value], abi: str):
        self.sig = sig
        self.old_types = old_types
        self.args = args
        self.abi = abi

    def value(self, i: int, old_arg: ir.Value) -> ir.Value | None:
        """The value replacing `old_arg`, or None where the prologue rewrote its uses itself."""
        a, t, v = self.sig.args[i], self.old_types[i], self.args[i]
        if a.kind == TENSOR and self.abi == "flat":
            self.flatten(a, old_arg, v)
            return None
        if a.kind == TENSOR:
            return self.memref(a, ir.MemRefType(t), v)
        if isinstance(t, ir.IndexType):
            return arith.IndexCastOp(t, v).result
        if a.dtype.name == "bool":
            return arith.TruncIOp(t, v).result
        return v

    def memref(self, a, t: ir.MemRefType, pointer: ir.Value) -> ir.Value:
        ptr = ir.Type.parse("!llvm.ptr")
        rank = t.rank
        arrays = f", array<{rank} x i64>, array<{rank} x i64>" if rank else ""
        desc_t = ir.Type.parse(f"!llvm.struct<(ptr, ptr, i64{arrays})>")
        # the llvm ops by name, as the llvm dialect's Python classes build them: a kernel that needs no other
        # llvm op (a GEMM's) then does not import their module (22 ms of a 0.5 s PTX compile; tessera.mlir)
        generic = _llvm_op("llvm.addrspacecast", ptr, [pointer])
        sizes = [_i64(d) if isinstance(d, int) else self.args[d[1]] for d in a.dims]
        strides = [_i64(1)]
        for k in range(rank - 1, 0, -1):
            strides.insert(0, arith.MulIOp(strides[0], sizes[k]).result)
        desc = _llvm_op("llvm.mlir.undef", desc_t, [])
        desc = _insert_value(desc, generic, [0])
        desc = _insert_value(desc, generic, [1])
        desc = _insert_value(desc, _i64(0), [2])
        for k in range(rank):
            desc = _insert_value(desc, sizes[k], [3, k])
            desc = _insert_value(desc, strides[k], [4, k])
        return builtin.UnrealizedConversionCastOp([t], [desc]).result

    def extents(self, a) -> list[ir.Value]:
        return [_index(d) if isinstance(d, int) else arith.IndexCastOp(ir.IndexType.get(), self.args[d[1]]).result
                for d in a.dims]

    def flatten(self, a, old_arg: ir.Value, flat: ir.Value) -> None:
        """Rewrites every use of the tensor `old_arg` onto the 1-D `flat` (the "flat" abi)."""
        sizes = self.extents(a)
        for use in list(old_arg.uses):
            op = use.owner.operation
            name = op.name
            with op.location, ir.InsertionPoint(op):
                if name == "memref.dim":
                    op.results[0].replace_all_uses_with(sizes[_constant_index(op.operands[1], op)])
                elif name == "memref.load":
                    new = memref.LoadOp(flat, [_linear(sizes, list(op.operands)[1:])]).result
                    op.results[0].replace_all_uses_with(new)
                elif name == "memref.store":
                    memref.StoreOp(op.operands[0], flat, [_linear(sizes, list(op.operands)[2:])])
                elif name in ("ttile.atomic_rmw", "ttile.atomic_cas"):  # the same atomic at the linear offset
                    at = use.operand_number
                    operands = list(op.operands)
                    new = ir.Operation.create(name, results=[op.results[0].type], attributes={
                        a: op.attributes[a] for a in op.attributes}, operands=operands[:at] + [
                        flat, _linear(sizes, operands[at + 1:])])
                    op.results[0].replace_all_uses_with(new.results[0])
                else:
                    raise LoweringError(op, f"'{name}' on a kernel tensor has no SPIR-V lowering yet "
                                            f"(kernel tensors are read and written by indexing)")
            op.erase()


def _constant_index(v: ir.Value, user) -> int:
    owner = v.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "arith.constant":
        return ir.IntegerAttr(owner.operation.attributes["value"]).value
    raise LoweringError(user, "a tensor extent asked with a computed axis has no SPIR-V lowering")


def _linear(sizes: list[ir.Value], indices: list[ir.Value]) -> ir.Value:
    """The row-major offset of `indices` in a tensor of extents `sizes`."""
    offset = indices[0] if indices else _index(0)
    for size, i in zip(sizes[1:], indices[1:]):
        offset = arith.AddIOp(arith.MulIOp(offset, size).result, i).result
    return offset


def _llvm_op(name: str, result: ir.Type, operands: list, attributes: dict | None = None) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=operands, attributes=attributes or {}).result


def _insert_value(container: ir.Value, value: ir.Value, position: list[int]) -> ir.Value:
    """llvm.insertvalue, as llvm.InsertValueOp builds it."""
    return _llvm_op("llvm.insertvalue", container.type, [container, value],
                    {"position": ir.DenseI64ArrayAttr.get(position)})


def _param_type(a, old: ir.Type, abi: str) -> ir.Type:
    if a.kind == TENSOR and abi == "flat":
        return ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], ir.MemRefType(old).element_type)
    if a.kind == TENSOR:
        return ir.Type.parse("!llvm.ptr<1>")  # global memory
    if a.kind == DIM or isinstance(old, ir.IndexType):
        return ir.IntegerType.get_signless(64)
    if a.dtype.name == "bool":
        return ir.IntegerType.get_signless(8)  # C's bool is a byte
    return old


def lower_kernel(kernel: func.FuncOp, body: ir.Block, warp_size: int = WARP_SIZE, abi: str = "llvm",
                 hidden_record: bool = False, target: str = "nvptx", cp_async: bool = False) -> None:
    """Moves `kernel` into the gpu.module `body` as a gpu.func kernel with the launch ABI (and, with
    `hidden_record`, the fault record as a trailing parameter: gpu_bounds_checks.py). Its shared arrays
    (tile.alloc_shared) become the gpu.func's workgroup attributions, which the NVVM and ROCDL conversions
    make address space 3 globals and the SPIR-V backend Workgroup variables; with `cp_async` (NVIDIA sm_80+)
    its tile.cp_async copies are cp.async instructions, waited for at each block barrier."""
    name = ir.StringAttr(kernel.attributes["sym_name"]).value
    if "tessera.tile_kernel" in kernel.attributes:
        raise LoweringError(kernel, f"kernel '{name}' is a CPU tile kernel: it has no GPU lowering")
    sig = signature_of(kernel)
    old_types = list(kernel.type.inputs)
    n_params = len(old_types)
    types = [_param_type(a, old_types[i] if i < n_params else None, abi) for i, a in enumerate(sig.args)]
    if hidden_record:
        types.append(gpu_bounds_checks.flat_record_type())
    loc = kernel.location
    with loc, ir.InsertionPoint(body):
        new = gpu.GPUFuncOp(ir.TypeAttr.get(ir.FunctionType.get(types, [])), sym_name=name, kernel=True)
    for attr in kernel.attributes:
        if attr.startswith("tessera."):
            new.attributes[attr] = kernel.attributes[attr]
    old_entry = kernel.regions[0].blocks[0]
    shared = [op for op in old_entry.operations if is_shared_alloca(op)]
    workgroup = [op.results[0].type for op in shared]
    entry = new.regions[0].blocks.append(*types, *workgroup, arg_locs=[loc] * (len(types) + len(workgroup)))
    if shared:
        new.attributes["workgroup_attributions"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(shared))
    for op, buffer in zip(shared, list(entry.arguments)[len(types):]):
        op.results[0].replace_all_uses_with(buffer)
        op.operation.erase()
    with loc, ir.InsertionPoint(entry):
        prologue = _Prologue(sig, old_types, list(entry.arguments), abi)
        for i, old_arg in enumerate(old_entry.arguments):
            value = prologue.value(i, old_arg)
            if value is not None:
                old_arg.replace_all_uses_with(value)
        ret = gpu.ReturnOp([])
    for op in list(old_entry.operations):
        if op.operation.name == "func.return":
            op.operation.erase()
        else:
            op.operation.move_before(ret)
    kernel.operation.erase()
    if hidden_record:
        for placeholder in gpu_bounds_checks.hidden_records(new):
            placeholder.result.replace_all_uses_with(entry.arguments[len(types) - 1])
            placeholder.operation.erase()
    waits = cp_async and _async_copies(new)
    _lower_simt_ops(new, _lowerings(warp_size, target, waits), target)


def _async_copies(fn) -> bool:
    """tile.cp_async's copies (a store marked `tessera.cp_async` of a global element's load into a shared
    array) as `cp.async.ca.shared.global` of the element's 4 or 8 bytes, the load dropped where nothing else
    reads it; other sizes (cp.async copies 4, 8 or 16 bytes) stay a load and a store. Returns whether any
    became cp.async, so that the block barriers wait for them."""
    stores = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "memref.store" and "tessera.cp_async" in inner.attributes:
                        stores.append(inner)
                    visit(inner)

    visit(fn.operation)
    issued = False
    for store in stores:
        value, dst, *to = store.operands
        load = value.owner
        size = tmem.element_bytes(value.type)
        if size not in (4, 8) or not isinstance(load, ir.OpView) or load.operation.name != "memref.load":
            continue
        src, *frm = load.operands
        with store.location, ir.InsertionPoint(store):
            target = _shared_element(dst, atomics.linear_index(dst, to))
            source = atomics.element_pointer(src, atomics.linear_index(src, frm), "nvptx")
            llvm.InlineAsmOp(None, [target, source], f"cp.async.ca.shared.global [$0], [$1], {size};",
                             "l,l,~{memory}", has_side_effects=True)
        store.operation.erase()
        if not list(load.results[0].uses):
            load.operation.erase()
        issued = True
    return issued


def _shared_element(mem: ir.Value, linear: ir.Value) -> ir.Value:
    """An address space 3 pointer to element `linear` of the shared array `mem`: the aligned pointer of its
    descriptor (the cast cancels against the NVVM conversion's), not its address as an integer, which in
    shared memory is an offset into the block's window and not a generic address."""
    mt = ir.MemRefType(mem.type)
    ptr = ir.Type.parse("!llvm.ptr<3>")
    arrays = f", array<{mt.rank} x i64>, array<{mt.rank} x i64>" if mt.rank else ""
    desc_t = ir.Type.parse(f"!llvm.struct<(ptr<3>, ptr<3>, i64{arrays})>")
    desc = builtin.UnrealizedConversionCastOp([desc_t], [mem]).result
    base = llvm.ExtractValueOp(ptr, desc, [1]).result
    offset = arith.IndexCastOp(ir.IntegerType.get_signless(64), linear).result
    return llvm.GEPOp(ptr, base, [offset], [-2147483648], mt.element_type, llvm.GEPNoWrapFlags.none).result


def _lower_simt_ops(fn, lowerings: dict, target: str) -> None:
    todo = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name.startswith("ttile."):
                        todo.append(inner)
                    visit(inner)

    visit(fn.operation)
    groups = []
    for op in todo:
        name = op.operation.name
        if name == "ttile.cooperative_group":
            groups.append(op)  # a compile-time partition: its users read its size; it goes once they have
            continue
        if name in lowerings and lowerings[name] is None:
            continue  # the backend's own (SPIR-V's atomics: backends/spirv/atomics.py)
        lower = lowerings.get(name)
        if lower is None:
            # the user's target by its tessera-cc name (nvptx is LLVM's, for the syncscopes)
            raise LoweringError(op, f"'{name}' has no GPU lowering yet (target {target.replace('nvptx', 'ptx')})")
        with op.location, ir.InsertionPoint(op):
            result = lower(op)
        if len(op.results):
            op.results[0].replace_all_uses_with(result)
        op.operation.erase()
    for op in groups:
        op.operation.erase()


_DIMS = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)


def _axis(op) -> gpu.Dimension:
    return _DIMS[ir.IntegerAttr(op.attributes["dim"]).value]


def _mul(a, b):
    return arith.MulIOp(a, b).result


def _add(a, b):
    return arith.AddIOp(a, b).result


def _thread_id(op):
    d = _axis(op)
    return _add(_mul(gpu.BlockIdOp(d).result, gpu.BlockDimOp(d).result), gpu.ThreadIdOp(d).result)


def _warp_id(op, warp_size: int):
    x, y, z = _DIMS
    block = _add(_mul(_add(_mul(gpu.BlockIdOp(z).result, gpu.GridDimOp(y).result), gpu.BlockIdOp(y).result),
                      gpu.GridDimOp(x).result), gpu.BlockIdOp(x).result)
    bdx, bdy, bdz = (gpu.BlockDimOp(d).result for d in _DIMS)
    threads = _mul(_mul(bdx, bdy), bdz)
    per_block = arith.CeilDivUIOp(threads, _index(warp_size)).result
    return _add(_mul(block, per_block), arith.DivUIOp(_linear_local_id(), _index(warp_size)).result)


def _shuffled(value: ir.Value, offset: ir.Value, mode, warp_size: int) -> ir.Value:
    """`value` from the lane `offset` away (mode down or xor) in a warp of `warp_size` lanes."""
    i32 = ir.IntegerType.get_signless(32)
    width = arith.ConstantOp(i32, warp_size).result
    t = value.type
    bits = t.width
    if bits in (32, 64):  # gpu.shuffle takes these directly (a 64-bit value as two 32-bit shuffles)
        return gpu.ShuffleOp(value, offset, width, mode).results[0]
    # Narrower values travel in the low bits of an i32.
    as_int = value if isinstance(t, ir.IntegerType) else arith.BitcastOp(ir.IntegerType.get_signless(bits), value).result
    wide = arith.ExtUIOp(i32, as_int).result
    moved = gpu.ShuffleOp(wide, offset, width, mode).results[0]
    narrow = arith.TruncIOp(as_int.type, moved).result
    return narrow if isinstance(t, ir.IntegerType) else arith.BitcastOp(t, narrow).result


def _shuffle(mode, warp_size: int):
    def lower(op):
        offset = arith.IndexCastOp(ir.IntegerType.get_signless(32), op.operands[1]).result
        return _shuffled(op.operands[0], offset, mode, warp_size)
    return lower


def _butterfly(value: ir.Value, kind: str, size: int, warp_size: int) -> ir.Value:
    """The `kind` reduction of `value` over aligned groups of `size` lanes, every lane getting it: xor
    shuffles by size/2, …, 2, 1 (shfl.sync.bfly, ds_bpermute, OpGroupNonUniformShuffleXor), which never leave
    the group — the CPU's butterfly (simt_to_warps.py), so a group reduction combines in the same order."""
    combine = combiner(kind, value.type)
    i32 = ir.IntegerType.get_signless(32)
    k = size // 2
    while k >= 1:
        value = combine(value, _shuffled(value, arith.ConstantOp(i32, k).result, gpu.ShuffleMode.XOR,
                                         warp_size)).result
        k //= 2
    return value


def _reduce(warp_size: int):
    def lower(op):
        kind = ir.StringAttr(op.attributes["kind"]).value
        if op.operation.name == "ttile.warp_reduce":
            return _butterfly(op.operands[0], kind, warp_size, warp_size)
        size = ir.IntegerAttr(op.attributes["group_size"]).value
        if size > warp_size:
            raise LoweringError(op, f"group_size {size} exceeds the target's warp of {warp_size} lanes")
        return _butterfly(op.operands[0], kind, size, warp_size)
    return lower


def _linear_local_id() -> ir.Value:
    """The thread's linear index in its block, x fastest (how the hardware forms warps)."""
    x, y, z = _DIMS
    return _add(_mul(_add(_mul(gpu.ThreadIdOp(z).result, gpu.BlockDimOp(y).result), gpu.ThreadIdOp(y).result),
                     gpu.BlockDimOp(x).result), gpu.ThreadIdOp(x).result)


def _thread_rank(op):
    return arith.RemUIOp(_linear_local_id(), _index(group_size(op.operands[0]))).result


# What a barrier orders on SPIR-V: shared (Workgroup) and global (CrossWorkgroup) memory, as bar.sync and
# AMDGPU's workgroup fences do; the upstream gpu.barrier orders only Workgroup memory there.
_SPIRV_BARRIER_SEMANTICS = "#spirv.memory_semantics<AcquireRelease|WorkgroupMemory|CrossWorkgroupMemory>"


def _block_barrier(target: str, waits: bool = False) -> None:
    """Every thread of the block waits for all, their memory writes before visible to all after: bar.sync 0
    (NVVM), s_barrier between workgroup-scope fences (ROCDL), OpControlBarrier at Workgroup scope; `waits`:
    after the thread's cp.async copies have landed (cp.async.wait_all), so that they are writes before it."""
    if waits:
        llvm.InlineAsmOp(None, [], "cp.async.wait_all;", "~{memory}", has_side_effects=True)
    if target == "spirv":
        workgroup = ir.Attribute.parse("#spirv.scope<Workgroup>")
        spirv.ControlBarrierOp(workgroup, workgroup, ir.Attribute.parse(_SPIRV_BARRIER_SEMANTICS))
    else:
        gpu.BarrierOp()


def _warp_barrier(size: int, target: str) -> None:
    """The threads of one group within a warp (aligned `size` lanes) wait for each other and see each other's
    writes: bar.warp.sync on the group's lane mask (NVIDIA's lanes are scheduled independently), a
    wavefront-scope fence on AMDGPU (a wavefront's lanes run in lockstep: only memory needs ordering),
    OpControlBarrier at Subgroup scope on SPIR-V."""
    if target == "spirv":
        subgroup = ir.Attribute.parse("#spirv.scope<Subgroup>")
        spirv.ControlBarrierOp(subgroup, subgroup, ir.Attribute.parse(_SPIRV_BARRIER_SEMANTICS))
    elif target == "amdgpu":
        llvm.FenceOp(llvm.AtomicOrdering.acq_rel, syncscope="wavefront")
    else:
        i32 = ir.IntegerType.get_signless(32)
        lanes = arith.ConstantOp(i32, (1 << size) - 1 if size < 32 else -1).result
        lane = arith.IndexCastOp(i32, gpu.LaneIdOp().result).result
        first = arith.AndIOp(lane, arith.ConstantOp(i32, -size).result).result
        mask = arith.ShLIOp(lanes, first).result
        llvm.CallIntrinsicOp(None, "llvm.nvvm.bar.warp.sync", [mask], [], [])


def _group_sync(warp_size: int, target: str, waits: bool):
    def lower(op):
        size = group_size(op.operands[0])
        if size > warp_size:  # whole warps: the block's barrier (every thread of the block must reach it)
            _block_barrier(target, waits)
        else:
            _warp_barrier(size, target)
    return lower


def _atomic(target: str, mem_at: int):
    """`ttile.atomic_rmw` (mem_at 1) or `ttile.atomic_cas` (2) as one LLVM atomic on the element's pointer in
    its own address space (passes/atomics.py), with `target`'s syncscopes."""
    def lower(op):
        operands = list(op.operands)
        mem = operands[mem_at]
        pointer = atomics.element_pointer(mem, atomics.linear_index(mem, operands[mem_at + 1:]), target)
        if mem_at == 1:
            return atomics.rmw(op, pointer, operands[0], target)
        return atomics.cas(op, pointer, operands[0], operands[1], target)
    return lower


# Warp fragment ops stay for the AMDGPU and SPIR-V backends' tessera-tile-mma (passes/tile_mma.py), which
# lowers them in the gpu.func (the Graph IR GEMMs of backends/matrix_gemm.py write them into SIMT kernels).
FRAGMENT_OPS = ("ttile.fill", "ttile.ldmatrix", "ttile.mma", "ttile.store_fragment")


def _lowerings(warp_size: int, target: str = "nvptx", waits: bool = False) -> dict:
    llvm_atomics = target in atomics.SYNCSCOPES
    return {
        **({name: None for name in FRAGMENT_OPS} if target in ("amdgpu", "spirv") else {}),
        "ttile.atomic_rmw": _atomic(target, 1) if llvm_atomics else None,
        "ttile.atomic_cas": _atomic(target, 2) if llvm_atomics else None,
        "ttile.fence": (lambda op: atomics.fence(op, target)) if llvm_atomics else None,
        "ttile.thread_id": _thread_id,
        "ttile.local_id": lambda op: gpu.ThreadIdOp(_axis(op)).result,
        "ttile.block_id": lambda op: gpu.BlockIdOp(_axis(op)).result,
        "ttile.block_dim": lambda op: gpu.BlockDimOp(_axis(op)).result,
        "ttile.grid_dim": lambda op: gpu.GridDimOp(_axis(op)).result,
        "ttile.lane_id": lambda op: gpu.LaneIdOp().result,
        "ttile.warp_size": lambda op: _index(warp_size),
        "ttile.warp_id": lambda op: _warp_id(op, warp_size),
        "ttile.shuffle_down": _shuffle(gpu.ShuffleMode.DOWN, warp_size),
        "ttile.shuffle_xor": _shuffle(gpu.ShuffleMode.XOR, warp_size),
        "ttile.warp_reduce": _reduce(warp_size),
        "ttile.group_reduce": _reduce(warp_size),
        "ttile.thread_rank": _thread_rank,
        "ttile.group_sync": _group_sync(warp_size, target, waits),
        "ttile.barrier": lambda op: _block_barrier(target, waits),
        # dropout's uniform: the CPU's Philox arithmetic on scalars, so every target draws the same bits
        "ttile.philox_uniform": lambda op: philox_uniform(op.operands[0],
                                                          ir.IntegerAttr(op.attributes["seed"]).value),
    }


def run(module, warp_size: int = WARP_SIZE, abi: str = "llvm",
        bounds_checks: bool = False, entry_symbol=None, target: str = "nvptx",
        cp_async: bool = False) -> gpu_bounds_checks.Sites:
    """Moves every `tessera.kernel` function of `module` (an ``ir.Module`` or its operation) into a new
    ``gpu.module @tessera_kernels``, lowered as the module docstring says, for warps of `warp_size` lanes.
    With `bounds_checks`, the accesses not proven in bounds are checked first (gpu_bounds_checks.py), and the
    gpu.module exists, with the fault record, even without a SIMT kernel ("llvm"; the "flat" abi's site table
    is the backend's to write). The site table names each kernel by its `entry_symbol(name)` (default: the
    name), the symbol the runtime looks the failed kernel up by. `target` ("nvptx", "amdgpu": the LLVM
    syncscopes atomics and fences take, passes/atomics.py; "spirv": they stay ttile ops, on the flat tensor at
    its linear offset, for the SPIR-V backend). `cp_async`: tile.cp_async copies are cp.async instructions
(NVIDIA sm_80 and later); elsewhere they stay a load and a store. Returns the sites (none without checks)."""
    if warp_size not in (16, 32, 64):
        raise ValueError(f"GPU warps have 16, 32 or 64 lanes, not {warp_size}")
    if abi not in ABIS:
        raise ValueError(f"unknown kernel abi '{abi}' (known: {', '.join(ABIS)})")
    op = module.operation if isinstance(module, ir.Module) else module
    body = op.regions[0].blocks[0]
    # Kernels generated whole as LLVM IR (backends/ptx/gemm_lowering.py) stay where they are for the backend.
    kernels = [k for k in body.operations if k.operation.name == "func.func" and "tessera.kernel" in k.attributes
               and "tessera.llvm_ir" not in k.attributes]
    sites = gpu_bounds_checks.Sites(entry_symbol)
    if not kernels and not bounds_checks:
        return sites
    op.attributes["gpu.container_module"] = ir.UnitAttr.get()
    with op.location, ir.InsertionPoint(body):
        gm = gpu.GPUModuleOp(GPU_MODULE)
    gm_body = gm.regions[0].blocks.append()
    for k in kernels:
        if bounds_checks:
            gpu_bounds_checks.guard(k, sites, abi)
        lower_kernel(k, gm_body, warp_size, abi, hidden_record=bounds_checks and abi == "flat", target=target,
                     cp_async=cp_async)
    if bounds_checks and abi == "llvm":
        with op.location:
            sites.emit(gm_body)
    return sites
