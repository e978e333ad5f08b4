"""Hopper flash attention (forward) on fp8: O = softmax(scale · sq·sk · Q·Kᵀ [causal]) · (P₈ · V) · sv, with Q, K
and V one-byte e4m3 tensors and sq, sk, sv their f32 descales (per tensor, in device memory).

The kernel is attention_sm90.py's (same warp roles, ring of K/V stages, ping-pong of the two consumer
warpgroups, online softmax in f32, masking, TMA stores of O); what differs is here:

  * S = Q·Kᵀ is wgmma m64nNk32 e4m3·e4m3 → f32, both operands K-major as stored (the head dimension is
    contiguous in Q [BH, SQ, D] and K [BH, SK, D]); a TMA box of 128 one-byte columns is one row of the
    128-byte swizzle, so D = 128 is one box.
  * The exponent's factor sq · sk · scale · log2(e) is one f32, computed at the start from the descales.
  * P (the probabilities relative to the running row max, in [0, 1]) is rounded to e4m3 (cvt.rn.satfinite)
    and stays in registers as wgmma's A. wgmma reads 8-bit B operands K-major only, so V comes as
    Vᵀ [BH, D, SKP] (SKP = SK rounded up to 16, the TMA row pitch), keys contiguous. The 8-bit A fragment
    of a thread holds columns 4t … 4t+3 (and +16) of its rows, while S's accumulator gives it columns 2t,
    2t+1, 8+2t, 9+2t (and +16): instead of shuffling P between lanes, Vᵀ's keys are stored permuted within
    each 16 (FlashAttention-3's trick) — `vt_order` is the permutation, which `generate_vt` applies while
    transposing.
  * O / l is multiplied by sv and rounded to bf16.

Row sums l add the f32 probabilities before rounding (the interpreter's reference, docs/language.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import attention_sm90 as fa
from . import hopper as hp
from .nvvm_text import Writer, module
from ..symbol_names import llvm_global

BM = fa.BM
ROW = 128                     # bytes (e4m3 elements) of one TMA box row: the 128-byte swizzle
TUNED = {"block_n": 128, "stages": 3}


def vt_order(i: int) -> int:
    """The key held at position `i` of each 16 in Vᵀ: position 4t + e (thread t's A fragment byte e) holds
    the key whose probability that byte carries, 2t + (e & 1) + 8·(e >> 1)."""
    t, e = (i % 16) // 4, i % 4
    return i - i % 16 + 2 * t + (e & 1) + 8 * (e >> 1)


@dataclass(frozen=True)
class Sm90AttentionFp8Spec(fa.Sm90AttentionSpec):
    dtype: str = "fp8_e4m3"
    out_dtype = "bf16"
    extra_params = ("DQ", "DK", "DV")   # f32 descales of Q, K, V (0-d tensors)

    def __post_init__(self):
        for key, value in TUNED.items():
            if not getattr(self, key):
                object.__setattr__(self, key, value)
        if self.dtype != "fp8_e4m3":
            raise ValueError(f"the sm_90a fp8 attention takes fp8_e4m3, not {self.dtype}")
        if self.head_dim != 128:
            raise ValueError(f"the sm_90a fp8 attention takes head dimension 128, not {self.head_dim}")
        if self.lse:
            raise ValueError("the sm_90a fp8 attention has no log-sum-exp output (no backward on fp8)")
        if not self.scale > 0:
            raise ValueError(f"the sm_90a fp8 attention takes a positive scale, not {self.scale}")
        if self.block_n not in (128, 256):
            raise ValueError(f"the sm_90a fp8 attention takes blocks of 128 or 256 keys, not {self.block_n}")
        if not 2 <= self.stages <= 4 or self.smem_bytes > 227 * 1024:
            raise ValueError(f"{self.stages} stages of {self.block_n}-key blocks do not fit sm_90's shared memory")

    @property
    def boxes(self) -> int:
        return 1

    @property
    def q_bytes(self) -> int:
        # Q takes BM·D bytes; O's staging (store_rows: two 64-column bf16 boxes of 128 rows) twice that
        return 2 * fa.QBOX

    @property
    def v_offset(self) -> int:
        return self.block_n * ROW

    @property
    def stage_bytes(self) -> int:
        return 2 * self.block_n * ROW

    @property
    def tensor_maps(self) -> str:
        # Q, K: 128 one-byte columns of BM / block_n rows; Vᵀ: 128 keys of D rows; O: bf16, as attention_sm90
        return (f"Q:0:128x{BM}x1:128;K:1:128x{self.block_n}x1:128;V:2:128x{self.head_dim}x1:128;"
                "O:3:64x64x1:128")

    def load_q(self, w: Writer, base: str, tm: str, m0: str, bh: str, bar: str) -> None:
        hp.mbar_expect(w, bar, BM * ROW)
        hp.tma_load(w, base, tm, ["0", m0, bh], bar)

    def load_kv(self, w: Writer, at: str, tm: dict, key0: str, bh: str, bar: str) -> None:
        hp.tma_load(w, at, tm["K"], ["0", key0, bh], bar)
        for i in range(self.block_n // ROW):   # Vᵀ: boxes of 128 keys, D rows
            hp.tma_load(w, w.v(f"add i32 {at}, {self.v_offset + i * self.head_dim * ROW}"), tm["V"],
                        [w.v(f"add i32 {key0}, {i * ROW}"), "0", bh], bar)

    def _descale(self, w: Writer, name: str) -> str:
        return w.v(f"load float, ptr addrspace(1) %{name}, align 4")

    def multiplier(self, w: Writer) -> str:
        qk = w.v(f"fmul float {self._descale(w, 'DQ')}, {self._descale(w, 'DK')}")
        return w.v(f"fmul float {qk}, {fa._f(self.scale * math.log2(math.e))}")

    def out_scale(self, w: Writer) -> str:
        return self._descale(w, "DV")

    def scores(self, w: Writer, q_rows: str, k_at: str) -> list[str]:
        sc = None
        for kk in range(self.head_dim // 32):
            da = hp.desc(w, w.v(f"add i32 {q_rows}, {32 * kk}"), 16, hp.ATOM)
            db = hp.desc(w, w.v(f"add i32 {k_at}, {32 * kk}"), 16, hp.ATOM)
            sc = (hp.wgmma_ss_first(w, self.block_n, "e4m3", da, db, 0) if sc is None
                  else hp.wgmma_ss(w, sc, "e4m3", da, db, 0))
        hp.commit(w)
        return sc

    def pv(self, w: Writer, o: list[str], frags: list[str], v_at: str) -> list[str]:
        for kk in range(self.block_n // 32):
            at = w.v(f"add i32 {v_at}, {(kk // 4) * self.head_dim * ROW + 32 * (kk % 4)}")
            o = hp.tied(w, o, f"wgmma.mma_async.sync.aligned.m64n{self.head_dim}k32.f32.e4m3.e4m3 {{ACC}}, "
                              "{{X0}, {X1}, {X2}, {X3}}, {X4}, 1, 1, 1;",
                        [("i32", x) for x in frags[4 * kk:4 * kk + 4]] + [("i64", hp.desc(w, at, 16, hp.ATOM))],
                        ["r", "r", "r", "r", "l"])
        hp.commit(w)
        return o

    def fragments(self, w: Writer, probs: list[str]) -> list[str]:
        """P as e4m3 A fragments, four registers per 32 keys: (row, 16-key half h) in register 2h + row, its
        bytes the accumulator's columns 2t, 2t+1, 8+2t, 9+2t of that half (Vᵀ's order, `vt_order`)."""
        out = []
        for kk in range(len(probs) // 16):
            for h in range(2):
                for r in range(2):
                    x = [probs[16 * kk + 8 * h + 4 * g + 2 * r + e] for g in range(2) for e in range(2)]
                    out.append(w.v(f'call i32 asm "{{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1; '
                                   f'cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3; mov.b32 $0, {{lo, hi}}; }}", '
                                   f'"=r,f,f,f,f"(float {x[0]}, float {x[1]}, float {x[2]}, float {x[3]})'))
        # wgmma's register order per 32 keys: a0 (row, h 0), a1 (row + 8, h 0), a2 (row, h 1), a3 (row + 8, h 1)
        return out


def generate(spec: Sm90AttentionFp8Spec) -> str:
    """The kernel as NVPTX LLVM IR text (attention_sm90.generate with this spec's parts). Parameters: the
    Q, K, Vᵀ, O tensor maps, then Q, K ([BH, SQ | SK, 128] e4m3), Vᵀ ([BH, 128, SKP] e4m3, keys in `vt_order`
    and zero past SK), O ([BH, SQ, 128] bf16), the descales DQ, DK, DV (f32), and BH, SQ, SK."""
    return fa.generate(spec)


def generate_vt(name: str, head_dim: int) -> str:
    """Vᵀ for the fp8 kernel: [BH, SK, D] one-byte values in, [BH, D, SKP] out (SKP = SK rounded up to 16),
    key j of each 16 at position `vt_order`⁻¹(j), zeros past SK. A block of 256 threads moves a 64-key ×
    64-column tile through shared memory (rows 65 bytes apart, so a warp's column reads spread over the
    banks). Grid: (ceil(SKP / 64), D / 64, BH)."""
    w = Writer()
    w.label("entry")
    tid, kb, db, bh = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y"), w.sreg("ctaid.z")
    sk = w.v("trunc i64 %SK to i32")
    skp = w.v(f"and i32 {w.v(f'add i32 {sk}, 15')}, -16")
    bh64 = w.v(f"zext i32 {bh} to i64")
    key0, col0 = w.v(f"shl i32 {kb}, 6"), w.v(f"shl i32 {db}, 6")
    # load: thread t reads 16 (key, column) bytes: key key0 + (t / 4) , columns col0 + 16·(t % 4) …
    kr = w.v(f"lshr i32 {tid}, 2")
    cq = w.v(f"shl i32 {w.v(f'and i32 {tid}, 3')}, 4")
    key = w.v(f"add i32 {key0}, {kr}")
    inside = w.v(f"icmp ult i32 {key}, {sk}")
    src = w.v(f"add i64 {w.v(f'mul i64 {bh64}, %SK')}, {w.v(f'zext i32 {key} to i64')}")
    c64 = w.v(f"zext i32 {w.v(f'add i32 {col0}, {cq}')} to i64")
    src = w.v(f"add i64 {w.v(f'mul i64 {src}, {head_dim}')}, {c64}")
    before = w.current
    w.cbr(inside, "load", "loaded")
    w.label("load")
    got = w.v(f"load <16 x i8>, ptr addrspace(1) {w.v(f'getelementptr i8, ptr addrspace(1) %V, i64 {src}')}, "
              "align 16")
    w.br("loaded")
    w.label("loaded")
    vals = w.v(f"phi <16 x i8> [zeroinitializer, %{before}], [{got}, %load]")
    # shared tile [64 keys][65]: key-major
    for e in range(16):
        byte = w.v(f"extractelement <16 x i8> {vals}, i32 {e}")
        at = w.v(f"add i32 {w.v(f'mul i32 {kr}, 65')}, {w.v(f'add i32 {cq}, {e}')}")
        w.emit(f"store i8 {byte}, ptr addrspace(3) {w.v(f'getelementptr i8, ptr addrspace(3) @tsr_tile, i32 {at}')}")
    w.asm("bar.sync 0;")
    # store: thread t writes 16 keys' bytes of one column: column col0 + t / 4, positions key0 + 16·(t % 4) …
    col = w.v(f"lshr i32 {tid}, 2")
    pq = w.v(f"shl i32 {w.v(f'and i32 {tid}, 3')}, 4")
    pos0 = w.v(f"add i32 {key0}, {pq}")
    vec = "zeroinitializer"
    for e in range(16):
        at = w.v(f"add i32 {w.v(f'mul i32 {pq}, 65')}, {w.v(f'add i32 {65 * (vt_order(e))}, {col}')}")
        byte = w.v(f"load i8, ptr addrspace(3) {w.v(f'getelementptr i8, ptr addrspace(3) @tsr_tile, i32 {at}')}")
        vec = w.v(f"insertelement <16 x i8> {vec}, i8 {byte}, i32 {e}")
    out_ok = w.v(f"icmp ult i32 {pos0}, {skp}")
    w.cbr(out_ok, "store", "exit")
    w.label("store")
    c64 = w.v(f"zext i32 {w.v(f'add i32 {col0}, {col}')} to i64")
    dst = w.v(f"add i64 {w.v(f'mul i64 {bh64}, {head_dim}')}, {c64}")
    pitch = w.v(f"zext i32 {skp} to i64")
    dst = w.v(f"add i64 {w.v(f'mul i64 {dst}, {pitch}')}, {w.v(f'zext i32 {pos0} to i64')}")
    w.emit(f"store <16 x i8> {vec}, ptr addrspace(1) {w.v(f'getelementptr i8, ptr addrspace(1) %VT, i64 {dst}')}, "
           "align 16")
    w.br("exit")
    w.label("exit")
    w.emit("ret void")
    kernel = (f"@tsr_tile = internal addrspace(3) global [{64 * 65} x i8] undef, align 16\n"
              f"define ptx_kernel void @{llvm_global(name)}(ptr addrspace(1) %V, ptr addrspace(1) %VT, i64 %BH, "
              f"i64 %SK) \"nvvm.maxntid\"=\"256\" {{\n" + "\n".join(w.lines) + "\n}\n")
    return module(kernel)
