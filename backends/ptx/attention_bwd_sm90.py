"""Hopper flash attention (backward): dQ, dK and dV of O = softmax(scale · Q·Kᵀ [causal mask]) · V on sm_90a
tensor cores, never holding the S×S matrix outside registers.

Inputs as the forward's (Q [BH, SQ, D], K and V [BH, SK, D], dO [BH, SQ, D], bf16 or f16, D 64 or 128) and
the f32 row statistics LSE (the forward's natural-log log-sum-exp of each query row) and Delta = rowsum(dO ∘ O),
both [BH, SQ]. With P = exp(scale · Q·Kᵀ − lse), dP = dO·Vᵀ and dS = P ∘ (dP − delta):
dV = Pᵀ·dO, dK = scale · dSᵀ·Q, dQ = scale · dS·K, accumulated in f32.

Two kernels at D = 128 and under the "deterministic" numerics profile (FlashAttention-2's variant with a separate dQ
pass: no f32 scratch, a fixed order of additions), or one (dkdvdq) by default; shaped as the
forward (attention_sm90.py): a CTA holds 128 rows of one side in shared memory (the "rows", 64 per consumer
warpgroup) and streams blocks of `block_n` rows of the other side through a TMA ring filled by a
producer warpgroup:

    dkdv   rows: K and V (128 keys);      streamed: Q and dO blocks (queries), with their LSE and Delta
           Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (wgmma, shared operands), Pᵀ = exp2(Sᵀ·c − lse·log2 e),
           dSᵀ = Pᵀ ∘ (dPᵀ − delta), then dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ and dSᵀ from registers as
           wgmma's A fragments (the accumulator layout of a product is the fragment layout of A)
    dq     rows: Q and dO (128 queries);  streamed: K and V blocks (keys)
           S = Q·Kᵀ, dP = dO·Vᵀ, P and dS as above with the row's lse and delta, dQ += dS·K

    dkdvdq dkdv, and dQ too (attention_lowering.lower_bwd: by default, FUSED_DQ_HEAD_DIMS): each
           warpgroup stages its 64 keys of dSᵀ in a shared tile (two, alternating by block), both meet at a
           named barrier, then each multiplies dQᵀ = Kᵀ·dSᵀ over the 128 keys (`_dq_product`), writes it to
           a shared buffer (`_add_dq`) and a warp of the producer warpgroup adds that into dQacc (f32
           [BH, SQ, D], zeroed before by `generate_pre`'s kernel, which also computes Delta, and rounded to dQ
           after by `generate_acc`'s) by TMA bulk tensor reductions (`_dq_warp`, FlashAttention-3's way)

so dkdv and dq multiply seven S×S×D products, dkdvdq five; dkdvdq's reductions add in a varying order, and
on an H100 it is the faster at D = 64 and 128 (docs/performance.md). dkdvdq keeps the streamed block's
statistics in shared memory (FlashAttention-3's way; dkdv and dq hold them in registers) and, with
128-query blocks (D = 64), computes dS from P rounded to the dtype (`rounded_p`). Causal
attention skips the blocks that are wholly masked (dkdv: query blocks before the key block; dq: key blocks
after the query block) and masks the diagonal ones; keys or queries past the end are masked too (TMA reads
them as zeros). The result rows leave through shared memory and TMA stores, as the forward's O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..symbol_names import llvm_global
from . import attention_sm90 as fwd
from . import hopper as hp
from .nvvm_text import Writer, module

BM = fwd.BM              # rows a CTA holds
# the kernels and the results each writes: dkdv (or one of its results alone, when only that is wanted) and dq
RESULTS = {"dkdv": ("dK", "dV"), "dk": ("dK",), "dv": ("dV",), "dq": ("dQ",), "dkdvdq": ("dK", "dV", "dQacc")}
# (rows of a streamed block, stages) by (kernel, head dimension, causal): the fastest tried on an H100 and an
# H200 at S = 4096 (docs/performance.md; others within 5 %); dkdv at D = 128 spills with 64-row blocks (two
# 64-row f32 accumulators of 128 columns besides Sᵀ and dPᵀ, and the columns' statistics), dkdvdq does not
# (its statistics in shared memory)
TUNED = {("dkdv", 128, False): (48, 3), ("dkdv", 128, True): (32, 2), ("dkdv", 64, False): (96, 2),
         ("dkdv", 64, True): (64, 2), ("dq", 128, False): (128, 2), ("dq", 128, True): (128, 2),
         ("dq", 64, False): (128, 2), ("dq", 64, True): (128, 2),
         ("dkdvdq", 128, False): (64, 3), ("dkdvdq", 128, True): (64, 3), ("dkdvdq", 64, False): (128, 2),
         ("dkdvdq", 64, True): (128, 2)}
# where dkdvdq (with its _dq_zero and _dq_cast) beat dkdv and dq on an H100 at S = 4096 (docs/performance.md:
# D = 64 by 7-9 % with 64-query blocks, more with 128; D = 128 by 23-40 % with 64-query blocks), so
# PTXOptions.fused_dq "faster" takes it
FUSED_DQ_HEAD_DIMS = (64, 128)
# dkdvdq's named barriers, one a consumer warpgroup: its dQ buffer written, and read by the reductions (`_dq_warp`)
DQ_FULL, DQ_FREE = 6, 8
DS_BOX = BM * hp.SWIZZLE_ROW   # one 64-column box of the CTA's dSᵀ tile (dkdvdq): 128 key rows of 128 bytes


@dataclass(frozen=True)
class Sm90AttentionBwdSpec(fwd.Blocks):
    name: str
    kind: str                     # a key of RESULTS
    head_dim: int = 128
    causal: bool = False
    scale: float = 1.0
    dtype: str = "bf16"
    stages: int = 0               # of the ring of streamed blocks; 0: TUNED's
    block_n: int = 0              # rows of the streamed side per block; 0: TUNED's
    held = 2                      # two tiles of 128 rows: K and V, or Q and dO

    def __post_init__(self):
        if self.kind not in RESULTS:
            raise ValueError(f"the sm_90a attention backward has kernels {', '.join(RESULTS)}, not {self.kind}")
        tuned = TUNED.get(({"dq": "dq", "dkdvdq": "dkdvdq"}.get(self.kind, "dkdv"), self.head_dim, self.causal),
                          (64, 2))
        for key, value in zip(("block_n", "stages"), tuned):
            if not getattr(self, key):
                object.__setattr__(self, key, value)
        self.check("attention backward", "rows", 128)
        if self.kind == "dkdvdq" and self.head_dim == 64 and self.block_n not in (64, 128):
            # each warpgroup takes half of the block's queries for dQ, within one 64-column box of dSᵀ
            raise ValueError(f"the sm_90a attention backward with dQ in the dK/dV kernel takes blocks of 64 or 128 "
                             f"queries at head dimension 64, not {self.block_n}")

    @property
    def ds_bytes(self) -> int:
        """Shared memory for dSᵀ (dkdvdq): two tiles (the block's and the next's) of 128 keys × block_n."""
        return 2 * -(-self.block_n // 64) * DS_BOX if self.kind == "dkdvdq" else 0

    @property
    def dq_rows(self) -> int:
        """Queries of a warpgroup's part of a block's dQ (dkdvdq): all of the block's at D = 128 (where the
        warpgroups split the head dimension), half of them at D = 64 (where they split the queries)."""
        return self.block_n if self.head_dim == 128 else self.block_n // 2

    @property
    def dq_bytes(self) -> int:
        """Shared memory for dQ's f32 partial sums (dkdvdq): a buffer a warpgroup of dq_rows × 64 head
        dimensions."""
        return 2 * self.dq_rows * 64 * 4 if self.kind == "dkdvdq" else 0

    @property
    def rounded_p(self) -> bool:
        """Whether dS is computed from P rounded to the operand dtype (its A fragment for dV, made before dP's
        wait) rather than from P in f32: dkdvdq with 128-query blocks, which otherwise hold P's f32 registers
        beside dP's and spill (232 bytes at D = 64); with 64-query blocks at D = 128 it ran 6 % slower on an
        H100 (docs/performance.md). dS is rounded to the dtype for its products anyway."""
        return self.kind == "dkdvdq" and self.block_n == 128

    @property
    def stat_bytes(self) -> int:
        """Shared memory for the streamed block's statistics (dkdvdq): a copy a warpgroup of its −lse·log2 e
        and delta, 2·block_n floats rounded up to the warpgroup's 128 threads (each loads one or two). Held
        in registers instead, the 2·block_n / 8 columns a thread multiplies were what made 64-query blocks
        spill at D = 128; FlashAttention-3 keeps them in shared memory too."""
        return 2 * 128 * -(-2 * self.block_n // 128) * 4 if self.kind == "dkdvdq" else 0

    @property
    def smem_bytes(self) -> int:
        return super().smem_bytes + self.ds_bytes + self.dq_bytes + self.stat_bytes

    @property
    def params(self) -> tuple[str, ...]:
        """The launch arguments' names, in order (then BH, SQ, SK)."""
        return ("Q", "K", "V", "dO", "LSE", "Delta") + RESULTS[self.kind]

    @property
    def tensor_maps(self) -> str:
        held = ("Q", "dO") if self.kind == "dq" else ("K", "V")
        rows = {n: BM if n in held else self.block_n for n in ("Q", "K", "V", "dO")}
        rows.update({n: 64 for n in self.params[6:8]})       # results leave 64 rows a warpgroup
        maps = [f"{n}:{i}:64x{rows[n]}x1:128" for i, n in enumerate(self.params) if n in rows]
        if self.kind == "dkdvdq":   # f32 boxes of 32 columns (128 bytes) added by the bulk tensor reduction
            maps.append(f"dQacc:8:32x{self.dq_rows}x1:128")
        return ";".join(maps)

    def flops(self, bh: int, sq: int, sk: int) -> float:
        """The FLOPs of this kernel's products (S×S×D each): dkdvdq five, dkdv four, dk and dq three, dv two."""
        pairs = sum(min(i + 1, sk) for i in range(sq)) if self.causal else sq * sk
        return 2.0 * {"dkdv": 4, "dk": 3, "dv": 2, "dq": 3, "dkdvdq": 5}[self.kind] * bh * pairs * self.head_dim


