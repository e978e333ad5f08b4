"""The SPIR-V backend's stages: Tile IR → gpu dialect → SPIR-V dialect → SPIR-V binary (Intel GPUs; any
OpenCL device that takes SPIR-V). MLIR's own route, with no LLVM target (DESIGN §9, "SPIR-V (MLIR route)"):

    gpu     SIMT kernels become gpu.func kernels with the launch ABI (passes/simt_to_gpu.py, its "flat" abi:
            a tensor is a 1-D memref, an OpenCL `__global T*`), for subgroups of 32 lanes
    spirv   the upstream conversion to the SPIR-V dialect under the Kernel capability and the OpenCL memory
            model (Physical64): warp shuffles become OpGroupNonUniformShuffle*, math the OpenCL.std
            extended instructions, launch queries the OpenCL built-ins
    spv     the serialized module, checked by spirv-val where it is installed (spirv_val.py)

Subgroups: an OpenCL device picks a kernel's subgroup size (Intel GPUs 8, 16 or 32) unless the kernel
requires one. Ours require 32 (ExecutionMode SubgroupSize, capability SubgroupDispatch), the width their
shuffles and warp ids were lowered for, so that warp code means on an Intel GPU what it means on NVIDIA.

Matrix hardware is used only where declared (`SPIRVOptions.arch`, `--arch xe-hpc`): then `tile.mma` products
of a shape in passes/tile_mma.py's COOPMAT_SHAPES become cooperative matrices (SPV_KHR_cooperative_matrix,
which Intel's drivers run on DPAS; bf16 through SPV_KHR_bfloat16), the others vector FMAs as everywhere.
MLIR's cooperative-matrix ops demand SPIR-V 1.6 where the extension needs 1.3, so such modules are built
for 1.6 and declared 1.3 afterwards (`_interfaces_of_version`, `_declared_version`);
`_cooperative_matrix_fixups` adjusts what the upstream conversion leaves: 64-bit strides and bf16 matrices.
bf16 tiles come as f16 loads from casts of bf16 memory (tile_mma's placeholder); `_bf16_matrix_sources`
drops the casts, leaving loads the gpu dialect's verifier refuses (memrefs of bf16) but the conversion
takes, so such modules are verified once, after the fixups. Modules without cooperative products are built
as if no device were declared.

bf16 anywhere else: without SPV_KHR_bfloat16 the upstream type conversion makes bf16 an f32 (a bf16 tensor an
f32 pointer: 4-byte stores into 2-byte elements, past the buffer's end, and no rounding at all), so
`_bf16_as_i16` first makes bf16 memory i16 and bf16 arithmetic f32, and arith-expand's bf16 rules make the
conversions integer arithmetic on the bits (round to nearest even, as the CPU backend's; NaN kept quiet).
"""

from __future__ import annotations

import struct

from ...diagnostics import CompileError, LoweringError
from ...mlir import arith, gpu, ir, memref, passmanager, spirv
from ...passes import fp8_convert, simt_to_gpu, strict_math, tile_mma
from . import atomics, spirv_val
from .options import MATRIX_ARCHS, SUBGROUP, SPIRVOptions

VERSION = "v1.3"   # the first with the GroupNonUniform instructions; Intel's OpenCL runtimes take 1.0–1.4
CAPS = ["Addresses", "Int64", "Int8", "Int16", "Float16", "Float64", "Kernel", "GroupNonUniformShuffle",
        "SubgroupDispatch"]

COOPMAT_MLIR_VERSION = "v1.6"   # what MLIR's spirv.KHR.CooperativeMatrix* ops declare they need
# bf16 matrices need the bf16 type of SPV_KHR_bfloat16, which also makes every bf16 tensor of the module a
# native bf16 one (converted with OpFConvert): declared only where a bf16 product is a cooperative one.
BF16_CAPS, BF16_EXTS = ["BFloat16TypeKHR", "BFloat16CooperativeMatrixKHR"], ["SPV_KHR_bfloat16"]


def _prepare(coop: bool = False, bf16: bool = False) -> str:
    version, caps, exts = VERSION, CAPS, []
    if coop:
        version, caps, exts = COOPMAT_MLIR_VERSION, CAPS + ["CooperativeMatrixKHR"], ["SPV_KHR_cooperative_matrix"]
    if bf16:
        caps, exts = caps + BF16_CAPS, exts + BF16_EXTS
    env = f"ver={version} caps={','.join(caps)}" + (f" exts={','.join(exts)}" if exts else "")
    return ",".join(["canonicalize", "cse", "expand-strided-metadata", "lower-affine", "arith-expand",
                     f"spirv-attach-target{{{env}}}"])


