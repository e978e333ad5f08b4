"""The AMDGPU target as the driver sees it: its options, its facts, and where its stages are.

Nothing here loads MLIR or LLVM (a cache hit hashes the backend without them); compiler.py holds the stages.
"""

from __future__ import annotations


from ...options import CompileOptions
from ...numerics import matrix_units
from ...targets import TargetFacts
from ..contract import Backend
from . import link
from .options import AMDGPUOptions

class AMDGPUBackend(Backend):
    name = "amdgpu"
    Options = AMDGPUOptions
    code_section = ".tessera.code.amdgpu"
    arch_prefixes = ("gfx",)
    stages = (("gpu", "make_gpu"),
              ("rocdl", "make_rocdl"),
              ("llir", "make_llir"),
              ("obj", "make_object"),
              ("hsaco", "make_hsaco"))

    @classmethod
    def option_values(cls, options: CompileOptions, arch: str | None) -> dict:
        return {"arch": arch or "gfx942", "opt_level": options.opt_level, "bounds_checks": options.gpu_bounds_checks,
                "exact_math": options.numerics == "strict"}

    def tool_versions(self) -> tuple[str, ...]:
        # the linker writes the code object
        return (link.identity(),)

    def target_facts(self) -> TargetFacts:
        # 128 bits: one 16-byte access per lane; the CU count (304 on an MI300X) is a placeholder, as the
        # compiler does not know the device and no phase sizes work by it yet.
        arch = self.options.arch
        return TargetFacts("amdgpu", 128, self.options.warp_size, frozenset({"f32", "f64"}), 304,
                           matrix_units=frozenset(matrix_units.tensorcore_dtypes(arch)),
                           shared_memory=64 << 10,   # LDS per workgroup on CDNA 2/3 and RDNA 3
                           integer_matmul=frozenset({"i8"}),   # the SIMT GEMM's (simt_gemm.py), exact in i32
                           fp8_gemm_widens=True,   # the SIMT GEMM loads one-byte fp8 and widens it (simt_gemm.py)
                           decompose_attention=True)   # no fused attention kernel: GEMMs and a softmax

    def lowerings(self) -> dict:
        # Graph IR GEMMs of bf16/f16 operands on MFMA (CDNA) or WMMA (RDNA 3), the others (and all under the
        # strict profile) as the SIMT kernel every GPU target compiles, on FMA units (backends/matrix_gemm.py)
        from .. import matrix_gemm  # lazy: it builds MLIR
        arch = self.options.arch
        unit = "mfma" if arch in ("gfx90a", "gfx942", "gfx950") else "wmma" if arch.startswith("gfx11") else None
        return {"gemm": matrix_gemm.lowering(matrix_gemm.UNITS.get(unit), f"amdgpu {arch}",
                                             strict=self.options.exact_math)}

    def entry_symbol(self, kernel: str) -> str:
        return kernel  # hipModuleGetFunction looks the kernel up by its own name (its descriptor is NAME.kd)
