"""The AMDGPU backend's stages: Tile IR → gpu dialect → ROCDL (LLVM dialect) → LLVM IR → object → HSACO.

    gpu     SIMT kernels become gpu.func kernels with the launch ABI (passes/simt_to_gpu.py), for the
            architecture's wavefront: 64 lanes on CDNA (gfx9), 32 on RDNA (gfx11); with
            AMDGPUOptions.bounds_checks, accesses not proven in bounds are checked (passes/gpu_bounds_checks.py)
    rocdl   math as arithmetic and intrinsics (passes/gpu_math.py), warp fragments as MFMA on CDNA and WMMA
            on RDNA 3 (vector FMAs for other shapes; passes/tile_mma.py), block and grid extents from the
            dispatch packet, then the upstream conversions
    llir    the kernels' LLVM IR, read by llvmlite's LLVM and optimized for the AMDGPU target
    obj     an AMDGPU ELF relocatable object from llvmlite
    hsaco   the code object HIP loads: the object linked as a shared ELF by ld.lld (link.py)

Each stage is a ``make_<ir>`` function taking the previous stage's artifact and the compilation's metadata,
as the other backends' are; `tessera.compiler` runs them in order.
"""

from __future__ import annotations

import llvmlite.binding as llvm

from ...diagnostics import CompileError
from ...mlir import arith, ir, llvm as llvm_d, passmanager, translate_module_to_llvmir
from ...passes import fp8_convert, gpu_math, simt_coarsen, simt_to_gpu, strict_math, tile_mma
from .. import llvm_compat
from ..cpu.target import init_llvm
from ..lowered import check_fully_lowered
from . import link
from .options import AMDGPUOptions
from .metadata import code_object_metadata

TRIPLE = "amdgcn-amd-amdhsa"

GPU_TO_ROCDL = "convert-gpu-to-rocdl{{chipset={arch} index-bitwidth=64}}"


def make_gpu(mod: ir.Module, metadata: dict, options: AMDGPUOptions) -> ir.Module:
    coarsened = {} if options.bounds_checks else simt_coarsen.run(mod)   # checks read one element a thread
    simt_to_gpu.run(mod, options.warp_size, bounds_checks=options.bounds_checks, target="amdgpu")
    simt_coarsen.bind_thread_count(mod)
    simt_coarsen.record(metadata, coarsened)
    passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(mod.operation)
    metadata["warp_size"] = options.warp_size
    return mod


# Offsets in the HSA kernel dispatch packet (hsa_kernel_dispatch_packet_t, HSA runtime spec §2.9):
# workgroup_size_{x,y,z} are u16 at 4, 6, 8; grid_size_{x,y,z} (in work-items) are u32 at 12, 16, 20.
_WORKGROUP_SIZE = (4, 6, 8)
_GRID_SIZE = (12, 16, 20)


def _dispatch_queries(mod: ir.Module) -> None:
    """gpu.block_dim and gpu.grid_dim as loads from the dispatch packet.

    convert-gpu-to-rocdl calls ROCm's device library for them (__ockl_get_local_size …), which would have
    to be linked from a ROCm installation; the packet, which every HSA/HIP dispatch provides through
    llvm.amdgcn.dispatch.ptr, holds both, as ockl itself read them before code object v5."""
    todo = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name in ("gpu.block_dim", "gpu.grid_dim"):
                        todo.append(inner)
                    visit(inner)

    visit(mod.operation)
    for op in todo:
        axis = int(str(op.attributes["dimension"]).split("<")[1].rstrip(">").strip() == "y") + \
            2 * int(str(op.attributes["dimension"]).split("<")[1].rstrip(">").strip() == "z")
        with op.location, ir.InsertionPoint(op):
            packet = llvm_d.CallIntrinsicOp(ir.Type.parse("!llvm.ptr<4>"), "llvm.amdgcn.dispatch.ptr", [], [], []).result
            result = _load(packet, _WORKGROUP_SIZE[axis], 16)
            if op.operation.name == "gpu.grid_dim":  # groups = ceil(grid size / workgroup size)
                result = arith.CeilDivUIOp(_load(packet, _GRID_SIZE[axis], 32), result).result
        op.results[0].replace_all_uses_with(result)
        op.operation.erase()


_AXES = {"#gpu<dim x>": 0, "#gpu<dim y>": 1, "#gpu<dim z>": 2}  # the bindings expose the enum only printed


