"""The PTX backend's stages: Tile IR → gpu dialect → NVVM (LLVM dialect) → LLVM IR → PTX text.

    gpu    SIMT kernels become gpu.func kernels with the launch ABI (passes/simt_to_gpu.py)
    nvvm   math as arithmetic and PTX-native intrinsics (passes/gpu_math.py), then the upstream conversions
    llir   the kernels' LLVM IR, read by llvmlite's LLVM and optimized for the NVPTX target
    ptx    PTX text from llvmlite's NVPTX backend, assembled by ptxas where it is installed (ptxas.py)

Each stage is a ``make_<ir>`` function taking the previous stage's artifact and the compilation's metadata,
as the CPU backend's are (backends/cpu/compiler.py); `tessera.compiler` runs them in order.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, fields

import llvmlite.binding as llvm

from ...mlir import ir, passmanager, translate_module_to_llvmir
from ...passes import gpu_math, simt_to_gpu
from ...targets import TargetFacts
from .. import llvm_compat
from ..cpu.target import init_llvm
from ..lowered import check_fully_lowered
from . import ptxas

TRIPLE = "nvptx64-nvidia-cuda"

# Architectures we emit for, with the PTX ISA version each needs. PTX is forward compatible: code for
# sm_80 runs on every later GPU (the driver compiles it for the device); an `a` architecture (sm_90a) runs
# only on that exact compute capability, in exchange for its own instructions (wgmma, setmaxnreg).
ARCHS = {"sm_70": "ptx80", "sm_75": "ptx80", "sm_80": "ptx80", "sm_86": "ptx80", "sm_87": "ptx80",
         "sm_89": "ptx80", "sm_90": "ptx80", "sm_90a": "ptx80", "sm_100": "ptx86", "sm_100a": "ptx86",
         "sm_120": "ptx87", "sm_120a": "ptx87"}

# convert-gpu-to-nvvm lowers arith, cf, memref and the gpu ops; arith-expand first, for the ceildivui of
# warp_id (no LLVM lowering of its own). Unlike the CPU's, bf16 conversions stay: sm_80+ has cvt to bf16.
GPU_TO_NVVM = ",".join([
    "canonicalize", "cse", "expand-strided-metadata", "lower-affine", "arith-expand", "convert-scf-to-cf",
    "convert-gpu-to-nvvm{index-bitwidth=64}", "reconcile-unrealized-casts", "canonicalize", "cse",
])


def _sm(arch: str) -> int:
    return int(arch[3:].rstrip("a"))


@dataclass(frozen=True)
class PTXOptions:
    arch: str = "sm_80"
    opt_level: int = 3

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"unknown NVIDIA architecture '{self.arch}' (known: {', '.join(ARCHS)})")

    def hash(self) -> str:
        key = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(key.encode()).hexdigest()


def make_gpu(mod: ir.Module, metadata: dict, options: PTXOptions) -> ir.Module:
    simt_to_gpu.run(mod)
    passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(mod.operation)
    return mod


def make_nvvm(mod: ir.Module, metadata: dict, options: PTXOptions) -> ir.Module:
    gpu_math.run(mod)
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
    lmod = llvm.parse_assembly(text)
    lmod.triple = TRIPLE
    tm = _target_machine(options)
    lmod.data_layout = str(tm.target_data)
    for fn in _generated(mod):
        name = ir.StringAttr(fn.attributes["sym_name"]).value
        lmod.link_in(llvm.parse_assembly(ir.StringAttr(fn.attributes["tessera.llvm_ir"]).value))
        props = ir.DictAttr(fn.attributes["tessera.kernel_props"]) if "tessera.kernel_props" in fn.attributes else []
        metadata.setdefault("kernel_props", {}).setdefault(name, {}).update(
            {na.name: ir.StringAttr(na.attr).value for na in props})
    lmod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=options.opt_level))
    pb.getModulePassManager().run(lmod, pb)
    metadata["arch"] = options.arch
    return str(lmod)


def make_ptx(llir: str, metadata: dict, options: PTXOptions) -> str:
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
        for name, r in found.items():
            resources[name] = {"regs": r.regs, "smem_bytes": r.smem_bytes}
            if r.spill_bytes or r.stack_bytes:
                metadata.setdefault("kernel_props", {}).setdefault(name, {}).update(
                    {"ptx.stack_bytes": str(r.stack_bytes), "ptx.spill_bytes": str(r.spill_bytes)})
    return text


def _ptxas_failure(e: Exception):
    from ...frontend import CompileError
    return CompileError(str(e), "<ptxas>", 0, 0)


class PTXBackend:
    name = "ptx"
    Options = PTXOptions
    code_section = ".tessera.code.ptx"

    def __init__(self, options: PTXOptions | None = None):
        self.options = options or PTXOptions()

    def add_stages(self, stages: dict) -> None:
        o = self.options
        stages["gpu"] = lambda m, md: make_gpu(m, md, o)
        stages["nvvm"] = lambda m, md: make_nvvm(m, md, o)
        stages["llir"] = lambda m, md: make_llir(m, md, o)
        stages["ptx"] = lambda m, md: make_ptx(m, md, o)

    def target_info(self):
        from .gemm_lowering import matmul_schedule, matmul_schedule_sm80
        # 128 bits: one 16-byte access per thread; the SM count (132 on an H100 SXM) is a placeholder, as
        # the compiler does not know the device. sm_80 and later compute in bf16 and f16 (tensor cores, cvt).
        arch = self.options.arch
        native = {"f32", "f64"} | ({"f16", "bf16"} if _sm(arch) >= 80 else set())
        schedule = matmul_schedule if arch == "sm_90a" else functools.partial(matmul_schedule_sm80, arch)
        return TargetFacts("ptx", 128, simt_to_gpu.WARP_SIZE, frozenset(native), 132, matmul_schedule=schedule)

    def gemm_lowering(self, *args):
        from .gemm_lowering import lower
        return lower(self.options.arch, *args)

    def attention_lowering(self, *args):
        from .attention_lowering import lower
        return lower(self.options.arch, *args)

    def entry_symbol(self, kernel: str) -> str:
        return kernel  # the PTX .entry has the kernel's own name, as profilers then show it