# convert-gpu-to-spirv leaves math ops alone; convert-math-to-spirv picks OpenCL.std over GLSL by the
# target environment it finds on an enclosing op as `spirv.target_env` (make_spirv copies it there).
TO_SPIRV = ",".join(["gpu.module(convert-math-to-spirv)", "convert-gpu-to-spirv{use-64bit-index=true}",
                     "gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce))"])


def _kernels(mod: ir.Module) -> list:
    return [fn for gm in mod.body.operations if gm.operation.name == "gpu.module"
            for fn in gm.regions[0].blocks[0].operations if fn.operation.name == "gpu.func"]


def make_gpu(mod: ir.Module, metadata: dict, options: SPIRVOptions) -> ir.Module:
    sites = simt_to_gpu.run(mod, SUBGROUP, abi="flat", bounds_checks=options.bounds_checks, target="spirv")
    if options.bounds_checks:
        metadata["fault_sites"] = sites.entries   # for make_spv (fault_sites)
    _global_ids(mod)
    passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(mod.operation)
    for fn in _kernels(mod):
        fn.attributes["spirv.entry_point_abi"] = ir.Attribute.parse(
            f"#spirv.entry_point_abi<subgroup_size = {SUBGROUP}>")
    metadata["warp_size"] = SUBGROUP
    return mod


def _global_ids(mod: ir.Module) -> None:
    """The global thread id as the GlobalInvocationId built-in (`gpu.global_id`): simt_to_gpu builds
    thread_id(d) as block_id(d) · block_dim(d) + local_id(d), which the conversion makes loads of the
    WorkgroupId, WorkgroupSize and LocalInvocationId built-ins and an OpIMul and OpIAdd. Intel's OpenCL CPU
    runtime (intel-opencl-rt 2026.2) miscompiles that sum in a module of two kernels where one compares it
    for equality (`t == 0`: OpIEqual, or OpINotEqual, OpULessThan with 1) and another by a signed
    comparison (`i < n`: OpSLessThan): the second kernel runs without writing its results, and with many
    work-items corrupts the host's heap. Both modules are spirv-val clean; the one with GlobalInvocationId
    runs right (docs/portability.md, SPIR-V notes). The same value: launches have no global offset."""
    def op_of(v):   # the operation defining v (None for a block argument)
        owner = v.owner
        return None if isinstance(owner, ir.Block) else owner.operation

    todo = []
    for add in _walk(mod.operation, "arith.addi", []):
        for mul, local in ((op_of(add.operands[0]), op_of(add.operands[1])),
                           (op_of(add.operands[1]), op_of(add.operands[0]))):
            if not (mul and local and mul.name == "arith.muli" and local.name == "gpu.thread_id"):
                continue
            ids = [op_of(v) for v in mul.operands]
            if sorted(o.name if o else "" for o in ids) != ["gpu.block_dim", "gpu.block_id"]:
                continue
            if len({str(o.attributes["dimension"]) for o in (*ids, local)}) == 1:
                todo.append((add, local.attributes["dimension"]))
                break
    for add, dim in todo:
        with add.location, ir.InsertionPoint(add):
            gid = gpu.GlobalIdOp(dim).result   # the attribute (#gpu<dim x>) as the builder takes it
        add.results[0].replace_all_uses_with(gid)
        add.operation.erase()


def _shuffle_down_as_index(mod: ir.Module) -> None:
    """gpu.shuffle down as gpu.shuffle idx from lane + offset, or from the lane itself past the subgroup's
    end (what shfl.down and our other targets return there); upstream's own lowering of down shuffles
    builds an ill-typed spirv.IAdd (index lane plus i32 offset)."""
    todo = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "gpu.shuffle" and str(inner.attributes["mode"]).endswith("down>"):
                        todo.append(inner)
                    visit(inner)

    visit(mod.operation)
    i32 = ir.IntegerType.get_signless(32)
    for op in todo:
        value, offset, width = op.operands
        with op.location, ir.InsertionPoint(op):
            lane = arith.IndexCastOp(i32, gpu.LaneIdOp().result).result
            source = arith.AddIOp(lane, offset).result
            inside = arith.CmpIOp(arith.CmpIPredicate.ult, source, width).result
            index = arith.SelectOp(inside, source, lane).result
            new = gpu.ShuffleOp(value, index, width, gpu.ShuffleMode.IDX)
        op.results[0].replace_all_uses_with(new.results[0])
        op.results[1].replace_all_uses_with(new.results[1])
        op.operation.erase()


