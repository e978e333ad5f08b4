"""Hopper flash attention (forward): O = softmax(scale · Q·Kᵀ [causal mask]) · V on sm_90a tensor cores.

Q, K, V and O are [BH, S, D] (batch and heads folded), or with `seq_heads` [B, S, H, D] (the heads inside
the sequence, as a model's projections lay them out: 4-D TMA maps whose boxes take one head, so the head
split and merge need no copies; grid y the heads, z the batch), D 64 or 128, bf16 or f16. One CTA takes `block_m`
query rows (128, or 192 at D = 64) of one (batch, head), with the warp roles of the GEMM (gemm_sm90.py):

    warpgroup 0     the producer: one thread loads the Q tile once, then K and V blocks of `block_n` keys
                    into a ring of `stages` buffers (TMA, 3-D maps, so rows past a head's end read as zeros)
    warpgroups 1 …  the consumers, 64 query rows each (two, or three for 192 rows); per key block:
                      S = Q·Kᵀ           wgmma, both operands from shared memory (K is K-major as stored)
                      online softmax     in registers: running row max m and sum l, exp2 with the scale and
                                         log2(e) folded into one FMA; keys past the end and, when causal,
                                         keys after the query are -inf
                      O = O·α + P·V      P (bf16 pairs) stays in registers as wgmma's A fragments — the
                                         accumulator layout of S is the fragment layout of A — V is MN-major
                    then O / l is rounded and stored.

The consumers take turns at the tensor cores (FlashAttention-3's ping-pong, `_Turns`, round robin): on its
turn a warpgroup issues Sⱼ and P·Vⱼ₋₁, hands the turn over, and computes the softmax of Sⱼ while the others'
products and its own P·Vⱼ₋₁ run; O is rescaled once P·Vⱼ₋₁ is in. exp2 is ex2.approx.ftz (a probability
below 2^-126 is 0; `poly_every` moves every n-th to a cubic on the FMA pipe, FlashAttention-4's way).
Measured on an H200 at S = 4096 (docs/performance.md): D = 128 with 128 × 128 tiles in three stages (two
stages: 0.85x as fast; 176 or 192 keys fit only two). D = 64 had 128 × 192 tiles in three stages; it now has
FlashAttention-3's 192 × 128 (hopper/tile_size.h: kBlockM 192, kBlockN 128 at head dimension <= 64; three
consumer warpgroups of 160 registers: the D = 64 products are half as long while the softmax is not, so a
third warpgroup's softmax hides behind two warpgroups' products) — see docs/performance.md for whether
it measured faster.

Causal attention is top-left aligned (query i sees keys j <= i, as the interpreter and torch's `is_causal`),
visits only the key blocks a tile needs, and runs the tiles with the most blocks first. The tiles end at the
last row (`end_tiles`, TUNED's), so that where BM does not divide SQ the short tile is the first rows' (few key
blocks), clamped to start at row 0: at S = 4096 with 192-row tiles the products computed fall from 1.125 to
1.066 of the causal pairs (measured on an H200: D = 64 causal 385 -> 400 TFLOP/s, docs/performance.md).
`skip_masked` lets each consumer warpgroup stop at its own rows' last key block (at 192 × 128 up to two of
three warpgroups skip a tile's last block): computed per warpgroup it measured slower (0.97x as fast at D = 64),
broadcast from lane 0 by a shuffle (`skip_masked=2`, TUNED's at D = 64) 1.03-1.04x as fast as without it (D = 64
causal 1.01-1.02x SDPA on an H200); at D = 128 (128 × 128) it skips no block, off.

`late_wait` (TUNED's at D = 128): ptxas hoisted the wait for P·Vⱼ₋₁ (WARPGROUP.DEPBAR 0) above the whole softmax
of Sⱼ when both sat in one basic block, so the intra-warpgroup overlap above did not happen; a never-taken branch
before the wait keeps it after the exponentials. Measured on an H200 (docs/performance.md, two processes): D = 128
1.015-1.018x as fast, causal 1.010x; at D = 64 slower (three consumers at 160 registers; causal spills), off there.
`split_kv` (K and V with barriers of their own, FlashAttention-3's), `early_rescale` (O·α between the two issues)
and 176-key blocks in two stages with both measured no faster (0.94-1.00x SDPA at 176 keys), off.

`persistent` makes the grid at most SMS CTAs, each looping over query tiles: thread 0 streams K and V (the ring's
stages and phases running on across tiles), thread 32 loads each tile's Q once the consumers have released the
buffer (an mbarrier; at D = 64 O has staging of its own, so the next Q loads while O goes out), the turns run on
across tiles, causal tiles longest first (`snake`: every other round of tiles in reverse CTA order; `section`:
longest first within groups of (batch, head)s). Measured on an H200 (docs/performance.md): alone it was no
faster or slower (non-causal 0.94-0.95x, sections 0.93-0.96x at D = 64 causal, D = 128 causal 0.80-0.97x); with
skip_masked=2 at D = 64 causal it is 1.03-1.04x as fast (3 runs), so TUNED has it there (causal only,
`persistent=1`, snake order); elsewhere the hardware's CTA scheduling stays.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..symbol_names import llvm_global
from . import hopper as hp
from .nvvm_text import Writer, module

BM = 128                 # query rows per CTA (the backward's, the fp8 kernel's; the forward's default)
TUNED = {128: {"block_m": 128, "block_n": 128, "stages": 3, "end_tiles": 1, "late_wait": 1},
         64: {"block_m": 192, "block_n": 128, "stages": 3, "end_tiles": 1, "skip_masked": 2, "persistent": 1,
              "snake": 1}}   # see the docstring
QBOX = 64 * BM * 2       # one TMA box of Q: 64 columns (128 bytes) of its rows
LOOPING_SPILL_BYTES = 32  # what ptxas spills of a persistent kernel at most (its records say "attention.persistent"):
#                           the causal D = 64 one spills 8-24 bytes, once per tile outside the key-block loop
#                           (nvdisasm: a store before the tile loop, a load at a tile's start, a pair in its epilogue)
SMS = 132                # CTAs of a persistent grid at most: an H100's or H200's SMs (not known when compiling)
ENV = "TESSERA_SM90_ATTENTION"   # benchmarks' override of TUNED: "64:block_m=128,block_n=192;128:stages=2"


def tuned(head_dim: int) -> dict:
    """TUNED's blocking for `head_dim`, with what $TESSERA_SM90_ATTENTION sets for it (a benchmark's way of
    building the variants it compares; the compile cache keys on it: options.OVERRIDE_ENVS)."""
    out = dict(TUNED.get(head_dim, TUNED[128]))
    for part in filter(None, os.environ.get(ENV, "").split(";")):
        dim, _, sets = part.partition(":")
        if int(dim) == head_dim:
            apply_settings(out, sets, ENV, ("block_m", "block_n", "stages", "poly_every", "end_tiles", "skip_masked",
                                            "persistent", "snake", "section", "late_wait", "split_kv",
                                            "early_rescale"))
    return out


def apply_settings(out: dict, sets: str, env: str, allowed: tuple) -> None:
    """`sets` ("key=value,…", integers) written into `out`; a key not in `allowed` is refused, naming $`env`."""
    for kv in filter(None, sets.split(",")):
        key, _, value = kv.partition("=")
        if key.strip() not in allowed:
            raise ValueError(f"${env}: no setting {key.strip()!r}")
        out[key.strip()] = int(value)
_ELEM = {"bf16": ("bf16", "bfloat"), "f16": ("f16", "half")}


class Blocks:
    """What the forward and backward kernel specs share: a CTA of a producer and two consumer warpgroups holds
    `held` tiles of BM rows (64-column TMA boxes of QBOX bytes) and streams two tensors' blocks of `block_n`
    rows through a ring of `stages`; its checks of dtype, head dimension, scale and sizes."""
    held = 1
    block_m = 0                   # query rows a CTA (64 a consumer warpgroup); 0: BM

    @property
    def bm(self) -> int:
        return self.block_m or BM

    @property
    def consumers(self) -> int:
        """Consumer warpgroups, 64 query rows each."""
        return self.bm // 64

    @property
    def q_box(self) -> int:
        """Bytes of one TMA box of the held rows: 64 columns (128 bytes) of `bm` rows."""
        return 64 * self.bm * 2

    def check(self, what: str, rows: str, most: int) -> None:
        if self.dtype not in _ELEM:
            raise ValueError(f"the sm_90a {what} takes bf16 or f16, not {self.dtype}")
        if self.head_dim not in (64, 128):
            raise ValueError(f"the sm_90a {what} takes head dimension 64 or 128, not {self.head_dim}")
        if not self.scale > 0:
            raise ValueError(f"the sm_90a {what} takes a positive scale, not {self.scale}")
        if self.block_n % 16 or not 16 <= self.block_n <= most:
            raise ValueError(f"the sm_90a {what} takes blocks of 16 … {most} {rows}, a multiple of 16, not "
                             f"{self.block_n}")
        if not 2 <= self.stages <= 4 or self.smem_bytes > 227 * 1024:
            raise ValueError(f"{self.stages} stages of {self.block_n}-row blocks do not fit sm_90's shared memory")

    @property
    def boxes(self) -> int:
        return self.head_dim // 64

    @property
    def stage_bytes(self) -> int:
        return 2 * self.boxes * self.kv_box

    @property
    def kv_box(self) -> int:
        """Bytes of one TMA box of a streamed block (K or V here): 64 columns (128 bytes) of its rows."""
        return 64 * self.block_n * 2

    @property
    def q_bytes(self) -> int:
        """Bytes of the held tiles at the start of shared memory (and O's staging, which reuses them)."""
        return self.held * self.boxes * self.q_box

    @property
    def smem_bytes(self) -> int:
        return self.q_bytes + self.stages * self.stage_bytes + 8 * (1 + 2 * self.stages) + 1024

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def out_dtype(self) -> str:
        """The dtype of the stored results."""
        return self.dtype


@dataclass(frozen=True)
class Sm90AttentionSpec(Blocks):
    name: str
    head_dim: int = 128
    causal: bool = False
    scale: float = 1.0
    dtype: str = "bf16"
    stages: int = 0               # of the K/V ring; 0: TUNED's for the head dimension
    block_n: int = 0              # keys per block; 0: TUNED's
    block_m: int = 0              # query rows per CTA, 128 or 192 (two or three consumer warpgroups); 0: TUNED's
    poly_every: int = 0           # every n-th exp2 of the softmax by a polynomial on the FMA pipe (0: none)
    end_tiles: int = -1           # causal, 1 (TUNED's; -1: TUNED's): the query tiles end at the last row (tile x: rows
    #                               SQ - (x+1)·BM …), the first rows' tile clamped to row 0 (see generate); 0
    #                               (TESSERA_SM90_ATTENTION=64:end_tiles=0): from row 0, the last one short
    skip_masked: int = -1         # causal, 1: a consumer warpgroup stops at its own rows' last key block and
    #                               passes its turns through the blocks after it (masked for all its rows); 2
    #                               (TUNED's at D = 64): that count taken from lane 0 (shfl.sync.idx), which ptxas
    #                               then knows is the same across the warp; 0 off; -1 TUNED's (the fp8 spec: off)
    lse: bool = False             # also store each query row's log-sum-exp (the backward's residual)
    seq_heads: bool = False       # Q, K, V and O are [B, S, H, D] (LSE stays [B, H, SQ])
    persistent: int = -1          # 1: causal, 2: causal or not — a grid of at most SMS CTAs, each looping over
    #                               query tiles (see generate); 0: a CTA a tile; -1: TUNED's (the fp8 spec: off)
    snake: int = 0                # persistent: every other round of tiles handed out in reverse CTA order
    split_kv: int = 0             # 1: K and V each with their own full and empty mbarriers (FlashAttention-3's two
    #                               pipelines): K released once S is in, V once P·V is; the producer loads Kⱼ₊₁ before
    #                               Vⱼ (not with a persistent grid nor skip_masked)
    early_rescale: int = 0        # 1: O·αⱼ₋₁ between the issues of Sⱼ and P·Vⱼ₋₁ (FlashAttention-3's place: while Sⱼ
    #                               runs), not after P·Vⱼ₋₁'s wait
    late_wait: int = -1           # 1: the wait for P·Vⱼ₋₁ in a block of its own after the softmax of Sⱼ (ptxas
    #                               otherwise hoists it above the softmax); 0 off; -1 TUNED's (the fp8 spec: its
    #                               TUNED_CAUSAL's, on when causal)
    section: int = 0              # persistent causal: tiles ordered longest first within groups of this many
    #                               (batch, head)s (their K and V shared in L2); 0: all of them; -1: as many as
    #                               32 MiB of K and V (FlashAttention-3's choice)

    def __post_init__(self):
        chosen_m = self.block_m
        for key, value in tuned(self.head_dim).items():
            if key in ("end_tiles", "persistent", "skip_masked", "late_wait"):   # 0 a choice (the old way), -1 TUNED's
                if getattr(self, key) < 0:
                    object.__setattr__(self, key, value)
            elif not getattr(self, key):
                object.__setattr__(self, key, value)
        for key in ("persistent", "skip_masked", "late_wait"):   # not in TUNED's for the head dimension: off
            if getattr(self, key) < 0:
                object.__setattr__(self, key, 0)
        if self.block_m not in (128, 192):
            raise ValueError(f"the sm_90a attention takes 128 or 192 query rows a CTA, not {self.block_m}")
        most = (128 - self.head_dim // 2) * 4 // 3 // 16 * 16
        if self.block_m == 192 and self.block_n > most and not chosen_m:
            # longer key blocks asked for (a hint, an autotuning candidate): two consumer warpgroups hold them
            object.__setattr__(self, "block_m", 128)
        if self.block_m == 192 and self.block_n > most:
            # three consumer warpgroups get 160 registers a thread: O (D/2), S (block_n/2) and the previous
            # block's P (block_n/4) live at once, at most 128 of them
            raise ValueError(f"192 query rows a CTA take blocks of at most {most} keys at head dimension "
                             f"{self.head_dim}, not {self.block_n}")
        self.check("attention", "keys", 256)
        if self.split_kv and (self.looping or self.skip_masked > 0):
            raise ValueError("split_kv takes neither a persistent grid nor skip_masked")

    @property
    def looping(self) -> bool:
        """Whether the CTAs loop over query tiles (a persistent grid of at most SMS CTAs)."""
        return self.persistent == 2 or (self.persistent == 1 and self.causal)

    @property
    def o_apart(self) -> int:
        """Bytes of O's own staging after Q's (looping, where they fit), so that the next tile's Q may load
        while O goes out; 0: O goes out through the Q buffer."""
        if not self.looping:
            return 0
        return self.q_bytes if Blocks.smem_bytes.fget(self) + self.q_bytes + 8 <= 227 * 1024 else 0

    @property
    def smem_bytes(self) -> int:
        # looping: O's staging and the barrier releasing the Q buffer; split_kv: V's full and empty barriers
        return Blocks.smem_bytes.fget(self) + (self.o_apart + 8 if self.looping else 0) \
            + (16 * self.stages if self.split_kv else 0)

    @property
    def tensor_maps(self) -> str:
        rows = {"Q": self.bm, "K": self.block_n, "V": self.block_n, "O": 64}   # O leaves 64 rows a warpgroup
        box = "64x1x{}x1" if self.seq_heads else "64x{}x1"
        return ";".join(f"{n}:{i}:{box.format(rows[n])}:128" for i, n in enumerate("QKVO"))

    def flops(self, bh: int, sq: int, sk: int) -> float:
        pairs = sum(min(i + 1, sk) for i in range(sq)) if self.causal else sq * sk
        return 4.0 * bh * pairs * self.head_dim

    # The parts that the fp8 kernel (attention_fp8_sm90.py) does its own way; `generate` calls these.
    extra_params = ()             # kernel parameters after O (and LSE)

    @property
    def extents(self) -> tuple:
        """The i64 parameters at the end (the launch's extents in order of first appearance)."""
        return ("B", "SQ", "H", "SK") if self.seq_heads else ("BH", "SQ", "SK")

    @property
    def v_offset(self) -> int:
        """Where a stage's V block starts after its K block."""
        return self.boxes * self.kv_box

    def load_q(self, w: Writer, base: str, tm: str, m0: str, bh: str, bar: str) -> None:
        hp.mbar_expect(w, bar, self.boxes * self.q_box)
        for i in range(self.boxes):
            hp.tma_load(w, w.v(f"add i32 {base}, {i * self.q_box}"), tm, [str(64 * i)] + outer(m0, bh), bar)

    def load_kv(self, w: Writer, at: str, tm: dict, key0: str, bh: str, bar: str) -> None:
        for i in range(self.boxes):
            hp.tma_load(w, w.v(f"add i32 {at}, {i * self.kv_box}"), tm["K"], [str(64 * i)] + outer(key0, bh), bar)
            hp.tma_load(w, w.v(f"add i32 {at}, {self.v_offset + i * self.kv_box}"), tm["V"],
                        [str(64 * i)] + outer(key0, bh), bar)

    def multiplier(self, w: Writer) -> str:
        """The factor of a raw score in the exponent (log2 units)."""
        return _f(self.scale * math.log2(math.e))

    def out_scale(self, w: Writer) -> str | None:
        """A factor of O besides 1 / l, if any."""
        return None

    def scores(self, w: Writer, q_rows: str, k_at: str) -> list[str]:
        return _scores(w, self, q_rows, k_at)

    def pv(self, w: Writer, o: list[str], frags: list[str], v_at: str) -> list[str]:
        return _pv(w, self, o, frags, v_at)

    def fragments(self, w: Writer, probs: list[str]) -> list[str]:
        return _fragments(w, self, probs)

    def exp2(self, w: Writer, x: str, i: int) -> str:
        """2^x of the softmax's element `i` of a thread's block (x <= 0 or -inf): MUFU's ex2.approx.ftz, or
        with `poly_every` every n-th element by `exp2_poly` on the FMA pipe."""
        if self.poly_every and i % self.poly_every == self.poly_every - 1:
            return exp2_poly(w, x)
        return w.v(f"call float @llvm.nvvm.ex2.approx.ftz.f(float {x})")


def generate(spec: Sm90AttentionSpec) -> str:
    """The kernel as NVPTX LLVM IR text. Parameters: the Q, K, V tensor maps, then the launch arguments
    Q, K, V, O ([BH, SQ, D], [BH, SK, D] twice, [BH, SQ, D]), with `spec.lse` LSE (f32 [BH, SQ]: the natural
    log of each row's sum of exp(scale · q·k)), and the extents BH, SQ, SK; with `spec.seq_heads` Q, K, V, O
    are [B, S, H, D] and the extents B, SQ, H, SK (grid (ceil(SQ/128), H, B))."""
    w = Writer()
    S, d = spec.stages, spec.head_dim
    params = hp.tensor_map_params("QKVO")
    params += [f"ptr addrspace(1) %{n}" for n in ("Q", "K", "V", "O") + (("LSE",) if spec.lse else ())
               + spec.extra_params]
    params += [f"i64 %{n}" for n in spec.extents]

    tid, bx, bh, nq, base = entry(w)
    loop = spec.looping
    sk = None
    if loop:
        # a persistent grid: CTA p takes the tiles of rank p, p + G, … (G = nctaid.x; `snake`: every other
        # round in reverse CTA order), ranks ordered by `_decode`; the query tiles are nq = ceil(SQ / BM)
        p_cta, grid_ = bx, nq
        sq = w.v("trunc i64 %SQ to i32")
        nq = w.v(f"udiv i32 {w.v(f'add i32 {sq}, {spec.bm - 1}')}, {spec.bm}")
        if spec.seq_heads:
            heads = w.v("trunc i64 %H to i32")
            bht = w.v(f"mul i32 {w.v('trunc i64 %B to i32')}, {heads}")
        else:
            bht = w.v("trunc i64 %BH to i32")
        ntiles = w.v(f"mul i32 {nq}, {bht}")
        sk = w.v("trunc i64 %SK to i32")
        w.cbr(w.v(f"icmp eq i32 {sk}, 0"), "exit", "started")   # no keys: no tile has a block
        w.label("started")
        lse_row = bh
    else:
        lse_row = bh   # LSE's row of this (batch, head)
        if spec.seq_heads:   # TMA coordinates (head, batch); LSE's [B, H] row b·H + h
            b = w.sreg("ctaid.z")
            heads = w.v("trunc i64 %H to i32")
            lse_row = w.v(f"add i32 {w.v(f'mul i32 {b}, {heads}')}, {bh}")
            bh = (bh, b)
    kv_base = w.v(f"add i32 {base}, {spec.q_bytes + spec.o_apart}")
    BN = spec.block_n
    bars = w.v(f"add i32 {kv_base}, {S * spec.stage_bytes}")   # qfull, full[S], empty[S] (, qempty)
    if sk is None:
        sk = w.v("trunc i64 %SK to i32")

    def tile(bx, nq):
        """(first row, key blocks) of the CTA's query tile `bx` of `nq`."""
        qb = w.v(f"sub i32 {nq}, 1") if spec.causal else bx
        if spec.causal:  # the longest rows first
            qb = w.v(f"sub i32 {qb}, {bx}")
        BMc = spec.bm
        m0 = w.v(f"mul i32 {qb}, {BMc}")
        if spec.causal and spec.end_tiles > 0:   # (the fp8 spec keeps -1: its own TUNED, the tiles from row 0)
            # the tiles end at the last row: tile bx holds rows SQ - (bx + 1)·BM … SQ - bx·BM - 1 (the longest
            # first), so the tile short of BM rows is the first rows' — which need the fewest key blocks — not
            # the last rows'. It starts at row 0, not below (never a negative row in a TMA box or a comparison),
            # and so also computes the first rows of the next tile: the same values bit for bit (same key
            # blocks, the extra ones fully masked for those rows: p = 0, α = 1), stored twice. S = 4096 at 192
            # rows: the products computed fall from 1.125 to 1.066 of the causal pairs.
            tiles_below = w.v(f"mul i32 {w.v(f'add i32 {bx}, 1')}, {BMc}")
            below = w.v(f"sub i32 {w.v('trunc i64 %SQ to i32')}, {tiles_below}")
            m0 = w.v(f"select i1 {w.v(f'icmp slt i32 {below}, 0')}, i32 0, i32 {below}")
        nkv = w.v(f"add i32 {sk}, {BN - 1}")
        nkv = w.v(f"udiv i32 {nkv}, {BN}")
        if spec.causal:
            need = w.v(f"udiv i32 {w.v(f'add i32 {m0}, {BMc + BN - 1}')}, {BN}")
            fewer = w.v(f"icmp ult i32 {need}, {nkv}")
            nkv = w.v(f"select i1 {fewer}, i32 {need}, i32 {nkv}")
        return m0, nkv

    def where(i, fresh: bool):
        """(rank, CTA tile count … ) of round `i`: with `fresh` the CTA's index, the grid and the extents read
        anew through opaque moves (the consumers', so that they are not live across the key blocks)."""
        if not fresh:
            return p_cta, grid_, nq, bht, ntiles
        mov = lambda x: w.asm("mov.b32 $0, $1;", "=r,r", [("i32", x)], ret="i32")
        p, g = (w.asm(f"mov.u32 $0, %{r};", "=r", ret="i32") for r in ("ctaid.x", "nctaid.x"))
        sq_ = mov(w.v("trunc i64 %SQ to i32"))
        n = w.v(f"udiv i32 {w.v(f'add i32 {sq_}, {spec.bm - 1}')}, {spec.bm}")
        if spec.seq_heads:
            b = mov(w.v(f"mul i32 {w.v('trunc i64 %B to i32')}, {w.v('trunc i64 %H to i32')}"))
        else:
            b = mov(w.v("trunc i64 %BH to i32"))
        return p, g, n, b, w.v(f"mul i32 {n}, {b}")

    def rank(i, fresh: bool):
        p, g, n, b, total = where(i, fresh)
        pos = p
        if spec.snake:
            back = w.v(f"sub i32 {w.v(f'sub i32 {g}, 1')}, {p}")
            pos = w.v(f"select i1 {w.v(f'trunc i32 {i} to i1')}, i32 {back}, i32 {p}")
        return w.v(f"add i32 {w.v(f'mul i32 {i}, {g}')}, {pos}"), n, b, total

    def place(r, n, b):
        """(first row, key blocks, (batch, head) coordinates, LSE row) of the tile of rank `r`."""
        tbx, bhl = _decode(w, spec, r, n, b)
        m0, nkv = tile(tbx, n)
        coords = (w.v(f"urem i32 {bhl}, {heads}"), w.v(f"udiv i32 {bhl}, {heads}")) if spec.seq_heads else bhl
        return m0, nkv, coords, bhl

    def looped(role: str, done: str, fresh: bool = False):
        """The head of a role's loop over its tiles (blocks `{role}tile`, `{role}go`): (round i, its phi's
        name for the next round, ring blocks before it, its phi's name, and the tile's first row, key
        blocks, (batch, head) coordinates, LSE row). The latch is `%{ROLE}LATCH`, patched at the end."""
        i, i_next, g0, g0_next = w.fresh("ti"), w.fresh("tin"), w.fresh("tg"), w.fresh("tgn")
        entry_label = w.current
        w.br(f"{role}tile")
        w.label(f"{role}tile")
        w.emit(f"{i} = phi i32 [0, %{entry_label}], [{i_next}, %{role.upper()}LATCH]")
        w.emit(f"{g0} = phi i32 [0, %{entry_label}], [{g0_next}, %{role.upper()}LATCH]")
        r, n, b, total = rank(i, fresh)
        w.cbr(w.v(f"icmp ult i32 {r}, {total}"), f"{role}go", done)
        w.label(f"{role}go")
        return (i, i_next, g0, g0_next) + place(r, n, b)

    def latch(role: str, i, i_next, g0, g0_next, nkv) -> None:
        w.emit(f"{i_next} = add i32 {i}, 1")
        w.emit(f"{g0_next} = add i32 {g0}, {nkv}")
        w.lines[:] = [x.replace(f"%{role.upper()}LATCH]", f"%{w.current}]") for x in w.lines]
        w.br(f"{role}tile")

    if not loop:
        m0, nkv = tile(bx, nq)
        g0 = None

    def thread():
        """A consumer thread's (warpgroup, thread in it, whether it leads, warp, lane), from %tid.x read anew
        (looping: not kept live across the key blocks, which LLVM would otherwise hoist them out of)."""
        tid_ = w.asm("mov.u32 $0, %tid.x;", "=r", ret="i32")
        c = w.v(f"sub i32 {w.v(f'lshr i32 {tid_}, 7')}, 1")
        t = w.v(f"and i32 {tid_}, 127")
        return c, t, w.v(f"icmp eq i32 {t}, 0"), w.v(f"lshr i32 {t}, 5"), w.v(f"and i32 {t}, 31")

    def gl(j):
        """Key block `j`'s index in the ring's sequence (the blocks of the CTA's earlier tiles before it)."""
        return j if g0 is None else w.v(f"add i32 {g0}, {j}")

    # -- producer (barriers: Q, full[s], empty[s]; looping: and the Q buffer's release) --------------------
    qempty = w.v(f"add i32 {bars}, {8 * (1 + 2 * S)}") if loop else None
    vbars = [(w.v(f"add i32 {bars}, {8 + 8 * (2 * S + i)}"), 1) for i in range(S)] \
        + [(w.v(f"add i32 {bars}, {8 + 8 * (3 * S + i)}"), spec.consumers) for i in range(S)] if spec.split_kv else []
    first, wg = producer(w, tid, bars, S, spec.consumers, [(qempty, spec.consumers)] if loop else vbars)
    tm = None
    if loop:
        # thread 0 streams K and V; thread 32 (another warp) loads each tile's Q once the consumers have
        # released the buffer, so that a tile's Q and first blocks land while the previous tile ends
        w.cbr(first, "kvstart", "qthread")
        w.label("qthread")
        w.cbr(w.v(f"icmp eq i32 {tid}, 32"), "qstart", "exit")
        w.label("qstart")
        tmq = w.v("ptrtoint ptr %tmQ to i64")
        i, i_next, g0, g0_next, m0, nkv, coords, _ = looped("q", "exit")
        hp.mbar_wait(w, qempty, w.v(f"xor i32 {w.v(f'and i32 {i}, 1')}, 1"))
        spec.load_q(w, base, tmq, m0, coords, bars)
        latch("q", i, i_next, g0, g0_next, nkv)
        w.label("kvstart")
        tm = {n: w.v(f"ptrtoint ptr %tm{n} to i64") for n in "QKV"}
        i, i_next, g0, g0_next, m0, nkv, bh, _ = looped("kv", "exit")
        ploop = w.current
        w.br("pkv")
    else:
        w.cbr(first, "load_q", "exit")
        w.label("load_q")
        tm = {n: w.v(f"ptrtoint ptr %tm{n} to i64") for n in "QKV"}
        spec.load_q(w, base, tm["Q"], m0, bh, bars)
        any_kv = w.v(f"icmp ugt i32 {nkv}, 0")
        ploop = "load_q"
        if spec.split_kv:
            w.cbr(any_kv, "pk0", "exit")
            w.label("pk0")
            _load_half(w, spec, kv_base, bars, tm, "0", bh, 0)
            ploop = w.current
            w.br("pkv")
        else:
            w.cbr(any_kv, "pkv", "exit")
    w.label("pkv")
    j, j_next = w.fresh("j"), w.fresh("jn")
    w.emit(f"{j} = phi i32 [0, %{ploop}], [{j_next}, %PLATCH]")
    if spec.split_kv:   # Kⱼ₊₁ (its slot freed by Sⱼ₋₁), then Vⱼ (its slot freed by P·Vⱼ₋₂)
        nxt = w.v(f"add i32 {j}, 1")
        w.cbr(w.v(f"icmp ult i32 {nxt}, {nkv}"), "pknext", "pv")
        w.label("pknext")
        _load_half(w, spec, kv_base, bars, tm, nxt, bh, 0)
        w.br("pv")
        w.label("pv")
        _load_half(w, spec, kv_base, bars, tm, j, bh, 1)
    else:
        s, ph = _stage(w, gl(j), S)
        full, empty = _full(w, bars, s), _empty(w, bars, s, S)
        hp.mbar_wait(w, empty, w.v(f"xor i32 {ph}, 1"))
        hp.mbar_expect(w, full, spec.stage_bytes)
        k_at = w.v(f"add i32 {kv_base}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
        key0 = w.v(f"mul i32 {j}, {BN}")
        spec.load_kv(w, k_at, tm, key0, bh, full)
    w.emit(f"{j_next} = add i32 {j}, 1")
    platch = w.current
    w.cbr(w.v(f"icmp ult i32 {j_next}, {nkv}"), "pkv", "kvnext" if loop else "exit")
    if loop:
        w.label("kvnext")
        latch("kv", i, i_next, g0, g0_next, nkv)

    # -- consumers ---------------------------------------------------------------------------------------
    c, t, leader, warp, lane = consumer(w, wg, tid, spec.consumers)
    if loop:
        mult = spec.multiplier(w)
        turn = _Turns(w, c, spec.consumers)
        turn.start()   # the turns run on across the tiles (each warpgroup takes the same number a tile)
        ti, ti_next, g0, g0_next, m0, nkv, bh, lse_row = looped("c", "cend", fresh=True)
    row0 = w.v(f"add i32 {w.v(f'shl i32 {warp}, 4')}, {w.v(f'lshr i32 {lane}, 2')}")
    row0 = w.v(f"add i32 {row0}, {w.v(f'shl i32 {c}, 6')}")
    row0 = w.v(f"add i32 {m0}, {row0}")
    row1 = w.v(f"add i32 {row0}, 8")
    col_t = w.v(f"shl i32 {w.v(f'and i32 {lane}, 3')}, 1")
    q_rows = w.v(f"add i32 {base}, {w.v(f'mul i32 {c}, {64 * hp.SWIZZLE_ROW}')}")
    rows = (w.v(f"add i32 {m0}, {w.v(f'shl i32 {c}, 6')}"), row0, row1, col_t)  # the first is uniform
    if not loop:
        mult = spec.multiplier(w)
    nkv_all = nkv
    if spec.causal and spec.skip_masked > 0:
        # this warpgroup's own rows m0 + 64c … m0 + 64c + 63 need ceil((m0 + 64c + 64) / BN) blocks; the CTA's
        # later blocks are masked for all of them (up to two of three warpgroups skip a 192 × 128 tile's last)
        own = w.v(f"udiv i32 {w.v(f'add i32 {rows[0]}, {64 + BN - 1}')}, {BN}")
        if spec.skip_masked > 1:   # the same in every lane, as ptxas can see: lane 0's
            own = w.v(f"call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 {own}, i32 0, i32 31)")
        nkv = w.v(f"select i1 {w.v(f'icmp ult i32 {own}, {nkv}')}, i32 {own}, i32 {nkv}")
    if loop:
        hp.mbar_wait(w, bars, w.v(f"and i32 {ti}, 1"))
        w.br("cfirst")
    else:
        hp.mbar_wait(w, bars, "0")
        w.cbr(w.v(f"icmp ugt i32 {nkv}, 0"), "cfirst", "exit")
    # the first block: S₀ only (no P·V before it)
    w.label("cfirst")
    if not loop:
        turn = _Turns(w, c, spec.consumers)
        turn.start()
    k_at, _ = _kv(w, spec, kv_base, bars, gl("0"))
    turn.take()
    hp.fence(w)
    sc = spec.scores(w, q_rows, k_at)
    turn.give()
    sc = hp.wait_group(w, sc, 0)
    if spec.split_kv:
        hp.mbar_arrive_if(w, _empty(w, bars, _stage(w, gl("0"), S)[0], S), leader)
    probs, m0_, l0_, a0_ = _softmax(w, spec, _mask(w, spec, sc, "0", rows, sk), ["0xFFF0000000000000"] * 2,
                                    ["0.0"] * 2, mult)
    frags0 = spec.fragments(w, probs)
    first = w.current
    w.cbr(w.v(f"icmp ugt i32 {nkv}, 1"), "ckv", "clast")
    # block j: P·Vⱼ₋₁ and Sⱼ issued on the warpgroup's turn, then the softmax of Sⱼ while the other
    # warpgroup's products run
    w.label("ckv")
    j, j_next = w.fresh("cj"), w.fresh("cjn")
    o_in = [w.fresh("o") for _ in range(d // 2)]
    m_in, l_in = [w.fresh("m") for _ in range(2)], [w.fresh("l") for _ in range(2)]
    f_in = [w.fresh("p") for _ in frags0]  # P packed
    a_in = [w.fresh("a") for _ in range(2)] if spec.early_rescale else []   # the α O awaits (early_rescale)
    phis_at = len(w.lines)
    k_at, _ = _kv(w, spec, kv_base, bars, gl(j))
    _, v_prev = _kv(w, spec, kv_base, bars, gl(w.v(f"sub i32 {j}, 1")), wait=False)
    if spec.split_kv:   # Vⱼ₋₁ (loaded after Kⱼ), before the turn: a wait between the two products' issues (as
        #                 FlashAttention-3 has it) is a branch inside the wgmma pipeline, which ptxas serializes (C7520)
        hp.mbar_wait(w, _vbar(w, bars, w.v(f"sub i32 {j}, 1"), S, 0), _stage(w, w.v(f"sub i32 {j}, 1"), S)[1])
    turn.take()
    if spec.early_rescale:
        hp.fence(w)
        sc = spec.scores(w, q_rows, k_at)
        o, f_in_kept = hp.fence(w, [w.v(f"fmul float {x}, {a_in[(i // 2) % 2]}") for i, x in enumerate(o_in)], f_in)
    else:
        o, f_in_kept = hp.fence(w, o_in, f_in)
        # Sⱼ first: its softmax runs while P·Vⱼ₋₁ is still in flight (FlashAttention-3's intra-warpgroup overlap)
        sc = spec.scores(w, q_rows, k_at)
    o = spec.pv(w, o, f_in_kept, v_prev)
    turn.give()
    sc = hp.wait_group(w, sc, 1, keep=f_in_kept)
    if spec.split_kv:   # Kⱼ is free once Sⱼ is in
        hp.mbar_arrive_if(w, _empty(w, bars, _stage(w, j, S)[0], S), leader)
    probs, m_new, l_new, alphas = _softmax(w, spec, _mask(w, spec, sc, j, rows, sk), m_in, l_in, mult)
    if spec.late_wait > 0:
        # a block boundary before the wait for P·Vⱼ₋₁: within one block ptxas hoists that wait (and the slot's
        # release) above the whole softmax (nvdisasm: WARPGROUP.DEPBAR.LE gsb0, 0x0 right after the mask), so
        # the softmax would not overlap the warpgroup's own P·V. The branch is never taken (no keys, no block);
        # an empty asm takes Pⱼ (f32: its bf16 fragments are the next P·V's inputs, which ptxas serializes the
        # wgmmas for if they are written while one is in flight, C7513), α and l first, so that LLVM does not
        # sink the softmax past the branch.
        w.asm("", ",".join(["f"] * (len(probs) + 4)), [("float", x) for x in probs + alphas + l_new])
        go, never = w.fresh_label("pvwait"), w.fresh_label("never")
        opaque = w.asm("mov.b32 $0, $1;", "=r,r", [("i32", sk)], ret="i32")   # LLVM may not fold the test
        w.cbr(w.v(f"icmp eq i32 {opaque}, 0"), never, go)
        w.label(never)
        w.asm("wgmma.wait_group.sync.aligned 0;")   # (else ptxas adds it: no wgmma left in flight at the exit)
        w.br("exit")
        w.label(go)
    o = hp.wait_group(w, o, 0, keep=f_in_kept)
    if spec.split_kv:
        hp.mbar_arrive_if(w, _vbar(w, bars, w.v(f"sub i32 {j}, 1"), S, 1), leader)
    else:
        hp.mbar_arrive_if(w, _empty(w, bars, w.v(f"urem i32 {gl(w.v(f'sub i32 {j}, 1'))}, {S}"), S), leader)
    if not spec.early_rescale:
        o = [w.v(f"fmul float {x}, {alphas[(i // 2) % 2]}") for i, x in enumerate(o)]
    frags = spec.fragments(w, probs)
    w.emit(f"{j_next} = add i32 {j}, 1")
    clatch = w.current
    w.cbr(w.v(f"icmp ult i32 {j_next}, {nkv}"), "ckv", "clast")
    w.lines[phis_at:phis_at] = (
        [f"  {j} = phi i32 [1, %{first}], [{j_next}, %{clatch}]"]
        + [f"  {a} = phi float [0.0, %{first}], [{b}, %{clatch}]" for a, b in zip(o_in, o)]
        + [f"  {a} = phi float [{m}, %{first}], [{b}, %{clatch}]" for a, m, b in zip(m_in, m0_, m_new)]
        + [f"  {a} = phi float [{x}, %{first}], [{b}, %{clatch}]" for a, x, b in zip(l_in, l0_, l_new)]
        + [f"  {a} = phi i32 [{x}, %{first}], [{b}, %{clatch}]" for a, x, b in zip(f_in, frags0, frags)]
        + ([f"  {a} = phi float [{x}, %{first}], [{b}, %{clatch}]" for a, x, b in zip(a_in, a0_, alphas)]
           if spec.early_rescale else []))
    # the last block's P·V
    w.label("clast")
    ol = [w.v(f"phi float [0.0, %{first}], [{b}, %{clatch}]") for b in o]
    ll = [w.v(f"phi float [{x}, %{first}], [{b}, %{clatch}]") for x, b in zip(l0_, l_new)]
    ml = [w.v(f"phi float [{x}, %{first}], [{b}, %{clatch}]") for x, b in zip(m0_, m_new)]
    fl = [w.v(f"phi i32 [{x}, %{first}], [{b}, %{clatch}]") for x, b in zip(frags0, frags)]
    if spec.early_rescale:
        al = [w.v(f"phi float [{x}, %{first}], [{b}, %{clatch}]") for x, b in zip(a0_, alphas)]
        ol = [w.v(f"fmul float {x}, {al[(i // 2) % 2]}") for i, x in enumerate(ol)]
    if loop and spec.o_apart:   # the tile's S products are done: the producer may load the next tile's Q
        hp.mbar_arrive_if(w, qempty, leader)
    last = w.v(f"sub i32 {nkv}, 1")
    _, v_last = _kv(w, spec, kv_base, bars, gl(last), wait=False)
    if spec.split_kv:
        hp.mbar_wait(w, _vbar(w, bars, last, S, 0), _stage(w, last, S)[1])
    turn.take()
    ol, fl = hp.fence(w, ol, fl)
    ol = spec.pv(w, ol, fl, v_last)
    turn.give()
    ol = hp.wait_group(w, ol, 0, keep=fl)
    if spec.split_kv:
        hp.mbar_arrive_if(w, _vbar(w, bars, last, S, 1), leader)
    else:
        hp.mbar_arrive_if(w, _empty(w, bars, w.v(f"urem i32 {gl(last)}, {S}"), S), leader)
    if nkv is not nkv_all:
        # the blocks after this warpgroup's own: its turns passed on empty-handed (the others' round robin goes
        # on) and each ring slot released once its block has landed (so the release counts for that block)
        done = w.current
        w.cbr(w.v(f"icmp ult i32 {nkv}, {nkv_all}"), "cidle", "cdone")
        w.label("cidle")
        ji, ji_next = w.fresh("ji"), w.fresh("jin")
        w.emit(f"{ji} = phi i32 [{nkv}, %{done}], [{ji_next}, %CIDLE]")
        si, phi_ = _stage(w, gl(ji), S)
        hp.mbar_wait(w, _full(w, bars, si), phi_)
        turn.take()
        turn.give()
        hp.mbar_arrive_if(w, _empty(w, bars, si, S), leader)
        w.emit(f"{ji_next} = add i32 {ji}, 1")
        idle = w.current
        w.cbr(w.v(f"icmp ult i32 {ji_next}, {nkv_all}"), "cidle", "cdone")
        w.lines[:] = [x.replace("%CIDLE]", f"%{idle}]") for x in w.lines]
        w.label("cdone")
    if not loop:
        turn.finish()
    staging = w.v(f"add i32 {base}, {spec.q_bytes}") if spec.o_apart else base
    if loop:   # the tile's place again, from the round alone (fewer values live across the key blocks)
        c, t, leader, warp, lane = thread()
        r, n, b, _ = rank(w.asm("mov.b32 $0, $1;", "=r,r", [("i32", ti)], ret="i32"), True)
        m0, _, bh, lse_row = place(r, n, b)
        row0 = w.v(f"add i32 {w.v(f'shl i32 {warp}, 4')}, {w.v(f'lshr i32 {lane}, 2')}")
        row0 = w.v(f"add i32 {row0}, {w.v(f'shl i32 {c}, 6')}")
        row0 = w.v(f"add i32 {m0}, {row0}")
        row1 = w.v(f"add i32 {row0}, 8")
    inv = _store(w, spec, ol, ll, c, warp, lane, m0, bh, staging)
    if spec.lse:
        _store_lse(w, ml, inv, (row0, row1), lane, lse_row)
    if loop:
        if not spec.o_apart:   # O went out through the Q buffer: free once its copies have read it (the leader
            hp.mbar_arrive_if(w, qempty, leader)   # waited for that in store_rows)
        latch("c", ti, ti_next, g0, g0_next, nkv_all)
        w.label("cend")
        turn.finish()
    w.br("exit")
    w.label("exit")
    w.emit("ret void")

    body = "\n".join(w.lines).replace("%PLATCH]", f"%{platch}]")
    body = body.replace("float -inf", "float 0xFFF0000000000000").replace("[-inf,", "[0xFFF0000000000000,")
    decls = "\n".join(["declare float @llvm.maxnum.f32(float, float)", "declare float @llvm.nvvm.ex2.approx.ftz.f(float)",
                       "declare float @llvm.fma.f32(float, float, float)",
                       "declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)"]
                      + (["declare i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)"]
                         if spec.causal and spec.skip_masked > 1 else []))
    kernel = (f"@tsr_smem = external addrspace(3) global [0 x i8], align 1024\n"
              f"define ptx_kernel void @{llvm_global(spec.name)}({', '.join(params)}) "
              f"\"nvvm.maxntid\"=\"{spec.threads}\" \"nvvm.minctasm\"=\"1\" {{\n{body}\n}}\n")
    return module(kernel, decls)


def _decode(w: Writer, spec: Sm90AttentionSpec, r: str, nq: str, bht: str) -> tuple[str, str]:
    """A persistent grid's tile of rank `r`: (query tile bx as a CTA a tile numbers it, the longest 0 when
    causal; (batch, head) index). Not causal: a (batch, head)'s tiles one after the other, as the hardware
    launches a grid (nq, BH). Causal: the longest tiles first, of every (batch, head) in turn — with `section`,
    of `section` (batch, head)s at a time (their K and V sharing L2) — so that the short ones fill the end."""
    if not spec.causal:
        return w.v(f"urem i32 {r}, {nq}"), w.v(f"udiv i32 {r}, {nq}")
    if not spec.section:
        return w.v(f"udiv i32 {r}, {bht}"), w.v(f"urem i32 {r}, {bht}")
    section = str(spec.section)
    if spec.section < 0:   # as many as 32 MiB of K and V hold (FlashAttention-3's DynamicPersistentTileScheduler)
        section = w.v(f"udiv i32 {(32 << 20) // (4 * spec.head_dim)}, {w.v('trunc i64 %SK to i32')}")
        section = w.v(f"select i1 {w.v(f'icmp eq i32 {section}, 0')}, i32 1, i32 {section}")
    few = w.v(f"icmp ult i32 {bht}, {section}")
    hs_full = w.v(f"select i1 {few}, i32 {bht}, i32 {section}")
    per = w.v(f"mul i32 {nq}, {hs_full}")
    sec = w.v(f"udiv i32 {r}, {per}")
    rem = w.v(f"sub i32 {r}, {w.v(f'mul i32 {sec}, {per}')}")
    h0 = w.v(f"mul i32 {sec}, {hs_full}")
    left = w.v(f"sub i32 {bht}, {h0}")
    hs = w.v(f"select i1 {w.v(f'icmp ult i32 {left}, {hs_full}')}, i32 {left}, i32 {hs_full}")
    return w.v(f"udiv i32 {rem}, {hs}"), w.v(f"add i32 {h0}, {w.v(f'urem i32 {rem}, {hs}')}")


class _Turns:
    """Ping-pong of the `n` consumer warpgroups (FlashAttention-3's schedule), round robin: each issues its
    products only on its turn and hands the turn to the next at once, so one warpgroup's softmax runs while
    the others' products keep the tensor cores busy — left alone, they reach their products together and
    their softmaxes together. A turn is named barrier n + 1 + c (after the store's 1 … n) of two warpgroups'
    256 threads: `take` waits on one's own, `give` arrives on the next one's. The last warpgroup gives first
    (`start`); warpgroup 0 takes one more turn at the end (`finish`), so that every barrier completes."""

    def __init__(self, w: Writer, c: str, n: int = 2):
        self.w, self.c, self.n = w, c, n
        self.mine = w.v(f"add i32 {c}, {n + 1}")
        nxt = w.v(f"add i32 {c}, 1")
        nxt = w.v(f"select i1 {w.v(f'icmp eq i32 {nxt}, {n}')}, i32 0, i32 {nxt}")
        self.other = w.v(f"add i32 {nxt}, {n + 1}")

    def _if(self, cond: str, text: str, bar: str) -> None:
        self.w.asm(f"{{ .reg .pred p; setp.ne.b32 p, $0, 0; @p {text} $1, 256; }}", "r,r",
                   [("i32", self.w.v(f"zext i1 {cond} to i32")), ("i32", bar)])

    def start(self) -> None:
        self._if(self.w.v(f"icmp eq i32 {self.c}, {self.n - 1}"), "bar.arrive", self.other)

    def take(self) -> None:
        self.w.asm("bar.sync $0, 256;", "r", [("i32", self.mine)])

    def give(self) -> None:
        self.w.asm("bar.arrive $0, 256;", "r", [("i32", self.other)])

    def finish(self) -> None:
        self._if(self.w.v(f"icmp eq i32 {self.c}, 0"), "bar.sync", self.mine)


def _kv(w: Writer, spec: Sm90AttentionSpec, kv_base: str, bars: str, j: str, wait: bool = True):
    """Shared addresses of K and V of key block `j`; waits for them to land unless told not to."""
    s, ph = _stage(w, j, spec.stages)
    if wait:
        hp.mbar_wait(w, _full(w, bars, s), ph)
    k_at = w.v(f"add i32 {kv_base}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
    return k_at, w.v(f"add i32 {k_at}, {spec.v_offset}")


def _scores(w: Writer, spec: Sm90AttentionSpec, q_rows: str, k_at: str) -> list[str]:
    """Issues S = Q·Kᵀ (both K-major: the head dimension is contiguous in Q and K), one box per 64 of it."""
    et, _ = _ELEM[spec.dtype]
    sc = None
    for kk in range(spec.head_dim // 16):
        da = hp.desc(w, w.v(f"add i32 {q_rows}, {(kk // 4) * spec.q_box + 32 * (kk % 4)}"), 16, hp.ATOM)
        db = hp.desc(w, w.v(f"add i32 {k_at}, {(kk // 4) * spec.kv_box + 32 * (kk % 4)}"), 16, hp.ATOM)
        sc = hp.wgmma_ss_first(w, spec.block_n, et, da, db, 0) if sc is None else hp.wgmma_ss(w, sc, et, da, db, 0)
    hp.commit(w)
    return sc


def _pv(w: Writer, spec: Sm90AttentionSpec, o: list[str], frags: list[str], v_at: str) -> list[str]:
    """Issues O += P·V: P's fragments in registers, V MN-major (64-column boxes one box apart)."""
    et, _ = _ELEM[spec.dtype]
    for kk in range(spec.block_n // 16):
        db = hp.desc(w, w.v(f"add i32 {v_at}, {16 * hp.SWIZZLE_ROW * kk}"), spec.kv_box, hp.ATOM)
        o = hp.wgmma_rs(w, o, et, frags[4 * kk:4 * kk + 4], db, trans_b=1)
    hp.commit(w)
    return o


def _softmax(w: Writer, spec: Sm90AttentionSpec, sc: list[str], m_in: list[str], l_in: list[str],
             log2e: str | None = None):
    """One step of the online softmax of the thread's two rows: (p, new row max, new row sum of this
    thread's columns, rescale factor of what came before). Maxima are completed across the quad of lanes
    sharing a row; sums are not until the end. `log2e`: a raw score's factor in the exponent (a positive
    f32 value), scale · log2(e) when not given."""
    log2e = log2e or _f(spec.scale * math.log2(math.e))
    probs = list(sc)
    m_new, l_new, alphas = [], [], []
    for r in range(2):
        idx = [4 * q + 2 * r + e for q in range(spec.block_n // 8) for e in range(2)]
        mx = _tree(w, [sc[i] for i in idx], "maxnum")
        for x in (1, 2):
            other = w.v(f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {mx}, i32 {x}, i32 31)")
            mx = w.v(f"call float @llvm.maxnum.f32(float {mx}, float {other})")
        mn = w.v(f"call float @llvm.maxnum.f32(float {m_in[r]}, float {w.v(f'fmul float {mx}, {log2e}')})")
        # a row with every key masked so far keeps -inf: exp2(-inf - -inf) would be NaN
        finite = w.v(f"fcmp one float {mn}, 0xFFF0000000000000")
        neg = w.v(f"fneg float {w.v(f'select i1 {finite}, float {mn}, float 0.0')}")
        for i in idx:
            probs[i] = spec.exp2(w, w.v(f"call float @llvm.fma.f32(float {sc[i]}, float {log2e}, float {neg})"), i)
        alpha = w.v(f"call float @llvm.nvvm.ex2.approx.ftz.f(float {w.v(f'fadd float {m_in[r]}, {neg}')})")
        total = _tree(w, [probs[i] for i in idx], "fadd")
        l_new.append(w.v(f"call float @llvm.fma.f32(float {l_in[r]}, float {alpha}, float {total})"))
        m_new.append(mn)
        alphas.append(alpha)
    return probs, m_new, l_new, alphas


def exp2_poly(w: Writer, x: str) -> str:
    """2^x for x <= 0 (or -inf) without the MUFU unit (FlashAttention-4's trick; as attention_fp8_sm90's): x
    clamped to -125 (2^-125 is far below what a bf16 probability next to the row's maximum, 1, carries), split
    as j + r with j = round(x) (adding 1.5·2^23 rounds it into the low bits) and |r| <= 1/2, 2^r by a cubic
    (relative error 1.4e-4, below bf16's 2^-9 rounding), and j added to the exponent field."""
    magic = _f(12582912.0)
    x = w.v(f"call float @llvm.maxnum.f32(float {x}, float {_f(-125.0)})")
    t = w.v(f"fadd float {x}, {magic}")
    j = w.v(f"sub i32 {w.v(f'bitcast float {t} to i32')}, 1262485504")   # bits of 1.5·2^23
    r = w.v(f"fsub float {x}, {w.v(f'fsub float {t}, {magic}')}")
    p = _f(0.05502926558256149)
    for c in (0.2422569841146469, 0.6932530403137207, 0.9999513626098633):
        p = w.v(f"call float @llvm.fma.f32(float {p}, float {r}, float {_f(c)})")
    bits = w.v(f"add i32 {w.v(f'bitcast float {p} to i32')}, {w.v(f'shl i32 {j}, 23')}")
    return w.v(f"bitcast i32 {bits} to float")


def _fragments(w: Writer, spec: Sm90AttentionSpec, probs: list[str]) -> list[str]:
    """P as wgmma A fragments: per 16 keys, packed pairs (row, keys 2t..), (row+8, …), (row, keys 8+2t..),
    (row+8, …) — which is the accumulator's order of S."""
    _, ety = _ELEM[spec.dtype]
    out = []
    for i in range(0, len(probs), 2):
        vec = w.v(f"insertelement <2 x float> poison, float {probs[i]}, i32 0")
        vec = w.v(f"insertelement <2 x float> {vec}, float {probs[i + 1]}, i32 1")
        out.append(w.v(f"bitcast <2 x {ety}> {w.v(f'fptrunc <2 x float> {vec} to <2 x {ety}>')} to i32"))
    return out


def _f(x: float) -> str:
    """An f32 constant as LLVM IR writes it (the double with the same value, in hex)."""
    import struct
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", struct.unpack("<f", struct.pack("<f", x))[0]))[0]


def entry(w: Writer) -> tuple[str, str, str, str, str]:
    """Opens the kernel (also attention_bwd_sm90's): (tid.x, ctaid.x, ctaid.y, nctaid.x, shared memory base)."""
    w.label("entry")
    return w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y"), w.sreg("nctaid.x"), hp.smem_base(w)


def producer(w: Writer, tid: str, bars: str, stages: int, consumers: int = 2, extra=()) -> tuple[str, str]:
    """Initialises the mbarriers at `bars` (the held rows' one, then full[stages] and empty[stages], the latter
    released by each of the `consumers`; then the `extra` (address, count)s), splits the roles and opens the
    producer's block, its registers given up: (tid == 0, the warpgroup's index)."""
    barriers = [(bars, 1)] + [(w.v(f"add i32 {bars}, {8 + 8 * s}"), 1) for s in range(stages)] \
        + [(w.v(f"add i32 {bars}, {8 + 8 * (stages + s)}"), consumers) for s in range(stages)] + list(extra)
    first, wg = hp.split_roles(w, tid, barriers)
    w.label("producer")
    w.asm("setmaxnreg.dec.sync.aligned.u32 24;")
    return first, wg


def consumer(w: Writer, wg: str, tid: str, consumers: int = 2) -> tuple[str, str, str, str, str]:
    """Opens the consumers' block, registers taken — 240 a thread for two consumer warpgroups, 160 for three
    (with the producer's 24: 64512 of the 65536): (consumer warpgroup c, thread in it, whether it leads, warp
    in it, lane)."""
    w.label("consumer")
    w.asm(f"setmaxnreg.inc.sync.aligned.u32 {240 if consumers == 2 else 160};")
    c = w.v(f"sub i32 {wg}, 1")
    t = w.v(f"and i32 {tid}, 127")
    leader = w.v(f"icmp eq i32 {t}, 0")
    return c, t, leader, w.v(f"lshr i32 {t}, 5"), w.v(f"and i32 {t}, 31")


def _stage(w: Writer, j: str, stages: int) -> tuple[str, str]:
    return w.v(f"urem i32 {j}, {stages}"), w.v(f"and i32 {w.v(f'udiv i32 {j}, {stages}')}, 1")


def _full(w: Writer, bars: str, s: str) -> str:
    return w.v(f"add i32 {w.v(f'add i32 {bars}, 8')}, {w.v(f'shl i32 {s}, 3')}")


def _empty(w: Writer, bars: str, s: str, stages: int) -> str:
    return w.v(f"add i32 {_full(w, bars, s)}, {8 * stages}")


def _vbar(w: Writer, bars: str, j: str, stages: int, empty: int) -> str:
    """split_kv: V's full (`empty` 0) or empty (1) mbarrier of key block `j`'s slot, after K's full and empty."""
    s = w.v(f"urem i32 {j}, {stages}")
    return w.v(f"add i32 {_full(w, bars, s)}, {8 * stages * (2 + empty)}")


def _load_half(w: Writer, spec: Sm90AttentionSpec, kv_base: str, bars: str, tm: dict, j: str, bh, v: int) -> None:
    """split_kv's producer: K (`v` 0) or V (1) of key block `j` into its slot once the consumers have freed it."""
    s, ph = _stage(w, j, spec.stages)
    full = _vbar(w, bars, j, spec.stages, 0) if v else _full(w, bars, s)
    empty = _vbar(w, bars, j, spec.stages, 1) if v else _empty(w, bars, s, spec.stages)
    hp.mbar_wait(w, empty, w.v(f"xor i32 {ph}, 1"))
    hp.mbar_expect(w, full, spec.boxes * spec.kv_box)
    at = w.v(f"add i32 {kv_base}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
    key0 = w.v(f"mul i32 {j}, {spec.block_n}")
    for i in range(spec.boxes):
        hp.tma_load(w, w.v(f"add i32 {at}, {v * spec.v_offset + i * spec.kv_box}"), tm["V" if v else "K"],
                    [str(64 * i)] + outer(key0, bh), full)


def _tree(w: Writer, vals: list[str], op: str) -> str:
    """A balanced reduction (short dependency chains)."""
    while len(vals) > 1:
        nxt = []
        for a, b in zip(vals[::2], vals[1::2]):
            nxt.append(w.v(f"call float @llvm.maxnum.f32(float {a}, float {b})") if op == "maxnum"
                       else w.v(f"fadd float {a}, {b}"))
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def _mask(w: Writer, spec: Sm90AttentionSpec, sc: list[str], j: str, rows: tuple, sk: str) -> list[str]:
    """-inf for keys past the end and, when causal, keys after the query — on the blocks that have any (a
    decision of the whole warpgroup, which must reach its next wgmma together)."""
    rmin, row0, row1, col_t = rows
    BN = spec.block_n
    key0 = w.v(f"mul i32 {j}, {BN}")
    last = w.v(f"icmp ugt i32 {w.v(f'add i32 {key0}, {BN}')}, {sk}")
    if spec.causal:
        diag = w.v(f"icmp ugt i32 {w.v(f'add i32 {key0}, {BN - 1}')}, {rmin}")
        last = w.v(f"or i1 {last}, {diag}")
    after_row = (lambda col, r: w.v(f"icmp ugt i32 {col}, {row1 if r else row0}")) if spec.causal else None
    return masked(w, sc, last, key0, col_t, sk, "0xFFF0000000000000", after_row)


def masked(w: Writer, vals: list[str], some: str, c0: str, col_t: str, end: str, fill: str, bad=None) -> list[str]:
    """`vals`, a wgmma accumulator's fragment (element i in column c0 + col_t + 8·(i // 4) + i % 2 and the
    thread's row (i // 2) % 2), with `fill` where the column is `end` or past it or `bad`(column, row) holds
    (an i1), computed on a branch that only the blocks with `some` (uniform across the warpgroup) take."""
    before, block, after = w.current, w.fresh_label("mask"), w.fresh_label("masked")
    w.cbr(some, block, after)
    w.label(block)
    out = []
    for i, v in enumerate(vals):
        g, r, e = i // 4, (i // 2) % 2, i % 2
        col = w.v(f"add i32 {c0}, {w.v(f'add i32 {col_t}, {8 * g + e}')}")
        past = w.v(f"icmp uge i32 {col}, {end}")
        if bad is not None:
            past = w.v(f"or i1 {past}, {bad(col, r)}")
        out.append(w.v(f"select i1 {past}, float {fill}, float {v}"))
    w.br(after)
    w.label(after)
    return [w.v(f"phi float [{v}, %{before}], [{m}, %{block}]") for v, m in zip(vals, out)]


def outer(row: str, bh) -> list[str]:
    """A TMA box's coordinates after the column: (row, bh) of a [BH, S, D] map, or (head, row, batch) of a
    [B, S, H, D] one where `bh` is the pair (head, batch)."""
    return [bh[0], row, bh[1]] if isinstance(bh, tuple) else [row, bh]


def _store(w: Writer, spec: Sm90AttentionSpec, o: list[str], l: list[str], c: str, warp: str, lane: str,
           m0: str, bh: str, base: str) -> list[str]:
    """O / l, rounded, out through shared memory (`store_rows`) by way of the warpgroup's 64 rows of the Q
    buffer (its last S product is done, and the other warpgroup reads only its own rows). The row sums are
    first completed across the quad of lanes that shares a row; returns their reciprocals."""
    inv = []
    for r in range(2):
        total = l[r]
        for x in (1, 2):
            total = w.v(f"fadd float {total}, "
                        f"{w.v(f'call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {total}, i32 {x}, i32 31)')}")
        inv.append(w.v(f"fdiv float 1.0, {total}"))
    extra = spec.out_scale(w)
    factor = [w.v(f"fmul float {x}, {extra}") for x in inv] if extra else inv
    scaled = [w.v(f"fmul float {x}, {factor[(i // 2) % 2]}") for i, x in enumerate(o)]
    store_rows(w, spec, scaled, c, warp, lane, w.v(f"add i32 {m0}, {w.v(f'shl i32 {c}, 6')}"), bh,
               w.v(f"add i32 {base}, {w.v(f'shl i32 {c}, 13')}"), "O")
    return inv


def _store_lse(w: Writer, m: list[str], inv: list[str], rows: tuple[str, str], lane: str, bh: str) -> None:
    """LSE[bh, row] = ln Σ exp(scale · s) = (m + log2 l) · ln 2, m being the running maximum in log2 units;
    the first lane of each quad stores its two rows, those before SQ."""
    ln2 = _f(math.log(2.0))
    quad0 = w.v(f"icmp eq i32 {w.v(f'and i32 {lane}, 3')}, 0")
    sq = w.v("trunc i64 %SQ to i32")
    for r in range(2):
        lg = w.asm("lg2.approx.f32 $0, $1;", "=f,f", [("float", inv[r])], ret="float")   # log2(1 / l)
        val = w.v(f"fmul float {w.v(f'fsub float {m[r]}, {lg}')}, {ln2}")
        ok = w.v(f"and i1 {quad0}, {w.v(f'icmp ult i32 {rows[r]}, {sq}')}")
        put, done = w.fresh_label("lse"), w.fresh_label("lsed")
        w.cbr(ok, put, done)
        w.label(put)
        at = w.v(f"mul i64 {w.v(f'zext i32 {bh} to i64')}, %SQ")
        at = w.v(f"add i64 {at}, {w.v(f'zext i32 {rows[r]} to i64')}")
        w.emit(f"store float {val}, ptr addrspace(1) {w.v(f'getelementptr float, ptr addrspace(1) %LSE, i64 {at}')}")
        w.br(done)
        w.label(done)


def store_rows(w: Writer, spec, vals: list[str], c: str, warp: str, lane: str, row: str, bh: str,
               staging: str, tmap: str) -> None:
    """A warpgroup's 64 rows × D of f32 accumulators `vals`, rounded to the spec's dtype, out to rows `row` …
    of the tensor with map `tmap`: into `staging` (64-row slices of 64-column boxes QBOX apart, which no
    one else reads now) by stmatrix in TMA's layout, then its leader stores one 64x64 box per 64 columns
    (rows past the end are clipped by TMA) and waits for the copies to have read shared memory before the
    CTA may end (or the staging be reused)."""
    _, ety = _ELEM[spec.out_dtype]

    def pair(q: int, r: int) -> str:
        vec = w.v(f"insertelement <2 x float> poison, float {vals[4 * q + 2 * r]}, i32 0")
        vec = w.v(f"insertelement <2 x float> {vec}, float {vals[4 * q + 2 * r + 1]}, i32 1")
        return w.v(f"bitcast <2 x {ety}> {w.v(f'fptrunc <2 x float> {vec} to <2 x {ety}>')} to i32")

    hp.stmatrix_rows(w, [[pair(q, r) for q in (2 * g, 2 * g + 1) for r in (0, 1)]
                         for g in range(spec.head_dim // 16)], warp, lane, staging, spec.q_box)
    w.asm("fence.proxy.async.shared::cta;")
    w.asm("bar.sync $0, 128;", "r", [("i32", w.v(f"add i32 {c}, 1"))])  # named barrier of the warpgroup
    t = w.v(f"or i32 {w.v(f'shl i32 {warp}, 5')}, {lane}")
    leader = w.v(f"zext i1 {w.v(f'icmp eq i32 {t}, 0')} to i32")
    tm = w.v(f"ptrtoint ptr %tm{tmap} to i64")
    for i in range(spec.head_dim // 64):
        coords = [str(64 * i)] + outer(row, bh)
        n = len(coords)
        w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; "
              f"@p cp.async.bulk.tensor.{n}d.global.shared::cta.bulk_group "
              f"[$1, {{{', '.join(f'${2 + j}' for j in range(n))}}}], [${2 + n}]; }}",
              ",".join(["r", "l"] + ["r"] * (n + 1)), [("i32", leader), ("i64", tm)] + [("i32", x) for x in coords]
              + [("i32", w.v(f"add i32 {staging}, {i * spec.q_box}"))])
    w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.commit_group; "
          "@p cp.async.bulk.wait_group.read 0; }", "r", [("i32", leader)])