def _load(packet: ir.Value, offset: int, bits: int) -> ir.Value:
    """The unsigned `bits`-wide field at `offset` of the packet, as an index."""
    i8 = ir.IntegerType.get_signless(8)
    field = llvm_d.GEPOp(packet.type, packet, [], [offset], i8, llvm_d.GEPNoWrapFlags.inbounds).result
    raw = llvm_d.LoadOp(ir.IntegerType.get_signless(bits), field, alignment=bits // 8, invariant=True).result
    return arith.IndexCastUIOp(ir.IndexType.get(), raw).result


# Blocks of up to 1024 threads, as on NVIDIA: LLVM otherwise assumes at most 256 (.max_flat_workgroup_size),
# and HIP refuses a larger launch of the kernel.
MAX_BLOCK = 1024


def make_rocdl(mod: ir.Module, metadata: dict, options: AMDGPUOptions) -> ir.Module:
    if options.exact_math:   # strict: exp, erf … in f64, which gpu_math computes by passes/f64_math.py
        strict_math.run(mod, gpu=True)
    fp8_convert.run(mod)   # one-byte fp8 as integer arithmetic (gfx942's cvt reads the fnuz variants)
    gpu_math.run(mod)
    # after gpu_math, whose f32-only math table would refuse the FMA path's vector fma (upstream lowers it)
    done = tile_mma.run(mod.operation, tile_mma.target_for_amdgpu(options.arch, options.warp_size))
    for kernel, products in done.items():   # what each product became, as SPIR-V's spirv.mma says it
        metadata.setdefault("kernel_props", {}).setdefault(kernel, {})["amdgpu.mma"] = \
            "; ".join(dict.fromkeys(str(p) for p in products))
    _dispatch_queries(mod)
    for fn in _functions(mod):
        fn.attributes["rocdl.flat_work_group_size"] = ir.StringAttr.get(f"1,{MAX_BLOCK}")
    pipeline = ",".join([
        "canonicalize", "cse", "expand-strided-metadata", "lower-affine", "arith-expand", "convert-scf-to-cf",
        GPU_TO_ROCDL.format(arch=options.arch), "reconcile-unrealized-casts", "canonicalize", "cse"])
    passmanager.PassManager.parse(f"builtin.module(gpu.module({pipeline}))").run(mod.operation)
    for fn in _functions(mod):
        # convert-gpu-to-rocdl adds gpu.kernel to the attributes it copied, which held it already; printed
        # twice, the stage's IR would not parse again (`--from rocdl`).
        if "gpu.kernel" in fn.attributes:
            del fn.attributes["gpu.kernel"]
            fn.attributes["gpu.kernel"] = ir.UnitAttr.get()
    return mod


def _functions(mod: ir.Module) -> list:
    return [fn for gm in mod.body.operations if gm.operation.name == "gpu.module"
            for fn in gm.regions[0].blocks[0].operations]


def _kernel_module(mod: ir.Module) -> ir.Module:
    """The gpu.module's contents as a module of their own, which is what LLVM translation takes."""
    out = ir.Module.create(mod.operation.location)
    with ir.InsertionPoint(out.body):
        for gm in (op for op in mod.body.operations if op.operation.name == "gpu.module"):
            for op in gm.regions[0].blocks[0].operations:
                op.operation.clone()
    check_fully_lowered(out, ("llvm.", "rocdl."), "ROCDL", externals_from="AMDGPU")
    return out


def _target_machine(options: AMDGPUOptions):
    init_llvm()
    t = llvm.Target.from_triple(TRIPLE)
    return t.create_target_machine(cpu=options.arch, features=f"+wavefrontsize{options.warp_size}",
                                   opt=options.opt_level, reloc="pic")


def make_llir(mod: ir.Module, metadata: dict, options: AMDGPUOptions) -> str:
    kernels = _kernel_module(mod)
    text = llvm_compat.downgrade(str(translate_module_to_llvmir(kernels.operation)))
    lmod = llvm.parse_assembly(text)
    lmod.triple = TRIPLE
    tm = _target_machine(options)
    lmod.data_layout = str(tm.target_data)
    lmod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=options.opt_level))
    pb.getModulePassManager().run(lmod, pb)
    metadata["arch"] = options.arch
    metadata["warp_size"] = options.warp_size
    return str(lmod)


def make_object(llir: str, metadata: dict, options: AMDGPUOptions) -> bytes:
    lmod = llvm.parse_assembly(llir)
    lmod.verify()  # codegen of invalid IR aborts the process: never reach it unverified
    return _target_machine(options).emit_object(lmod)


def make_hsaco(obj: bytes, metadata: dict, options: AMDGPUOptions) -> bytes:
    try:
        code = link.hsaco(obj)
    except link.LinkError as e:
        raise CompileError(str(e), "<ld.lld>", 0, 0) from None
    # What the code object says of each kernel goes into its record, as ptxas's report does for PTX.
    resources = metadata.setdefault("kernel_resources", {})
    for k in code_object_metadata(code)["amdhsa.kernels"]:
        resources[k[".name"]] = {"regs": k[".vgpr_count"], "smem_bytes": k[".group_segment_fixed_size"]}
        spills = k.get(".vgpr_spill_count", 0) + k.get(".sgpr_spill_count", 0)
        if spills:
            metadata.setdefault("kernel_props", {}).setdefault(k[".name"], {})["amdgpu.spill_count"] = str(spills)
    return code