def _mul_extended_as_i64(mod: ir.Module) -> None:
    """arith.mului_extended (Philox's 32×32 → 64-bit products, passes/simt_to_warps.py) as one Int64 OpIMul
    of the zero-extended words, then its low and high halves: the conversion would make it OpUMulExtended,
    which Intel's OpenCL CPU runtime turns into a call of a built-in it does not define
    (`__spirv_UMulExtendedii`), so the kernel fails to load."""
    for op in _walk(mod.operation, "arith.mului_extended", []):
        a, b = op.operands
        wide_t = ir.IntegerType.get_signless(2 * ir.IntegerType(a.type).width)
        with op.location, ir.InsertionPoint(op):
            wide = arith.MulIOp(arith.ExtUIOp(wide_t, a).result, arith.ExtUIOp(wide_t, b).result).result
            high = arith.ShRUIOp(wide, arith.ConstantOp(wide_t, ir.IntegerType(a.type).width).result).result
            op.results[0].replace_all_uses_with(arith.TruncIOp(a.type, wide).result)
            op.results[1].replace_all_uses_with(arith.TruncIOp(a.type, high).result)
        op.operation.erase()


def _workgroup_memory(mod: ir.Module) -> None:
    """A kernel's workgroup attributions (shared memory) as `memref.alloc`s in the Workgroup storage class at
    its entry, which the memref conversion makes module-scope Workgroup variables (OpenCL `__local`); the
    upstream conversion of the attributions themselves crashes in this MLIR."""
    workgroup = ir.Attribute.parse("#spirv.storage_class<Workgroup>")
    for fn in _kernels(mod):
        count = ir.IntegerAttr(fn.attributes["workgroup_attributions"]).value \
            if "workgroup_attributions" in fn.attributes else 0
        if not count:
            continue
        block = fn.regions[0].blocks[0]
        first = len(block.arguments) - count
        for i in range(first, len(block.arguments)):
            arg = block.arguments[i]
            t = ir.MemRefType(arg.type)
            with fn.location, ir.InsertionPoint(block.operations[0]):
                alloc = memref.AllocOp(ir.MemRefType.get(t.shape, t.element_type, t.layout, workgroup), [], [])
            arg.replace_all_uses_with(alloc.result)
        for i in reversed(range(first, len(block.arguments))):
            block.erase_argument(i)
        fn.attributes["workgroup_attributions"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)


def _record_matrix_use(metadata: dict, options: SPIRVOptions, done: dict) -> None:
    """Kernel properties (tessera-objdump shows them): the declared device, and how each tile.mma was done."""
    props = metadata.setdefault("kernel_props", {})
    if options.arch:
        for name in _kernel_names(metadata, done):
            props.setdefault(name, {})["spirv.arch"] = options.arch
    for name, how in done.items():
        props.setdefault(name, {})["spirv.mma"] = "; ".join(map(str, how))


def _kernel_names(metadata: dict, done: dict) -> list[str]:
    return [s.name for s in metadata.get("signatures", [])] or list(done)


def make_spirv(mod: ir.Module, metadata: dict, options: SPIRVOptions) -> ir.Module:
    done = tile_mma.run(mod.operation, tile_mma.Target(SUBGROUP, MATRIX_ARCHS.get(options.arch, "")))
    if options.exact_math:   # OpenCL's f32 builtins, division and sqrt are a few ulp off; its f64 ones are not
        strict_math.run(mod)
    fp8_convert.run(mod)   # one-byte fp8 loads and stores as integer arithmetic (OpenCL has no fp8 type)
    _record_matrix_use(metadata, options, done)
    products = [d for how in done.values() for d in how if d.how == "cooperative matrix"]
    coop, bf16 = bool(products), any(d.dtype == "bf16" for d in products)
    _bf16_matrix_sources(mod)
    _workgroup_memory(mod)
    _shuffle_down_as_index(mod)
    _mul_extended_as_i64(mod)
    if not bf16:
        _bf16_as_i16(mod)
    _run(mod, _prepare(coop, bf16), verify=not bf16)
    for gm in mod.body.operations:
        if gm.operation.name == "gpu.module":
            gm.attributes["spirv.target_env"] = ir.ArrayAttr(gm.attributes["targets"])[0]
    wide_atomics = atomics.run(mod)
    _run(mod, TO_SPIRV, verify=not bf16)
    if wide_atomics:
        atomics.declare_int64_atomics(mod)
    if coop:
        _cooperative_matrix_fixups(mod)
        _interfaces_of_version(mod)
        _run(mod, "gpu.module(spirv.module(spirv-update-vce))", verify=True)   # bf16 matrices' capability
    return mod


