"""The CPU target's options."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...options import HashedOptions
from . import target

MAX_WARP = 64


def _host_caches() -> tuple[tuple[int, int], ...]:
    return tuple(sorted(target.cache_sizes().items()))


@dataclass(frozen=True)
class CPUOptions(HashedOptions):
    cpu: str = "native"       # an LLVM CPU name, "native" for the build machine, "generic" for any
    opt_level: int = 3
    warp_size: int = 32
    bounds_checks: bool = True  # check the accesses simt_to_warps cannot prove in bounds
    # the strict numerics profile: f32 math in f64 rounded once (passes/strict_math.py), GEMMs as the SPIR-V
    # backend's one-product-one-sum kernel instead of the blocked FMA one (backend.py `lowerings`)
    exact_math: bool = False
    # What the GEMM cost model fits schedules to: the runtime's worker threads (TESSERA_NUM_THREADS, else
    # one per CPU) and the data caches, (level, bytes), of the machine we run on. The environment is read
    # here only, once per options: the schedule, and so the code, is part of the options' hash.
    threads: int = field(default_factory=target.worker_threads)
    cache_sizes: tuple[tuple[int, int], ...] = field(default_factory=_host_caches)
    # The int8 GEMM's path (gemm_i8.py): TESSERA_CPU_INT8_GEMM pins one, as tests do to run each here.
    int8_gemm: str = field(default_factory=target.int8_gemm_path)
    # The bf16 GEMM's path (gemm_bf16.py): TESSERA_CPU_BF16_GEMM pins one likewise.
    bf16_gemm: str = field(default_factory=target.bf16_gemm_path)

    def __post_init__(self):
        target.check_cpu(self.cpu)
        # warps run as vectors of this many lanes, and shuffles pair lanes by xor
        if type(self.warp_size) is not int or not 1 <= self.warp_size <= MAX_WARP or \
                self.warp_size & (self.warp_size - 1):
            raise ValueError(f"the cpu target's warp_size must be a power of two from 1 to {MAX_WARP}, "
                             f"not {self.warp_size!r}")
