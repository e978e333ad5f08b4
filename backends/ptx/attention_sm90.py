"""Hopper flash attention (forward): O = softmax(scale · Q·Kᵀ [causal mask]) · V on sm_90a tensor cores.

Q, K, V and O are [BH, S, D] (batch and heads folded), D 64 or 128, bf16 or f16. One CTA takes 128 query
rows of one (batch, head), with the warp roles of the GEMM (gemm_sm90.py):

    warpgroup 0     the producer: one thread loads the Q tile once, then K and V tiles of 128 keys into a
                    ring of `stages` buffers (TMA, 3-D maps, so rows past a head's end read as zeros)
    warpgroups 1, 2 the consumers, 64 query rows each; per key block:
                      S = Q·Kᵀ           wgmma, both operands from shared memory (K is K-major as stored)
                      online softmax     in registers: running row max m and sum l, exp2 with the scale and
                                         log2(e) folded into one FMA; keys past the end and, when causal,
                                         keys after the query are -inf
                      O = O·α + P·V      P (bf16 pairs) stays in registers as wgmma's A fragments — the
                                         accumulator layout of S is the fragment layout of A — V is MN-major
                    then O / l is rounded and stored.

Causal attention is top-left aligned (query i sees keys j <= i, as the interpreter and torch's `is_causal`),
visits only the key blocks a tile needs, and runs the tiles with the most blocks first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import hopper as hp
from .nvvm_text import Writer, module

BM = 128                 # query rows per CTA
BN = 128                 # keys per block
BOX = 64 * BN * 2        # one TMA box: 64 columns (128 bytes) of 128 rows
_ELEM = {"bf16": ("bf16", "bfloat"), "f16": ("f16", "half")}


@dataclass(frozen=True)
class Sm90AttentionSpec:
    name: str
    head_dim: int = 128
    causal: bool = False
    scale: float = 1.0
    dtype: str = "bf16"
    stages: int = 2

    def __post_init__(self):
        if self.dtype not in _ELEM:
            raise ValueError(f"the sm_90a attention takes bf16 or f16, not {self.dtype}")
        if self.head_dim not in (64, 128):
            raise ValueError(f"the sm_90a attention takes head dimension 64 or 128, not {self.head_dim}")
        if not self.scale > 0:
            raise ValueError(f"the sm_90a attention takes a positive scale, not {self.scale}")
        if not 2 <= self.stages <= 4 or self.smem_bytes > 227 * 1024:
            raise ValueError(f"{self.stages} stages of K and V blocks do not fit sm_90's shared memory")

    @property
    def boxes(self) -> int:
        return self.head_dim // 64

    @property
    def stage_bytes(self) -> int:
        return 2 * self.boxes * BOX

    @property
    def smem_bytes(self) -> int:
        return self.boxes * BOX + self.stages * self.stage_bytes + 8 * (1 + 2 * self.stages) + 1024

    @property
    def threads(self) -> int:
        return 384

    @property
    def tensor_maps(self) -> str:
        return ";".join(f"{n}:{i}:64x{BM if n == 'Q' else BN}x1:128" for i, n in enumerate("QKV"))

    def flops(self, bh: int, sq: int, sk: int) -> float:
        pairs = sum(min(i + 1, sk) for i in range(sq)) if self.causal else sq * sk
        return 4.0 * bh * pairs * self.head_dim


def generate(spec: Sm90AttentionSpec) -> str:
    """The kernel as NVPTX LLVM IR text. Parameters: the Q, K, V tensor maps, then the launch arguments
    Q, K, V, O ([BH, SQ, D], [BH, SK, D] twice, [BH, SQ, D]) and the extents BH, SQ, SK."""
    w = Writer()
    et, ety = _ELEM[spec.dtype]
    S, nb, d = spec.stages, spec.boxes, spec.head_dim
    params = [f"ptr byval([128 x i8]) align 64 \"nvvm.grid_constant\" %tm{n}" for n in "QKV"]
    params += [f"ptr addrspace(1) %{n}" for n in ("Q", "K", "V", "O")] + ["i64 %BH", "i64 %SQ", "i64 %SK"]

    w.label("entry")
    tid = w.sreg("tid.x")
    bx = w.sreg("ctaid.x")
    bh = w.sreg("ctaid.y")
    nq = w.sreg("nctaid.x")
    raw = w.v("ptrtoint ptr addrspace(3) @tsr_smem to i32")
    base = w.v(f"add i32 {raw}, 1023")
    base = w.v(f"and i32 {base}, -1024")
    kv_base = w.v(f"add i32 {base}, {nb * BOX}")
    bars = w.v(f"add i32 {kv_base}, {S * spec.stage_bytes}")   # qfull, full[S], empty[S]
    sq = w.v("trunc i64 %SQ to i32")
    sk = w.v("trunc i64 %SK to i32")
    qb = w.v(f"sub i32 {nq}, 1") if spec.causal else bx
    if spec.causal:  # the longest rows first
        qb = w.v(f"sub i32 {qb}, {bx}")
    m0 = w.v(f"mul i32 {qb}, {BM}")
    nkv = w.v(f"add i32 {sk}, {BN - 1}")
    nkv = w.v(f"udiv i32 {nkv}, {BN}")
    if spec.causal:
        need = w.v(f"udiv i32 {w.v(f'add i32 {m0}, {BM + BN - 1}')}, {BN}")
        fewer = w.v(f"icmp ult i32 {need}, {nkv}")
        nkv = w.v(f"select i1 {fewer}, i32 {need}, i32 {nkv}")

    barriers = [(bars, 1)] + [(w.v(f"add i32 {bars}, {8 + 8 * s}"), 1) for s in range(S)] \
        + [(w.v(f"add i32 {bars}, {8 + 8 * (S + s)}"), 2) for s in range(S)]  # Q, full[s], empty[s]
    first, wg = hp.split_roles(w, tid, barriers)

    # -- producer ----------------------------------------------------------------------------------------
    w.label("producer")
    w.asm("setmaxnreg.dec.sync.aligned.u32 24;")
    w.cbr(first, "load_q", "exit")
    w.label("load_q")
    tm = {n: w.v(f"ptrtoint ptr %tm{n} to i64") for n in "QKV"}
    hp.mbar_expect(w, bars, nb * BOX)
    for i in range(nb):
        hp.tma_load(w, w.v(f"add i32 {base}, {i * BOX}"), tm["Q"], [str(64 * i), m0, bh], bars)
    any_kv = w.v(f"icmp ugt i32 {nkv}, 0")
    w.cbr(any_kv, "pkv", "exit")
    w.label("pkv")
    j, j_next = w.fresh("j"), w.fresh("jn")
    w.emit(f"{j} = phi i32 [0, %load_q], [{j_next}, %PLATCH]")
    s, ph = _stage(w, j, S)
    full, empty = _full(w, bars, s), _empty(w, bars, s, S)
    hp.mbar_wait(w, empty, w.v(f"xor i32 {ph}, 1"))
    hp.mbar_expect(w, full, spec.stage_bytes)
    k_at = w.v(f"add i32 {kv_base}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
    key0 = w.v(f"mul i32 {j}, {BN}")
    for i in range(nb):
        hp.tma_load(w, w.v(f"add i32 {k_at}, {i * BOX}"), tm["K"], [str(64 * i), key0, bh], full)
        hp.tma_load(w, w.v(f"add i32 {k_at}, {(nb + i) * BOX}"), tm["V"], [str(64 * i), key0, bh], full)
    w.emit(f"{j_next} = add i32 {j}, 1")
    platch = w.current
    w.cbr(w.v(f"icmp ult i32 {j_next}, {nkv}"), "pkv", "exit")

    # -- consumers ---------------------------------------------------------------------------------------
    w.label("consumer")
    w.asm("setmaxnreg.inc.sync.aligned.u32 240;")
    c = w.v(f"sub i32 {wg}, 1")
    t = w.v(f"and i32 {tid}, 127")
    leader = w.v(f"icmp eq i32 {t}, 0")
    warp = w.v(f"lshr i32 {t}, 5")
    lane = w.v(f"and i32 {t}, 31")
    row0 = w.v(f"add i32 {w.v(f'shl i32 {warp}, 4')}, {w.v(f'lshr i32 {lane}, 2')}")
    row0 = w.v(f"add i32 {row0}, {w.v(f'shl i32 {c}, 6')}")
    row0 = w.v(f"add i32 {m0}, {row0}")
    row1 = w.v(f"add i32 {row0}, 8")
    col_t = w.v(f"shl i32 {w.v(f'and i32 {lane}, 3')}, 1")
    q_rows = w.v(f"add i32 {base}, {w.v(f'mul i32 {c}, {64 * hp.SWIZZLE_ROW}')}")
    rows = (w.v(f"add i32 {m0}, {w.v(f'shl i32 {c}, 6')}"), row0, row1, col_t)  # the first is uniform
    hp.mbar_wait(w, bars, "0")
    pre = w.current
    w.cbr(w.v(f"icmp ugt i32 {nkv}, 0"), "ckv", "cdone")
    w.label("ckv")
    j, j_next = w.fresh("cj"), w.fresh("cjn")
    w.emit(f"{j} = phi i32 [0, %{pre}], [{j_next}, %CLATCH]")
    o_in = [w.fresh("o") for _ in range(d // 2)]
    m_in = [w.fresh("m") for _ in range(2)]
    l_in = [w.fresh("l") for _ in range(2)]
    phis_at = len(w.lines)
    k_at, v_at = _kv(w, spec, kv_base, bars, j)
    hp.fence(w)
    sc = hp.wait_group(w, _scores(w, spec, q_rows, k_at), 0)
    probs, m_new, l_new, alphas = _softmax(w, spec, _mask(w, spec, sc, j, rows, sk), m_in, l_in)
    o = [w.v(f"fmul float {x}, {alphas[(i // 2) % 2]}") for i, x in enumerate(o_in)]
    frags = _fragments(w, spec, probs)
    hp.fence(w)
    o = hp.wait_group(w, _pv(w, spec, o, frags, v_at), 0, keep=frags)
    hp.mbar_arrive_if(w, _empty(w, bars, w.v(f"urem i32 {j}, {S}"), S), leader)
    w.emit(f"{j_next} = add i32 {j}, 1")
    clatch = w.current
    w.cbr(w.v(f"icmp ult i32 {j_next}, {nkv}"), "ckv", "cdone")
    w.lines[phis_at:phis_at] = (
        [f"  {a} = phi float [0.0, %{pre}], [{b}, %{clatch}]" for a, b in zip(o_in, o)]
        + [f"  {a} = phi float [-inf, %{pre}], [{b}, %{clatch}]" for a, b in zip(m_in, m_new)]
        + [f"  {a} = phi float [0.0, %{pre}], [{b}, %{clatch}]" for a, b in zip(l_in, l_new)])
    w.label("cdone")
    of = [w.v(f"phi float [0.0, %{pre}], [{b}, %{clatch}]") for b in o]
    lf = [w.v(f"phi float [1.0, %{pre}], [{b}, %{clatch}]") for b in l_new]
    _store(w, spec, of, lf, bh, row0, row1, col_t, sq)
    w.br("exit")
    w.label("exit")
    w.emit("ret void")

    body = "\n".join(w.lines).replace("%PLATCH]", f"%{platch}]").replace("%CLATCH]", f"%{clatch}]")
    body = body.replace("float -inf", "float 0xFFF0000000000000").replace("[-inf,", "[0xFFF0000000000000,")
    decls = "\n".join(["declare float @llvm.maxnum.f32(float, float)", "declare float @llvm.exp2.f32(float)",
                       "declare float @llvm.fma.f32(float, float, float)",
                       "declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)"])
    kernel = (f"@tsr_smem = external addrspace(3) global [0 x i8], align 1024\n"
              f"define ptx_kernel void @{spec.name}({', '.join(params)}) "
              f"\"nvvm.maxntid\"=\"{spec.threads}\" \"nvvm.minctasm\"=\"1\" {{\n{body}\n}}\n")
    return module(kernel, decls)


def _kv(w: Writer, spec: Sm90AttentionSpec, kv_base: str, bars: str, j: str, wait: bool = True):
    """Shared addresses of K and V of key block `j`; waits for them to land unless told not to."""
    s, ph = _stage(w, j, spec.stages)
    if wait:
        hp.mbar_wait(w, _full(w, bars, s), ph)
    k_at = w.v(f"add i32 {kv_base}, {w.v(f'mul i32 {s}, {spec.stage_bytes}')}")
    return k_at, w.v(f"add i32 {k_at}, {spec.boxes * BOX}")


def _scores(w: Writer, spec: Sm90AttentionSpec, q_rows: str, k_at: str) -> list[str]:
    """Issues S = Q·Kᵀ (both K-major: the head dimension is contiguous in Q and K), one box per 64 of it."""
    et, _ = _ELEM[spec.dtype]
    sc = None
    for kk in range(spec.head_dim // 16):
        off = (kk // 4) * BOX + 32 * (kk % 4)
        da = hp.desc(w, w.v(f"add i32 {q_rows}, {off}"), 16, hp.ATOM)
        db = hp.desc(w, w.v(f"add i32 {k_at}, {off}"), 16, hp.ATOM)
        sc = hp.wgmma_ss_first(w, BN, et, da, db, 0) if sc is None else hp.wgmma_ss(w, sc, et, da, db, 0)
    hp.commit(w)
    return sc


def _pv(w: Writer, spec: Sm90AttentionSpec, o: list[str], frags: list[str], v_at: str) -> list[str]:
    """Issues O += P·V: P's fragments in registers, V MN-major (64-column boxes BOX apart)."""
    et, _ = _ELEM[spec.dtype]
    for kk in range(BN // 16):
        db = hp.desc(w, w.v(f"add i32 {v_at}, {16 * hp.SWIZZLE_ROW * kk}"), BOX, hp.ATOM)
        o = hp.wgmma_rs(w, o, et, frags[4 * kk:4 * kk + 4], db, trans_b=1)
    hp.commit(w)
    return o


def _softmax(w: Writer, spec: Sm90AttentionSpec, sc: list[str], m_in: list[str], l_in: list[str]):
    """One step of the online softmax of the thread's two rows: (p, new row max, new row sum of this
    thread's columns, rescale factor of what came before). Maxima are completed across the quad of lanes
    sharing a row; sums are not until the end."""
    log2e = _f(spec.scale * math.log2(math.e))
    probs = list(sc)
    m_new, l_new, alphas = [], [], []
    for r in range(2):
        idx = [4 * q + 2 * r + e for q in range(BN // 8) for e in range(2)]
        mx = _tree(w, [sc[i] for i in idx], "maxnum")
        for x in (1, 2):
            other = w.v(f"call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {mx}, i32 {x}, i32 31)")
            mx = w.v(f"call float @llvm.maxnum.f32(float {mx}, float {other})")
        mn = w.v(f"call float @llvm.maxnum.f32(float {m_in[r]}, float {w.v(f'fmul float {mx}, {log2e}')})")
        # a row with every key masked so far keeps -inf: exp2(-inf - -inf) would be NaN
        finite = w.v(f"fcmp one float {mn}, 0xFFF0000000000000")
        neg = w.v(f"fneg float {w.v(f'select i1 {finite}, float {mn}, float 0.0')}")
        for i in idx:
            probs[i] = w.v(f"call float @llvm.exp2.f32(float "
                           f"{w.v(f'call float @llvm.fma.f32(float {sc[i]}, float {log2e}, float {neg})')})")
        alpha = w.v(f"call float @llvm.exp2.f32(float {w.v(f'fadd float {m_in[r]}, {neg}')})")
        total = _tree(w, [probs[i] for i in idx], "fadd")
        l_new.append(w.v(f"call float @llvm.fma.f32(float {l_in[r]}, float {alpha}, float {total})"))
        m_new.append(mn)
        alphas.append(alpha)
    return probs, m_new, l_new, alphas


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


def _stage(w: Writer, j: str, stages: int) -> tuple[str, str]:
    return w.v(f"urem i32 {j}, {stages}"), w.v(f"and i32 {w.v(f'udiv i32 {j}, {stages}')}, 1")


def _full(w: Writer, bars: str, s: str) -> str:
    return w.v(f"add i32 {w.v(f'add i32 {bars}, 8')}, {w.v(f'shl i32 {s}, 3')}")


def _empty(w: Writer, bars: str, s: str, stages: int) -> str:
    return w.v(f"add i32 {_full(w, bars, s)}, {8 * stages}")


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
    key0 = w.v(f"mul i32 {j}, {BN}")
    last = w.v(f"icmp ugt i32 {w.v(f'add i32 {key0}, {BN}')}, {sk}")
    if spec.causal:
        diag = w.v(f"icmp ugt i32 {w.v(f'add i32 {key0}, {BN - 1}')}, {rmin}")
        last = w.v(f"or i1 {last}, {diag}")
    before, masked, after = w.current, w.fresh_label("mask"), w.fresh_label("masked")
    w.cbr(last, masked, after)
    w.label(masked)
    out = []
    for i, v in enumerate(sc):
        q, r, e = i // 4, (i // 2) % 2, i % 2
        col = w.v(f"add i32 {key0}, {w.v(f'add i32 {col_t}, {8 * q + e}')}")
        bad = w.v(f"icmp uge i32 {col}, {sk}")
        if spec.causal:
            bad = w.v(f"or i1 {bad}, {w.v(f'icmp ugt i32 {col}, {row1 if r else row0}')}")
        out.append(w.v(f"select i1 {bad}, float 0xFFF0000000000000, float {v}"))
    w.br(after)
    w.label(after)
    return [w.v(f"phi float [{v}, %{before}], [{m}, %{masked}]") for v, m in zip(sc, out)]


def _store(w: Writer, spec: Sm90AttentionSpec, o: list[str], l: list[str], bh: str, row0: str, row1: str,
           col_t: str, sq: str) -> None:
    """O / l, each thread's pairs of its two rows (the accumulator layout), rounded; rows past SQ are not
    written. The row sums are first completed across the quad of lanes that shares a row."""
    _, ety = _ELEM[spec.dtype]
    inv = []
    for r in range(2):
        total = l[r]
        for x in (1, 2):
            total = w.v(f"fadd float {total}, "
                        f"{w.v(f'call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float {total}, i32 {x}, i32 31)')}")
        inv.append(w.v(f"fdiv float 1.0, {total}"))
    bh64 = w.v(f"zext i32 {bh} to i64")
    for r, row in enumerate((row0, row1)):
        ok = w.v(f"zext i1 {w.v(f'icmp ult i32 {row}, {sq}')} to i32")
        line = w.v(f"add i64 {w.v(f'mul i64 {bh64}, %SQ')}, {w.v(f'zext i32 {row} to i64')}")
        line = w.v(f"mul i64 {line}, {spec.head_dim}")
        for q in range(spec.head_dim // 8):
            a, b = o[4 * q + 2 * r], o[4 * q + 2 * r + 1]
            vec = w.v(f"insertelement <2 x float> poison, float {w.v(f'fmul float {a}, {inv[r]}')}, i32 0")
            vec = w.v(f"insertelement <2 x float> {vec}, float {w.v(f'fmul float {b}, {inv[r]}')}, i32 1")
            bits = w.v(f"bitcast <2 x {ety}> {w.v(f'fptrunc <2 x float> {vec} to <2 x {ety}>')} to i32")
            col = w.v(f"add i32 {col_t}, {8 * q}")
            idx = w.v(f"add i64 {line}, {w.v(f'zext i32 {col} to i64')}")
            addr = w.v(f"getelementptr {ety}, ptr addrspace(1) %O, i64 {idx}")
            a64 = w.v(f"ptrtoint ptr {w.v(f'addrspacecast ptr addrspace(1) {addr} to ptr')} to i64")
            w.asm("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b32 [$0], $1; }", "l,r,r",
                  [("i64", a64), ("i32", bits), ("i32", ok)])