def _run(mod: ir.Module, pipeline: str, verify: bool) -> None:
    pm = passmanager.PassManager.parse(f"builtin.module({pipeline})")
    pm.enable_verifier(verify)
    pm.run(mod.operation)


def _walk(op, name: str, found: list) -> list:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if inner.operation.name == name:
                    found.append(inner)
                _walk(inner.operation, name, found)
    return found


def _is_bf16(t: ir.Type) -> bool:
    return isinstance(t, ir.BF16Type)


def _bf16_memref_as_i16(t: ir.Type):
    """A memref of bf16 as one of i16 (the same layout and memory space), or None for any other type."""
    if not isinstance(t, ir.MemRefType) or not _is_bf16(t.element_type):
        return None
    return ir.MemRefType.get(t.shape, ir.IntegerType.get_signless(16), t.layout, t.memory_space)


def _all_ops(op, found: list) -> list:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found.append(inner)
                _all_ops(inner.operation, found)
    return found


# What stays bf16 after _bf16_as_i16's rewrites, for arith-expand{include-bf16} to make integer arithmetic
# (extf to f32, truncf from f32) and canonicalize to fold away (bitcasts between i16 and bf16).
BF16_KEPT = ("arith.extf", "arith.truncf", "arith.bitcast")


def _bf16_as_i16(mod: ir.Module) -> None:
    """bf16 in a module without SPV_KHR_bfloat16 (module doc): memrefs of bf16 as memrefs of i16 (a tensor's
    memory is the bf16 bits, as the host and every other target keep it), loads and stores bitcast to and from
    bf16, and every other op on bf16 values computed in f32 — its bf16 operands extended, its bf16 results
    rounded back — as the CPU backend's LLVM promotes bf16 arithmetic (sitofp i8 to bf16, which canonicalize
    folds from sitofp to f32 then truncf, becomes that again). Then arith-expand{include-bf16} makes the
    remaining extf and truncf integer arithmetic and canonicalize folds the bitcast pairs: no bf16 value is
    left; one that is (an op this does not know) is refused at its line rather than miscompiled."""
    i16, f32 = ir.IntegerType.get_signless(16), ir.F32Type.get()
    for op in _all_ops(mod.operation, []):
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if (t := _bf16_memref_as_i16(arg.type)) is not None:
                        arg.set_type(t)
        for result in op.results:
            if (t := _bf16_memref_as_i16(result.type)) is not None:
                result.set_type(t)
        if op.operation.name == "gpu.func":
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            inputs = [_bf16_memref_as_i16(t) or t for t in ftype.inputs]
            op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, ftype.results))
    for op in _all_ops(mod.operation, []):
        name = op.operation.name
        if name == "memref.load" and _is_bf16(op.results[0].type):
            with op.location, ir.InsertionPoint(op):
                bits = memref.LoadOp(op.operands[0], list(op.operands[1:])).result
                op.results[0].replace_all_uses_with(arith.BitcastOp(op.results[0].type, bits).result)
            op.operation.erase()
        elif name == "memref.store" and _is_bf16(op.operands[0].type):
            with op.location, ir.InsertionPoint(op):
                bits = arith.BitcastOp(i16, op.operands[0]).result
                memref.StoreOp(bits, op.operands[1], list(op.operands[2:]))
            op.operation.erase()
        elif name == "arith.constant" and _is_bf16(op.results[0].type):
            value = ir.FloatAttr(op.attributes["value"]).value   # a bf16 value: the high half of its f32 bits
            word = struct.unpack("<I", struct.pack("<f", value))[0] >> 16
            with op.location, ir.InsertionPoint(op):
                bits = arith.ConstantOp(i16, ir.IntegerAttr.get(i16, word - (word >> 15 << 16))).result
                op.results[0].replace_all_uses_with(arith.BitcastOp(op.results[0].type, bits).result)
            op.operation.erase()
        elif name == "arith.extf" and _is_bf16(op.operands[0].type) and op.results[0].type != f32:
            with op.location, ir.InsertionPoint(op):
                wide = arith.ExtFOp(f32, op.operands[0]).result
                op.results[0].replace_all_uses_with(arith.ExtFOp(op.results[0].type, wide).result)
            op.operation.erase()
        elif name not in BF16_KEPT and (any(_is_bf16(v.type) for v in op.operands)
                                         or any(_is_bf16(r.type) for r in op.results)) and not op.regions:
            with op.location, ir.InsertionPoint(op):
                operands = [arith.ExtFOp(f32, v).result if _is_bf16(v.type) else v for v in op.operands]
                new = ir.Operation.create(name, results=[f32 if _is_bf16(r.type) else r.type for r in op.results],
                                          operands=operands,
                                          attributes={a.name: a.attr for a in op.attributes})
                for old, res in zip(op.results, new.results):
                    old.replace_all_uses_with(arith.TruncFOp(old.type, res).result if _is_bf16(old.type) else res)
            op.operation.erase()
    _run(mod, "arith-expand{include-bf16=true},canonicalize", verify=True)
    for op in _all_ops(mod.operation, []):
        if any(_is_bf16(getattr(v.type, "element_type", v.type)) for v in list(op.operands) + list(op.results)):
            raise LoweringError(op, f"'{op.operation.name}' on bf16 has no SPIR-V lowering without a device "
                                    "that has SPV_KHR_bfloat16")


