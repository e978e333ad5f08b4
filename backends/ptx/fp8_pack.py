"""Packing 8-bit GEMM operands for the sm_90a wgmma kernel (gemm_sm90.py): fp8 values held in their f16
container (passes/fp8_fallback.py) become one-byte e4m3/e5m2 elements, K-major, rows padded with zeros to a
multiple of 16 bytes (what TMA reads). int8 operands are one byte wide already: their B is copied, bytes
unchanged, into the same transposed layout (`cols`), which is what wgmma's s8 kind reads.

    rows   A [R, K] f16 -> [R, KP] fp8      (already K-major)
    cols   B [K, N] f16 -> [N, KP] fp8      (transposed: wgmma reads 8-bit operands K-major only)

Each thread writes 16 consecutive bytes of one packed row (KP = 16·groups). In `rows` the threads of a
warp take consecutive groups of one row; in `cols` consecutive columns of B, so their loads of a row of B
coalesce and each thread's 16-byte store fills half a 32-byte sector. The conversion is exact — the
container holds only fp8 values — so the rounding mode of cvt (to nearest, saturating) never acts.
"""

from __future__ import annotations

from ... import plan
from ..symbol_names import llvm_global
from .hopper import FP8
from .nvvm_text import Writer, module

GROUP = 16      # bytes a thread packs: one 16-byte store
THREADS = 128


def padded(k) -> str:
    """The packed row length of K elements, as a plan expression."""
    return f"ceil(({k})/{GROUP})*{GROUP}"


def generate(name: str, dtype: str, transpose: bool) -> str:
    """Kernel `name(src f16* (i8* for dtype "i8"), dst u8*, i64 R|K, i64 K|N, i64 KP)`: `rows` (R, K) or
    `cols` (K, N) as the module's docstring says. Grid: rows — (ceil(KP/16/128), min(R, 65535)) with rows
    strided by the grid's y; cols — (ceil(N/128), KP/16)."""
    w = Writer()
    src_ty = "i8" if dtype == "i8" else "i16"
    w.label("entry")
    tid = w.sreg("tid.x")
    bx, by = w.sreg("ctaid.x"), w.sreg("ctaid.y")
    x = w.v(f"add i32 {w.v(f'mul i32 {bx}, {THREADS}')}, {tid}")
    x64 = w.v(f"zext i32 {x} to i64")
    if transpose:   # x: a column n of B (a packed row), y: a group
        r, g = x64, w.v(f"zext i32 {by} to i64")
        w.cbr(w.v(f"icmp ult i64 {r}, %N"), "body", "exit")
        w.label("body")
    else:           # x: a group, y: the first row; rows stride by the grid's y
        g = x64
        ny = w.v(f"zext i32 {w.sreg('nctaid.y')} to i64")
        w.cbr(w.v(f"icmp ult i64 {g}, {w.v(f'udiv i64 %KP, {GROUP}')}"), "start", "exit")
        w.label("start")
        r0 = w.v(f"zext i32 {by} to i64")
        w.cbr(w.v(f"icmp ult i64 {r0}, %R"), "body", "exit")
        w.label("body")
        r, r_next = w.fresh("r"), w.fresh("rn")
        w.emit(f"{r} = phi i64 [{r0}, %start], [{r_next}, %body]")
    k0 = w.v(f"mul i64 {g}, {GROUP}")
    halves = []
    for j in range(GROUP):
        k = w.v(f"add i64 {k0}, {j}")
        inside = w.v(f"icmp ult i64 {k}, %K")
        # src index: rows r·K + k, cols k·N + n; clamped to 0 where k is past the end (the load is discarded)
        idx = w.v(f"add i64 {w.v(f'mul i64 {k}, %N')}, {r}") if transpose else \
            w.v(f"add i64 {w.v(f'mul i64 {r}, %K')}, {k}")
        idx = w.v(f"select i1 {inside}, i64 {idx}, i64 0")
        h = w.v(f"load {src_ty}, ptr addrspace(1) {w.v(f'getelementptr {src_ty}, ptr addrspace(1) %src, i64 {idx}')}")
        halves.append(w.v(f"select i1 {inside}, {src_ty} {h}, {src_ty} 0"))
    words = _bytes_to_words(w, halves) if dtype == "i8" else _convert_to_words(w, halves, dtype)
    at = w.v(f"add i64 {w.v(f'mul i64 {r}, %KP')}, {k0}")
    ptr = w.v(f"getelementptr i8, ptr addrspace(1) %dst, i64 {at}")
    vec = "poison"
    for i, word in enumerate(words):
        vec = w.v(f"insertelement <4 x i32> {vec}, i32 {word}, i32 {i}")
    w.emit(f"store <4 x i32> {vec}, ptr addrspace(1) {ptr}, align 16")
    if transpose:
        w.br("exit")
    else:
        w.emit(f"{r_next} = add i64 {r}, {ny}")
        w.cbr(w.v(f"icmp ult i64 {r_next}, %R"), "body", "exit")
    w.label("exit")
    w.emit("ret void")
    dims = "i64 %K, i64 %N" if transpose else "i64 %R, i64 %K"
    kernel = (f"define ptx_kernel void @{llvm_global(name)}(ptr addrspace(1) %src, ptr addrspace(1) %dst, {dims}, "
              f"i64 %KP) "
              f"\"nvvm.maxntid\"=\"{THREADS}\" {{\n" + "\n".join(w.lines) + "\n}\n")
    return module(kernel)


