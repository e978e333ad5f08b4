"""The PTX backend's stages: Tile IR → gpu dialect → NVVM (LLVM dialect) → LLVM IR → PTX text.

    gpu    SIMT kernels become gpu.func kernels with the launch ABI (passes/simt_to_gpu.py), their accesses
           not proven in bounds checked with PTXOptions.bounds_checks (passes/gpu_bounds_checks.py)
    nvvm   math as arithmetic and PTX-native intrinsics (passes/gpu_math.py), then the upstream conversions
    llir   the kernels' LLVM IR, read by llvmlite's LLVM and optimized for the NVPTX target
    ptx    PTX text from llvmlite's NVPTX backend, assembled by ptxas where it is installed (ptxas.py)

Each stage is a ``make_<ir>`` function taking the previous stage's artifact and the compilation's metadata,
as the CPU backend's are (backends/cpu/compiler.py); `tessera.compiler` runs them in order.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.binding as llvm

from ...diagnostics import CompileError
from ...mlir import ir, passmanager, translate_module_to_llvmir
from ...passes import fp8_convert, gpu_math, simt_coarsen, simt_to_gpu, simt_vector_access, strict_math
from .. import llvm_compat, llvm_threads
from ..cpu.target import init_llvm
from ..lowered import check_fully_lowered
from ..symbol_names import ptx_identifier
from . import modules, ptxas
from .options import ARCHS, PTXOptions, sm

TRIPLE = "nvptx64-nvidia-cuda"

# convert-gpu-to-nvvm lowers arith, cf, memref and the gpu ops; arith-expand first, for the ceildivui of
# warp_id (no LLVM lowering of its own). Unlike the CPU's, bf16 conversions stay: sm_80+ has cvt to bf16.
GPU_TO_NVVM = ",".join([
    "canonicalize", "cse", "expand-strided-metadata", "lower-affine", "arith-expand", "convert-scf-to-cf",
    "convert-gpu-to-nvvm{index-bitwidth=64}", "reconcile-unrealized-casts", "canonicalize", "cse",
])


def make_gpu(mod: ir.Module, metadata: dict, options: PTXOptions) -> ir.Module:
    coarsened = {} if options.bounds_checks else simt_coarsen.run(mod)   # checks read one element a thread
    if not options.bounds_checks:   # a thread's 16 bytes of consecutive elements as one access where aligned
        simt_vector_access.run(mod)
    simt_to_gpu.run(mod, bounds_checks=options.bounds_checks, entry_symbol=ptx_identifier,
                    cp_async=sm(options.arch) >= 80)   # tile.cp_async as cp.async from Ampere on
    simt_coarsen.bind_thread_count(mod)
    simt_coarsen.record(metadata, coarsened)
    passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(mod.operation)
    return mod


def make_nvvm(mod: ir.Module, metadata: dict, options: PTXOptions) -> ir.Module:
    if options.exact_math:   # strict: exp, erf … in f64, which gpu_math computes by passes/f64_math.py
        strict_math.run(mod, gpu=True)
    # cvt to and from e4m3/e5m2: PTX has them from sm_89 (ISA 7.8), LLVM selects them on sm_89 only from PTX
    # 8.1, and sm_89's images say 8.0 (ARCHS): there the integer conversions, exact too
    fp8_convert.run(mod, native=sm(options.arch) >= 90)
    gpu_math.run(mod, mulhi="llvm.nvvm.mulhi.ui")   # Philox's high words as mul.hi.u32
    passmanager.PassManager.parse(f"builtin.module(gpu.module({GPU_TO_NVVM}))").run(mod.operation)
    return mod


def _kernel_module(mod: ir.Module) -> ir.Module:
    """The gpu.module's contents as a module of their own, which is what LLVM translation takes."""
    body = mod.body
    gpu_modules = [op for op in body.operations if op.operation.name == "gpu.module"]
    out = ir.Module.create(mod.operation.location)
    with ir.InsertionPoint(out.body):
        for gm in gpu_modules:
            for op in gm.regions[0].blocks[0].operations:
                op.operation.clone()
    check_fully_lowered(out, ("llvm.", "nvvm."), "NVVM", externals_from="PTX")
    return out


