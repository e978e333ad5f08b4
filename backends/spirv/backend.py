"""The SPIR-V target as the driver sees it: its options, its facts, and where its stages and lowerings are.

Nothing here loads MLIR or LLVM (a cache hit hashes the backend without them); compiler.py holds the stages.
"""

from __future__ import annotations


from ...options import CompileOptions
from ...targets import TargetFacts
from ..contract import Backend
from . import spirv_val
from .options import SUBGROUP, SPIRVOptions

class SPIRVBackend(Backend):
    name = "spirv"
    Options = SPIRVOptions
    code_section = ".tessera.code.spirv"
    arch_prefixes = ("xe-",)
    stages = (("gpu", "make_gpu"), ("spirv", "make_spirv"), ("spv", "make_spv"))

    @classmethod
    def option_values(cls, options: CompileOptions, arch: str | None) -> dict:
        return {"opt_level": options.opt_level, "arch": arch or "", "contraction": options.numerics != "strict",
                "exact_math": options.numerics == "strict", "bounds_checks": options.gpu_bounds_checks}

    def tool_versions(self) -> tuple[str, ...]:
        return (spirv_val.identity(),)

    def target_facts(self) -> TargetFacts:
        # 128 bits: one 16-byte access per work-item; the core count (Xe cores of a Max 1550: 128) is a
        # placeholder, as the compiler does not know the device and no phase sizes work by it yet.
        # Matrix units and shared local memory are a declared device's (--arch): otherwise what every OpenCL
        # device guarantees, no matrix unit and 32 KiB.
        declared = self.options.arch == "xe-hpc"
        return TargetFacts("spirv", 128, SUBGROUP, frozenset({"f32", "f64"}), 128,
                           matrix_units=frozenset({"fp16", "bf16"}) if declared else frozenset(),
                           shared_memory=(128 if declared else 32) << 10,
                           integer_matmul=frozenset({"i8"}),   # the SIMT GEMM's (simt_gemm.py), exact in i32
                           fp8_gemm_widens=True,   # the SIMT GEMM loads one-byte fp8 and widens it (simt_gemm.py)
                           decompose_attention=True)   # no fused attention kernel: GEMMs and a softmax

    def lowerings(self) -> dict:
        # Graph IR GEMMs of bf16/f16 operands as cooperative matrices where the device is declared (--arch
        # xe-hpc), the others (and all under the strict profile) as the SIMT GEMM (backends/matrix_gemm.py)
        from .. import matrix_gemm  # lazy: it builds MLIR
        from .options import MATRIX_ARCHS
        unit = matrix_gemm.UNITS.get(MATRIX_ARCHS.get(self.options.arch, ""))
        return {"gemm": matrix_gemm.lowering(unit, "spirv", strict=self.options.exact_math)}

    def entry_symbol(self, kernel: str) -> str:
        return kernel  # the OpEntryPoint's name, which clCreateKernel and zeKernelCreate look up