def _bf16_matrix_sources(mod: ir.Module) -> None:
    """tile_mma's bf16 placeholders — gpu.subgroup_mma_load_matrix of f16 from a cast of bf16 memory — as
    loads from the bf16 memory itself: the conversion then reads through a bf16 pointer, by which
    `_cooperative_matrix_fixups` knows the matrix is bf16 (the load is ill-typed until then)."""
    for cast in _walk(mod.operation, "builtin.unrealized_conversion_cast", []):
        source, view = cast.operands[0], cast.results[0]
        if "xbf16" in str(source.type) and all(
                (u.owner.operation if hasattr(u.owner, "operation") else u.owner).name ==
                "gpu.subgroup_mma_load_matrix" for u in view.uses):
            view.replace_all_uses_with(source)
            cast.operation.erase()


def _interfaces_of_version(mod: ir.Module) -> None:
    """Entry-point interfaces as SPIR-V VERSION (1.3) has them, Input and Output variables only: built for 1.6
    (COOPMAT_MLIR_VERSION), they list every module-scope variable the kernel uses, as 1.4 and later want."""
    for sm in _walk(mod.operation, "spirv.module", []):
        io = {ir.StringAttr(v.attributes["sym_name"]).value for v in _walk(sm.operation, "spirv.GlobalVariable", [])
              if str(ir.TypeAttr(v.attributes["type"]).value).endswith((", Input>", ", Output>"))}
        for entry in _walk(sm.operation, "spirv.EntryPoint", []):
            kept = [a for a in ir.ArrayAttr(entry.attributes["interface"])
                    if ir.FlatSymbolRefAttr(a).value in io]
            entry.attributes["interface"] = ir.ArrayAttr.get(kept)


def _cooperative_matrix_fixups(mod: ir.Module) -> None:
    """What the upstream conversion of gpu.subgroup_mma_* leaves to do for an OpenCL driver:
    - strides as 64-bit integers: Intel's SPIR-V consumers declare the load and store builtins with a size_t
      stride; the CPU runtime's link step fails on a 32-bit one ("Invalid call record");
    - bf16 matrices: tile_mma loads bf16 tiles as f16 matrices (the gpu dialect has no bf16 ones), so a
      matrix loaded through a pointer to bf16 gets its element type, and the products reading it with it."""
    i64 = ir.IntegerType.get_signless(64)
    for name, stride_at in (("spirv.KHR.CooperativeMatrixLoad", 1), ("spirv.KHR.CooperativeMatrixStore", 2)):
        for op in _walk(mod.operation, name, []):
            stride = op.operands[stride_at]
            if stride.type != i64:
                value = ir.IntegerAttr(stride.owner.attributes["value"]).value
                with op.location, ir.InsertionPoint(op):
                    op.operands[stride_at] = spirv.ConstantOp(i64, ir.IntegerAttr.get(i64, value)).result
            if name.endswith("Load") and str(op.operands[0].type).startswith("!spirv.ptr<bf16,"):
                op.results[0].set_type(ir.Type.parse(str(op.results[0].type).replace("xf16,", "xbf16,")))


