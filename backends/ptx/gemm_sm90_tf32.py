"""Hopper tf32 GEMM without a copy of B: C[M,N] = epilogue(A[M,K] · B[K,N]) for f32 operands read as tf32, on
sm_90a's wgmma tf32 kind, computed as the transposed product Cᵀ[N,M] = Bᵀ[N,K] · Aᵀ[K,M].

wgmma reads tf32 operands K-major only (the ISA has no transpose bit for 32-bit types), and B [K,N] as stored is
MN-major. The transposed product turns the roles around:

    wgmma's B (shared memory, K-major) is Aᵀ, whose K-major form is A [M,K] row-major as stored: A's tiles come
        in by TMA unchanged (rows of 32 f32 of K, 128-byte swizzled) and feed a K-major descriptor;
    wgmma's A is Bᵀ, read from REGISTERS (the form of wgmma FlashAttention-3 uses for P·V): each consumer thread
        loads its fragment of Bᵀ (m64nNk8 .tf32: four registers a thread per k8 slice, rows g and g+8 of its
        warp's 16 at k = t and t+4, g = lane/4, t = lane%4 — the PTX ISA's register fragment of A, CUTLASS's
        ALayout_64x8) from B's tile in shared memory, which TMA writes as stored: 32-column boxes of N (128
        bytes), 32 rows of K, 128-byte swizzled (16-byte chunk c of row k at chunk c ^ (k % 8)).

The rows of Cᵀ (wgmma's M, the n of C) may be ordered freely, as long as the epilogue stores each where it
belongs: a thread's two rows g and g+8 are taken as two adjacent columns n, n+1 of C, so that each of its loads
is one 8-byte `ld.shared.v2` of a row of B, and the 8 lanes of a row of K read n ∈ {0…7, 16…23} (or
{8…15, 24…31}) of the box: 16-byte chunks {0, 1, 4, 5} (or {2, 3, 6, 7}), which XORed with k % 8 for the four k
of a load cover each of the 8 bank groups exactly twice — 256 bytes in two wavefronts, the minimum, no bank
conflicts (tests/unit/test_ptx_gemm_fma.py checks the addresses).

One CTA computes a tile of `bm` rows of C (wgmma's N: 256 or 128) × `bn` = 64·consumers columns of C (wgmma's
M, 64 a consumer warpgroup), with gemm_sm90.py's structure: a producer warpgroup issuing the TMA copies of A's
[bm, 32] box and B's bn/32 boxes of [32, 32] into a ring of `stages` buffers, consumers each waiting for a
stage, loading their 16 fragment registers, issuing 4 wgmma m64n{bm}k8 and retiring them before the next step
(the fragment registers an in-flight wgmma reads must stay as they are: _k_loop), while the other consumer's
wgmmas run, then freeing the stage.

The accumulators are Cᵀ's fragments: per 8 columns j of Cᵀ (rows of C), a thread holds C[m, n] and C[m, n+1]
for m = 8j + 2t and 8j + 2t + 1: each pair is one 8-byte store (the 8 lanes of a row of C fill two whole 32-byte
sectors), the epilogue (scale, bias indexed by n, residual, activation) applied to each value in fp32; 16-bit
results are rounded by pairs into one 4-byte store.

Takes: M any, K a multiple of 4 (A's rows by TMA, 16-byte units), N a multiple of 4 (B's rows likewise), batches
(one launch per entry, as the other GEMMs), every epilogue of gemm_common, f32/bf16/f16 results. Where N is not a
multiple of 4, gemm_lowering._lower_tf32_sm90 keeps the copy of B to [N, K] and gemm_sm90.py's tf32 kernel
(N static), or launches the FMA kernel instead (N known at the launch only).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import gemm_common as gc
from . import hopper as hp
from .gemm_sm90 import (ROW, PersistentTile, _empty, _stage, consumer_start, consumer_tiles, geometry, k_steps,
                        kernel, producer)
from .nvvm_text import Writer

BK = ROW // 4            # f32 elements of a K step: one 128-byte swizzle row of A
BOX = 32                 # columns of N in one TMA box of B (128 bytes)
BOX_BYTES = BOX * ROW    # 32 rows of K


@dataclass(frozen=True)
class Sm90Tf32Spec(PersistentTile):
    name: str
    out_dtype: str = "f32"
    bm: int = 256            # rows of C a tile: wgmma's N
    consumers: int = 2       # columns of C a tile: 64 a consumer warpgroup (wgmma's M)
    stages: int = 4
    group_m: int = 8         # tile rows visited before moving right (L2 reuse of B's columns)
    epilogue: tuple = ()
    bias_dtype: str = "f32"
    residual_dtype: str = "f32"

    def __post_init__(self):
        gc.check("sm_90a", self)
        if self.bm not in (64, 128, 256) or self.consumers not in (1, 2) or not 2 <= self.stages <= 8:
            raise ValueError(f"unsupported sm_90a tf32 GEMM tile: {self.bm} rows of C, {self.consumers} consumers, "
                             f"{self.stages} stages")
        self.check_smem()

    @property
    def bn(self) -> int:
        return 64 * self.consumers

    @property
    def bk(self) -> int:
        return BK

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * ROW     # A's [bm, 32] box, then B's bn/32 boxes of [32, 32]

    @property
    def smem_bytes(self) -> int:
        return self.stages * (self.stage_bytes + 16) + 1024

    @property
    def tensor_maps(self) -> str:
        """A [M, K] in boxes of 32 (K) × bm rows, B [K, N] as stored in boxes of 32 (N) × 32 rows of K."""
        return f"A:0:{BK}x{self.bm}:128;B:1:{BOX}x{BK}:128"


def fragment_offsets(w: Writer, c: str, warp: str, lane: str) -> tuple[list[str], str]:
    """(the byte offsets in a stage's B tile of the thread's two fragment loads of k8 slice 0 — k = t and
    t + 4; slice s adds 1024·s —, the first of the two adjacent columns n of the tile its rows g, g+8 take).
    Warp w of consumer c reads box 2c + w/2, half w%2 of it: columns 8·half + 16·(g/4) + 2·(g%4)."""
    box = w.v(f"add i32 {w.v(f'shl i32 {c}, 1')}, {w.v(f'lshr i32 {warp}, 1')}")
    half = w.v(f"and i32 {warp}, 1")
    g = w.v(f"lshr i32 {lane}, 2")
    t = w.v(f"and i32 {lane}, 3")
    quad = w.v(f"shl i32 {w.v(f'lshr i32 {g}, 2')}, 4")
    pair = w.v(f"shl i32 {w.v(f'and i32 {g}, 3')}, 1")
    col = w.v(f"add i32 {w.v(f'shl i32 {half}, 3')}, {quad}")
    col = w.v(f"add i32 {col}, {pair}")   # within the box
    chunk = w.v(f"lshr i32 {col}, 2")
    within = w.v(f"shl i32 {w.v(f'and i32 {col}, 3')}, 2")
    at_box = w.v(f"add i32 {w.v(f'mul i32 {box}, {BOX_BYTES}')}, {within}")
    offs = []
    for q in range(2):
        k = w.v(f"add i32 {t}, {4 * q}")
        sw = w.v(f"shl i32 {w.v(f'xor i32 {chunk}, {k}')}, 4")
        row = w.v(f"add i32 {at_box}, {w.v(f'shl i32 {k}, 7')}")
        offs.append(w.v(f"add i32 {row}, {sw}"))
    n_col = w.v(f"add i32 {w.v(f'shl i32 {box}, 5')}, {col}")
    return offs, n_col


def generate(spec: Sm90Tf32Spec, activations: str = "") -> str:
    """The kernel as NVPTX LLVM IR text (gemm_sm90.generate's conventions: the A and B tensor maps, then A, B, C,
    the epilogue's parameters, M, K, N; persistent over tiles)."""
    w = Writer()
    params = hp.tensor_map_params(["A", "B"]) + gc.params(spec)

    w.label("entry")
    gc.prologue(w, spec)
    g = geometry(w, spec)

    def loads(sa: str, k0: str, m0: str, n0: str, full: str, tmA: str, tmB: str) -> None:
        hp.tma_load(w, sa, tmA, [k0, m0], full)
        for j in range(spec.bn // BOX):
            hp.tma_load(w, w.v(f"add i32 {sa}, {spec.bm * ROW + j * BOX_BYTES}"), tmB,
                        [w.v(f"add i32 {n0}, {BOX * j}"), k0], full)

    pklatch = producer(w, spec, g, loads)

    # -- consumers: each warpgroup multiplies its 64 columns of C (rows of Cᵀ) of every tile ------------------
    c, t, leader = consumer_start(w, g)
    warp = w.v(f"lshr i32 {t}, 5")
    lane = w.v(f"and i32 {t}, 31")
    offs, n_col = fragment_offsets(w, c, warp, lane)
    ctnext = consumer_tiles(
        w, spec, g, lambda cit: _k_loop(w, spec, g.kt_n, cit, g.bars, g.base, offs, leader),
        lambda acc, m0, n0: _epilogue(w, spec, acc, lane, m0, w.v(f"add i32 {n0}, {n_col}"), g.m32, g.n32))
    return kernel(w, spec, params, activations, pklatch, ctnext)


def _wgmma_rs(w: Writer, acc: list[str], frag: list[str], db: str) -> list[str]:
    """acc += Bᵀ-fragment · Aᵀ, m64nNk8 tf32: A from four registers, B from shared memory (K-major)."""
    text = (f"wgmma.mma_async.sync.aligned.m64n{2 * len(acc)}k8.f32.tf32.tf32 {{ACC}}, "
            "{{X0}, {X1}, {X2}, {X3}}, {X4}, 1, 1, 1;")
    return hp.tied(w, acc, text, [("i32", x) for x in frag] + [("i64", db)], ["r", "r", "r", "r", "l"])


def _fragments(w: Writer, b_tile: str, offs: list[str]) -> list[str]:
    """The thread's 16 fragment registers of a K step: per k8 slice s, (row g, k t), (row g+8, k t), (row g,
    k t+4), (row g+8, k t+4) — the two rows being adjacent columns of B, one 8-byte load per k."""
    at = [w.v(f"add i32 {b_tile}, {o}") for o in offs]
    frag = []
    for sl in range(BK // 8):
        for q in range(2):
            pair = w.asm(f"ld.shared.v2.b32 {{$0, $1}}, [$2+{1024 * sl}];", "=r,=r,r", [("i32", at[q])],
                         ret="{i32, i32}", hint="fr")
            frag += [w.v(f"extractvalue {{i32, i32}} {pair}, {i}", "b") for i in range(2)]
    return frag


def _k_loop(w: Writer, spec: Sm90Tf32Spec, kt_n: str, cit: str, bars: str, base: str, offs: list[str],
            leader: str) -> list[str]:
    """A consumer's K steps of one tile (block `ck`, entered from `ctile_go`, to `ckdone`, which holds the
    result). Each step's group of wgmmas is retired (wait_group 0, the fragments held until then) before the
    next step's fragments are loaded, and its stage freed at once: the registers an in-flight wgmma reads must
    not be rewritten, and a fragment carried to a later wait through the loop's phi is a copy, which leaves
    the originals to be reused — measured on an H200 with one group kept in flight that way: wrong sums. The
    other consumer's group keeps the tensor cores busy meanwhile."""
    def step(ck: str, g: str, acc_in: list[str]) -> list[str]:
        s, ph, full = _stage(w, spec, bars, g)
        hp.mbar_wait(w, full, ph)
        a_tile = w.v(f"add i32 {base}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
        frag = _fragments(w, w.v(f"add i32 {a_tile}, {spec.bm * ROW}"), offs)
        acc, frag = hp.fence(w, acc_in, frag)
        for sl in range(BK // 8):   # each k8 slice: 32 bytes of A's K-major rows
            db = hp.desc(w, w.v(f"add i32 {a_tile}, {32 * sl}"), 16, hp.ATOM)
            acc = _wgmma_rs(w, acc, frag[4 * sl:4 * sl + 4], db)
        hp.commit(w)
        acc = hp.wait_group(w, acc, 0, keep=frag)
        hp.mbar_arrive_if(w, _empty(w, spec, bars, g), leader)
        return acc

    return k_steps(w, kt_n, cit, spec.bm // 2, "float", step)[0]


def _epilogue(w: Writer, spec: Sm90Tf32Spec, acc: list[str], lane: str, m0: str, n: str, m32: str,
              n32: str) -> None:
    """acc[4j + 2h + v] is C[m0 + 8j + 2t + v, n + h] (t = lane % 4; `n` even, and N a multiple of 4, so n + 1
    is in range where n is): the epilogue's steps on each in fp32, then one store of the pair (n, n + 1)."""
    t = w.v(f"and i32 {lane}, 3")
    m_first = w.v(f"add i32 {m0}, {w.v(f'shl i32 {t}, 1')}")
    n_ok = w.v(f"icmp ult i32 {n}, {n32}")
    n64 = w.v(f"zext i32 {n} to i64")
    alpha = "%alpha" if "scale" in spec.epilogue else None
    for j in range(spec.bm // 8):
        for v in range(2):
            m = w.v(f"add i32 {m_first}, {8 * j + v}")
            ok = w.v(f"and i1 {n_ok}, {w.v(f'icmp ult i32 {m}, {m32}')}")
            m64 = w.v(f"zext i32 {m} to i64")
            idx = w.v(f"add i64 {w.v(f'mul i64 {m64}, %N')}, {n64}")
            pair = [gc.apply(w, spec, acc[4 * j + 2 * h + v], n64, idx, h, alpha) for h in range(2)]
            on = w.v(f"zext i1 {ok} to i32")
            if spec.out_dtype == "f32":
                addr = w.v(f"getelementptr float, ptr addrspace(1) %C, i64 {idx}")
                a64 = w.v(f"ptrtoint ptr {w.v(f'addrspacecast ptr addrspace(1) {addr} to ptr')} to i64")
                w.asm("{ .reg .pred p; setp.ne.b32 p, $3, 0; @p st.global.v2.f32 [$0], {$1, $2}; }", "l,f,f,r",
                      [("i64", a64), ("float", pair[0]), ("float", pair[1]), ("i32", on)])
            else:
                addr = w.v(f"getelementptr {gc.OUT[spec.out_dtype]}, ptr addrspace(1) %C, i64 {idx}")
                a64 = w.v(f"ptrtoint ptr {w.v(f'addrspacecast ptr addrspace(1) {addr} to ptr')} to i64")
                w.asm("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b32 [$0], $1; }", "l,r,r",
                      [("i64", a64), ("i32", gc.pack(w, spec, *pair)), ("i32", on)])