def _target_machine(options: PTXOptions):
    init_llvm()
    t = llvm.Target.from_triple(TRIPLE)
    return t.create_target_machine(cpu=options.arch, features="+" + ARCHS[options.arch], opt=options.opt_level)


def _generated(mod: ir.Module) -> list:
    """The kernels generated whole as LLVM IR (their ``func.func`` declarations carry it)."""
    return [op for op in mod.body.operations
            if op.operation.name == "func.func" and "tessera.llvm_ir" in op.attributes]


def make_llir(mod: ir.Module, metadata: dict, options: PTXOptions) -> str:
    kernels = _kernel_module(mod)
    text = llvm_compat.downgrade(str(translate_module_to_llvmir(kernels.operation)))
    generated = []
    for fn in _generated(mod):
        name = ir.StringAttr(fn.attributes["sym_name"]).value
        generated.append(ir.StringAttr(fn.attributes["tessera.llvm_ir"]).value)
        props = ir.DictAttr(fn.attributes["tessera.kernel_props"]) if "tessera.kernel_props" in fn.attributes else []
        metadata.setdefault("kernel_props", {}).setdefault(name, {}).update(
            {na.name: ir.StringAttr(na.attr).value for na in props})
    # NVPTX codegen aborts on a name PTX cannot spell: give it its entry's
    renames = {sig.name: ptx_identifier(sig.name) for sig in metadata["signatures"]
               if ptx_identifier(sig.name) != sig.name}
    metadata["arch"] = options.arch
    pieces = modules.split([text, *generated], renames)
    if pieces is not None:   # independent modules: optimized each on its own, on threads (modules.py)
        optimized = llvm_threads.optimize(pieces, lambda: _target_machine(options), TRIPLE, options.opt_level,
                                          renames)
        if modules.as_linked(pieces, optimized):
            return modules.join(optimized)
    return _linked_llir(text, generated, renames, options)


def _linked_llir(text: str, generated: list[str], renames: dict, options: PTXOptions) -> str:
    """The kernels' LLVM IR as one module: the generated kernels linked into the translated ones, optimized."""
    lmod = llvm.parse_assembly(text)
    lmod.triple = TRIPLE
    tm = _target_machine(options)
    lmod.data_layout = str(tm.target_data)
    for llvm_ir in generated:
        lmod.link_in(llvm.parse_assembly(llvm_ir))
    for old, new in renames.items():
        lmod.get_function(old).name = new
    lmod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=options.opt_level))
    pb.getModulePassManager().run(lmod, pb)
    return str(lmod)


def make_ptx(llir: str, metadata: dict, options: PTXOptions) -> str:
    pieces = modules.pieces(llir)
    text = None
    if len(pieces) > 1:
        text = modules.stitch_ptx(llvm_threads.emit_assembly(pieces, lambda: _target_machine(options)))
        if text is None:   # not the shape stitch_ptx knows: the modules linked, as one
            lmod = llvm.parse_assembly(pieces[0])
            for piece in pieces[1:]:
                lmod.link_in(llvm.parse_assembly(piece))
            llir = str(lmod)
    if text is None:
        lmod = llvm.parse_assembly(llir)
        lmod.verify()  # codegen of invalid IR aborts the process: never reach it unverified
        text = _target_machine(options).emit_assembly(lmod)
    tool = ptxas.find()
    if tool:
        try:
            found = ptxas.check(text, options.arch, tool)
        except ptxas.PtxasError as e:
            raise _ptxas_failure(e) from None
        resources = metadata.setdefault("kernel_resources", {})
        kernel_of = {ptx_identifier(sig.name): sig.name for sig in metadata["signatures"]}
        for entry, r in found.items():
            name = kernel_of.get(entry, entry)
            resources[name] = {"regs": r.regs, "smem_bytes": r.smem_bytes}
            if r.spill_bytes or r.stack_bytes:
                metadata.setdefault("kernel_props", {}).setdefault(name, {}).update(
                    {"ptx.stack_bytes": str(r.stack_bytes), "ptx.spill_bytes": str(r.spill_bytes)})
    return text


def _ptxas_failure(e: Exception):
    return CompileError(str(e), "<ptxas>", 0, 0)
