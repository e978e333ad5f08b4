"""The PTX target as the driver sees it: its options, its facts, and where its stages and lowerings are.

Nothing here loads MLIR or LLVM, so a cache hit in a fresh process can hash the backend without them; the
stages (compiler.py) and lowerings load when a compilation needs them.
"""

from __future__ import annotations

import dataclasses
import functools
import os

from ...options import CompileOptions
from ...numerics import matrix_units, profiles
from ...targets import TargetFacts
from ..contract import Backend
from ..symbol_names import ptx_identifier
from . import ptxas
from .options import OVERRIDE_ENVS, WARP_SIZE, PTXOptions, sm

# Shared memory one block may use (opted in beyond 48 KiB), by compute capability (CUDA's tables).
SHARED_MEMORY = {70: 96 << 10, 75: 64 << 10, 80: 163 << 10, 86: 99 << 10, 87: 163 << 10, 89: 99 << 10,
                 90: 227 << 10, 100: 227 << 10, 120: 99 << 10}

class PTXBackend(Backend):
    name = "ptx"
    Options = PTXOptions
    code_section = ".tessera.code.ptx"
    arch_prefixes = ("sm_",)
    stages = (("gpu", "make_gpu"), ("nvvm", "make_nvvm"), ("llir", "make_llir"), ("ptx", "make_ptx"))

    @classmethod
    def option_values(cls, options: CompileOptions, arch: str | None) -> dict:
        if options.warp_size != WARP_SIZE:
            raise ValueError(f"the ptx target has warps of {WARP_SIZE} lanes, not {options.warp_size}")
        return {"arch": arch or "sm_80", "opt_level": options.opt_level, "bounds_checks": options.gpu_bounds_checks,
                "exact_math": options.numerics == "strict", "input_precision": options.input_precision,
                "fused_dq": "never" if profiles.deterministic(options.numerics) else
                {"0": "never", "1": "always"}.get(os.environ.get("TESSERA_ATTENTION_FUSED_DQ", ""), "faster"),
                "attention_sm80": os.environ.get("TESSERA_ATTENTION_SM80", "") != "0",
                "overrides": tuple((name, os.environ[name]) for name in OVERRIDE_ENVS if os.environ.get(name))}

    def tool_versions(self) -> tuple[str, ...]:
        # ptxas's report (registers, shared memory, spills) is part of each kernel's record
        return (ptxas.version(),)

    def target_facts(self) -> TargetFacts:
        from . import gemm_lowering  # lazy: the cost models build MLIR
        # 128 bits: one 16-byte access per thread; the SM count (132 on an H100 SXM) is a placeholder, as
        # the compiler does not know the device. sm_80 and later compute in bf16 and f16 (tensor cores, cvt).
        arch = self.options.arch
        native = {"f32", "f64"} | ({"f16", "bf16"} if sm(arch) >= 80 else set())
        schedule = gemm_lowering.matmul_schedule if arch == "sm_90a" else \
            functools.partial(gemm_lowering.matmul_schedule_sm80, arch)
        # sm_90a has flash attention's backward kernels (attention_bwd_sm90.py) for bf16 and f16; sm_90a's forward
        # is attention_sm90.py (wgmma), sm_80 … sm_90's attention_sm80.py (mma.sync) unless PTXOptions.attention_sm80
        # is off, both bf16/f16 by 64 and 128
        fused_forward = arch == "sm_90a" or (self.options.attention_sm80 and arch in _attention_sm80_archs())
        facts = TargetFacts("ptx", 128, WARP_SIZE, frozenset(native), 132,
                            matrix_units=frozenset(matrix_units.tensorcore_dtypes(arch)),
                            shared_memory=SHARED_MEMORY[sm(arch)], matmul_schedule=schedule,
                            fused_attention_backward=frozenset({"bf16", "f16"}) if arch == "sm_90a" else frozenset(),
                            attention_delta=frozenset({"bf16", "f16"}) if arch == "sm_90a" else frozenset(),
                            # the fp8 forward (attention_fp8_sm90.py) writes bf16
                            fused_attention_fp8=frozenset({"bf16"}) if arch == "sm_90a" else frozenset(),
                            gemm_transposes=frozenset(gemm_lowering.GEMM_TRANSPOSES if arch == "sm_90a" else ()),
                            # wgmma's s8 kind (gemm_sm90.py); other architectures the SIMT GEMM's (simt_gemm.py)
                            integer_matmul=frozenset({"i8"}),
                            # no fused attention kernel elsewhere (before sm_80, sm_100 …): GEMMs and a softmax
                            # (recorded as a fallback); the fused kernels take these, the rest falls back too (and,
                            # before sm_90a, the backward)
                            decompose_attention=not fused_forward,
                            attention_kernels=frozenset((dt, d) for dt in ("bf16", "f16") for d in ("64", "128"))
                            if fused_forward else frozenset(),
                            # the fused forwards read and write [..., S, H, D] in place (no head copies): sm_90a's
                            # through 4-D TMA maps, sm_80's cp.async rows at their strides
                            attention_seq_heads=frozenset({"bf16", "f16"}) if fused_forward else frozenset(),
                            # sm_90a's takes its keys per block and stages from the schedule (autotuning)
                            attention_blocking=arch == "sm_90a",
                            # wgmma's fp8 kinds fed from one-byte tensors, the two scales and a cast to a 16-bit
                            # result in its epilogue (gemm_lowering.py)
                            scaled_fp8_gemm=arch == "sm_90a",
                            gemm_epilogue=frozenset({"scale_by", "scale_by2", "cast"}) if arch == "sm_90a" else frozenset())
        if self.options.exact_math:
            # strict: the SIMT GEMM (backends/simt_gemm.py, as the CPU's), k ascending with one product and one sum
            # per step, so ptx, the CPU and SPIR-V agree bit for bit (the tensor cores' products and sums round
            # otherwise); attention decomposed into GEMMs and a softmax (the fused kernels' exp is ex2.approx)
            return dataclasses.replace(facts, matmul_schedule=None, gemm_transposes=frozenset(),
                                       gemm_epilogue=frozenset(), fused_attention_backward=frozenset(),
                                       attention_delta=frozenset(), fused_attention_fp8=frozenset(),
                                       attention_seq_heads=frozenset(), decompose_attention=True)
        return facts

    def lowerings(self) -> dict:
        from . import gemm_lowering  # lazy: they build MLIR
        from .. import simt_gemm  # lazy: it builds MLIR
        gemm = functools.partial(gemm_lowering.lower, self.options.arch, precision=self.options.input_precision)
        if self.options.arch != "sm_90a":   # no s8 wgmma: integer GEMMs as the SIMT kernel, exact in i32
            gemm = simt_gemm.taking(simt_gemm.INTEGERS, gemm)
        if self.options.exact_math:   # float GEMMs as the SIMT kernel (target_facts), int8 ones as above
            return {"gemm": simt_gemm.strict(gemm)}
        return {"gemm": gemm,
                "attention": functools.partial(_attention, "lower", self.options.arch),
                "attention_fp8": functools.partial(_attention, "lower_fp8"),
                "attention_bwd": functools.partial(_attention, "lower_bwd", self.options.fused_dq)}

    def entry_symbol(self, kernel: str) -> str:
        # the PTX .entry has the kernel's own name, as profilers then show it, unless PTX cannot spell it
        return ptx_identifier(kernel)


def _attention(name: str, *args, **kwargs):
    """attention_lowering's `name`, called: its kernel generators (some 130 KB of source) are imported by the
    first compilation with an attention group, not by every one."""
    from . import attention_lowering  # lazy: the attention kernels' generators, for attention groups only
    return getattr(attention_lowering, name)(*args, **kwargs)


def _attention_sm80_archs() -> tuple:
    from . import attention_sm80  # lazy: the mma.sync attention generator (and what it imports), off sm_90a only
    return attention_sm80.ARCHS