def generate(spec: Sm90AttentionBwdSpec) -> str:
    """The kernel as NVPTX LLVM IR text. Parameters: the tensor maps of `spec.tensor_maps`, then the launch
    arguments `spec.params` and the extents BH, SQ, SK. Grid: (ceil(SQ/128) for dq, else ceil(SK/128), BH)."""
    w = Writer()
    dkdv = spec.kind != "dq"                                 # K and V are the held rows
    fused = spec.kind == "dkdvdq"                            # dQ too, by bulk reductions
    want_dk, want_dv = "dK" in spec.params, "dV" in spec.params
    S, nb, d, BN, BOX = spec.stages, spec.boxes, spec.head_dim, spec.block_n, spec.kv_box
    maps = [m.split(":")[0] for m in spec.tensor_maps.split(";")]
    params = hp.tensor_map_params(maps)
    params += [f"ptr addrspace(1) %{n}" for n in spec.params] + ["i64 %BH", "i64 %SQ", "i64 %SK"]
    rows_map, cols_map = (("K", "V"), ("Q", "dO")) if dkdv else (("Q", "dO"), ("K", "V"))

    tid, bx, bh, nx, base = fwd.entry(w)                     # base: rows A1 (nb boxes), A2 (nb boxes)
    ring = w.v(f"add i32 {base}, {2 * nb * fwd.QBOX}")
    ds_tiles = w.v(f"add i32 {ring}, {S * spec.stage_bytes}")  # dkdvdq: dSᵀ, two tiles
    dq_bufs = w.v(f"add i32 {ds_tiles}, {spec.ds_bytes}")     # dkdvdq: dQ's partial sums, a buffer a warpgroup
    stat_bufs = w.v(f"add i32 {dq_bufs}, {spec.dq_bytes}")    # dkdvdq: the block's statistics, a copy a warpgroup
    bars = w.v(f"add i32 {stat_bufs}, {spec.stat_bytes}")     # rows full, full[S], empty[S]
    sq = w.v("trunc i64 %SQ to i32")
    sk = w.v("trunc i64 %SK to i32")
    if spec.causal and not dkdv:  # the query tiles with the most key blocks first
        bx = w.v(f"sub i32 {w.v(f'sub i32 {nx}, 1')}, {bx}")
    r0 = w.v(f"mul i32 {bx}, {BM}")                          # the CTA's first row
    # the streamed blocks j0 … j0 + n - 1
    n_all = w.v(f"udiv i32 {w.v(f'add i32 {sq if dkdv else sk}, {BN - 1}')}, {BN}")
    j0 = "0"
    if spec.causal and dkdv:     # queries before the first key see none of these keys
        j0 = w.v(f"udiv i32 {r0}, {BN}")
        j0 = w.v(f"select i1 {w.v(f'icmp ult i32 {j0}, {n_all}')}, i32 {j0}, i32 {n_all}")
    elif spec.causal:            # keys after the last query are seen by none of these queries
        need = w.v(f"udiv i32 {w.v(f'add i32 {r0}, {BM + BN - 1}')}, {BN}")
        n_all = w.v(f"select i1 {w.v(f'icmp ult i32 {need}, {n_all}')}, i32 {need}, i32 {n_all}")
    n = w.v(f"sub i32 {n_all}, {j0}")

    first, wg = fwd.producer(w, tid, bars, S)   # the producer: the rows once, then the streamed blocks
    w.cbr(first, "load_rows", "dq_warp0" if fused else "exit")
    if fused:
        _dq_warp(w, spec, tid, j0, n, bh, dq_bufs)
    w.label("load_rows")
    tm = {m: w.v(f"ptrtoint ptr %tm{m} to i64") for m in rows_map + cols_map}
    hp.mbar_expect(w, bars, 2 * nb * fwd.QBOX)
    for a, m in enumerate(rows_map):
        for i in range(nb):
            hp.tma_load(w, w.v(f"add i32 {base}, {(a * nb + i) * fwd.QBOX}"), tm[m], [str(64 * i), r0, bh], bars)
    w.cbr(w.v(f"icmp ugt i32 {n}, 0"), "pload", "exit")
    w.label("pload")
    i, i_next = w.fresh("i"), w.fresh("in")
    w.emit(f"{i} = phi i32 [0, %load_rows], [{i_next}, %PLATCH]")
    s, ph = fwd._stage(w, i, S)
    full, empty = fwd._full(w, bars, s), fwd._empty(w, bars, s, S)
    hp.mbar_wait(w, empty, w.v(f"xor i32 {ph}, 1"))
    hp.mbar_expect(w, full, spec.stage_bytes)
    at = w.v(f"add i32 {ring}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
    row = w.v(f"mul i32 {w.v(f'add i32 {j0}, {i}')}, {BN}")
    for a, m in enumerate(cols_map):
        for b in range(nb):
            hp.tma_load(w, w.v(f"add i32 {at}, {(a * nb + b) * BOX}"), tm[m], [str(64 * b), row, bh], full)
    w.emit(f"{i_next} = add i32 {i}, 1")
    platch = w.current
    w.cbr(w.v(f"icmp ult i32 {i_next}, {n}"), "pload", "exit")

    # -- consumers -----------------------------------------------------------------------------------------
    c, t, leader, warp, lane = fwd.consumer(w, wg, tid)
    wrow = w.v(f"add i32 {r0}, {w.v(f'shl i32 {c}, 6')}")     # the warpgroup's first row
    row0 = w.v(f"add i32 {w.v(f'shl i32 {warp}, 4')}, {w.v(f'lshr i32 {lane}, 2')}")
    row0 = w.v(f"add i32 {wrow}, {row0}")
    row1 = w.v(f"add i32 {row0}, 8")
    col_t = w.v(f"shl i32 {w.v(f'and i32 {lane}, 3')}, 1")
    a1 = w.v(f"add i32 {base}, {w.v(f'mul i32 {c}, {64 * hp.SWIZZLE_ROW}')}")
    a2 = w.v(f"add i32 {a1}, {nb * fwd.QBOX}")
    bhq = w.v(f"mul i64 {w.v(f'zext i32 {bh} to i64')}, %SQ")
    log2e = fwd._f(math.log2(math.e))
    if not dkdv:  # the rows' own statistics, once
        stats = [_stat(w, bhq, r, sq, log2e) for r in (row0, row1)]
    hp.mbar_wait(w, bars, "0")
    acc_n = d // 2
    w.br("cloop0")
    w.label("cloop0")
    # dkdv's two warpgroups take turns at the tensor cores (the forward's ping-pong: one's exponentials and
    # dS while the other's products run): 3-10 % faster on an H200; dq's were 5-12 % slower with turns
    turn = fwd._Turns(w, c) if dkdv else None
    if turn:
        turn.start()
    w.cbr(w.v(f"icmp ugt i32 {n}, 0"), "cloop", "cdone")
    w.label("cloop")
    i, i_next = w.fresh("ci"), w.fresh("cin")
    outs_in = [[w.fresh("o") for _ in range(acc_n)] for _ in range(2 if want_dk and want_dv else 1)]
    phis_at = len(w.lines)
    j = w.v(f"add i32 {j0}, {i}")
    if fused:    # this thread's share of the block's statistics, loaded before the waits, staged after the issue
        q0 = w.v(f"mul i32 {j}, {BN}")
        stats_at = w.v(f"add i32 {stat_bufs}, {w.v(f'mul i32 {c}, {spec.stat_bytes // 2}')}")
        staged = _load_stats(w, spec, bhq, q0, t, sq)
    elif dkdv:   # the block's queries' statistics, loaded before the waits (asm that LLVM will not move loads past)
        q0 = w.v(f"mul i32 {j}, {BN}")
        cols = [w.v(f"add i32 {q0}, {w.v(f'add i32 {col_t}, {8 * g + e}')}") for g in range(BN // 8) for e in (0, 1)]
        lses, deltas = zip(*[_stat(w, bhq, x, sq, log2e) for x in cols])
    else:
        lses, deltas = zip(*stats)
    # accumulator k's column (dkdv: a query) or row (dq: a query) among the thread's statistics
    at = (lambda k: 2 * (k // 4) + k % 2) if dkdv else (lambda k: (k // 2) % 2)   # noqa: E731
    # the held rows' addresses made opaque in each turn: LLVM would hoist the products' shared-memory
    # descriptors of them out of the loop, two registers each held throughout (spills at D = 128)
    h1, h2, hbase = (w.asm("mov.b32 $0, $1;", "=r,r", [("i32", x)], ret="i32", hint="held") for x in (a1, a2, base))
    s, ph = fwd._stage(w, i, S)
    hp.mbar_wait(w, fwd._full(w, bars, s), ph)
    b1 = w.v(f"add i32 {ring}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
    b2 = w.v(f"add i32 {b1}, {nb * BOX}")
    if turn:
        turn.take()
    hp.fence(w)
    sc = fwd._scores(w, spec, h1, b1)
    need_ds = not dkdv or want_dk                             # dV alone needs no dP
    if need_ds:
        dp = fwd._scores(w, spec, h2, b2)
    if turn:
        turn.give()
    if fused:    # while the products run; the warpgroup's previous reads of the copy ended before _add_dq's barrier
        for idx, x in staged:
            w.asm("st.shared.f32 [$0], $1;", "r,f", [("i32", w.v(f"add i32 {stats_at}, {w.v(f'shl i32 {idx}, 2')}")),
                                                      ("float", x)])
        w.asm("bar.sync $0, 128;", "r", [("i32", w.v(f"add i32 {c}, 1"))])   # the warpgroup's named barrier
    # P while dP's product may still run, then dS: the statistics come in (dkdvdq: from shared memory) as
    # they are needed, which keeps fewer registers live at once
    sc = hp.wait_group(w, sc, 1 if need_ds else 0)
    if fused:
        lses = _read_stats(w, stats_at, col_t, 0, BN)
    probs, ds = [], []
    c2 = fwd._f(spec.scale * math.log2(math.e))
    for k in range(len(sc)):
        x = w.v(f"call float @llvm.fma.f32(float {sc[k]}, float {c2}, float {lses[at(k)]})")
        probs.append(w.v(f"call float @llvm.nvvm.ex2.approx.ftz.f(float {x})"))
    probs = _mask(w, spec, probs, j, (wrow, row0, row1, col_t), sq, sk)
    if spec.rounded_p:   # P's f32 registers free before dP's wait
        fp = fwd._fragments(w, spec, probs)
        _, ety = fwd._ELEM[spec.dtype]
        pairs = [w.v(f"bitcast i32 {x} to <2 x {ety}>") for x in fp]
        probs = [w.v(f"fpext {ety} {w.v(f'extractelement <2 x {ety}> {pairs[k // 2]}, i32 {k % 2}')} to float")
                 for k in range(len(probs))]
    if need_ds:
        dp = hp.wait_group(w, dp, 0)
        if fused:
            deltas = _read_stats(w, stats_at, col_t, BN, BN)
    for k, p in enumerate(probs if need_ds else ()):
        ds.append(w.v(f"fmul float {p}, {w.v(f'fsub float {dp[k]}, {deltas[at(k)]}')}"))
    if not spec.rounded_p:
        fp = fwd._fragments(w, spec, probs) if want_dv else []
    fds = fwd._fragments(w, spec, ds)
    if fused:   # the warpgroup's 64 keys of dSᵀ into the block's tile (the other tile may still be read)
        odd = w.v(f"and i32 {i}, 1")
        ds_at = w.v(f"add i32 {ds_tiles}, {w.v(f'mul i32 {odd}, {spec.ds_bytes // 2}')}")
        hp.stmatrix_rows(w, [fds[4 * g:4 * g + 4] for g in range(BN // 16)], warp, lane,
                         w.v(f"add i32 {ds_at}, {w.v(f'mul i32 {c}, {64 * hp.SWIZZLE_ROW}')}"), DS_BOX)
        w.asm("fence.proxy.async.shared::cta;")   # generic-proxy writes, read by wgmma (the async proxy)
        w.asm("bar.sync 5, 256;")   # both warpgroups' halves are in
    if turn:
        turn.take()
    flat, frags = hp.fence(w, [x for o in outs_in for x in o], fp + fds)
    fp, fds = frags[:len(fp)], frags[len(fp):]
    # dV += Pᵀ·dO, dK += dSᵀ·Q, dQ += dS·K: the streamed blocks read MN-major. dkdvdq adds dQ into dQacc
    # (shared-memory stores, barrier, bulk reductions) while dK's product still runs: its product is issued
    # first at D = 128 (dV's runs too), second at D = 64 (after dV's), each the faster on an H100 (D = 128
    # 7-9 %, D = 64 4-5 % over waiting for all three; docs/performance.md)
    dq_first = fused and spec.head_dim == 128
    if dq_first:
        dq = _dq_product(w, spec, hbase, ds_at, c)
    outs = [flat[acc_n * i:acc_n * (i + 1)] for i in range(len(outs_in))]
    if want_dv:
        outs[0] = fwd._pv(w, spec, outs[0], fp, b2)
    if fused and not dq_first:
        dq = _dq_product(w, spec, hbase, ds_at, c)
    if want_dk or not dkdv:
        outs[-1] = fwd._pv(w, spec, outs[-1], fds, b1)
    if turn:
        turn.give()
    if fused:   # the products issued after dQ's stay in flight
        _add_dq(w, spec, hp.wait_group(w, dq, 2 if dq_first else 1, keep=frags), i, c, warp, lane, col_t,
                dq_bufs)
    outs = [hp.wait_group(w, o, 0, keep=frags) for o in outs]
    hp.mbar_arrive_if(w, fwd._empty(w, bars, s, S), leader)
    w.emit(f"{i_next} = add i32 {i}, 1")
    clatch = w.current
    w.cbr(w.v(f"icmp ult i32 {i_next}, {n}"), "cloop", "cdone")
    w.lines[phis_at:phis_at] = [f"  {i} = phi i32 [0, %cloop0], [{i_next}, %{clatch}]"] + [
        f"  {a} = phi float [0.0, %cloop0], [{b}, %{clatch}]" for o_in, o in zip(outs_in, outs)
        for a, b in zip(o_in, o)]
    w.label("cdone")
    final = [[w.v(f"phi float [0.0, %cloop0], [{b}, %{clatch}]") for b in o] for o in outs]
    if turn:
        turn.finish()
    if fused:   # the other warpgroup's last dQ product reads this one's K rows, about to stage dK
        w.asm("bar.sync 5, 256;")
    scale = fwd._f(spec.scale)
    # staged in the warpgroup's own held rows, which its last products have read
    if want_dv:
        fwd.store_rows(w, spec, final[0], c, warp, lane, wrow, bh, a2, "dV")
    if want_dk or not dkdv:
        fwd.store_rows(w, spec, [w.v(f"fmul float {x}, {scale}") for x in final[-1]], c, warp, lane, wrow, bh,
                       a1, "dK" if dkdv else "dQ")
    w.br("exit")
    w.label("exit")
    w.emit("ret void")

    body = "\n".join(w.lines).replace("%PLATCH]", f"%{platch}]")
    decls = "\n".join(["declare float @llvm.nvvm.ex2.approx.ftz.f(float)",
                       "declare float @llvm.fma.f32(float, float, float)"])
    kernel = (f"@tsr_smem = external addrspace(3) global [0 x i8], align 1024\n"
              f"define ptx_kernel void @{llvm_global(spec.name)}({', '.join(params)}) "
              f"\"nvvm.maxntid\"=\"{spec.threads}\" \"nvvm.minctasm\"=\"1\" {{\n{body}\n}}\n")
    return module(kernel, decls)


def _dq_product(w: Writer, spec: Sm90AttentionBwdSpec, base: str, ds_at: str, c: str) -> list[str]:
    """Issues the block's dQᵀ = Kᵀ·dSᵀ over the CTA's 128 keys (unscaled), this warpgroup's part: at D = 128
    head dimensions 64c … 64c + 63 (M) of every query of the block, at D = 64 every head dimension (M) of
    queries c·block_n/2 … (N). Kᵀ is the held K read MN-major (head dimensions contiguous), dSᵀ the tile
    (queries contiguous) MN-major too."""
    et, _ = fwd._ELEM[spec.dtype]
    if spec.head_dim == 128:
        a_at, b_at, n = w.v(f"add i32 {base}, {w.v(f'mul i32 {c}, {fwd.QBOX}')}"), ds_at, spec.block_n
    else:        # half the block's queries: 32 columns (64 bytes into the box) or a box of 64
        half = spec.block_n // 2
        a_at, b_at, n = base, w.v(f"add i32 {ds_at}, {w.v(f'mul i32 {c}, {DS_BOX if half == 64 else 2 * half}')}"), half
    acc = None
    for kk in range(BM // 16):
        da = hp.desc(w, w.v(f"add i32 {a_at}, {16 * hp.SWIZZLE_ROW * kk}"), fwd.QBOX, hp.ATOM)
        db = hp.desc(w, w.v(f"add i32 {b_at}, {16 * hp.SWIZZLE_ROW * kk}"), DS_BOX, hp.ATOM)
        acc = (hp.wgmma_ss_first(w, n, et, da, db, 1, trans_a=1) if acc is None
               else hp.wgmma_ss(w, acc, et, da, db, 1, trans_a=1))
    hp.commit(w)
    return acc


def _dq_warp(w: Writer, spec: Sm90AttentionBwdSpec, tid: str, j0: str, n: str, bh: str, dq_bufs: str) -> None:
    """dkdvdq's producer warpgroup's second warp (FlashAttention-3's way), from block `dq_warp0`: for each streamed block, for
    each consumer warpgroup c, waits at named barrier DQ_FULL + c until c has written its dQ buffer, and its
    first lane adds the buffer into dQacc (`_reduce_dq`); once those reductions have read the buffers, the
    warp arrives at DQ_FREE + c, where c waits before writing the next block's (none waits after the
    last)."""
    w.label("dq_warp0")
    w.cbr(w.v(f"icmp eq i32 {w.v(f'lshr i32 {tid}, 5')}, 1"), "dq_warp", "exit")
    w.label("dq_warp")
    lead = w.v(f"zext i1 {w.v(f'icmp eq i32 {tid}, 32')} to i32")
    w.cbr(w.v(f"icmp ugt i32 {n}, 0"), "dq_wloop", "exit")
    w.label("dq_wloop")
    i, i_next = w.fresh("wi"), w.fresh("win")
    w.emit(f"{i} = phi i32 [0, %dq_warp], [{i_next}, %dq_wloop]")
    j = w.v(f"add i32 {j0}, {i}")
    for c in (0, 1):
        w.asm(f"bar.sync {DQ_FULL + c}, 160;")
        _reduce_dq(w, spec, j, str(c), bh, dq_bufs, lead)
    w.emit(f"{i_next} = add i32 {i}, 1")
    more = w.v(f"icmp ult i32 {i_next}, {n}")
    more32 = w.v(f"zext i1 {more} to i32")
    for c in (0, 1):   # c's reductions (the older group first) have read its buffer
        w.asm(f"{{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.wait_group.read {1 - c}; }}", "r",
              [("i32", lead)])
        w.asm(f"{{ .reg .pred p; setp.ne.b32 p, $0, 0; @p bar.arrive {DQ_FREE + c}, 160; }}", "r", [("i32", more32)])
    w.cbr(more, "dq_wloop", "exit")


def _reduce_dq(w: Writer, spec: Sm90AttentionBwdSpec, j: str, c: str, bh: str, dq_bufs: str, lead: str) -> None:
    """Where `lead` (i32) is not 0: dQacc += consumer warpgroup c's buffer of block j (`_add_dq`), two TMA boxes
    by bulk tensor reductions (cp.reduce.async.bulk.tensor .add: one instruction per box instead of a
    red.global per element; TMA skips queries past the end), committed as one bulk group."""
    rows = spec.dq_rows
    box_bytes = rows * hp.SWIZZLE_ROW
    buf = w.v(f"add i32 {dq_bufs}, {w.v(f'mul i32 {c}, {2 * box_bytes}')}")
    q0 = w.v(f"mul i32 {j}, {spec.block_n}")
    if spec.head_dim == 128:
        d0 = w.v(f"shl i32 {c}, 6")
    else:
        d0, q0 = "0", w.v(f"add i32 {q0}, {w.v(f'mul i32 {c}, {rows}')}")
    tm = w.v("ptrtoint ptr %tmdQacc to i64")
    for b in (0, 1):
        w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; "
              "@p cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [$1, {$2, $3, $4}], [$5]; }",
              "r,l,r,r,r,r", [("i32", lead), ("i64", tm), ("i32", w.v(f"add i32 {d0}, {32 * b}")), ("i32", q0),
                              ("i32", bh), ("i32", w.v(f"add i32 {buf}, {b * box_bytes}"))])
    w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.commit_group; }", "r", [("i32", lead)])


def _add_dq(w: Writer, spec: Sm90AttentionBwdSpec, dq: list[str], i: str, c: str, warp: str, lane: str,
            col_t: str, dq_bufs: str) -> None:
    """Hands the warpgroup's part of the `i`-th streamed block's dQᵀ (rows d, columns q; `_dq_product`'s
    split) to the dQ warp, which adds it into dQacc, as FlashAttention-3 does: from the second block on the
    threads wait at DQ_FREE + c until the warp's reductions of the previous block have read the buffer, write
    it in the layout of two TMA boxes (32 head dimensions × dq_rows queries, f32, 128-byte swizzle: the
    16-byte chunk k of row q at k ^ (q % 8), so that a warp's 32 scalar stores hit 32 banks) and arrive at
    DQ_FULL + c without waiting (`_dq_warp` issues the reductions and waits for their reads)."""
    rows = spec.dq_rows
    box_bytes = rows * hp.SWIZZLE_ROW
    buf = w.v(f"add i32 {dq_bufs}, {w.v(f'mul i32 {c}, {2 * box_bytes}')}")
    # element k: head dimension m = 16·warp + lane/4 + 8r (box m / 32 = warp / 2), query col_t + 8g + e; its
    # chunk (m % 32) / 4 = 4·(warp % 2) + lane/16 + 2r, swizzled by q % 8 = col_t + e
    odd_warp = w.v(f"and i32 {warp}, 1")
    sub = w.v(f"or i32 {w.v(f'shl i32 {odd_warp}, 2')}, {w.v(f'lshr i32 {lane}, 4')}")
    chunk = w.v(f"xor i32 {sub}, {col_t}")
    box = w.v(f"lshr i32 {warp}, 1")
    t = w.v(f"add i32 {buf}, {w.v(f'mul i32 {box}, {box_bytes}')}")
    t = w.v(f"add i32 {t}, {w.v(f'shl i32 {col_t}, 7')}")
    word = w.v(f"and i32 {w.v(f'lshr i32 {lane}, 2')}, 3")                          # m % 4
    t = w.v(f"add i32 {t}, {w.v(f'shl i32 {word}, 2')}")
    at = {}
    for r in (0, 1):
        for e in (0, 1):
            swizzled = w.v(f"xor i32 {chunk}, {2 * r + e}")
            at[(r, e)] = w.v(f"add i32 {t}, {w.v(f'shl i32 {swizzled}, 4')}")
    # the dQ warp's reductions of the previous block have read the buffer
    w.asm("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p bar.sync $1, 160; }", "r,r",
          [("i32", w.v(f"zext i1 {w.v(f'icmp ne i32 {i}, 0')} to i32")), ("i32", w.v(f"add i32 {c}, {DQ_FREE}"))])
    for k, x in enumerate(dq):
        g, r, e = k // 4, (k // 2) % 2, k % 2
        w.asm(f"st.shared.f32 [$0+{(8 * g + e) * hp.SWIZZLE_ROW}], $1;", "r,f", [("i32", at[(r, e)]), ("float", x)])
    w.asm("fence.proxy.async.shared::cta;")   # generic-proxy writes, read by the bulk reduction
    w.asm("bar.arrive $0, 160;", "r", [("i32", w.v(f"add i32 {c}, {DQ_FULL}"))])


def _stat_at(w: Writer, bhq: str, q: str, sq: str) -> str:
    """The index of query `q`'s statistics in this head's row, the last query's for those past the end (whose
    probabilities are masked or multiply zero rows)."""
    last = w.v(f"sub i32 {sq}, 1")
    q = w.v(f"select i1 {w.v(f'icmp ult i32 {q}, {sq}')}, i32 {q}, i32 {last}")
    return w.v(f"add i64 {bhq}, {w.v(f'zext i32 {q} to i64')}")


def _stat(w: Writer, bhq: str, q: str, sq: str, log2e: str) -> tuple[str, str]:
    """(−lse·log2 e, delta) of query `q` of this head (`_stat_at`)."""
    at = _stat_at(w, bhq, q, sq)
    lse, delta = (w.v(f"load float, ptr addrspace(1) {w.v(f'getelementptr float, ptr addrspace(1) %{n}, i64 {at}')}, "
                      f"align 4") for n in ("LSE", "Delta"))
    return w.v(f"fmul float {lse}, {fwd._f(-math.log2(math.e))}"), delta


def _load_stats(w: Writer, spec: Sm90AttentionBwdSpec, bhq: str, q0: str, t: str, sq: str) -> list[tuple[str, str]]:
    """The warpgroup's thread `t`'s share of the statistics of the block of queries from q0 (dkdvdq): slots t,
    t + 128, … of its copy, slot i < block_n holding −lse·log2 e of query q0 + i, then block_n deltas; slots
    past 2·block_n are loaded as the last query's and never read. [(slot, value)]."""
    bn = spec.block_n
    out = []
    for r in range(-(-2 * bn // 128)):
        slot = t if r == 0 else w.v(f"add i32 {t}, {128 * r}")
        is_delta = w.v(f"icmp uge i32 {slot}, {bn}")
        back = w.v(f"sub i32 {slot}, {bn}")
        q = w.v(f"add i32 {q0}, {w.v(f'select i1 {is_delta}, i32 {back}, i32 {slot}')}")
        src = w.v(f"select i1 {is_delta}, ptr addrspace(1) %Delta, ptr addrspace(1) %LSE")
        at = w.v(f"getelementptr float, ptr addrspace(1) {src}, i64 {_stat_at(w, bhq, q, sq)}")
        x = w.v(f"load float, ptr addrspace(1) {at}, align 4")
        lse = w.v(f"fmul float {x}, {fwd._f(-math.log2(math.e))}")
        out.append((slot, w.v(f"select i1 {is_delta}, float {x}, float {lse}")))
    return out


def _read_stats(w: Writer, stats_at: str, col_t: str, first: int, bn: int) -> list[str]:
    """A thread's columns' values (col_t + 8g + e, g < bn / 8, e < 2, in that order) from slots first … of the
    warpgroup's copy of the block's statistics (`_load_stats`), two adjacent columns a load."""
    col = w.v(f"add i32 {col_t}, {first}")
    at = w.v(f"add i32 {stats_at}, {w.v(f'shl i32 {col}, 2')}")
    out = []
    for g in range(bn // 8):
        pair = w.asm(f"ld.shared.v2.f32 {{$0, $1}}, [$2+{32 * g}];", "=f,=f,r", [("i32", at)], ret="{float, float}",
                     hint="st")
        out += [w.v(f"extractvalue {{float, float}} {pair}, {e}") for e in (0, 1)]
    return out


def _mask(w: Writer, spec: Sm90AttentionBwdSpec, probs: list[str], j: str, rows: tuple, sq: str, sk: str) -> list[str]:
    """0 for pairs past the ends (the streamed side's: the held side's rows are never stored) and, when
    causal, for keys after the query — on the blocks that have any (a decision of the whole warpgroup, which
    must reach its next wgmma together). In dkdv the rows are keys and the columns queries; in dq the
    reverse."""
    wrow, row0, row1, col_t = rows
    BN = spec.block_n
    dkdv = spec.kind != "dq"
    c0 = w.v(f"mul i32 {j}, {BN}")
    end = sq if dkdv else sk
    some = w.v(f"icmp ugt i32 {w.v(f'add i32 {c0}, {BN}')}, {end}")
    if spec.causal:   # dkdv: some query column before the last key row; dq: some key column after the first query row
        diag = (w.v(f"icmp ult i32 {c0}, {w.v(f'add i32 {wrow}, 63')}") if dkdv
                else w.v(f"icmp ugt i32 {w.v(f'add i32 {c0}, {BN - 1}')}, {wrow}"))
        some = w.v(f"or i1 {some}, {diag}")

    def unseen(col: str, r: int) -> str:   # dkdv: the query (column) before the key (row); dq: the reverse
        row = row1 if r else row0
        return w.v(f"icmp ugt i32 {row}, {col}" if dkdv else f"icmp ugt i32 {col}, {row}")
    return fwd.masked(w, probs, some, c0, col_t, end, "0.0", unseen if spec.causal else None)


def generate_pre(name: str, head_dim: int, dtype: str = "bf16", zero: bool = False) -> str:
    """The backward's preprocessing (FlashAttention-2/3's): Delta = rowsum(dO ∘ O) in f32 (each row's
    D / 8 threads read 8 elements of each, 16 bytes, once, and add their sums by butterfly shuffles), and
    with `zero` dQacc's rows filled with zeros (dkdvdq adds into them), so that one kernel replaces the
    elementwise and row kernels of delta and dkdvdq's zeroing kernel. 256 threads a CTA, rows = 2048 / D a CTA;
    grid (ceil(SQ / rows), BH). Parameters: O, dO, Delta (and dQacc), BH, SQ."""
    w = Writer()
    per_row = head_dim // 8
    rows = 2048 // head_dim
    _, ety = fwd._ELEM[dtype]
    w.label("entry")
    tid, bx, bh = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y")
    sq = w.v("trunc i64 %SQ to i32")
    row = w.v(f"add i32 {w.v(f'mul i32 {bx}, {rows}')}, {w.v(f'udiv i32 {tid}, {per_row}')}")
    inside = w.v(f"icmp ult i32 {row}, {sq}")
    # a row past the end reads the last row (every lane of a warp takes part in the shuffles), writes nothing
    read = w.v(f"select i1 {inside}, i32 {row}, i32 {w.v(f'sub i32 {sq}, 1')}")
    bhw, readw = w.v(f"zext i32 {bh} to i64"), w.v(f"zext i32 {read} to i64")
    at_row = w.v(f"add i64 {w.v(f'mul i64 {bhw}, %SQ')}, {readw}")
    col = w.v(f"urem i32 {tid}, {per_row}")
    at = w.v(f"add i64 {w.v(f'mul i64 {at_row}, {per_row}')}, {w.v(f'zext i32 {col} to i64')}")   # 8-element units
    x, y = (w.v(f"load <8 x {ety}>, ptr addrspace(1) {w.v(f'getelementptr <8 x {ety}>, ptr addrspace(1) %{n}, i64 {at}')}"
                ", align 16") for n in ("O", "dO"))
    x, y = (w.v(f"fpext <8 x {ety}> {a} to <8 x float>") for a in (x, y))
    prod = w.v(f"fmul <8 x float> {x}, {y}")
    total = w.v(f"extractelement <8 x float> {prod}, i32 0")
    for i in range(1, 8):
        total = w.v(f"fadd float {total}, {w.v(f'extractelement <8 x float> {prod}, i32 {i}')}")
    m = per_row // 2
    while m:
        other = w.v(f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {total}, i32 {m}, i32 31)")
        total = w.v(f"fadd float {total}, {other}")
        m //= 2
    w.cbr(inside, "body", "exit")
    w.label("body")
    if zero:   # this thread's 8 columns of the row, in f32: two 16-byte stores
        acc = w.v(f"getelementptr <4 x float>, ptr addrspace(1) %dQacc, i64 {w.v(f'mul i64 {at}, 2')}")
        w.emit(f"store <4 x float> zeroinitializer, ptr addrspace(1) {acc}, align 16")
        w.emit(f"store <4 x float> zeroinitializer, ptr addrspace(1) "
               f"{w.v(f'getelementptr <4 x float>, ptr addrspace(1) {acc}, i64 1')}, align 16")
    w.cbr(w.v(f"icmp eq i32 {col}, 0"), "first", "exit")
    w.label("first")
    out = w.v(f"getelementptr float, ptr addrspace(1) %Delta, i64 {at_row}")
    w.emit(f"store float {total}, ptr addrspace(1) {out}, align 4")
    w.br("exit")
    w.label("exit")
    w.emit("ret void")
    body = "\n".join(w.lines)
    params = "ptr addrspace(1) %O, ptr addrspace(1) %dO, ptr addrspace(1) %Delta" + \
        (", ptr addrspace(1) %dQacc" if zero else "")
    return module(f"define ptx_kernel void @{llvm_global(name)}({params}, i64 %BH, i64 %SQ) "
                  f"\"nvvm.maxntid\"=\"256\" {{\n{body}\n}}\n",
                  "declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)")


def generate_acc(name: str, head_dim: int, op: str, dtype: str = "bf16", scale: float = 1.0) -> str:
    """dkdvdq's companions over dQacc (f32 [BH, SQ, D]): `op` "zero" fills it with zeros before the kernel
    adds into it (where delta is computed outside the group, else generate_pre zeroes it); "cast" writes
    dQ = scale · dQacc in `dtype` after. 256 threads a CTA, four elements each (one
    16-byte access); grid (ceil(SQ / rows), BH) with rows = 1024 / D. Parameters: dQacc (and dQ), BH, SQ."""
    w = Writer()
    per_row = head_dim // 4
    rows = 1024 // head_dim
    w.label("entry")
    tid, bx, bh = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y")
    row = w.v(f"add i32 {w.v(f'mul i32 {bx}, {rows}')}, {w.v(f'udiv i32 {tid}, {per_row}')}")
    w.cbr(w.v(f"icmp ult i32 {row}, {w.v('trunc i64 %SQ to i32')}"), "body", "exit")
    w.label("body")
    bhw, roww = w.v(f"zext i32 {bh} to i64"), w.v(f"zext i32 {row} to i64")
    row = w.v(f"add i64 {w.v(f'mul i64 {bhw}, %SQ')}, {roww}")
    col = w.v(f"zext i32 {w.v(f'urem i32 {tid}, {per_row}')} to i64")
    at = w.v(f"add i64 {w.v(f'mul i64 {row}, {per_row}')}, {col}")   # in 4-element units
    acc = w.v(f"getelementptr <4 x float>, ptr addrspace(1) %dQacc, i64 {at}")
    if op == "zero":
        w.emit(f"store <4 x float> zeroinitializer, ptr addrspace(1) {acc}, align 16")
        params = "ptr addrspace(1) %dQacc"
    else:
        _, ety = fwd._ELEM[dtype]
        x = w.v(f"load <4 x float>, ptr addrspace(1) {acc}, align 16")
        s = fwd._f(scale)
        x = w.v(f"fmul <4 x float> {x}, <float {s}, float {s}, float {s}, float {s}>")
        w.emit(f"store <4 x {ety}> {w.v(f'fptrunc <4 x float> {x} to <4 x {ety}>')}, ptr addrspace(1) "
               f"{w.v(f'getelementptr <4 x {ety}>, ptr addrspace(1) %dQ, i64 {at}')}, align 8")
        params = "ptr addrspace(1) %dQacc, ptr addrspace(1) %dQ"
    w.br("exit")
    w.label("exit")
    w.emit("ret void")
    body = "\n".join(w.lines)
    return module(f"define ptx_kernel void @{llvm_global(name)}({params}, i64 %BH, i64 %SQ) "
                  f"\"nvvm.maxntid\"=\"256\" {{\n{body}\n}}\n")
