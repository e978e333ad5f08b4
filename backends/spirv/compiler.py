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
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, fields

from ...mlir import arith, gpu, ir, memref, passmanager
from ...passes import simt_to_gpu, tile_mma
from . import spirv_val

SUBGROUP = 32
VERSION = "v1.3"   # the first with the GroupNonUniform instructions; Intel's OpenCL runtimes take 1.0–1.4
CAPS = ["Addresses", "Int64", "Int8", "Int16", "Float16", "Float64", "Kernel", "GroupNonUniformShuffle",
        "SubgroupDispatch"]

PREPARE = ",".join(["canonicalize", "cse", "expand-strided-metadata", "lower-affine", "arith-expand",
                     f"spirv-attach-target{{ver={VERSION} caps={','.join(CAPS)}}}"])
# convert-gpu-to-spirv leaves math ops alone; convert-math-to-spirv picks OpenCL.std over GLSL by the
# target environment it finds on an enclosing op as `spirv.target_env` (make_spirv copies it there).
TO_SPIRV = ",".join(["gpu.module(convert-math-to-spirv)", "convert-gpu-to-spirv{use-64bit-index=true}",
                     "gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce))"])


@dataclass(frozen=True)
class SPIRVOptions:
    opt_level: int = 3   # kept for the common interface; the SPIR-V consumer (the driver) optimizes
    contraction: bool = True  # False (numerics profile "strict"): the driver may not fuse a*b+c

    def hash(self) -> str:
        key = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(key.encode()).hexdigest()


def _kernels(mod: ir.Module) -> list:
    return [fn for gm in mod.body.operations if gm.operation.name == "gpu.module"
            for fn in gm.regions[0].blocks[0].operations if fn.operation.name == "gpu.func"]


def make_gpu(mod: ir.Module, metadata: dict, options: SPIRVOptions) -> ir.Module:
    simt_to_gpu.run(mod, SUBGROUP, abi="flat")
    passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(mod.operation)
    for fn in _kernels(mod):
        fn.attributes["spirv.entry_point_abi"] = ir.Attribute.parse(
            f"#spirv.entry_point_abi<subgroup_size = {SUBGROUP}>")
    metadata["warp_size"] = SUBGROUP
    return mod


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


def make_spirv(mod: ir.Module, metadata: dict, options: SPIRVOptions) -> ir.Module:
    tile_mma.run(mod.operation, tile_mma.Target(SUBGROUP))  # warp fragments as vector FMAs (no DPAS declared)
    _workgroup_memory(mod)
    _shuffle_down_as_index(mod)
    passmanager.PassManager.parse(f"builtin.module({PREPARE})").run(mod.operation)
    for gm in mod.body.operations:
        if gm.operation.name == "gpu.module":
            gm.attributes["spirv.target_env"] = ir.ArrayAttr(gm.attributes["targets"])[0]
    passmanager.PassManager.parse(f"builtin.module({TO_SPIRV})").run(mod.operation)
    return mod


OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID = 15, 16, 331
CONTRACTION_OFF = 31


def contraction_off(spv: bytes) -> bytes:
    """The module with `OpExecutionMode %k ContractionOff` for every entry point, after the execution modes
    it has (the logical layout's place for them): OpenCL drivers otherwise fuse multiplies and adds."""
    words = list(struct.unpack(f"<{len(spv) // 4}I", spv))
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
    modes = [w for e in entries for w in ((3 << 16) | OP_EXECUTION_MODE, e, CONTRACTION_OFF)]
    out = words[:end] + modes + words[end:]
    return struct.pack(f"<{len(out)}I", *out)


def make_spv(mod: ir.Module, metadata: dict, options: SPIRVOptions) -> bytes:
    passmanager.PassManager.parse("builtin.module(gpu-module-to-binary)").run(mod.operation)
    binary = next(op for op in mod.body.operations if op.operation.name == "gpu.binary")
    spv = gpu.ObjectAttr(binary.attributes["objects"][0]).object
    if not options.contraction:
        spv = contraction_off(spv)
    tool = spirv_val.find()
    if tool:
        try:
            spirv_val.check(spv, tool)
        except spirv_val.SpirvValError as e:
            from ...frontend import CompileError
            raise CompileError(str(e), "<spirv-val>", 0, 0) from None
    metadata["arch"] = f"spirv{VERSION[1:]}"
    metadata["warp_size"] = SUBGROUP
    return spv


class SPIRVBackend:
    name = "spirv"
    Options = SPIRVOptions
    code_section = ".tessera.code.spirv"

    def __init__(self, options: SPIRVOptions | None = None):
        self.options = options or SPIRVOptions()

    def add_stages(self, stages: dict) -> None:
        o = self.options
        stages["gpu"] = lambda m, md: make_gpu(m, md, o)
        stages["spirv"] = lambda m, md: make_spirv(m, md, o)
        stages["spv"] = lambda m, md: make_spv(m, md, o)

    def target_info(self):
        from ...passes.graph_phases import TargetInfo
        # 128 bits: one 16-byte access per work-item; the core count (Xe cores of a Max 1550: 128) is a
        # placeholder, as the compiler does not know the device and no phase sizes work by it yet.
        return TargetInfo("spirv", 128, SUBGROUP, frozenset({"f32", "f64"}), 128)

    @staticmethod
    def gemm_lowering(*args):
        from .gemm_lowering import lower
        return lower(*args)

    def entry_symbol(self, kernel: str) -> str:
        return kernel  # the OpEntryPoint's name, which clCreateKernel and zeKernelCreate look up
