"""B [K, N] of f32 words copied to [N, K] for sm_90a's wgmma tf32 kind, which reads tf32 operands K-major only, where
N is static and not a multiple of 4 (gemm_lowering._lower_tf32_sm90; otherwise gemm_sm90_tf32.py reads B as stored):
the words unchanged, so the GEMM truncates them as it would have in place.

The classic tiled transpose through shared memory: a CTA of 32×8 threads moves a 32×32 tile, reading rows of B
(consecutive threads on consecutive columns, 128-byte segments) into a shared tile padded to 33 words a row
(so that the column reads below fall in distinct banks), then, after a barrier, writing rows of the result
(consecutive threads on consecutive k). Each thread moves four elements; the edges are guarded.
"""

from __future__ import annotations

from ... import plan
from ..symbol_names import llvm_global
from .nvvm_text import Writer, module

TILE, ROWS = 32, 8      # a CTA's tile, and its threads' rows (each thread moves TILE / ROWS elements)


def generate(name: str) -> str:
    """Kernel `name(src f32* [K, N], dst f32* [N, KP], i64 K, i64 N, i64 KP)`: dst[n, k] = src[k, n] for k < K,
    0 for K <= k < KP. Grid (ceil(N/32), ceil(KP/32)), 256 threads."""
    w = Writer()
    w.label("entry")
    tid = w.sreg("tid.x")
    tx, ty = w.v(f"and i32 {tid}, {TILE - 1}"), w.v(f"lshr i32 {tid}, 5")
    n0 = w.v(f"mul i32 {w.sreg('ctaid.x')}, {TILE}")
    k0 = w.v(f"mul i32 {w.sreg('ctaid.y')}, {TILE}")
    for i in range(TILE // ROWS):   # read: row k0 + ty + 8i of B, column n0 + tx, into tile[ty + 8i][tx]
        r = w.v(f"add i32 {ty}, {ROWS * i}")
        k = w.v(f"zext i32 {w.v(f'add i32 {k0}, {r}')} to i64")
        n = w.v(f"zext i32 {w.v(f'add i32 {n0}, {tx}')} to i64")
        ok = w.v(f"and i1 {w.v(f'icmp ult i64 {k}, %K')}, {w.v(f'icmp ult i64 {n}, %N')}")
        kn = w.v(f"mul i64 {k}, %N")
        idx = w.v(f"select i1 {ok}, i64 {w.v(f'add i64 {kn}, {n}')}, i64 0")
        x = w.v(f"load i32, ptr addrspace(1) {w.v(f'getelementptr i32, ptr addrspace(1) %src, i64 {idx}')}")
        x = w.v(f"select i1 {ok}, i32 {x}, i32 0")
        at = w.v(f"add i32 {w.v(f'mul i32 {r}, {TILE + 1}')}, {tx}")
        w.emit(f"store i32 {x}, ptr addrspace(3) {w.v(f'getelementptr i32, ptr addrspace(3) @tsr_tile, i32 {at}')}")
    w.asm("bar.sync 0;", "~{memory}")   # the tile is whole (a memory clobber: LLVM keeps the accesses around it)
    for i in range(TILE // ROWS):   # write: row n0 + ty + 8i of the result, column k0 + tx, from tile[tx][ty + 8i]
        r = w.v(f"add i32 {ty}, {ROWS * i}")
        n = w.v(f"zext i32 {w.v(f'add i32 {n0}, {r}')} to i64")
        k = w.v(f"zext i32 {w.v(f'add i32 {k0}, {tx}')} to i64")
        at = w.v(f"add i32 {w.v(f'mul i32 {tx}, {TILE + 1}')}, {r}")
        x = w.v(f"load i32, ptr addrspace(3) {w.v(f'getelementptr i32, ptr addrspace(3) @tsr_tile, i32 {at}')}")
        ok = w.v(f"and i1 {w.v(f'icmp ult i64 {n}, %N')}, {w.v(f'icmp ult i64 {k}, %KP')}")
        then, done = w.fresh_label("store"), w.fresh_label("next")
        w.cbr(ok, then, done)
        w.label(then)
        idx = w.v(f"add i64 {w.v(f'mul i64 {n}, %KP')}, {k}")
        w.emit(f"store i32 {x}, ptr addrspace(1) {w.v(f'getelementptr i32, ptr addrspace(1) %dst, i64 {idx}')}")
        w.br(done)
        w.label(done)
    w.emit("ret void")
    kernel = (f"@tsr_tile = internal addrspace(3) global [{TILE * (TILE + 1)} x i32] undef, align 4\n"
              f"define ptx_kernel void @{llvm_global(name)}(ptr addrspace(1) %src, ptr addrspace(1) %dst, i64 %K, "
              f"i64 %N, i64 %KP) \"nvvm.maxntid\"=\"{TILE * ROWS}\" {{\n" + "\n".join(w.lines) + "\n}\n")
    return module(kernel)


def step(name: str, src: str, dst: str, env: dict, lead: tuple[str, ...]) -> plan.ArgsStep:
    """The plan step running kernel `name` on plan values `src` [.., K, N] → `dst` [.., N, KP]; `env` binds K, N
    and KP; `lead` is ("BATCH",) when the step runs once per batch entry."""
    return plan.ArgsStep(name, env=env, block=(TILE * ROWS, 1, 1), grid=(f"ceil(N/{TILE})", f"ceil(KP/{TILE})", "1"),
                         batch="BATCH" if lead else None,
                         args=(plan.TensorArg(src, (*lead, "K", "N")), plan.TensorArg(dst, (*lead, "N", "KP"))))
