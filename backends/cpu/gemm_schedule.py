"""The CPU GEMM's cost model: how a kernel (gemm.py) is blocked for a problem and a target.

The register tile fits the vector ISA (`vector_isa`): AVX2 holds 6×16 f32 in 12 ymm accumulators plus two B
vectors and a broadcast A value (15 of 16 registers); AVX-512 14×32 in 28 of 32 zmm; NEON 8×12 in 24 of 32 q
registers. The cache blocks fit the target's data caches and the tiling of C into blocks the worker threads
that run them (`choose_schedule`): both are target facts (tessera/targets.py), which the CPU backend's
options decide (and hash); the compiler reads no environment for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...targets import TargetFacts
from .target import HostTarget

K_UNROLL = 4   # the cost model's micro-kernel iterations per loop trip


@dataclass(frozen=True)
class Schedule:
    """How one kernel is blocked: the MB×NC tile of C per block, cache blocks MC×KC (A) and KC×NC (B), and
    the MR×NR register micro-tile."""

    mb: int              # rows of C per block (a multiple of mr); the block's A blocks share one packed B panel
    nc: int              # columns of C per block (a multiple of nr); the packed B panel KC×NC stays in L3
    mc: int              # rows per packed A block (a multiple of mr); MC×KC stays in L2
    kc: int              # K per packed chunk; the B micro-panel KC×NR stays in L1 (AVX-512: in L2)
    mr: int              # micro-tile rows: one broadcast A value each
    nr: int              # micro-tile columns: nr / vector_width vectors
    vector_width: int    # f32 lanes per vector register
    fma: bool = True     # the target has fused multiply-add (else multiply then add)
    k_unroll: int = K_UNROLL   # micro-kernel iterations per loop trip
    stages: int = 1      # packed B panels in rotation (2: the next chunk's is packed during this one's compute)

    def __post_init__(self):
        for name in ("mb", "nc", "mc", "kc", "mr", "nr", "vector_width", "k_unroll", "stages"):
            if getattr(self, name) < 1:
                raise ValueError(f"schedule: {name} must be positive, got {getattr(self, name)}")
        if self.nr % self.vector_width:
            raise ValueError(f"schedule: nr={self.nr} must be a multiple of vector_width={self.vector_width}")
        for name, step in (("mb", "mr"), ("mc", "mr"), ("nc", "nr")):
            if getattr(self, name) % getattr(self, step):
                raise ValueError(f"schedule: {name}={getattr(self, name)} must be a multiple of "
                                 f"{step}={getattr(self, step)}")


@dataclass(frozen=True)
class RegisterTile:
    vector_width: int    # f32 lanes
    mr: int
    nr: int
    fma: bool
    # The share of L1 the B micro-panel (KC×NR) may take, which bounds KC. Where one micro-kernel step is
    # long enough that the panel streams from L2 unnoticed (AVX-512: 28 FMAs, 14 cycles, for 128 bytes of B)
    # it may exceed L1: fewer K chunks, fewer passes adding partial sums into C (see choose_schedule).
    l1_share: float = 2 / 3


def vector_isa(target: HostTarget) -> RegisterTile:
    """The register tile for `target`'s vector unit (see the module docstring for the register budgets),
    from its LLVM feature string. A CPU named without one (`--cpu x86-64-v3`) gets the SSE tile, which
    every x86-64 runs: give choose_schedule a HostTarget with features to tune for a named CPU."""
    feats = set(f[1:] for f in target.features.split(",") if f.startswith("+"))
    if target.arch == "aarch64":
        return RegisterTile(4, 8, 12, True)
    if "avx512f" in feats:
        return RegisterTile(16, 14, 32, True, l1_share=8 / 3)
    if "avx2" in feats or "avx" in feats:
        return RegisterTile(8, 6, 16, "fma" in feats)
    # SSE: 16 xmm registers hold 6×8 (12 accumulators) as on AVX2, with half the lanes.
    return RegisterTile(4, 6, 8, False)


def choose_schedule(M: int, N: int, K: int, target: HostTarget, threads: int, caches: dict[int, int]) -> Schedule:
    """A schedule for an M×N×K product on `target`'s register tile: cache blocks from the data cache sizes
    (`caches`: level -> bytes), then the tiling of C into blocks that minimizes the modelled time on `threads`
    workers, which take blocks in turn."""
    isa = vector_isa(target)
    f32 = 4
    unroll = K_UNROLL
    # KC: the B micro-panel (KC×NR) takes the tile's share of L1 (two thirds, leaving room for the A strip
    # and C tile lines; AVX-512: 8/3, streaming from L2). Fewer K chunks mean fewer passes adding partial
    # sums into C and fewer tile starts: on a 48 KiB-L1 Xeon (AVX-512) KC 256 (2/3) ran 2-10% faster than 172
    # (1/2) at 512×2048×512, plain and transposed; on a Zen 5 EPYC (48 KiB L1, 1 MiB L2) KC 1024 (8/3) ran
    # 5-10% cheaper in CPU time than 256 and ~5% than 512 at 1024³ and 2048³; on Zen 3 (32 KiB, AVX2) 256
    # (1/2), 384 and 512 had measured the same (docs/performance.md).
    kc_max = max(unroll, int(caches[1] * isa.l1_share) // (isa.nr * f32) // unroll * unroll)
    chunks = max(1, ceil_div(K, kc_max))
    kc = max(unroll, round_up(ceil_div(max(K, 1), chunks), unroll))
    # MC: the packed A block (MC×KC) takes a third of L2, which also holds the B micro-panels and C tiles
    # streaming through (on Zen 3 at 2048^3 a half-L2 block ran 15% slower); NC: the B panel (KC×NC) a
    # quarter of L3.
    mc_max = max(isa.mr, caches[2] // 3 // (kc * f32) // isa.mr * isa.mr)
    nc_max = max(isa.nr, caches.get(3, caches[2]) // 4 // (kc * f32) // isa.nr * isa.nr)

    def tiles(extent, most, step):
        # Tile counts from the fewest that respect `most` up to a few more, for parallelism.
        least = max(1, ceil_div(extent, most))
        return range(least, min(least + 4 * threads, max(1, ceil_div(extent, step))) + 1)

    def balanced(extent, count, step):
        return round_up(ceil_div(max(extent, 1), count), step)

    best = None
    for tm in tiles(M, M, isa.mr):
        mb = balanced(M, tm, isa.mr)
        mc = balanced(mb, ceil_div(mb, mc_max), isa.mr)
        for tn in tiles(N, nc_max, isa.nr):
            nc = balanced(N, tn, isa.nr)
            # Cycles per block: its FMAs at two per cycle; packing its B panel and its A blocks, about 2.5
            # cycles per element either way (measured on Zen 3 at 2048^3: cache misses dominate); a fixed
            # cost to start. Blocks run in waves over the threads; blocks are not equally fast on a shared
            # machine, so at the end the other threads wait on average half a block for the last one.
            block = mb * nc * K / isa.vector_width / 2 + 2.5 * (nc + mb) * K + 2000
            if isa.vector_width >= 16:
                # The packed B panel (KC×NC, beyond L2 here) is read from L3 again by each A block: ~32 bytes
                # a cycle. Between grids of equal packing (1036×512 and 518×1024 at 1024³ on two threads)
                # the one with the smaller panel measured 2-3% less CPU time on a Zen 5 EPYC.
                block += 0.125 * ceil_div(mb, mc) * nc * K
            cost = (ceil_div(tm * tn, threads) + tail_wait(tm * tn, threads, isa)) * block
            if best is None or cost < best[0]:
                best = (cost, mb, nc, mc)
    _, mb, nc, mc = best
    # One B panel: packing the next one during the micro-kernels (stages=2) measured no faster on Zen 3 —
    # packing streams B at the core's memory bandwidth either way (docs/performance.md) — so the model
    # leaves multi-buffering to programs that ask for it (hints, a tile program's shared buffers).
    return Schedule(mb=mb, nc=nc, mc=mc, kc=kc, mr=isa.mr, nr=isa.nr, vector_width=isa.vector_width,
                    fma=isa.fma, k_unroll=unroll)


def tail_wait(blocks: int, threads: int, isa: RegisterTile) -> float:
    """The blocks' time the other threads wait on average for the last one, on a machine others share:
    half a block where blocks are taken in turn. With the 16-lane tile (AVX-512) a grid of at most one block
    per thread is charged none: there each thread packs its block's A and B once, where a finer grid packs
    every A row and B column again in each block of its row and column of blocks, and on a 2-core Zen 5 EPYC
    one block per thread took 3-4% less CPU time and no more wall time than the finer grids the half-block
    term had chosen (1036×512 against 2×2 at 1024³, 2058×1024 against 3×2 at 2048³; docs/performance.md,
    session 31). The other tiles keep the term everywhere (not measured)."""
    if isa.vector_width >= 16 and blocks <= threads:
        return 0.0
    return 0.5 * (threads - 1) / threads


@dataclass(frozen=True)
class CostModel:
    """`choose_schedule` for one target: the CPU whose register tile the kernels use, and the worker threads
    and data caches of the target facts."""

    target: HostTarget
    threads: int
    caches: tuple[tuple[int, int], ...]   # (level, bytes), as TargetFacts.cache_sizes

    @classmethod
    def of(cls, facts: TargetFacts, target: HostTarget) -> "CostModel":
        return cls(target, facts.cores, facts.cache_sizes)

    def choose(self, M: int, N: int, K: int) -> Schedule:
        return choose_schedule(M, N, K, self.target, self.threads, dict(self.caches))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b
