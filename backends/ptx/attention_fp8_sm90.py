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
import os
from dataclasses import dataclass

from . import attention_sm90 as fa
from . import hopper as hp
from .nvvm_text import Writer, module
from ..symbol_names import llvm_global

BM = fa.BM
ROW = 128                     # bytes (e4m3 elements) of one TMA box row: the 128-byte swizzle
TUNED = {"block_m": 128, "block_n": 128, "stages": 3}   # block_m=192 (three consumers) spills 288 bytes and ran
#                                                         0.82x as fast on an H100 (docs/performance.md)
# causal only, over TUNED: late_wait (the loop's P·V wait after the softmax, not hoisted above it by ptxas) and
# early_rescale (O·α between the issues of S and P·V). Measured on an H200 (docs/performance.md, session 34, two
# processes, the sides' order rotated): the causal kernel alone 363.7 / 364.0 µs against 387.0 / 385.9, the e4m3-input
# call 387.7 / 394.7 against 421.1 / 413.1, the same output bits; not causal the kernel alone was 0.3-0.6 % slower
# (637.8 / 636.8 against 636.2 / 633.0 µs; one kernel moved by 0.2-3.2 % between the processes), so it stays off there.
TUNED_CAUSAL = {"late_wait": 1, "early_rescale": 1}
ENV = "TESSERA_SM90_ATTENTION_FP8"   # benchmarks' override of TUNED: "block_m=192,stages=2" (compile with
#                                     TESSERA_CACHE=0 so that no cached image is reused)


def tuned(causal: bool = False) -> dict:
    """TUNED (and TUNED_CAUSAL's when `causal`), with what $TESSERA_SM90_ATTENTION_FP8 sets (a benchmark's way of
    building variants; "late_wait=0,early_rescale=0" turns the causal ones off)."""
    out = dict(TUNED, **(TUNED_CAUSAL if causal else {}))
    fa.apply_settings(out, os.environ.get(ENV, ""), ENV, ("block_m", "block_n", "stages", "poly_every", "late_wait",
                                                           "early_rescale"))
    return out


def vt_order(i: int) -> int:
    """The key held at position `i` of each 16 in Vᵀ: position 4t + e (thread t's A fragment byte e) holds
    the key whose probability that byte carries, 2t + (e & 1) + 8·(e >> 1)."""
    t, e = (i % 16) // 4, i % 4
    return i - i % 16 + 2 * t + (e & 1) + 8 * (e >> 1)


