"""Ampere flash attention (forward): O = softmax(scale · Q·Kᵀ [causal mask]) · V on mma.sync tensor cores,
FlashAttention-2's schedule, for sm_80 … sm_90 (every architecture without sm_90a's wgmma kernel).

Q, K, V and O are [BH, S, D] (batch and heads folded), D 64 or 128, bf16 or f16, f32 accumulation. One CTA
of `warps` (4 or 8) warps takes `block_m` query rows of one (batch, head), each warp 16 · `m_tiles` of them:

    prologue        Q's rows, key block 0 and value block 0 are copied into shared memory (cp.async, three
                    commit groups); each warp then holds its Q rows as mma A fragments (ldmatrix.x4) for
                    the whole kernel (with two m tiles a warp, it reads them again at each key block)
    key block j     wait for K_j (and the CTA to be done with block j-1); copy K_{j+1} into the other K
                    buffer; S = Q·K_jᵀ by mma.sync.m16n8k16 (K as stored is the B operand: ldmatrix.x4);
                    the online softmax in registers (attention_sm90's: row max across the quad of lanes
                    sharing a row, exp2 with scale · log2(e) folded into one FMA, keys past SK and, when
                    causal, after the query are -inf on the blocks that have any); O *= exp2(m_old - m_new);
                    wait for V_j, copy V_{j+1} into the other V buffer; O += P·V_j, where P is rounded in
                    registers to A fragments (the C fragment of two n8 blocks is the A fragment of one k16
                    step) and V is read by ldmatrix.x4.trans
    end             O / l (the row sums completed across the quad), rounded, stored by predicated 32-bit
                    stores of the rows before SQ

Shared rows are D · 2 bytes; 16-byte chunk c of row r sits at c ^ (r & 7), so the eight rows that one
ldmatrix phase reads (same logical chunk) fall in distinct banks. Rows past a tensor's end are zero-filled
(cp.async's src-size 0) and their keys masked. Causal attention is top-left aligned (query i sees keys
j <= i, as the interpreter and torch's `is_causal`), visits only the key blocks a tile needs, and runs the
tiles with the most blocks first.

The kernel's numerics are checked on the CPU by tests/unit/nvptx_emulator.py (test_ptx_attention_sm80.py)
and on a GPU by tests/gpu/test_attention_sm80_gpu.py. The ptx backend uses it on sm_80 … sm_90 unless
PTXOptions.attention_sm80 is off (TESSERA_ATTENTION_SM80=0: attention decomposed, docs/nvidia.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..symbol_names import llvm_global
from . import ampere as am
from . import attention_sm90 as fa
from .gemm_sm80 import SMEM_PER_BLOCK
from .nvvm_text import Writer, module

NEG_INF = "0xFFF0000000000000"
# (block_m, block_n, warps) per head dimension: 128 query rows a CTA (FlashAttention-2's, halving the K/V
# traffic of 64) on 8 warps of 16 rows, so that each warp holds its Q fragments in registers beside O and S
# without spilling (ptxas: 246–255 registers at D = 128 by 64 keys, 246–248 at D = 64 by 128 keys; one CTA of
# 8 warps a multiprocessor). Measured on an H200 against 128x128 on 8 warps and 64x64 on 4 (docs/performance.md,
# issue 18): the fastest of the three at each head dimension, causal or not.
TUNED = {128: {"block_m": 128, "block_n": 64, "warps": 8}, 64: {"block_m": 128, "block_n": 128, "warps": 8}}
ARCHS = tuple(a for a in SMEM_PER_BLOCK if a != "sm_90a")


@dataclass(frozen=True)
class Sm80AttentionSpec:
    name: str
    head_dim: int = 128
    causal: bool = False
    scale: float = 1.0
    dtype: str = "bf16"
    block_m: int = 0              # query rows per CTA (16 · m_tiles a warp); 0: TUNED's
    block_n: int = 0              # keys per block; 0: TUNED's
    warps: int = 0                # 4 or 8; 0: TUNED's
    arch: str = "sm_80"           # for its shared-memory limit
    seq_heads: bool = False       # Q, K, V and O are [B, S, H, D] (passes/fold_transposes.attention)

    @property
    def extents(self) -> tuple:
        """The i64 parameters after the tensors (the launch's extents in order of first appearance)."""
        return ("B", "SQ", "H", "SK") if self.seq_heads else ("BH", "SQ", "SK")

    def __post_init__(self):
        for key, value in TUNED.get(self.head_dim, TUNED[128]).items():
            if not getattr(self, key):
                object.__setattr__(self, key, value)
        if self.dtype not in fa._ELEM:
            raise ValueError(f"the sm_80 attention takes bf16 or f16, not {self.dtype}")
        if self.head_dim not in (64, 128):
            raise ValueError(f"the sm_80 attention takes head dimension 64 or 128, not {self.head_dim}")
        if not self.scale > 0:
            raise ValueError(f"the sm_80 attention takes a positive scale, not {self.scale}")
        if self.warps not in (4, 8) or self.block_m not in (64, 128) or self.block_m < 16 * self.warps \
                or self.block_n not in (32, 64, 128):
            raise ValueError(f"the sm_80 attention takes blocks of 64 or 128 queries (16 or 32 a warp, of 4 or 8 "
                             f"warps) and 32, 64 or 128 keys, not {self.block_m}x{self.block_n} on {self.warps} warps")
        if self.arch not in ARCHS:
            raise ValueError(f"the sm_80 attention targets {', '.join(ARCHS)}, not {self.arch}")
        if self.smem_bytes > SMEM_PER_BLOCK[self.arch]:
            raise ValueError(f"a {self.block_m}x{self.block_n} attention tile at head dimension {self.head_dim} "
                             f"needs {self.smem_bytes} bytes of shared memory; {self.arch} has "
                             f"{SMEM_PER_BLOCK[self.arch] // 1024} KiB a block")

    @property
    def m_tiles(self) -> int:
        """m16 row tiles a warp holds."""
        return self.block_m // (16 * self.warps)

    @property
    def row_bytes(self) -> int:
        return 2 * self.head_dim

    @property
    def kv_bytes(self) -> int:
        """One buffer of K or V."""
        return self.block_n * self.row_bytes

    @property
    def smem_bytes(self) -> int:
        """Q's rows, then two K buffers, then two V buffers."""
        return self.block_m * self.row_bytes + 4 * self.kv_bytes

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def exp2(self, w: Writer, x: str, i: int) -> str:
        """2^x for the online softmax (attention_sm90._softmax calls it)."""
        return w.v(f"call float @llvm.nvvm.ex2.approx.ftz.f(float {x})")


def generate(spec: Sm80AttentionSpec) -> str:
    """The kernel as NVPTX LLVM IR text. Parameters: Q, K, V, O ([BH, SQ, D], [BH, SK, D] twice, [BH, SQ, D])
    and the extents BH, SQ, SK; with `spec.seq_heads` [B, S, H, D] tensors and the extents B, SQ, H, SK.
    Grid: (ceil(SQ / block_m), BH) (B·H)."""
    w = Writer()
    D, BM, BN, MT = spec.head_dim, spec.block_m, spec.block_n, spec.m_tiles
    params = [f"ptr addrspace(1) %{n}" for n in "QKVO"] + [f"i64 %{n}" for n in spec.extents]

    w.label("entry")
    tid, bx, bh, nq = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y"), w.sreg("nctaid.x")
    smem = w.v("ptrtoint ptr addrspace(3) @tsr_smem to i32")
    k_buf = w.v(f"add i32 {smem}, {BM * spec.row_bytes}")
    v_buf = w.v(f"add i32 {k_buf}, {2 * spec.kv_bytes}")
    sq, sk = w.v("trunc i64 %SQ to i32"), w.v("trunc i64 %SK to i32")
    qb = w.v(f"sub i32 {w.v(f'sub i32 {nq}, 1')}, {bx}") if spec.causal else bx   # the longest rows first
    m0 = w.v(f"mul i32 {qb}, {BM}")
    nkv = w.v(f"udiv i32 {w.v(f'add i32 {sk}, {BN - 1}')}, {BN}")
    if spec.causal:
        need = w.v(f"udiv i32 {w.v(f'add i32 {m0}, {BM + BN - 1}')}, {BN}")
        nkv = w.v(f"select i1 {w.v(f'icmp ult i32 {need}, {nkv}')}, i32 {need}, i32 {nkv}")
    warp, lane = w.v(f"lshr i32 {tid}, 5"), w.v(f"and i32 {tid}, 31")
    bh64 = w.v(f"zext i32 {bh} to i64")

    copy_q = _copies(w, spec, tid, "Q", BM, _rows(w, spec, bh64, "%SQ"), sq)
    copy_k = _copies(w, spec, tid, "K", BN, _rows(w, spec, bh64, "%SK"), sk)
    copy_v = _copies(w, spec, tid, "V", BN, _rows(w, spec, bh64, "%SK"), sk)
    copy_q(m0, smem, "1")
    am.commit(w)
    issue0 = w.v(f"zext i1 {w.v(f'icmp ugt i32 {nkv}, 0')} to i32")
    copy_k("0", k_buf, issue0)
    am.commit(w)
    copy_v("0", v_buf, issue0)
    am.commit(w)
    am.wait_group(w, 2)
    w.asm("bar.sync 0;")
    q_frags = _q_fragments(w, spec, smem, warp, lane)

    g = w.v(f"lshr i32 {lane}, 2")
    col_t = w.v(f"shl i32 {w.v(f'and i32 {lane}, 3')}, 1")
    warp_row0 = w.v(f"add i32 {m0}, {w.v(f'mul i32 {warp}, {16 * MT}')}")
    rows = []    # per m tile: the thread's two rows
    for mi in range(MT):
        r0 = w.v(f"add i32 {warp_row0}, {w.v(f'add i32 {g}, {16 * mi}')}")
        rows.append((r0, w.v(f"add i32 {r0}, 8")))
    k_off = _k_offsets(w, spec, lane)
    v_off = _v_offsets(w, spec, lane)

    nacc = MT * D // 2      # O: D/8 n8 blocks of 4 per m tile
    pre = w.current
    w.cbr(w.v(f"icmp ugt i32 {nkv}, 0"), "kv", "done")

    # -- key block j -------------------------------------------------------------------------------------
    w.label("kv")
    j, j_next = w.fresh("j"), w.fresh("jn")
    o_in = [w.fresh("o") for _ in range(nacc)]
    m_in = [w.fresh("m") for _ in range(2 * MT)]
    l_in = [w.fresh("l") for _ in range(2 * MT)]
    phis_at = len(w.lines)
    buf = w.v(f"and i32 {j}, 1")
    nbuf = w.v(f"xor i32 {buf}, 1")
    jn = w.v(f"add i32 {j}, 1")
    issue = w.v(f"zext i1 {w.v(f'icmp ult i32 {jn}, {nkv}')} to i32")
    key0 = w.v(f"mul i32 {j}, {BN}")
    am.wait_group(w, 1)          # K_j has landed (this thread's copies) …
    w.asm("bar.sync 0;")         # … everyone's, and no one still reads block j-1's buffers
    k_at = w.v(f"add i32 {k_buf}, {w.v(f'mul i32 {buf}, {spec.kv_bytes}')}")
    copy_k(w.v(f"mul i32 {jn}, {BN}"), w.v(f"add i32 {k_buf}, {w.v(f'mul i32 {nbuf}, {spec.kv_bytes}')}"), issue)
    am.commit(w)
    sc = _scores(w, spec, q_frags, k_at, k_off)

    probs, m_out, l_out, alphas = [], [], [], []
    last = w.v(f"icmp ugt i32 {w.v(f'add i32 {key0}, {BN}')}, {sk}")
    per = 4 * BN // 8
    some = last   # the blocks with a masked key anywhere in the CTA's rows: uniform, so the CTA branches together
    if spec.causal:
        end = w.v(f"add i32 {key0}, {BN - 1}")
        some = w.v(f"or i1 {last}, {w.v(f'icmp ugt i32 {end}, {m0}')}")
    for mi in range(MT):
        r0, r1 = rows[mi]
        after = (lambda col, r, r0=r0, r1=r1: w.v(f"icmp ugt i32 {col}, {r1 if r else r0}")) if spec.causal else None
        s = fa.masked(w, sc[mi * per:(mi + 1) * per], some, key0, col_t, sk, NEG_INF, after)
        p, mn, ln, al = fa._softmax(w, spec, s, m_in[2 * mi:2 * mi + 2], l_in[2 * mi:2 * mi + 2])
        probs += p
        m_out += mn
        l_out += ln
        alphas += al
    o = [w.v(f"fmul float {x}, {alphas[2 * (i // (D // 2)) + (i // 2) % 2]}") for i, x in enumerate(o_in)]
    frags = [fa._fragments(w, spec, probs[mi * per:(mi + 1) * per]) for mi in range(MT)]

    am.wait_group(w, 1)          # V_j has landed …
    w.asm("bar.sync 0;")
    v_at = w.v(f"add i32 {v_buf}, {w.v(f'mul i32 {buf}, {spec.kv_bytes}')}")
    copy_v(w.v(f"mul i32 {jn}, {BN}"), w.v(f"add i32 {v_buf}, {w.v(f'mul i32 {nbuf}, {spec.kv_bytes}')}"), issue)
    am.commit(w)
    o = _pv(w, spec, o, frags, v_at, v_off)
    w.emit(f"{j_next} = add i32 {j}, 1")
    latch = w.current
    w.cbr(w.v(f"icmp ult i32 {j_next}, {nkv}"), "kv", "done")
    w.lines[phis_at:phis_at] = (
        [f"  {j} = phi i32 [0, %{pre}], [{j_next}, %{latch}]"]
        + [f"  {a} = phi float [0.0, %{pre}], [{b}, %{latch}]" for a, b in zip(o_in, o)]
        + [f"  {a} = phi float [{NEG_INF}, %{pre}], [{b}, %{latch}]" for a, b in zip(m_in, m_out)]
        + [f"  {a} = phi float [0.0, %{pre}], [{b}, %{latch}]" for a, b in zip(l_in, l_out)])

    # -- O / l out ---------------------------------------------------------------------------------------
    w.label("done")
    o_fin = [w.v(f"phi float [0.0, %{pre}], [{b}, %{latch}]") for b in o]
    l_fin = [w.v(f"phi float [0.0, %{pre}], [{b}, %{latch}]") for b in l_out]
    am.wait_group(w, 0)          # only empty groups remain; a kernel leaves none behind
    _store(w, spec, o_fin, l_fin, rows, col_t, _rows(w, spec, bh64, "%SQ"), sq)
    w.emit("ret void")

    decls = "\n".join(["declare float @llvm.maxnum.f32(float, float)",
                       "declare float @llvm.nvvm.ex2.approx.ftz.f(float)",
                       "declare float @llvm.fma.f32(float, float, float)",
                       "declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)"])
    kernel = (f"@tsr_smem = external addrspace(3) global [0 x i8], align 128\n"
              f"define ptx_kernel void @{llvm_global(spec.name)}({', '.join(params)}) "
              f"\"nvvm.maxntid\"=\"{spec.threads}\" \"nvvm.minctasm\"=\"1\" {{\n" + "\n".join(w.lines) + "\n}\n")
    return module(kernel, decls)


def _rows(w: Writer, spec: Sm80AttentionSpec, bh64: str, extent: str):
    """A function giving the i64 index, in rows of D elements, of row `row` (i32) of (batch, head) `bh64` of a
    tensor `extent` rows a head: bh·S + row of [BH, S, D], or (b·S + row)·H + h of [B, S, H, D]."""
    if not spec.seq_heads:
        first = w.v(f"mul i64 {bh64}, {extent}")
        return lambda row: w.v(f"add i64 {first}, {w.v(f'zext i32 {row} to i64')}")
    h, b = w.v(f"urem i64 {bh64}, %H"), w.v(f"udiv i64 {bh64}, %H")
    first = w.v(f"mul i64 {b}, {extent}")

    def row_at(row: str) -> str:
        at = w.v(f"add i64 {first}, {w.v(f'zext i32 {row} to i64')}")
        return w.v(f"add i64 {w.v(f'mul i64 {at}, %H')}, {h}")
    return row_at


def _copies(w: Writer, spec: Sm80AttentionSpec, tid: str, tensor: str, nrows: int, row_at, extent: str):
    """This thread's share of copying `nrows` rows of `tensor` (`row_at`: the index of a row of this (batch,
    head), _rows; `extent` rows long) into shared memory: a function (row0, shared base, issue) that issues
    its 16-byte cp.asyncs of rows row0 … row0 + nrows - 1, zero-filling rows past the end. Consecutive
    threads copy consecutive chunks of a row (coalesced). A thread's chunk column and row & 7 never change,
    so its swizzled destinations are fixed offsets."""
    per_row = spec.head_dim // 8
    step = spec.threads // per_row                      # rows between a thread's copies
    c = w.v(f"and i32 {tid}, {per_row - 1}")
    r = w.v(f"udiv i32 {tid}, {per_row}")
    dst = _swizzled(w, spec, r, c)
    col = w.v(f"zext i32 {w.v(f'shl i32 {c}, 3')} to i64")

    def issue(row0: str, base: str, on: str) -> None:
        for i in range(nrows // step):
            row = w.v(f"add i32 {row0}, {w.v(f'add i32 {r}, {i * step}')}")
            ok = w.v(f"icmp ult i32 {row}, {extent}")
            elem = w.v(f"add i64 {w.v(f'mul i64 {row_at(row)}, {spec.head_dim}')}, {col}")
            elem = w.v(f"select i1 {ok}, i64 {elem}, i64 0")   # a chunk outside reads nothing but names one
            src = w.v(f"ptrtoint ptr addrspace(1) "
                      f"{w.v(f'getelementptr i16, ptr addrspace(1) %{tensor}, i64 {elem}')} to i64")
            am.cp_async(w, w.v(f"add i32 {base}, {w.v(f'add i32 {dst}, {i * step * spec.row_bytes}')}"), src,
                        w.v(f"select i1 {ok}, i32 16, i32 0"), on)
    return issue


def _swizzled(w: Writer, spec: Sm80AttentionSpec, row: str, chunk: str) -> str:
    """The shared offset of 16-byte chunk `chunk` of row `row` (chunk ^ (row & 7))."""
    swz = w.v(f"xor i32 {chunk}, {w.v(f'and i32 {row}, 7')}")
    return w.v(f"add i32 {w.v(f'mul i32 {row}, {spec.row_bytes}')}, {w.v(f'shl i32 {swz}, 4')}")


def _q_fragments(w: Writer, spec: Sm80AttentionSpec, smem: str, warp: str, lane: str):
    """The warp's Q rows as A fragments: a function (m tile, k step) → four registers. Lane l addresses row
    l % 16 of the m tile, chunk 2·ks + l / 16 (matrices: rows 0-7 k lo, rows 8-15 k lo, 0-7 k hi, 8-15 k hi);
    the m tiles are 16 rows apart, with the same row & 7. With one m tile a warp loads them once and holds
    them (D/4 registers); with two, they would not fit beside O and S, and are read from shared memory at
    each key block, as FlashAttention-2 does."""
    row = w.v(f"add i32 {w.v(f'mul i32 {warp}, {16 * spec.m_tiles}')}, {w.v(f'and i32 {lane}, 15')}")
    hi = w.v(f"lshr i32 {lane}, 4")
    offs = [w.v(f"add i32 {smem}, {_swizzled(w, spec, row, w.v(f'add i32 {hi}, {2 * ks}'))}")
            for ks in range(spec.head_dim // 16)]

    def load(mi: int, ks: int) -> list[str]:
        return am.ldmatrix_x4(w, w.v(f"add i32 {offs[ks]}, {16 * mi * spec.row_bytes}"))
    if spec.m_tiles > 1:
        return load
    held = {(0, ks): load(0, ks) for ks in range(spec.head_dim // 16)}
    return lambda mi, ks: held[mi, ks]


def _k_offsets(w: Writer, spec: Sm80AttentionSpec, lane: str) -> list[str]:
    """Where lane l's ldmatrix.x4 reads K for k step ks of the first 16 keys: key row l % 8 + 8·(l / 16),
    chunk 2·ks + (l / 8) % 2 — matrices (keys 0-7, k lo), (0-7, k hi), (8-15, k lo), (8-15, k hi), the B
    fragments of two n8 blocks. The next 16 keys are 16 rows on, with the same row & 7: a constant apart."""
    hi = w.v(f"shl i32 {w.v(f'lshr i32 {lane}, 4')}, 3")
    key = w.v(f"add i32 {w.v(f'and i32 {lane}, 7')}, {hi}")
    half = w.v(f"and i32 {w.v(f'lshr i32 {lane}, 3')}, 1")
    return [_swizzled(w, spec, key, w.v(f"add i32 {half}, {2 * ks}")) for ks in range(spec.head_dim // 16)]


def _v_offsets(w: Writer, spec: Sm80AttentionSpec, lane: str) -> list[str]:
    """Where lane l's ldmatrix.x4.trans reads V for the first 16 keys and pair p of n8 blocks of D: key row
    l % 16, chunk 2·p + l / 16 — matrices (keys 0-7, d lo), (8-15, d lo), (0-7, d hi), (8-15, d hi),
    transposed: the B fragments of two n8 blocks. Later k steps are 16 rows on: a constant apart."""
    key = w.v(f"and i32 {lane}, 15")
    hi = w.v(f"lshr i32 {lane}, 4")
    return [_swizzled(w, spec, key, w.v(f"add i32 {hi}, {2 * p}")) for p in range(spec.head_dim // 16)]


def _scores(w: Writer, spec: Sm80AttentionSpec, q_frag, k_at: str, k_off: list) -> list[str]:
    """S = Q·K_jᵀ: per m tile, BN/8 n8 blocks of four accumulators (mma's C layout, attention_sm90's order
    of a wgmma accumulator: element i in key block i // 4)."""
    MT = spec.m_tiles
    nb = spec.block_n // 8
    acc = [["0.0"] * 4 for _ in range(MT * nb)]
    for ks in range(spec.head_dim // 16):
        q = [q_frag(mi, ks) for mi in range(MT)]
        for p in range(spec.block_n // 16):
            b = am.ldmatrix_x4(w, w.v(f"add i32 {k_at}, {w.v(f'add i32 {k_off[ks]}, {16 * p * spec.row_bytes}')}"))
            for mi in range(MT):
                for h in range(2):
                    i = mi * nb + 2 * p + h
                    acc[i] = am.mma(w, acc[i], q[mi], b[2 * h:2 * h + 2], spec.dtype)
    return [x for a in acc for x in a]


def _pv(w: Writer, spec: Sm80AttentionSpec, o: list[str], frags: list, v_at: str, v_off: list) -> list[str]:
    """O += P·V_j: P's A fragments per m tile (four registers per k step of 16 keys), V by ldmatrix.x4.trans."""
    o = list(o)
    nd = spec.head_dim // 8
    for ks in range(spec.block_n // 16):
        for p in range(spec.head_dim // 16):
            b = am.ldmatrix_x4(w, w.v(f"add i32 {v_at}, {w.v(f'add i32 {v_off[p]}, {16 * ks * spec.row_bytes}')}"),
                               trans=True)
            for mi in range(spec.m_tiles):
                a = frags[mi][4 * ks:4 * ks + 4]
                for h in range(2):
                    i = 4 * (mi * nd + 2 * p + h)
                    o[i:i + 4] = am.mma(w, o[i:i + 4], a, b[2 * h:2 * h + 2], spec.dtype)
    return o


def _store(w: Writer, spec: Sm80AttentionSpec, o: list[str], l: list[str], rows: list, col_t: str, row_at,
           sq: str) -> None:
    """O / l rounded to the dtype: the row sums completed across the quad of lanes sharing a row; each pair of
    columns one 32-bit store, for rows before SQ."""
    D = spec.head_dim
    _, ety = fa._ELEM[spec.dtype]
    for mi, (r0, r1) in enumerate(rows):
        for r, row in enumerate((r0, r1)):
            total = l[2 * mi + r]
            for x in (1, 2):
                other = w.v(f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {total}, i32 {x}, i32 31)")
                total = w.v(f"fadd float {total}, {other}")
            inv = w.v(f"fdiv float 1.0, {total}")
            ok = w.v(f"zext i1 {w.v(f'icmp ult i32 {row}, {sq}')} to i32")
            base = w.v(f"mul i64 {row_at(row)}, {D}")
            base = w.v(f"add i64 {base}, {w.v(f'zext i32 {col_t} to i64')}")
            for nb in range(D // 8):
                i = 4 * (mi * (D // 8) + nb) + 2 * r
                vec = w.v(f"insertelement <2 x float> poison, float {w.v(f'fmul float {o[i]}, {inv}')}, i32 0")
                vec = w.v(f"insertelement <2 x float> {vec}, float {w.v(f'fmul float {o[i + 1]}, {inv}')}, i32 1")
                pair = w.v(f"bitcast <2 x {ety}> {w.v(f'fptrunc <2 x float> {vec} to <2 x {ety}>')} to i32")
                at = w.v(f"getelementptr i16, ptr addrspace(1) %O, i64 {w.v(f'add i64 {base}, {8 * nb}')}")
                w.asm("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b32 [$0], $1; }", "l,r,r",
                      [("i64", w.v(f"ptrtoint ptr addrspace(1) {at} to i64")), ("i32", pair), ("i32", ok)])