def _convert_to_words(w: Writer, halves: list[str], dtype: str) -> list[str]:
    """Sixteen f16 containers of fp8 values as four 32-bit words of fp8 bytes, in element order."""
    cvt = f"cvt.rn.satfinite.{FP8[dtype]}x2.f16x2 $0, $1;"
    words = []
    for j in range(0, GROUP, 4):
        pairs = []
        for a, b in ((halves[j], halves[j + 1]), (halves[j + 2], halves[j + 3])):
            lo, hi = w.v(f"zext i16 {a} to i32"), w.v(f"zext i16 {b} to i32")
            packed = w.v(f"or i32 {lo}, {w.v(f'shl i32 {hi}, 16')}")
            # the upper half converts to the upper byte: element order stays little-endian
            pairs.append(w.v(f"zext i16 {w.asm(cvt, '=h,r', [('i32', packed)], ret='i16')} to i32"))
        words.append(w.v(f"or i32 {pairs[0]}, {w.v(f'shl i32 {pairs[1]}, 16')}"))
    return words


def _bytes_to_words(w: Writer, values: list[str]) -> list[str]:
    """Sixteen bytes as four little-endian 32-bit words, in element order."""
    words = []
    for j in range(0, GROUP, 4):
        word = w.v(f"zext i8 {values[j]} to i32")
        for i in range(1, 4):
            byte = w.v(f"zext i8 {values[j + i]} to i32")
            word = w.v(f"or i32 {word}, {w.v(f'shl i32 {byte}, {8 * i}')}")
        words.append(word)
    return words


def step(name: str, transpose: bool, src: str, dst: str, env: dict, lead: tuple[str, ...]) -> plan.ArgsStep:
    """The plan step running kernel `name` on plan values `src` → `dst`. `env` binds R (rows), K, N and KP;
    `lead` is ("BATCH",) when the step runs once per batch entry."""
    if transpose:
        shapes, grid = (("K", "N"), ("N", "KP")), (f"ceil(N/{THREADS})", f"KP//{GROUP}", "1")
    else:
        shapes, grid = (("R", "K"), ("R", "KP")), (f"ceil(KP/{GROUP * THREADS})", "min(R, 65535)", "1")
    return plan.ArgsStep(name, env=env, block=(THREADS, 1, 1), grid=grid, batch="BATCH" if lead else None,
                         args=(plan.TensorArg(src, (*lead, *shapes[0])), plan.TensorArg(dst, (*lead, *shapes[1]))))
