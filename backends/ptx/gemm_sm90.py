"""Hopper GEMM: C[M,N] = epilogue(A[M,K] · B[K,N]) on sm_90a tensor cores, warp-specialized.

One CTA computes a BM×BN tile of C with three roles, the structure of CUTLASS's and Triton's Hopper kernels:

    warpgroup 0     the producer: one thread issues TMA bulk-tensor copies of the A and B tiles of each
                    K step into a ring of `stages` shared-memory buffers (128-byte swizzled, which is the
                    layout wgmma reads without bank conflicts), each completing on a `full` mbarrier; it
                    gives its registers away (setmaxnreg.dec)
    warpgroups 1…C  the consumers: each owns 64 rows of the tile, waits for a stage to be full, issues
                    wgmma.mma_async m64nBNk16 from shared memory into its fp32 accumulators (BN/2 registers
                    a thread), keeps one group of wgmmas in flight and frees the stage before it on an
                    `empty` mbarrier; then applies the epilogue and stores its rows of C

A is row-major [M,K] (K-major for wgmma); B row-major [K,N], which wgmma reads as its transposed (MN-major)
form, so neither operand is copied or transposed. A 16-bit operand stored transposed (`trans_a`: Aᵀ as
[K,M]; `trans_b`: Bᵀ as [N,K]; the Graph IR's `tessera.transpose_a/_b`) is loaded as stored and read in the
other major order: Aᵀ in 64-column boxes MN-major (wgmma's transpose-A bit), as B is; Bᵀ in one box of
K-rows K-major, as A is. fp8 operands (e4m3, e5m2, mixed as wgmma allows) are the
exception: wgmma reads 8-bit types K-major only, so the fp8 kernel takes B transposed, [N,K] row-major
(gemm_lowering.py packs it so), and multiplies k32 slices of 128-element (128-byte) K steps. int8 operands
(`dtype` "i8") take the same path with wgmma's s8 kind: A [M,K] read as stored (K-major already), B packed
to [N,K] as fp8's is, the products summed exactly in s32 accumulators (no fp32 promotion is needed) and
written as i32 by plain stores, with no epilogue. The TMA tensor maps come in as `__grid_constant__`
parameters: the runtime encodes them at launch from the A and B arguments (`tensor_maps` below, recorded as
the kernel's `ptx.tensor_maps` property). Out-of-range rows and columns of a tile are filled with zeros by
TMA, and stores are predicated, so M, N and K need not be multiples of the tile: TMA needs only rows whose
byte length is a multiple of 16 (K and N multiples of 8 in 16-bit types), which the runtime checks.

Tiles are visited in groups of `group_m` rows of tiles, so that consecutive CTAs share B columns in L2.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..symbol_names import llvm_global
from . import ampere
from . import gemm_common as gc
from . import hopper as hp
from .nvvm_text import Writer, module

ROW = 128                # bytes of a K step: one 128-byte swizzle row (64 16-bit or 128 fp8 elements)
_ELEM = {"bf16": "bf16", "f16": "f16", "i8": "s8", "tf32": "tf32", **hp.FP8}   # wgmma's operand type names
TRANSPOSABLE = ("bf16", "f16")   # operand dtypes whose kernel reads a stored Aᵀ or Bᵀ (wgmma's transpose bits)
FP8_BN, FP8_STAGES = 128, 6   # two sets of BN/2 accumulators a thread: the fp32 sum, the step's product
# fp8 tiles 256 wide promote by halves of N: BN/2 fp32 sums a thread and one product of 64 registers, which
# each K step fills twice (columns 0-127, then 128-255, each an m64n128 group added to its half of the sums)
FP8_WIDE_BN, FP8_WIDE_STAGES = 256, 4


class PersistentTile:
    """What the specs of the warp-specialized kernels (this one, gemm_sm90_tf32's) derive alike from their tile
    of bm x bn and their consumers: the kernels share generate's skeleton, so its producer warpgroup, its grid
    and sm_90's limit on shared memory hold for both."""

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        return (-(-m // self.bm) * -(-n // self.bn), 1, 1)

    def check_smem(self) -> None:
        if self.smem_bytes > 227 * 1024:
            raise ValueError(f"{self.stages} stages of a {self.bm}x{self.bn} tile need {self.smem_bytes} bytes "
                             "of shared memory; sm_90 has 227 KiB a block")


@dataclass(frozen=True)
class Sm90GemmSpec(PersistentTile):
    name: str
    dtype: str = "bf16"           # A (and B unless b_dtype says otherwise: the fp8 kinds mix)
    out_dtype: str = "bf16"       # C; accumulation is fp32 (s32 and an i32 C for i8 operands)
    bn: int = 256
    consumers: int = 2            # BM = 64 · consumers
    stages: int = 4
    group_m: int = 8              # tile rows visited before moving right (L2 reuse of B's columns)
    epilogue: tuple = ()
    bias_dtype: str = "f32"       # of the bias and residual operands, widened to fp32 as they are read
    residual_dtype: str = "f32"
    b_dtype: str = ""             # B's, when it differs from A's
    trans_a: bool = False         # A stored as Aᵀ [K,M] (16-bit operands)
    trans_b: bool = False         # B stored as Bᵀ [N,K] (16-bit operands)
    cluster_m: int = 1            # 2: clusters of two CTAs on vertically adjacent tiles, B multicast to both
    a_regs: bool = False          # fp8 tiles 256 wide: A read into registers once a K step (ldmatrix), both
    # halves' wgmmas taking it from there (wgmma's RS form) rather than from shared memory each
    promote: int = 1              # fp8: K steps (128 elements each) summed in the wgmma product before it is
    # added to the fp32 sums (2: 256 elements of K in the tensor cores' own precision, half the adds)

    def __post_init__(self):
        b = self.b_dtype or self.dtype
        if self.dtype not in _ELEM or (b != self.dtype and not (self.fp8 and b in hp.FP8)):
            raise ValueError(f"the sm_90a GEMM takes bf16, f16 or fp8 operands (fp8 kinds may mix), or i8 or tf32 "
                             f"ones, not {self.dtype} @ {b}")
        if self.int8:
            if self.out_dtype != "i32" or self.epilogue:
                raise ValueError(f"the sm_90a int8 GEMM returns the i32 product alone, not {self.out_dtype} "
                                 f"with epilogue {self.epilogue}")
        else:
            gc.check("sm_90a", self)
        if self.k_major_only and (self.trans_a or self.trans_b):
            raise ValueError("the 8-bit and tf32 GEMMs read their operands as A [M,K] and B [N,K] only, not "
                             "transposed ones")
        if self.bn not in (64, 128, 192, 256) or self.consumers not in (1, 2) or not 2 <= self.stages <= 8:
            raise ValueError(f"unsupported sm_90a GEMM tile: BN={self.bn}, consumers={self.consumers}, "
                             f"stages={self.stages}")
        if self.bn == 192 and self.dtype not in TRANSPOSABLE:
            raise ValueError(f"the sm_90a GEMM's 192-wide tiles take bf16 or f16 operands, not {self.dtype}")
        if self.fp8 and FP8_BN < self.bn != FP8_WIDE_BN:
            raise ValueError(f"the fp8 GEMM sums each K step in fp32 beside the step's own accumulators: "
                             f"tiles up to {FP8_BN} wide fit the registers, or {FP8_WIDE_BN} wide promoted by "
                             f"halves of N, not {self.bn}")
        if self.promote not in (1, 2) or (self.promote == 2 and (not self.fp8 or self.a_regs)):
            raise ValueError(f"the fp8 GEMM promotes its product every 1 or 2 K steps (2: shared-memory operands "
                             f"only, not a_regs), not promote={self.promote} for {self.dtype}")
        if self.a_regs and not self.fp8_halves:
            raise ValueError(f"A from registers (a_regs) is the {FP8_WIDE_BN}-wide fp8 GEMM's option only")
        if self.cluster_m not in (1, 2) or (self.cluster_m == 2 and self.dtype not in (*TRANSPOSABLE, *hp.FP8)):
            raise ValueError(f"the sm_90a GEMM's clusters of cluster_m={self.cluster_m} CTAs: 1, or 2 for bf16, f16 "
                             f"or fp8 operands")
        self.check_smem()

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        if self.cluster_m == 1:
            return super().grid(m, n)
        return (2 * -(-m // (2 * self.bm)) * -(-n // self.bn), 1, 1)   # whole clusters, the last pair's
        # second tile past M where the tiles down M are odd

    @property
    def fp8(self) -> bool:
        return self.dtype in hp.FP8

    @property
    def fp8_halves(self) -> bool:
        """An fp8 tile too wide for a second full set of accumulators: each K step's product is computed and
        promoted in two halves of N (m64n128 wgmmas into one product of 64 registers a thread)."""
        return self.fp8 and self.bn > FP8_BN

    @property
    def int8(self) -> bool:
        return self.dtype == "i8"

    @property
    def eight_bit(self) -> bool:
        """One-byte operands: wgmma reads them K-major only, 128 elements a K step."""
        return self.fp8 or self.int8

    @property
    def k_major_only(self) -> bool:
        """Operands wgmma reads K-major only: 8-bit ones and tf32 (f32 words, 32 elements a K step)."""
        return self.eight_bit or self.dtype == "tf32"

    @property
    def acc_type(self) -> str:
        """The accumulators' LLVM type."""
        return "i32" if self.int8 else "float"

    @property
    def b_k_major(self) -> bool:
        """B in shared memory K-major (rows of K, as A is): 8-bit operands (packed [N,K]) and a stored Bᵀ."""
        return self.k_major_only or self.trans_b

    @property
    def bk(self) -> int:
        """Elements of a K step."""
        return ROW if self.eight_bit else ROW // 4 if self.dtype == "tf32" else ROW // 2

    @property
    def bm(self) -> int:
        return 64 * self.consumers

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * ROW

    @property
    def staged_store(self) -> bool:
        """16-bit results leave through shared memory and TMA bulk stores (f32 and i32 ones by plain stores)."""
        return self.out_dtype in ("bf16", "f16")

    @property
    def staging_bytes(self) -> int:
        return self.consumers * 2 * 64 * 64 * 2 if self.staged_store else 0  # two 64x64 boxes a warpgroup

    @property
    def smem_bytes(self) -> int:
        # the stages, the store staging, 16 bytes of mbarriers per stage, and slack to align the base to the
        # 1024-byte swizzle atom
        return self.stages * (self.stage_bytes + 16) + self.staging_bytes + 1024

    @property
    def tensor_maps(self) -> str:
        """For the runtime: `operand:arg:box_inner×box_outer:swizzle` of each TMA map, in parameter order;
        the arg is the launch argument (A is 0, B is 1) whose row-major 2-D extents the map describes. A
        16-bit B is read in 64-column boxes, an fp8 B ([N,K]) or a stored Bᵀ as A is, one box of K-rows a
        tile; a stored Aᵀ [K,M] as a 16-bit B is."""
        a = f"A:0:64x{self.bk}:128" if self.trans_a else f"A:0:{self.bk}x{self.bm}:128"
        b = f"B:1:{self.bk}x{self.bn // self.cluster_m}:128" if self.b_k_major else f"B:1:64x{self.bk}:128"
        return f"{a};{b}" + (";C:2:64x64:128" if self.staged_store else "")


def generate(spec: Sm90GemmSpec, activations: str = "") -> str:
    """The kernel as NVPTX LLVM IR text, with `activations` (the definitions of its epilogue's
    ``@tsr_act_*`` functions; declarations when empty). Parameters: the A and B tensor maps, then the launch
    arguments A, B, C, the epilogue's parameters in step order (alpha, bias, residual), M, K, N (K, M, N where A
    is stored transposed: the dimension arguments come in order of first appearance, tessera/abi.py).

    The kernel is persistent: CTA p computes tiles p, p + grid, p + 2·grid, …, so a grid of one CTA per SM
    lets the producer fill the next tile's stages while the consumers run the previous tile's epilogue (a
    grid of one CTA per tile is as correct). The stage ring and its phases run on across tiles."""
    w = Writer()
    BM, BN = spec.bm, spec.bn
    maps = ["A", "B", "C"] if spec.staged_store else ["A", "B"]
    params = hp.tensor_map_params(maps)
    params += gc.params(spec, spec.trans_a)

    w.label("entry")
    gc.prologue(w, spec)
    g = geometry(w, spec, spec.staging_bytes)

    def loads(sa: str, k0: str, m0: str, n0: str, full: str, tmA: str, tmB: str) -> None:
        if spec.trans_a:   # 64 columns of Aᵀ (M) a box, 64·ROW bytes apart: consumer c's rows are box c
            for j in range(BM // 64):
                hp.tma_load(w, w.v(f"add i32 {sa}, {j * 64 * ROW}"), tmA, [w.v(f"add i32 {m0}, {64 * j}"), k0], full)
        else:
            hp.tma_load(w, sa, tmA, [k0, m0], full)
        if spec.b_k_major and spec.cluster_m == 2:   # half the box of K-rows from each CTA, into both
            for j in range(2):
                hp.tma_load_multicast(w, w.v(f"add i32 {sa}, {(BM + j * BN // 2) * ROW}"), tmB,
                                      [k0, w.v(f"add i32 {n0}, {j * BN // 2}")], full, 3,
                                      w.v(f"icmp eq i32 {g.rank}, {j}"))
        elif spec.b_k_major:
            hp.tma_load(w, w.v(f"add i32 {sa}, {BM * ROW}"), tmB, [k0, n0], full)
        for j in range(0 if spec.b_k_major else BN // 64):
            dst = w.v(f"add i32 {sa}, {BM * ROW + j * 64 * ROW}")
            if spec.cluster_m == 2:   # box j from the CTA of rank j % 2, into both CTAs' stage
                hp.tma_load_multicast(w, dst, tmB, [w.v(f"add i32 {n0}, {64 * j}"), k0], full, 3,
                                      w.v(f"icmp eq i32 {g.rank}, {j % 2}"))
                continue
            hp.tma_load(w, dst, tmB, [w.v(f"add i32 {n0}, {64 * j}"), k0], full)

    pklatch = producer(w, spec, g, loads)

    # -- consumers: each warpgroup multiplies its 64 rows of every tile --------------------------------
    c, t, leader = consumer_start(w, g)
    a_off = w.v(f"mul i32 {c}, {64 * ROW}")

    def epilogue(acc: list[str], m0: str, n0: str) -> None:
        mine = w.v(f"add i32 {g.staging}, {w.v(f'mul i32 {c}, {spec.staging_bytes // spec.consumers}')}") \
            if spec.staged_store else None
        _epilogue(w, spec, acc, c, t, m0, n0, g.m32, g.n32, mine)

    ctnext = consumer_tiles(w, spec, g, lambda cit: _k_loop(w, spec, g.kt_n, cit, g.bars, g.base, a_off, leader, t),
                            epilogue, spec.acc_type)
    if spec.staged_store:  # the bulk stores read shared memory until they complete
        w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.wait_group 0; }", "r",
              [("i32", w.v(f"zext i1 {leader} to i32"))])
    return kernel(w, spec, params, activations, pklatch, ctnext)


@dataclass(frozen=True)
class Geometry:
    """The entry block's values that both roles of a persistent, warp-specialized GEMM kernel read."""
    tid: str
    pid: str
    grid: str
    base: str             # the stage ring, in shared memory
    staging: str | None   # the store staging region, after the ring
    bars: str             # full[s] at bars + 8s, empty[s] at bars + 8(S + s)
    m32: str
    n32: str
    kt_n: str             # K steps a tile
    tiles: str
    dims: tuple[str, str]  # tiles down M, across N
    wg: str               # the thread's warpgroup: 0 produces, the others consume
    rank: str | None = None   # the CTA's rank in its cluster of two (cluster_m 2; pid, grid, tiles and dims
    # then count pairs of tiles, down M by pairs of tile rows)


def geometry(w: Writer, spec, staging_bytes: int | None = None) -> Geometry:
    """Shared memory is the stage ring, then `staging_bytes` of store staging (None: no staging region; the
    kernels with one take its address even where it is empty, so their text stays as it was), then the
    mbarriers; thread 0 initializes those, and the warpgroups part into their roles."""
    S = spec.stages
    tid = w.sreg("tid.x")
    pid = w.sreg("ctaid.x")
    grid = w.sreg("nctaid.x")
    cluster = getattr(spec, "cluster_m", 1)
    rank = None
    if cluster == 2:   # clusters are CTAs 2p and 2p + 1: both walk pair p's tiles, in lockstep
        rank = w.v(f"and i32 {pid}, 1")
        pid = w.v(f"lshr i32 {pid}, 1")
        grid = w.v(f"lshr i32 {grid}, 1")
    base = hp.smem_base(w)
    staging = w.v(f"add i32 {base}, {S * spec.stage_bytes}") if staging_bytes is not None else None
    bars = w.v(f"add i32 {staging}, {staging_bytes}") if staging is not None \
        else w.v(f"add i32 {base}, {S * spec.stage_bytes}")
    m32, n32, _, kt_n, num_m, num_n = gc.extents(w, spec)
    if cluster == 2:
        num_m = w.v(f"lshr i32 {w.v(f'add i32 {num_m}, 1')}, 1")
    tiles = w.v(f"mul i32 {num_m}, {num_n}")
    # a stage is empty once every consumer of the cluster has read it (each CTA's B came from both)
    _, wg = hp.split_roles(w, tid, [(w.v(f"add i32 {bars}, {8 * s}"), 1) for s in range(S)]
                           + [(w.v(f"add i32 {bars}, {8 * (S + s)}"), spec.consumers * cluster) for s in range(S)])
    return Geometry(tid, pid, grid, base, staging, bars, m32, n32, kt_n, tiles, (num_m, num_n), wg, rank)


def producer(w: Writer, spec, g: Geometry, loads) -> str:
    """The producer warpgroup: one thread fills the stages, tile after tile, each K step's copies issued by
    `loads(stage address, k0, m0, n0, full mbarrier, A's map, B's map)` once the consumers have freed the
    stage. The other threads leave at once, their registers given to the consumers. Returns the K loop's latch
    block (PKLATCH in the text until `kernel`)."""
    S, stage = spec.stages, spec.stage_bytes
    w.label("producer")
    if g.rank is not None:
        hp.cluster_sync(w)
    w.asm("setmaxnreg.dec.sync.aligned.u32 40;")
    issues = w.v(f"icmp eq i32 {g.tid}, 0")
    tmA = w.v("ptrtoint ptr %tmA to i64")
    tmB = w.v("ptrtoint ptr %tmB to i64")
    # In a cluster the idle threads leave at once rather than waiting at the exit's cluster barrier (which
    # counts only threads that have not exited): lanes 1-31 parked there would share warp 0 with the issuing
    # thread for the whole kernel.
    w.cbr(issues, "ptile", "exit" if g.rank is None else "pidle")
    if g.rank is not None:
        w.label("pidle")
        w.emit("ret void")
    tile, it, tile_next, it_out, m0, n0 = _tile_loop(w, spec, "p", "producer", "exit", g.pid, g.tiles, g.dims,
                                                     g.rank)
    w.cbr(w.v(f"icmp ugt i32 {g.kt_n}, 0"), "pk", "ptnext")
    w.label("pk")
    kt, kt_next = w.fresh("kt"), w.fresh("ktn")
    w.emit(f"{kt} = phi i32 [0, %ptile_go], [{kt_next}, %PKLATCH]")
    s, ph, full = _stage(w, spec, g.bars, w.v(f"add i32 {it}, {kt}"))
    hp.mbar_wait(w, w.v(f"add i32 {full}, {8 * S}"), w.v(f"xor i32 {ph}, 1"))  # its empty barrier
    hp.mbar_expect(w, full, stage)
    sa = w.v(f"mul i32 {s}, {stage}")
    sa = w.v(f"add i32 {g.base}, {sa}")
    k0 = w.v(f"mul i32 {kt}, {spec.bk}")
    loads(sa, k0, m0, n0, full, tmA, tmB)
    w.emit(f"{kt_next} = add i32 {kt}, 1")
    more = w.v(f"icmp ult i32 {kt_next}, {g.kt_n}")
    pklatch = w.current
    w.cbr(more, "pk", "ptnext")
    w.label("ptnext")
    w.emit(f"{it_out} = add i32 {it}, {g.kt_n}")
    w.emit(f"{tile_next} = add i32 {tile}, {g.grid}")
    w.br("ptile")
    return pklatch


def consumer_start(w: Writer, g: Geometry) -> tuple[str, str, str]:
    """Enters the consumer role, taking the registers the producer gave: (its consumer index c, the thread t
    within the warpgroup, t == 0)."""
    w.label("consumer")
    if g.rank is not None:
        hp.cluster_sync(w)
    w.asm("setmaxnreg.inc.sync.aligned.u32 232;")
    c = w.v(f"sub i32 {g.wg}, 1")
    t = w.v(f"and i32 {g.tid}, 127")
    return c, t, w.v(f"icmp eq i32 {t}, 0")


def consumer_tiles(w: Writer, spec, g: Geometry, k_loop, epilogue, acc_type: str = "float") -> str:
    """A consumer's loop over its tiles, ending in block `cfinish`: `k_loop(steps before the tile)` emits the
    tile's K steps (blocks `ck`, entered from `ctile_go`, to `ckdone`) and returns the accumulators;
    `epilogue(acc, m0, n0)` writes the tile (zeros where K is 0). Returns the loop's latch block (CTNEXT in
    the text until `kernel`)."""
    w.br("ctile")
    ctile, cit, ctile_next, cit_out, m0, n0 = _tile_loop(w, spec, "c", "consumer", "cfinish", g.pid, g.tiles,
                                                         g.dims, g.rank)
    w.cbr(w.v(f"icmp ugt i32 {g.kt_n}, 0"), "ck", "cdone")
    acc = k_loop(cit)
    w.br("cdone")
    w.label("cdone")
    zero = "0" if acc_type == "i32" else "0.0"
    fin = [w.v(f"phi {acc_type} [{zero}, %ctile_go], [{o}, %ckdone]", "f") for o in acc]
    epilogue(fin, m0, n0)
    w.emit(f"{cit_out} = add i32 {cit}, {g.kt_n}")
    w.emit(f"{ctile_next} = add i32 {ctile}, {g.grid}")
    ctnext = w.current
    w.br("ctile")
    w.label("cfinish")
    return ctnext


def kernel(w: Writer, spec, params: list[str], activations: str, pklatch: str, ctnext: str) -> str:
    """The module of the kernel `w` holds, its consumers' last block falling through to `exit`. Loop phis
    name their latch blocks before those exist (PTNEXT, PKLATCH, CTNEXT): they are named here."""
    w.br("exit")
    w.label("exit")
    cluster = getattr(spec, "cluster_m", 1) == 2
    if cluster:   # no CTA leaves while its peer may still write into its stages or arrive on its barriers
        hp.cluster_sync(w, aligned=False)
    w.emit("ret void")
    body = "\n".join(w.lines)
    for key, block in (("PTNEXT", "ptnext"), ("PKLATCH", pklatch), ("CTNEXT", ctnext)):
        body = body.replace(f"%{key}]", f"%{block}]")
    text = (f"@tsr_smem = external addrspace(3) global [0 x i8], align 1024\n"
            f"define ptx_kernel void @{llvm_global(spec.name)}({', '.join(params)}) "
            f"\"nvvm.maxntid\"=\"{spec.threads}\" \"nvvm.minctasm\"=\"1\"{hp.CLUSTER_ATTR if cluster else ''} {{\n"
            f"{body}\n}}\n")
    return module(text, gc.declarations(spec, activations))


def _k_step(w: Writer, spec: Sm90GemmSpec, bars: str, base: str, a_off: str, g: str, acc: list[str] | None) -> list[str]:
    """Waits for global K step `g`'s stage and issues its wgmmas (into `acc`, or fresh accumulators when None)
    as one committed group."""
    a_base, b_base = _k_stage(w, spec, bars, base, a_off, g)
    return _k_wgmmas(w, spec, a_base, b_base, acc, spec.bn)


def _k_stage(w: Writer, spec: Sm90GemmSpec, bars: str, base: str, a_off: str, g: str) -> tuple[str, str]:
    """Waits for global K step `g`'s stage: (the consumer's A rows, B) in it."""
    s, ph, full = _stage(w, spec, bars, g)
    hp.mbar_wait(w, full, ph)
    sa = w.v(f"add i32 {base}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
    return w.v(f"add i32 {sa}, {a_off}"), w.v(f"add i32 {sa}, {spec.bm * ROW}")


def _k_wgmmas(w: Writer, spec: Sm90GemmSpec, a_base: str, b_base: str, acc: list[str] | None, n: int,
              group: str = "whole") -> list[str]:
    """A K step's wgmmas of n columns of B from `b_base` (into `acc`, or fresh accumulators when None) as one
    committed group; `group` "open" issues them after a fence without committing, "close" after the open
    step's, with no fence, and commits both as one group (the fp8 kernel's promotion every two steps)."""
    et, bt = _ELEM[spec.dtype], _ELEM[spec.b_dtype or spec.dtype]
    if group != "close":
        hp.fence(w)
    for k in range(ROW // 32):
        # each wgmma takes 32 bytes of K. A: K-major rows of the consumer's 64 (a stored Aᵀ: MN-major, the
        # consumer's box of 64 columns, 16 K-rows a wgmma). B: 16-bit ones MN-major, their 64-column chunks
        # one TMA box (64 rows of 128 bytes) apart; fp8 ones and a stored Bᵀ K-major as A is
        if spec.trans_a:
            da = hp.desc(w, w.v(f"add i32 {a_base}, {16 * hp.SWIZZLE_ROW * k}"), 64 * ROW, hp.ATOM)
        else:
            da = hp.desc(w, w.v(f"add i32 {a_base}, {32 * k}"), 16, hp.ATOM)
        if spec.b_k_major:
            db = hp.desc(w, w.v(f"add i32 {b_base}, {32 * k}"), 16, hp.ATOM)
        else:
            db = hp.desc(w, w.v(f"add i32 {b_base}, {16 * hp.SWIZZLE_ROW * k}"), 64 * ROW, hp.ATOM)
        if acc is None:
            acc = hp.wgmma_ss_first(w, n, et, da, db, 0, bt=bt)
        else:
            acc = hp.wgmma_ss(w, acc, et, da, db, trans_b=0 if spec.b_k_major else 1, bt=bt,
                              trans_a=int(spec.trans_a))
    if group != "open":
        hp.commit(w)
    return acc


def _k_loop(w: Writer, spec: Sm90GemmSpec, kt_n: str, cit: str, bars: str, base: str, a_off: str,
            leader: str, t: str | None = None) -> list[str]:
    """A consumer's K steps of one tile (from block `ck`, entered from `ctile_go`, to block `ckdone`, which
    holds the result). 16-bit and i8 operands: one group of wgmmas in flight, the stage before it freed.

    fp8 operands: Hopper's fp8 wgmma sums its products with fewer bits than fp32 (about 13 of the fraction:
    2e-4 relative errors in one step, measured on an H200; DeepSeek-V3's report saw the same), and so would
    keep summing in its accumulators: each step's product (128 elements of K) starts afresh instead and is
    added to fp32 registers once it completes (CUTLASS's "promotion"), which frees the step's stage at once.
    The wait leaves the tensor cores to the other consumer meanwhile; overlapping two steps' products in
    turn measured no faster, and reading a product while another group is in flight, or moving it through a
    phi, makes ptxas serialize every wgmma (C7514).

    fp8 tiles 256 wide (`fp8_halves`) keep 128 fp32 sums a thread and one product of 64: a K step waits for its
    stage once, then for each half of N issues m64n128 wgmmas into the product (B's rows 128h … 128h + 127,
    K-major, 128·ROW bytes apart), waits for them and adds the product to that half's sums (wgmma's D layout
    puts columns 8j … 8j + 7 at registers 4j … 4j + 3, so half h is registers 64h … 64h + 63); the stage is
    freed after both. With `a_regs` the step's A is read into registers once (16 a thread, _a_fragments) and
    both halves' wgmmas take it from there (wgmma's RS form), B alone from shared memory. With `promote` 2 the
    steps go in pairs, the product summing 256 elements of K before each promotion (_fp8_pairs)."""
    def step(ck: str, g: str, acc_in: list[str]) -> list[str]:
        if spec.fp8_halves:
            a_base, b_base = _k_stage(w, spec, bars, base, a_off, g)
            frags = _a_fragments(w, a_base, t) if spec.a_regs else None
            half = FP8_BN // 2
            acc = []
            for h in range(spec.bn // FP8_BN):
                b_half = w.v(f"add i32 {b_base}, {h * FP8_BN * ROW}") if h else b_base
                if frags is None:
                    product = hp.wait_group(w, _k_wgmmas(w, spec, a_base, b_half, None, FP8_BN), 0)
                else:
                    product = _k_wgmmas_rs(w, spec, frags, b_half)
                acc += [w.v(f"fadd float {a}, {p}") for a, p in zip(acc_in[h * half:(h + 1) * half], product)]
            _release(w, spec, _empty(w, spec, bars, g), leader)
            return acc
        if spec.fp8:
            product = hp.wait_group(w, _k_step(w, spec, bars, base, a_off, g, None), 0)
            acc = [w.v(f"fadd float {a}, {p}") for a, p in zip(acc_in, product)]
            _release(w, spec, _empty(w, spec, bars, g), leader)
            return acc
        acc = hp.wait_group(w, _k_step(w, spec, bars, base, a_off, g, acc_in), 1, acc_type=spec.acc_type)
        # the stage read one step ago is free now
        had = w.v(f"icmp ugt i32 {ck}, 0")
        _release(w, spec, _empty(w, spec, bars, w.v(f"add i32 {g}, {spec.stages - 1}")),
                 w.v(f"and i1 {had}, {leader}"))
        return acc

    if spec.promote == 2:
        return _fp8_pairs(w, spec, kt_n, cit, bars, base, a_off, leader, step)
    acc, g = k_steps(w, kt_n, cit, spec.bn // 2, spec.acc_type, step)
    if not spec.fp8:
        acc = hp.wait_group(w, acc, 0, acc_type=spec.acc_type)
        _release(w, spec, _empty(w, spec, bars, g), leader)  # the tile's last stage
    return acc


def _fp8_pairs(w: Writer, spec: Sm90GemmSpec, kt_n: str, cit: str, bars: str, base: str, a_off: str,
               leader: str, step) -> list[str]:
    """The fp8 K loop with `promote` 2: each iteration waits for the stages of two K steps (g, g + 1), and for
    each half of N (one, the whole tile, where 128 wide) issues step g's wgmmas into a fresh product and step
    g + 1's into the same product, commits them as one group, waits, and adds the product to that half's fp32
    sums: 256 elements of K summed in the tensor cores' precision, half the adds and waits of `promote` 1. Both
    stages are freed after the last half. An odd step count ends with one step promoted alone (`step`, the
    `promote` 1 body). Blocks: `ck` (from `ctile_go`) -> `ckp` (the pairs) -> `ckt` -> `cko` (the odd step)
    -> `ckdone`."""
    n_acc = spec.bn // 2
    zero = "0.0"
    w.label("ck")
    pairs = w.v(f"lshr i32 {kt_n}, 1")
    w.cbr(w.v(f"icmp ugt i32 {pairs}, 0"), "ckp", "ckt")
    w.label("ckp")
    i, i_next = w.fresh("cp"), w.fresh("cpn")
    acc_in = [w.fresh("acc") for _ in range(n_acc)]
    at = len(w.lines)
    g = w.v(f"add i32 {cit}, {w.v(f'shl i32 {i}, 1')}")
    g1 = w.v(f"add i32 {g}, 1")
    a0, b0 = _k_stage(w, spec, bars, base, a_off, g)
    a1, b1 = _k_stage(w, spec, bars, base, a_off, g1)
    width = FP8_BN if spec.fp8_halves else spec.bn
    half = width // 2
    acc = []
    for h in range(spec.bn // width):
        off = h * width * ROW
        product = _k_wgmmas(w, spec, a0, w.v(f"add i32 {b0}, {off}") if h else b0, None, width, "open")
        product = _k_wgmmas(w, spec, a1, w.v(f"add i32 {b1}, {off}") if h else b1, product, width, "close")
        product = hp.wait_group(w, product, 0)
        acc += [w.v(f"fadd float {a}, {p}") for a, p in zip(acc_in[h * half:(h + 1) * half], product)]
    _release(w, spec, _empty(w, spec, bars, g), leader)
    _release(w, spec, _empty(w, spec, bars, g1), leader)
    w.emit(f"{i_next} = add i32 {i}, 1")
    latch = w.current
    w.cbr(w.v(f"icmp ult i32 {i_next}, {pairs}"), "ckp", "ckt")
    w.lines[at:at] = [f"  {i} = phi i32 [0, %ck], [{i_next}, %{latch}]"] + \
        [f"  {a} = phi float [{zero}, %ck], [{o}, %{latch}]" for a, o in zip(acc_in, acc)]
    w.label("ckt")
    sums = [w.v(f"phi float [{zero}, %ck], [{o}, %{latch}]", "s") for o in acc]
    w.cbr(w.v(f"icmp ne i32 {w.v(f'and i32 {kt_n}, 1')}, 0"), "cko", "ckdone")
    w.label("cko")
    last = w.v(f"add i32 {cit}, {w.v(f'sub i32 {kt_n}, 1')}")
    odd = step(None, last, sums)
    odd_latch = w.current
    w.br("ckdone")
    w.label("ckdone")
    return [w.v(f"phi float [{s}, %ckt], [{o}, %{odd_latch}]", "f") for s, o in zip(sums, odd)]


def _a_fragments(w: Writer, a_base: str, t: str) -> list[list[str]]:
    """The consumer's 64 rows of a K step's A (128 bytes a row, 128-byte swizzled) as wgmma's register A of
    each k32 slice: four registers of four bytes a thread, the layout of mma's m16n8k32 per warp (register
    a0: row l/4 of the warp's 16, bytes 4(l%4) … +3 of the slice's first 16; a1: row l/4 + 8; a2, a3: the same
    of its second 16), which is ldmatrix.x4's of the four 8x8 matrices of 16-bit pairs (rows 0-7 | 8-15) x
    (chunk 2k | 2k + 1): lane l gives row l%8 + 8((l/8)%2) of matrix l/8, its 16-byte chunk at chunk ^ (row % 8)."""
    warp = w.v(f"lshr i32 {t}, 5")
    lane = w.v(f"and i32 {t}, 31")
    mi = w.v(f"lshr i32 {lane}, 3")
    row = w.v(f"add i32 {w.v(f'shl i32 {warp}, 4')}, {w.v(f'and i32 {lane}, 7')}")
    odd = w.v(f"and i32 {mi}, 1")
    row = w.v(f"add i32 {row}, {w.v(f'shl i32 {odd}, 3')}")
    at = w.v(f"add i32 {a_base}, {w.v(f'shl i32 {row}, 7')}")
    r8 = w.v(f"and i32 {row}, 7")
    hi = w.v(f"lshr i32 {mi}, 1")
    frags = []
    for k in range(ROW // 32):
        chunk = w.v(f"xor i32 {w.v(f'add i32 {hi}, {2 * k}')}, {r8}")
        frags.append(ampere.ldmatrix_x4(w, w.v(f"add i32 {at}, {w.v(f'shl i32 {chunk}, 4')}")))
    return frags


def _k_wgmmas_rs(w: Writer, spec: Sm90GemmSpec, frags: list[list[str]], b_base: str) -> list[str]:
    """A K step's m64n128k32 wgmmas of one half of N, A from the registers `frags` (_a_fragments), B's 128
    K-major rows from `b_base`, into a fresh product: committed and waited for (the fragments held until the
    wait), the product returned."""
    et, bt = _ELEM[spec.dtype], _ELEM[spec.b_dtype or spec.dtype]
    flat = [r for f in frags for r in f]
    _, flat = hp.fence(w, ints=flat)   # no definition of a fragment sinks into the wgmma pipeline
    n, op = FP8_BN, f"wgmma.mma_async.sync.aligned.m64n{FP8_BN}k32.f32.{et}.{bt}"
    acc = None
    for k in range(ROW // 32):
        a = flat[4 * k:4 * k + 4]
        db = hp.desc(w, w.v(f"add i32 {b_base}, {32 * k}"), 16, hp.ATOM)
        if acc is None:   # scale-d false: the product starts afresh
            regs = ", ".join(f"${i}" for i in range(n // 2))
            ty = "{" + ", ".join(["float"] * (n // 2)) + "}"
            res = w.asm(f"{{ .reg .pred p; setp.ne.b32 p, ${n // 2 + 5}, 0; {op} {{{regs}}}, "
                        f"{{${n // 2}, ${n // 2 + 1}, ${n // 2 + 2}, ${n // 2 + 3}}}, ${n // 2 + 4}, p, 1, 1; }}",
                        ",".join(["=f"] * (n // 2) + ["r", "r", "r", "r", "l", "r"]),
                        [("i32", x) for x in a] + [("i64", db), ("i32", "0")], ret=ty, hint="acc")
            acc = [w.v(f"extractvalue {ty} {res}, {i}", "d") for i in range(n // 2)]
        else:
            acc = hp.tied(w, acc, f"{op} {{ACC}}, {{{{X0}}, {{X1}}, {{X2}}, {{X3}}}}, {{X4}}, 1, 1, 1;",
                          [("i32", x) for x in a] + [("i64", db)], ["r", "r", "r", "r", "l"])
    hp.commit(w)
    return hp.wait_group(w, acc, 0, keep=flat)


def _release(w: Writer, spec: Sm90GemmSpec, empty: str, cond: str) -> None:
    """Frees a stage (its `empty` mbarrier) where `cond`: in a cluster, on both CTAs' barriers, since the stage's
    B came from both and either producer refills it only once both CTAs' consumers have read it."""
    if spec.cluster_m == 2:
        for rank in range(2):
            hp.mbar_arrive_remote_if(w, empty, rank, cond)
    else:
        hp.mbar_arrive_if(w, empty, cond)


def k_steps(w: Writer, kt_n: str, cit: str, n_acc: int, acc_type: str, step) -> tuple[list[str], str]:
    """The loop over a tile's K steps, from block `ck` (entered from `ctile_go`, the accumulators zero) to
    `ckdone`: `step(ck, global step, accumulators in)` emits step `ck` and returns the accumulators after it.
    Returns (those of the last step, its global step number), for `ckdone` to finish with."""
    w.label("ck")
    ck, ck_next = w.fresh("ck"), w.fresh("ckn")
    acc_in = [w.fresh("acc") for _ in range(n_acc)]
    at = len(w.lines)  # the phis go here once the values from the latch have names
    g = w.v(f"add i32 {cit}, {ck}")
    acc = step(ck, g, acc_in)
    w.emit(f"{ck_next} = add i32 {ck}, 1")
    latch = w.current
    w.cbr(w.v(f"icmp ult i32 {ck_next}, {kt_n}"), "ck", "ckdone")
    zero = "0" if acc_type == "i32" else "0.0"
    w.lines[at:at] = [f"  {ck} = phi i32 [0, %ctile_go], [{ck_next}, %{latch}]"] + \
        [f"  {a} = phi {acc_type} [{zero}, %ctile_go], [{o}, %{latch}]" for a, o in zip(acc_in, acc)]
    w.label("ckdone")
    return acc, g


def _tile_loop(w: Writer, spec: Sm90GemmSpec, role: str, entry: str, done: str, pid: str, tiles: str,
               dims: tuple[str, str], rank: str | None = None) -> tuple:
    """The head of a role's loop over its tiles (`pid`, `pid` + grid, …; blocks `{role}tile`, `{role}tile_go`):
    (tile, steps before it, their next values for the `{role}tnext` block to define, m0, n0). The stage ring
    runs on across tiles, so each role counts the K steps it has taken. In a cluster (`rank` not None) the
    tiles are pairs of vertically adjacent ones, and the CTA of rank r takes the pair's r-th."""
    tile, it = w.fresh("tile"), w.fresh("it")
    tile_next, it_out = w.fresh("tilen"), w.fresh("itout")
    w.label(f"{role}tile")
    w.emit(f"{tile} = phi i32 [{pid}, %{entry}], [{tile_next}, %{role.upper()}TNEXT]")
    w.emit(f"{it} = phi i32 [0, %{entry}], [{it_out}, %{role.upper()}TNEXT]")
    w.cbr(w.v(f"icmp ult i32 {tile}, {tiles}"), f"{role}tile_go", done)
    w.label(f"{role}tile_go")
    if rank is None:
        return (tile, it, tile_next, it_out, *gc.tile_origin(w, spec, tile, dims))
    pair = _Pair(2 * spec.bm, spec.bn, max(1, spec.group_m // 2))
    m0, n0 = gc.tile_origin(w, pair, tile, dims)
    return tile, it, tile_next, it_out, w.v(f"add i32 {m0}, {w.v(f'mul i32 {rank}, {spec.bm}')}"), n0


@dataclass(frozen=True)
class _Pair:
    """A cluster's pair of tiles, for gemm_common.tile_origin: group_m counts pairs of tile rows."""
    bm: int
    bn: int
    group_m: int


def _stage(w: Writer, spec: Sm90GemmSpec, bars: str, g: str) -> tuple[str, str, str]:
    """(stage, phase parity, `full` mbarrier) of global K step `g`."""
    s = w.v(f"urem i32 {g}, {spec.stages}")
    ph = w.v(f"and i32 {w.v(f'udiv i32 {g}, {spec.stages}')}, 1")
    return s, ph, w.v(f"add i32 {bars}, {w.v(f'shl i32 {s}, 3')}")


def _empty(w: Writer, spec: Sm90GemmSpec, bars: str, g: str) -> str:
    """The `empty` mbarrier of the stage of global step `g`."""
    s = w.v(f"urem i32 {g}, {spec.stages}")
    s = w.v(f"shl i32 {s}, 3")
    s = w.v(f"add i32 {bars}, {s}")
    return w.v(f"add i32 {s}, {8 * spec.stages}")


def _epilogue(w: Writer, spec: Sm90GemmSpec, acc: list[str], c: str, t: str, m0: str, n0: str, m32: str,
              n32: str, staging: str | None = None) -> None:
    """Each thread holds, per 8 columns j, the pairs (acc[4j], acc[4j+1]) at row l/4 and (acc[4j+2],
    acc[4j+3]) at row l/4 + 8 of its warp's 16 rows, at columns 8j + 2(l % 4) + {0, 1} (wgmma's D layout).
    The epilogue's steps apply to each in fp32; 16-bit results then go out through `staging` (stmatrix into
    shared memory, one TMA bulk store per 64x64 box, which clips at the matrix edges and lets the warpgroup
    return to its next tile while the copy drains), f32 results by predicated stores."""
    warp = w.v(f"lshr i32 {t}, 5")
    lane = w.v(f"and i32 {t}, 31")
    row = w.v(f"add i32 {w.v(f'shl i32 {warp}, 4')}, {w.v(f'lshr i32 {lane}, 2')}")
    row = w.v(f"add i32 {row}, {w.v(f'shl i32 {c}, 6')}")
    row0 = w.v(f"add i32 {m0}, {row}")
    row1 = w.v(f"add i32 {row0}, 8")
    col = w.v(f"shl i32 {w.v(f'and i32 {lane}, 3')}, 1")
    col = w.v(f"add i32 {n0}, {col}")
    alpha = "%alpha" if "scale" in spec.epilogue else None
    vals = list(acc)
    oks = {}
    for half, r in ((0, row0), (1, row1)):
        r_ok = w.v(f"icmp ult i32 {r}, {m32}")
        rbase = w.v(f"mul i64 {w.v(f'zext i32 {r} to i64')}, %N")
        for j in range(spec.bn // 8):
            cj = w.v(f"add i32 {col}, {8 * j}")
            c64 = w.v(f"zext i32 {cj} to i64")
            idx = w.v(f"add i64 {rbase}, {c64}")
            if staging is None:
                oks[half, j] = (r_ok, cj, idx)
            for k in range(2):
                i = 4 * j + 2 * half + k
                vals[i] = gc.apply(w, spec, vals[i], c64, idx, k, alpha)
    if staging is not None:
        _store_staged(w, spec, vals, c, warp, lane, m0, n0, staging)
        return
    # f32 and i32 results: a pair is one 8-byte store where N is even; where N is odd (8-bit operands allow any
    # N) every other row's pairs are misaligned, so each value is stored alone
    even = w.v(f"icmp eq i32 {w.v(f'and i32 {n32}, 1')}, 0")
    ty, st, reg = ("i32", "b32", "r") if spec.int8 else ("float", "f32", "f")
    for (half, j), (r_ok, cj, idx) in oks.items():
        a, b = vals[4 * j + 2 * half], vals[4 * j + 2 * half + 1]
        addr = w.v(f"getelementptr {ty}, ptr addrspace(1) %C, i64 {idx}")
        a64 = w.v(f"ptrtoint ptr {w.v(f'addrspacecast ptr addrspace(1) {addr} to ptr')} to i64")
        first = w.v(f"and i1 {r_ok}, {w.v(f'icmp ult i32 {cj}, {n32}')}")
        cj1 = w.v(f"add i32 {cj}, 1")
        second = w.v(f"and i1 {r_ok}, {w.v(f'icmp ult i32 {cj1}, {n32}')}")
        preds = [w.v(f"and i1 {first}, {even}"), w.v(f"and i1 {first}, {w.v(f'xor i1 {even}, true')}"),
                 w.v(f"and i1 {second}, {w.v(f'xor i1 {even}, true')}")]
        w.asm("{ .reg .pred p, q, r; setp.ne.b32 p, $3, 0; setp.ne.b32 q, $4, 0; setp.ne.b32 r, $5, 0; "
              f"@p st.global.v2.{st} [$0], {{$1, $2}}; @q st.global.{st} [$0], $1; @r st.global.{st} [$0+4], $2; }}",
              f"l,{reg},{reg},r,r,r", [("i64", a64), (ty, a), (ty, b)]
              + [("i32", w.v(f"zext i1 {p} to i32")) for p in preds])


def _store_staged(w: Writer, spec: Sm90GemmSpec, vals: list[str], c: str, warp: str, lane: str, m0: str,
                  n0: str, staging: str) -> None:
    """The warpgroup's 64 rows, up to 128 columns a pass (a 192-wide tile: 128, then 64): stmatrix writes 8x8
    blocks into two 64x64 boxes laid out as TMA's 128-byte swizzle expects (16-byte chunk k of row r at chunk
    k ^ (r % 8)); the leader then issues the bulk stores. Before a pass overwrites the buffer, the previous
    pass's stores must have read it (cp.async.bulk.wait_group.read)."""
    bar = w.v(f"add i32 {c}, 1")  # named barrier of the warpgroup (0 is the whole CTA's)
    t = w.v(f"or i32 {w.v(f'shl i32 {warp}, 5')}, {lane}")
    leader = w.v(f"zext i1 {w.v(f'icmp eq i32 {t}, 0')} to i32")
    tmC = w.v("ptrtoint ptr %tmC to i64")
    row_c = w.v(f"add i32 {m0}, {w.v(f'shl i32 {c}, 6')}")
    for start in range(0, spec.bn, 128):
        cols = min(128, spec.bn - start)
        w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.wait_group.read 0; }", "r", [("i32", leader)])
        w.asm("bar.sync $0, 128;", "r", [("i32", bar)])
        first = start // 8
        hp.stmatrix_rows(w, [[gc.pack(w, spec, vals[4 * jj + 2 * h], vals[4 * jj + 2 * h + 1])
                              for jj in (j, j + 1) for h in (0, 1)] for j in range(first, first + cols // 8, 2)],
                         warp, lane, staging, 8192)
        w.asm("fence.proxy.async.shared::cta;")
        w.asm("bar.sync $0, 128;", "r", [("i32", bar)])
        for b in range(cols // 64):
            col = w.v(f"add i32 {n0}, {start + 64 * b}")
            src = w.v(f"add i32 {staging}, {b * 8192}")
            w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; "
                  "@p cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$1, {$2, $3}], [$4]; }",
                  "r,l,r,r,r", [("i32", leader), ("i64", tmC), ("i32", col), ("i32", row_c), ("i32", src)])
        w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.commit_group; }", "r", [("i32", leader)])