def _declared_version(spv: bytes) -> bytes:
    """The module declaring SPIR-V VERSION where MLIR wrote a later one: SPV_KHR_cooperative_matrix requires
    SPIR-V 1.3 (its specification's dependencies), MLIR's ops declare 1.6, and nothing else of ours needs
    more than VERSION (spirv-val checks the module in that version's environment)."""
    major, minor = (int(x) for x in VERSION[1:].split("."))
    words = list(struct.unpack(f"<{len(spv) // 4}I", spv))
    words[1] = min(words[1], (major << 16) | (minor << 8))
    return struct.pack(f"<{len(words)}I", *words)


OP_STRING, OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID = 7, 15, 16, 331
CONTRACTION_OFF = 31
FAULT_SITES = "__tessera_fault_sites"   # the OpString that starts the site table (fault_sites)


def _after_execution_modes(words: list[int]) -> tuple[list[int], int]:
    """The entry points' ids, and where the instructions after the execution modes start (the logical
    layout's place for more execution modes, and for the debug instructions' OpStrings)."""
    entries, end, i = [], 5, 5   # after the 5-word header
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            raise ValueError("internal compiler error: a SPIR-V instruction of 0 words")
        if opcode == OP_ENTRY_POINT:
            entries.append(words[i + 2])
        if opcode in (OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID):
            end = i + count
        i += count
    return entries, end


def contraction_off(spv: bytes) -> bytes:
    """The module with `OpExecutionMode %k ContractionOff` for every entry point, after the execution modes
    it has (the logical layout's place for them): OpenCL drivers otherwise fuse multiplies and adds."""
    words = list(struct.unpack(f"<{len(spv) // 4}I", spv))
    entries, end = _after_execution_modes(words)
    modes = [w for e in entries for w in ((3 << 16) | OP_EXECUTION_MODE, e, CONTRACTION_OFF)]
    out = words[:end] + modes + words[end:]
    return struct.pack(f"<{len(out)}I", *out)


def _op_string(result_id: int, text: str) -> list[int]:
    literal = text.encode() + b"\0"
    literal += b"\0" * (-len(literal) % 4)
    words = [result_id, *struct.unpack(f"<{len(literal) // 4}I", literal)]
    if len(words) >= 0xFFFF:
        raise ValueError(f"a bounds-check report too long for an OpString: {text[:80]}...")
    return [((len(words) + 1) << 16) | OP_STRING, *words]


def fault_sites(spv: bytes, sites: list[tuple[str, str]]) -> bytes:
    """The module with its bounds checks' site table (passes/gpu_bounds_checks.py, the "flat" abi) as
    OpStrings, first among the debug instructions: FAULT_SITES, then each site's kernel and report
    (docs/image-format.md). The marker alone says the module's kernels take the hidden record argument."""
    words = list(struct.unpack(f"<{len(spv) // 4}I", spv))
    _, end = _after_execution_modes(words)
    texts = [FAULT_SITES] + [t for site in sites for t in site]
    bound = words[3]
    strings = [w for k, text in enumerate(texts) for w in _op_string(bound + k, text)]
    words[3] = bound + len(texts)
    out = words[:end] + strings + words[end:]
    return struct.pack(f"<{len(out)}I", *out)


def make_spv(mod: ir.Module, metadata: dict, options: SPIRVOptions) -> bytes:
    passmanager.PassManager.parse("builtin.module(gpu-module-to-binary)").run(mod.operation)
    metadata["arch"] = f"spirv{VERSION[1:]}"
    metadata["warp_size"] = SUBGROUP
    binary = next((op for op in mod.body.operations if op.operation.name == "gpu.binary"), None)
    if binary is None:  # no kernels (a plan of collectives only): an empty section, as ptx's empty PTX module
        return b""
    spv = gpu.ObjectAttr(binary.attributes["objects"][0]).object
    if not options.contraction:
        spv = contraction_off(spv)
    if options.arch:
        spv = _declared_version(spv)
    if options.bounds_checks:
        spv = fault_sites(spv, metadata.pop("fault_sites"))
    tool = spirv_val.find()
    if tool:
        try:
            spirv_val.check(spv, tool)
        except spirv_val.SpirvValError as e:
            raise CompileError(str(e), "<spirv-val>", 0, 0) from None
    return spv
