"""The CPU backend's stages: Tile IR → warp vectors → LLVM dialect → LLVM IR → object → shared object.

Each stage is a small ``make_<ir>`` function taking the previous stage's artifact and the compilation's
metadata dict; `tessera.compiler` runs them in order and can stop after any of them.
"""

from __future__ import annotations

import llvmlite.binding as llvm

from ...mlir import ir, passmanager, translate_module_to_llvmir
from ...passes import cpu_vector_math, fp8_convert, simt_to_warps, strict_math
from ...passes.to_llvm import CPU_TO_LLVM
from .. import llvm_compat
from ..lowered import check_fully_lowered
from . import entry, gemm_i8, link, support, target
from .options import CPUOptions

_GENERATED = "tessera.cpu_llvm_ir"


def make_warps(mod: ir.Module, metadata: dict, options: CPUOptions) -> ir.Module:
    fp8_convert.run(mod)   # one-byte fp8 loads and stores as integer arithmetic, vectorized with the rest
    simt_to_warps.run(mod, options.warp_size, options.bounds_checks)
    passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(mod.operation)
    return mod


def make_llvm_dialect(mod: ir.Module, metadata: dict, options: CPUOptions) -> ir.Module:
    host = target.host(options.cpu)
    # Kernels generated whole as LLVM IR (gemm_i8.py): their IR, kept for the llir stage to link in, as
    # lowering their declarations to llvm.func drops it.
    generated = gemm_i8.generated(mod)
    if generated:
        mod.operation.attributes[_GENERATED] = ir.ArrayAttr.get([ir.StringAttr.get(t) for t in generated])
    if options.exact_math:   # before libmvec's few-ulp f32 functions could take the math
        strict_math.run(mod)
    cpu_vector_math.run(mod, host.arch, host.features)
    passmanager.PassManager.parse(f"builtin.module({CPU_TO_LLVM})").run(mod.operation)
    return mod


def make_llir(mod: ir.Module, metadata: dict, options: CPUOptions) -> str:
    host = target.host(options.cpu)
    check_fully_lowered(mod, ("llvm.",), "LLVM")
    bodies = []
    if _GENERATED in mod.operation.attributes:   # translation knows no such attribute
        bodies = [ir.StringAttr(t).value for t in ir.ArrayAttr(mod.operation.attributes[_GENERATED])]
        del mod.operation.attributes[_GENERATED]
    text = llvm_compat.downgrade(str(translate_module_to_llvmir(mod.operation)))
    lmod = llvm.parse_assembly(text)
    for body in bodies:
        lmod.link_in(llvm.parse_assembly(body))   # the int8 GEMM's kernels (gemm_i8.py)
    # A kernel lowered with bounds checks takes one more argument, its report slot: the body says which.
    wrappers = "".join(entry.entry_ir(sig, sig.name, entry.takes_report_slot(
        sig, len(list(lmod.get_function(sig.name).arguments)))) for sig in metadata["signatures"])
    lmod.link_in(llvm.parse_assembly(wrappers))
    if "bfloat" in text:
        lmod.link_in(llvm.parse_assembly(support.SUPPORT_IR))
    for sig in metadata["signatures"]:
        lmod.get_function(sig.name).linkage = "internal"  # only the entries are the image's interface
    lmod.triple = host.triple
    lmod.verify()
    tm = _target_machine(options)
    lmod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=options.opt_level)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(lmod, pb)
    metadata["arch"] = host.arch
    metadata["cpu"] = host.cpu
    return str(lmod)


def make_object(llir: str, metadata: dict, options: CPUOptions) -> bytes:
    lmod = llvm.parse_assembly(llir)
    lmod.verify()  # codegen of invalid IR aborts the process: never reach it unverified
    return _target_machine(options).emit_object(lmod)


def make_shared_object(obj: bytes, metadata: dict, options: CPUOptions) -> bytes:
    return link.shared_object(obj)


def _target_machine(options: CPUOptions):
    host = target.host(options.cpu)
    t = llvm.Target.from_triple(host.triple)
    return t.create_target_machine(cpu=host.cpu, features=host.features, opt=options.opt_level,
                                   reloc="pic", codemodel="default")
