"""The CPU target as the driver sees it: its options, its facts, and where its stages and lowerings are.

Nothing here loads MLIR or LLVM (a cache hit hashes the backend without them); compiler.py holds the stages.
"""

from __future__ import annotations

import dataclasses
import functools

from ...options import CompileOptions
from ...targets import TargetFacts
from ..contract import Backend
from . import entry, link, target
from .options import CPUOptions


class CPUBackend(Backend):
    name = "cpu"
    Options = CPUOptions
    code_section = ".tessera.code.cpu"
    stages = (("warps", "make_warps"),
              ("llvm", "make_llvm_dialect"),
              ("llir", "make_llir"),
              ("obj", "make_object"),
              ("so", "make_shared_object"))

    @classmethod
    def option_values(cls, options: CompileOptions, arch: str | None) -> dict:
        return {"cpu": options.cpu, "opt_level": options.opt_level, "warp_size": options.warp_size,
                "bounds_checks": options.bounds_checks, "exact_math": options.numerics == "strict"}

    def tool_versions(self) -> tuple[str, ...]:
        # The host linker writes the shared object; the build machine decides `native` code and, whatever
        # `cpu` names, the register tile the GEMM kernels are fitted to (target_facts).
        return (link.identity(), target.host_identity())

    def target_facts(self) -> TargetFacts:
        from . import gemm_lowering, gemm_schedule  # lazy: LLVM (the host's features), the cost model
        o = self.options
        facts = TargetFacts("cpu", target.vector_bits(target.host(o.cpu)), o.warp_size, frozenset({"f32", "f64"}),
                            o.threads, cache_sizes=o.cache_sizes, decompose_attention=True, fused_attention=True,
                            fused_attention_backward=frozenset({"f32"}),
                            gemm_transposes=frozenset({"f32", "bf16", "f16", "fp8_e4m3", "fp8_e5m2"}),
                            gemm_epilogue=frozenset({"scale_by", "sub_from", "gelu_grad", "gelu_tanh_grad"}),
                            integer_matmul=frozenset({"i8"}),   # gemm_i8.py
                            # gemm.py widens one-byte fp8 while packing; strict's SIMT GEMM as it loads
                            fp8_gemm_widens=True)
        # The register tile is the build machine's, whatever `cpu` names (gemm_lowering's lowering fits to it).
        if o.exact_math:
            # strict: the SIMT GEMM (lowerings) reads no transposed operand and has no blocking to choose; no
            # fused attention, whose kernels compute exp by an inline approximation (passes/vmath.py): it is
            # decomposed into GEMMs and a softmax, whose exp strict_math makes exact
            return dataclasses.replace(facts, gemm_transposes=frozenset(), gemm_epilogue=frozenset(),
                                       fused_attention=False, fused_attention_backward=frozenset())
        model = gemm_schedule.CostModel.of(facts, target.host())
        return dataclasses.replace(facts, matmul_schedule=functools.partial(gemm_lowering.matmul_schedule, model),
                                   staging_buffers=functools.partial(gemm_lowering.staging_buffers, model))

    def lowerings(self) -> dict:
        from . import attention, attention_bwd, gemm_lowering, gemm_schedule  # lazy: they build MLIR
        from .. import simt_gemm  # lazy: it builds MLIR
        # GEMMs of extents known only at run time get blockings to choose from at launch: the cost model's
        model = gemm_schedule.CostModel.of(self.target_facts(), target.host())
        # tf32 operands (f32 words) as the SIMT GEMM, multiplied in f32: the packed kernels take f32/f16/bf16
        gemm = simt_gemm.taking(("tf32",), functools.partial(gemm_lowering.lower, model=model,
                                                             int8_path=self.options.int8_gemm,
                                                             bf16_path=self.options.bf16_gemm))
        if self.options.exact_math:
            # strict: float GEMMs as the SIMT kernel (simt_gemm.py), k ascending with one product and one sum per
            # step (rounded each), so the CPU and SPIR-V agree bit for bit; the blocked kernel's FMAs and K
            # chunks round otherwise. int8 GEMMs stay this backend's (exact). Attention is decomposed.
            return {"gemm": simt_gemm.strict(gemm)}
        return {"gemm": gemm,
                "attention": attention.lower,
                "attention_bwd": attention_bwd.lower}

    def entry_symbol(self, kernel: str) -> str:
        return entry.entry_symbol(kernel)
