"""The PTX target's options and the architectures they may name."""

from __future__ import annotations

from dataclasses import dataclass

from ...options import HashedOptions

# Architectures we emit for, with the PTX ISA version each needs. PTX is forward compatible: code for
# sm_80 runs on every later GPU (the driver compiles it for the device); an `a` architecture (sm_90a) runs
# only on that exact compute capability, in exchange for its own instructions (wgmma, setmaxnreg).
ARCHS = {"sm_70": "ptx80", "sm_75": "ptx80", "sm_80": "ptx80", "sm_86": "ptx80", "sm_87": "ptx80",
         "sm_89": "ptx80", "sm_90": "ptx80", "sm_90a": "ptx80", "sm_100": "ptx86", "sm_100a": "ptx86",
         "sm_120": "ptx87", "sm_120a": "ptx87"}
WARP_SIZE = 32
# Benchmarks' overrides of the sm_90a kernels' tuned settings, read from the environment at compile time
# (attention_sm90.ENV, attention_fp8_sm90.ENV, gemm_lowering.CLUSTER_ENV, FP8_BN_ENV, FP8_PROMOTE_ENV and
# GROUP_M_ENV): their values are PTXOptions.overrides, so that an image built under one is never served from the
# compile cache to a compile without it, or the reverse (tests/unit/test_ptx_overrides_cache.py finds every such
# variable the backend reads)
OVERRIDE_ENVS = ("TESSERA_SM90_ATTENTION", "TESSERA_SM90_ATTENTION_FP8", "TESSERA_SM90_GEMM_CLUSTER",
                 "TESSERA_SM90_GEMM_FP8_BN", "TESSERA_SM90_GEMM_FP8_PROMOTE", "TESSERA_SM90_GEMM_GROUP_M")


def sm(arch: str) -> int:
    """The compute capability of an architecture name, as a number: sm_90a -> 90."""
    return int(arch[3:].rstrip("a"))


@dataclass(frozen=True)
class PTXOptions(HashedOptions):
    arch: str = "sm_80"
    opt_level: int = 3
    bounds_checks: bool = False  # guard the accesses not proven in bounds (passes/gpu_bounds_checks.py)
    # whether the sm_90a attention backward adds dQ inside its dK/dV kernel by f32 bulk reductions (whose order
    # varies from run to run): "never" (the "deterministic" and "strict" numerics profiles (strict decomposes
    # attention: backend.py),
    # TESSERA_ATTENTION_FUSED_DQ=0), "faster" (the "fast" profile's default: at the head dimensions where that
    # measured faster than dQ in a kernel of its own, attention_bwd_sm90.FUSED_DQ_HEAD_DIMS;
    # docs/performance.md) or "always" (TESSERA_ATTENTION_FUSED_DQ=1)
    fused_dq: str = "never"
    exact_math: bool = False   # the strict numerics profile: exp, erf … in f64, rounded once (passes/strict_math.py)
    # f32 GEMMs on FMA units ("ieee") or tf32 tensor cores ("tf32"): CompileOptions.input_precision
    input_precision: str = "ieee"
    # flash_attention on sm_80 … sm_90 as attention_sm80.py's mma.sync kernel rather than two GEMMs and a
    # softmax; TESSERA_ATTENTION_SM80=0 turns it off (docs/nvidia.md)
    attention_sm80: bool = True
    overrides: tuple = ()   # (name, value) of each OVERRIDE_ENVS variable set and not empty

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"unknown NVIDIA architecture '{self.arch}' (known: {', '.join(ARCHS)})")