@dataclass(frozen=True)
class Sm90AttentionFp8Spec(fa.Sm90AttentionSpec):
    dtype: str = "fp8_e4m3"
    out_dtype = "bf16"
    poly_every: int = 0      # every n-th exp2 of the softmax by a polynomial on the FMA pipe (0: none)
    extra_params = ("DS",)   # f32 [3]: the descales of Q, K, V
    extents = ("BH", "SQ", "SK", "SKP")   # SKP: Vᵀ's row pitch (its TMA map's), unread by the kernel

    def __post_init__(self):
        for key, value in tuned(self.causal).items():
            if key == "late_wait":   # -1: TUNED's (0 a choice)
                if self.late_wait < 0:
                    object.__setattr__(self, key, value)
            elif not getattr(self, key):
                object.__setattr__(self, key, value)
        if self.late_wait < 0:   # not in TUNED: off
            object.__setattr__(self, "late_wait", 0)
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
        if self.block_m not in (128, 192):
            raise ValueError(f"the sm_90a fp8 attention takes 128 or 192 query rows a CTA, not {self.block_m}")
        if not 2 <= self.stages <= 4 or self.smem_bytes > 227 * 1024:
            raise ValueError(f"{self.stages} stages of {self.block_n}-key blocks do not fit sm_90's shared memory")

    @property
    def boxes(self) -> int:
        return 1

    @property
    def q_bytes(self) -> int:
        # Q takes bm·D bytes; O's staging (store_rows: two 64-column bf16 boxes of bm rows) twice that
        return 2 * self.q_box

    @property
    def v_offset(self) -> int:
        return self.block_n * ROW

    @property
    def stage_bytes(self) -> int:
        return 2 * self.block_n * ROW

    @property
    def tensor_maps(self) -> str:
        # Q, K: 128 one-byte columns of bm / block_n rows; Vᵀ: 128 keys of D rows; O: bf16, as attention_sm90
        return (f"Q:0:128x{self.bm}x1:128;K:1:128x{self.block_n}x1:128;V:2:128x{self.head_dim}x1:128;"
                "O:3:64x64x1:128")

    def load_q(self, w: Writer, base: str, tm: str, m0: str, bh: str, bar: str) -> None:
        hp.mbar_expect(w, bar, self.bm * ROW)
        hp.tma_load(w, base, tm, ["0", m0, bh], bar)

    def load_kv(self, w: Writer, at: str, tm: dict, key0: str, bh: str, bar: str) -> None:
        hp.tma_load(w, at, tm["K"], ["0", key0, bh], bar)
        for i in range(self.block_n // ROW):   # Vᵀ: boxes of 128 keys, D rows
            hp.tma_load(w, w.v(f"add i32 {at}, {self.v_offset + i * self.head_dim * ROW}"), tm["V"],
                        [w.v(f"add i32 {key0}, {i * ROW}"), "0", bh], bar)

    def _descale(self, w: Writer, i: int) -> str:
        return w.v(f"load float, ptr addrspace(1) {w.v(f'getelementptr float, ptr addrspace(1) %DS, i32 {i}')}, "
                   "align 4")

    def multiplier(self, w: Writer) -> str:
        qk = w.v(f"fmul float {self._descale(w, 0)}, {self._descale(w, 1)}")
        return w.v(f"fmul float {qk}, {fa._f(self.scale * math.log2(math.e))}")

    def out_scale(self, w: Writer) -> str:
        return self._descale(w, 2)

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

    def exp2(self, w: Writer, x: str, i: int) -> str:
        if not self.poly_every or i % self.poly_every != self.poly_every - 1:
            return super().exp2(w, x, i)
        return _exp2_poly(w, x)

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


def _exp2_poly(w: Writer, x: str) -> str:
    """2^x for x <= 0 (or -inf) without the MUFU unit: x clamped to -125 (2^-125 rounds to e4m3's 0 as 0
    does), split as j + r with j = round(x) (adding 1.5·2^23 rounds it into the low bits) and |r| <= 1/2,
    2^r by a cubic (relative error 1.4e-4, below e4m3's 2^-4 by far), and j added to the exponent field.
    On fp8 the exponentials, not the tensor cores, bound the softmax's turn: every `poly_every`-th moves
    to the FMA and integer pipes."""
    magic = fa._f(12582912.0)
    x = w.v(f"call float @llvm.maxnum.f32(float {x}, float {fa._f(-125.0)})")
    t = w.v(f"fadd float {x}, {magic}")
    j = w.v(f"sub i32 {w.v(f'bitcast float {t} to i32')}, 1262485504")   # bits of 1.5·2^23
    r = w.v(f"fsub float {x}, {w.v(f'fsub float {t}, {magic}')}")
    p = fa._f(0.05502926558256149)
    for c in (0.2422569841146469, 0.6932530403137207, 0.9999513626098633):
        p = w.v(f"call float @llvm.fma.f32(float {p}, float {r}, float {fa._f(c)})")
    bits = w.v(f"add i32 {w.v(f'bitcast float {p} to i32')}, {w.v(f'shl i32 {j}, 23')}")
    return w.v(f"bitcast i32 {bits} to float")


def generate(spec: Sm90AttentionFp8Spec) -> str:
    """The kernel as NVPTX LLVM IR text (attention_sm90.generate with this spec's parts). Parameters: the
    Q, K, Vᵀ, O tensor maps, then Q, K ([BH, SQ | SK, 128] e4m3), Vᵀ ([BH, 128, SKP] e4m3, keys in `vt_order`
    and zero past SK), O ([BH, SQ, 128] bf16), the descales DS (f32 [3]: Q's, K's, V's), and BH, SQ, SK, SKP."""
    return fa.generate(spec)


NB = 256                      # blocks of the amax kernel per tensor: its partial maxima, one per thread after
UNROLL = 4                    # runs of 8 elements a thread of the amax kernel loads at once
E4M3_MAX = 448.0
_CVT = ('call i32 asm "{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1; '
        'cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3; mov.b32 $0, {lo, hi}; }", "=r,f,f,f,f"')


def _e4m3x4(w: Writer, x: list[str]) -> str:
    """Four f32 values rounded to e4m3 (to nearest, ties to even, saturated at ±448), packed low first."""
    return w.v(f"{_CVT}(float {x[0]}, float {x[1]}, float {x[2]}, float {x[3]})")


def _kernel(name: str, params: str, w: Writer, smem: str = "") -> str:
    return module(smem + f"define ptx_kernel void @{llvm_global(name)}({params}) \"nvvm.maxntid\"=\"256\" {{\n"
                  + "\n".join(w.lines) + "\n}\n", "declare float @llvm.maxnum.f32(float, float)\n"
                  "declare float @llvm.fabs.f32(float)\n"
                  "declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)")


def _block_max(w: Writer, x: str, tid: str) -> str:
    """The maximum of the non-negative f32 `x` over the block's 256 threads (as integers: the bit patterns of
    non-negative floats order as their values), in every thread."""
    b = w.v(f"bitcast float {x} to i32")
    for d in (16, 8, 4, 2, 1):
        o = w.v(f"call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 {b}, i32 {d}, i32 31)")
        b = w.v(f"select i1 {w.v(f'icmp ugt i32 {o}, {b}')}, i32 {o}, i32 {b}")
    slot = w.v(f"getelementptr i32, ptr addrspace(3) @tsr_red, i32 {w.v(f'lshr i32 {tid}, 5')}")
    w.emit(f"store i32 {b}, ptr addrspace(3) {slot}")
    w.asm("bar.sync 0;")
    m = "0"
    for i in range(8):
        o = w.v(f"load i32, ptr addrspace(3) {w.v(f'getelementptr i32, ptr addrspace(3) @tsr_red, i32 {i}')}")
        m = w.v(f"select i1 {w.v(f'icmp ugt i32 {o}, {m}')}, i32 {o}, i32 {m}")
    return w.v(f"bitcast i32 {m} to float")


_RED = "@tsr_red = internal addrspace(3) global [8 x i32] undef, align 4\n"


def generate_amax(name: str) -> str:
    """Partial maxima of |x| over Q, K and V (bf16, NQ, NK and NK elements, multiples of 128): block (b, t) of
    grid (NB, 3) takes every NB-th run of 2048 elements from run b of tensor t, UNROLL runs in flight a thread,
    and writes P[t·NB + b] (f32).
    Maxima are exact, so no order of the blocks changes the scale (maxnum skips NaN: a NaN element does not
    make the scale NaN, its own quantized value is NaN)."""
    w = Writer()
    w.label("entry")
    tid, b, t = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y")
    kv = w.v(f"select i1 {w.v(f'icmp eq i32 {t}, 1')}, ptr addrspace(1) %K, ptr addrspace(1) %V")
    src = w.v(f"select i1 {w.v(f'icmp eq i32 {t}, 0')}, ptr addrspace(1) %Q, ptr addrspace(1) {kv}")
    n = w.v(f"select i1 {w.v(f'icmp eq i32 {t}, 0')}, i64 %NQ, i64 %NK")
    run = w.v(f"add i32 {w.v(f'shl i32 {b}, 8')}, {tid}")
    first = w.v(f"zext i32 {run} to i64")   # this thread's first run of 8 elements
    w.br("loop")
    w.label("loop")
    i, i_next, m, m_next = w.fresh("i"), w.fresh("in"), w.fresh("m"), w.fresh("mn")
    w.emit(f"{i} = phi i64 [{first}, %entry], [{i_next}, %next]")
    w.emit(f"{m} = phi float [0.0, %entry], [{m_next}, %next]")
    e0 = w.v(f"shl i64 {i}, 3")
    w.cbr(w.v(f"icmp ult i64 {e0}, {n}"), "body", "done")
    w.label("body")
    # UNROLL runs of 8 (every NB·256-th) loaded before any is used; a run is all in or all out, the element
    # counts being multiples of D = 128; one out reads run 0 again, which changes no maximum
    vecs = []
    for u in range(UNROLL):
        at = w.v(f"add i64 {e0}, {8 * NB * 256 * u}")
        at = w.v(f"select i1 {w.v(f'icmp ult i64 {at}, {n}')}, i64 {at}, i64 0")
        vecs.append(w.v(f"load <8 x bfloat>, ptr addrspace(1) "
                        f"{w.v(f'getelementptr bfloat, ptr addrspace(1) {src}, i64 {at}')}, align 16"))
    acc = m
    for vec in vecs:
        for e in range(8):
            x = w.v(f"fpext bfloat {w.v(f'extractelement <8 x bfloat> {vec}, i32 {e}')} to float")
            acc = w.v(f"call float @llvm.maxnum.f32(float {acc}, float {w.v(f'call float @llvm.fabs.f32(float {x})')})")
    w.emit(f"{m_next} = call float @llvm.maxnum.f32(float {acc}, float 0.0)")
    w.br("next")
    w.label("next")
    w.emit(f"{i_next} = add i64 {i}, {UNROLL * NB * 256}")
    w.br("loop")
    w.label("done")
    top = _block_max(w, m, tid)
    put = w.v(f"icmp eq i32 {tid}, 0")
    w.cbr(put, "put", "exit")
    w.label("put")
    slot = w.v(f"add i32 {w.v(f'mul i32 {t}, {NB}')}, {b}")
    w.emit(f"store float {top}, ptr addrspace(1) {w.v(f'getelementptr float, ptr addrspace(1) %P, i32 {slot}')}")
    w.br("exit")
    w.label("exit")
    w.emit("ret void")
    return _kernel(name, "ptr addrspace(1) %Q, ptr addrspace(1) %K, ptr addrspace(1) %V, ptr addrspace(1) %P, "
                   "i64 %NQ, i64 %NK", w, _RED)


def _scale_of(w: Writer, t: str, tid: str, block_is_first: str) -> str:
    """Tensor t's quantization scale max(amax, 2^-126) / 448 (f32) from its NB partial maxima in P; the first
    block also writes it to DS[t], the attention's descale."""
    slot = w.v(f"add i32 {w.v(f'mul i32 {t}, {NB}')}, {tid}")
    part = w.v(f"getelementptr float, ptr addrspace(1) %P, i32 {slot}")
    amax = _block_max(w, w.v(f"load float, ptr addrspace(1) {part}"), tid)
    s = w.v(f"fdiv float {w.v(f'call float @llvm.maxnum.f32(float {amax}, float 0x3810000000000000)')}, "
            f"{fa._f(E4M3_MAX)}")
    put = w.v(f"and i1 {block_is_first}, {w.v(f'icmp eq i32 {tid}, 0')}")
    w.cbr(put, "put_scale", "scaled")
    w.label("put_scale")
    w.emit(f"store float {s}, ptr addrspace(1) {w.v(f'getelementptr float, ptr addrspace(1) %DS, i32 {t}')}")
    w.br("scaled")
    w.label("scaled")
    return s


def _load16(w: Writer, src: str, at: str) -> str:
    """The 16 bf16 values at element `at` of `src` (32-byte aligned), as loaded."""
    return w.v(f"load <16 x bfloat>, ptr addrspace(1) {w.v(f'getelementptr bfloat, ptr addrspace(1) {src}, i64 {at}')}"
               ", align 32")


def _quantized16(w: Writer, vec: str, s: str) -> str:
    """16 bf16 values (`_load16`'s) divided by s in f32 (one rounding) and rounded to e4m3: their 16 bytes as
    <4 x i32>."""
    f = []
    for e in range(16):
        x = w.v(f"fpext bfloat {w.v(f'extractelement <16 x bfloat> {vec}, i32 {e}')} to float")
        f.append(w.v(f"fdiv float {x}, {s}"))
    out = "poison"
    for i in range(4):
        out = w.v(f"insertelement <4 x i32> {out}, i32 {_e4m3x4(w, f[4 * i:4 * i + 4])}, i32 {i}")
    return out


def generate_quant(name: str) -> str:
    """Q and K (bf16, NQ and NK elements) to e4m3 Q8 and K8 with their scales (`_scale_of`, from the amax
    kernel's partials P; DS[0], DS[1] written): block (b, t) of grid (ceil(max(NQ, NK) / 4096), 2) converts
    16 elements a thread of tensor t. (Four runs of 16 a thread, loaded before the scale's reduction, measured
    1-2 % slower on an H100: docs/performance.md.)"""
    w = Writer()
    w.label("entry")
    tid, b, t = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y")
    s = _scale_of(w, t, tid, w.v(f"icmp eq i32 {b}, 0"))
    kq = w.v(f"icmp eq i32 {t}, 0")
    src = w.v(f"select i1 {kq}, ptr addrspace(1) %Q, ptr addrspace(1) %K")
    dst = w.v(f"select i1 {kq}, ptr addrspace(1) %Q8, ptr addrspace(1) %K8")
    n = w.v(f"select i1 {kq}, i64 %NQ, i64 %NK")
    run = w.v(f"add i32 {w.v(f'shl i32 {b}, 8')}, {tid}")
    e0 = w.v(f"shl i64 {w.v(f'zext i32 {run} to i64')}, 4")
    # 16 elements: 32 bytes in, 16 out (the element counts are multiples of D = 128, so a thread's 16 are all in)
    w.cbr(w.v(f"icmp ult i64 {e0}, {n}"), "whole", "exit")
    w.label("whole")
    out = _quantized16(w, _load16(w, src, e0), s)
    w.emit(f"store <4 x i32> {out}, ptr addrspace(1) {w.v(f'getelementptr i8, ptr addrspace(1) {dst}, i64 {e0}')}, "
           "align 16")
    w.br("exit")
    w.label("exit")
    w.emit("ret void")
    return _kernel(name, "ptr addrspace(1) %Q, ptr addrspace(1) %K, ptr addrspace(1) %Q8, ptr addrspace(1) %K8, "
                   "ptr addrspace(1) %P, ptr addrspace(1) %DS, i64 %NQ, i64 %NK", w, _RED)


def generate_vt(name: str, head_dim: int) -> str:
    """V (bf16 [BH, SK, D]) to Vᵀ for the fp8 kernel: e4m3 [BH, D, SKP] (SKP: SK rounded up to 16), key j of
    each 16 at position `vt_order`⁻¹(j), zeros past SK, quantized with V's scale (`_scale_of`: DS[2] written).
    A block of 256 threads moves a 64-key × 64-column tile through shared memory (rows 65 bytes apart, so a
    warp's column reads spread over the banks). Grid: (ceil(SKP / 64), D / 64, BH). Its loads go out before the
    scale's reduction (40.6-41.2 -> 38.4-38.6 us at 4x16x4096x128 on an H100)."""
    w = Writer()
    w.label("entry")
    tid, kb, db, bh = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y"), w.sreg("ctaid.z")
    first = w.v(f"icmp eq i32 {w.v(f'or i32 {kb}, {db}')}, 0")
    first = w.v(f"and i1 {first}, {w.v(f'icmp eq i32 {bh}, 0')}")
    skp, bh64, key0, col0, kr, cq, src, inside = _tile_source(w, tid, kb, db, bh, head_dim)
    # V's 16 elements loaded before the scale's reduction (their latencies overlap); past SK: zero bytes
    raw = _load16(w, "%V", w.v(f"select i1 {inside}, i64 {src}, i64 0"))
    s = _scale_of(w, "2", tid, first)
    packed = w.v(f"bitcast <4 x i32> {_quantized16(w, raw, s)} to <16 x i8>")
    vals = w.v(f"select i1 {inside}, <16 x i8> {packed}, <16 x i8> zeroinitializer")
    _transpose_tile(w, vals, tid, kr, cq, key0, col0, bh64, skp, head_dim)
    return _kernel(name, "ptr addrspace(1) %V, ptr addrspace(1) %VT, ptr addrspace(1) %P, ptr addrspace(1) %DS, "
                   "i64 %BH, i64 %SK, i64 %SKP", w, _RED + f"@tsr_tile = internal addrspace(3) global [{64 * 65} x i8] undef, "
                   "align 16\n")


def _tile_source(w: Writer, tid: str, kb: str, db: str, bh: str, head_dim: int) -> tuple:
    """The first half of generate_vt and generate_vt8's addressing: block (kb, db, bh) moves keys key0 … key0 + 63
    and columns col0 … col0 + 63 of V [BH, SK, D]; thread t takes 16 elements of key key0 + t / 4 (kr), columns
    col0 + 16·(t % 4) (cq) …, whose element offset is `src`, `inside` where the key is below SK. Returns (SKP as
    i32, bh as i64, key0, col0, kr, cq, src, inside)."""
    sk, skp = w.v("trunc i64 %SK to i32"), w.v("trunc i64 %SKP to i32")
    bh64 = w.v(f"zext i32 {bh} to i64")
    key0, col0 = w.v(f"shl i32 {kb}, 6"), w.v(f"shl i32 {db}, 6")
    kr = w.v(f"lshr i32 {tid}, 2")
    cq = w.v(f"shl i32 {w.v(f'and i32 {tid}, 3')}, 4")
    key = w.v(f"add i32 {key0}, {kr}")
    src = w.v(f"add i64 {w.v(f'mul i64 {bh64}, %SK')}, {w.v(f'zext i32 {key} to i64')}")
    c64 = w.v(f"zext i32 {w.v(f'add i32 {col0}, {cq}')} to i64")
    src = w.v(f"add i64 {w.v(f'mul i64 {src}, {head_dim}')}, {c64}")
    return skp, bh64, key0, col0, kr, cq, src, w.v(f"icmp ult i32 {key}, {sk}")


def _transpose_tile(w: Writer, vals: str, tid: str, kr: str, cq: str, key0: str, col0: str, bh64: str, skp: str,
                    head_dim: int) -> None:
    """The second half of generate_vt and generate_vt8: thread t's 16 bytes `vals` (key key0 + kr, columns
    col0 + cq …) through the shared tile [64 keys][65 bytes] (key-major; 65 so that a warp's column reads spread
    over the banks), then 16 positions of one column of Vᵀ [BH, D, SKP] a thread, in vt_order, stored where
    they are below SKP; ends the kernel."""
    for e in range(16):
        byte = w.v(f"extractelement <16 x i8> {vals}, i32 {e}")
        at = w.v(f"add i32 {w.v(f'mul i32 {kr}, 65')}, {w.v(f'add i32 {cq}, {e}')}")
        w.emit(f"store i8 {byte}, ptr addrspace(3) {w.v(f'getelementptr i8, ptr addrspace(3) @tsr_tile, i32 {at}')}")
    w.asm("bar.sync 0;")
    # store: thread t writes 16 positions of one column: column col0 + t / 4, positions key0 + 16·(t % 4) …
    col = w.v(f"lshr i32 {tid}, 2")
    pq = w.v(f"shl i32 {w.v(f'and i32 {tid}, 3')}, 4")
    pos0 = w.v(f"add i32 {key0}, {pq}")
    vec = "zeroinitializer"
    for e in range(16):
        at = w.v(f"add i32 {w.v(f'mul i32 {pq}, 65')}, {w.v(f'add i32 {65 * (vt_order(e))}, {col}')}")
        byte = w.v(f"load i8, ptr addrspace(3) {w.v(f'getelementptr i8, ptr addrspace(3) @tsr_tile, i32 {at}')}")
        vec = w.v(f"insertelement <16 x i8> {vec}, i8 {byte}, i32 {e}")
    w.cbr(w.v(f"icmp ult i32 {pos0}, {skp}"), "store", "exit")
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


def generate_vt8(name: str, head_dim: int) -> str:
    """generate_vt for V already e4m3 (the one-byte form of flash_attention_fp8, with descales): V8 (e4m3
    [BH, SK, D], one byte an element) to Vᵀ e4m3 [BH, D, SKP] with the same key permutation and zeros past SK,
    the bytes moved as they are; the first block's thread 0 also writes the three descales SCQ, SCK, SCV (f32,
    one each) to DS, the attention kernel's [3]. Same tiles and grid as generate_vt: (ceil(SKP / 64), D / 64,
    BH)."""
    w = Writer()
    w.label("entry")
    tid, kb, db, bh = w.sreg("tid.x"), w.sreg("ctaid.x"), w.sreg("ctaid.y"), w.sreg("ctaid.z")
    first = w.v(f"icmp eq i32 {w.v(f'or i32 {kb}, {db}')}, 0")
    first = w.v(f"and i1 {first}, {w.v(f'icmp eq i32 {bh}, 0')}")
    put = w.v(f"and i1 {first}, {w.v(f'icmp eq i32 {tid}, 0')}")
    w.cbr(put, "put_scales", "moved")
    w.label("put_scales")
    for i, src in enumerate(("%SCQ", "%SCK", "%SCV")):
        x = w.v(f"load float, ptr addrspace(1) {src}, align 4")
        w.emit(f"store float {x}, ptr addrspace(1) {w.v(f'getelementptr float, ptr addrspace(1) %DS, i32 {i}')}")
    w.br("moved")
    w.label("moved")
    skp, bh64, key0, col0, kr, cq, src, inside = _tile_source(w, tid, kb, db, bh, head_dim)
    at = w.v(f"select i1 {inside}, i64 {src}, i64 0")
    raw = w.v(f"load <16 x i8>, ptr addrspace(1) {w.v(f'getelementptr i8, ptr addrspace(1) %V, i64 {at}')}, align 16")
    vals = w.v(f"select i1 {inside}, <16 x i8> {raw}, <16 x i8> zeroinitializer")
    _transpose_tile(w, vals, tid, kr, cq, key0, col0, bh64, skp, head_dim)
    return _kernel(name, "ptr addrspace(1) %V, ptr addrspace(1) %SCQ, ptr addrspace(1) %SCK, ptr addrspace(1) %SCV, "
                   "ptr addrspace(1) %VT, ptr addrspace(1) %DS, i64 %BH, i64 %SK, i64 %SKP", w,
                   f"@tsr_tile = internal addrspace(3) global [{64 * 65} x i8] undef, align 16\n")
