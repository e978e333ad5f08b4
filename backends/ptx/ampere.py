"""Ampere (sm_80+) building blocks as inline PTX in NVPTX LLVM IR text: cp.async copies into shared memory and
their multistage K loop, ldmatrix fragment loads and mma.sync tensor-core products. Used by the generated sm_80
GEMMs (gemm_sm80.py, gemm_fma.py);
every later architecture runs them too (sm_90a included), since PTX is forward compatible.

Fragment layouts are the PTX ISA's ("Matrix fragments for mma.m16n8k16" / "mma.m16n8k8"): with g = lane / 4
and t = lane % 4, a thread holds rows g and g + 8 of A and C, and column g of B.
"""

from __future__ import annotations

from .nvvm_text import Writer

# mma.sync shape and PTX type of each input dtype: k16 for 16-bit inputs, k8 for tf32
MMA = {"bf16": ("m16n8k16", "bf16"), "f16": ("m16n8k16", "f16"), "tf32": ("m16n8k8", "tf32")}


def cp_async(w: Writer, dst: str, src: str, nbytes: str, issue: str) -> None:
    """Copies 16 bytes from global address `src` to shared address `dst` without passing through L1 (.cg):
    of them `nbytes` (0 or 16) are read and the rest zero-filled, which is how tiles are padded at the
    matrix edges. Nothing is issued where `issue` (i32) is 0."""
    w.asm("{ .reg .pred p; setp.ne.b32 p, $3, 0; @p cp.async.cg.shared.global [$0], [$1], 16, $2; }",
          "r,l,r,r", [("i32", dst), ("i64", src), ("i32", nbytes), ("i32", issue)])


def commit(w: Writer) -> None:
    """Closes the thread's group of copies issued since the last commit."""
    w.asm("cp.async.commit_group;")


def wait_group(w: Writer, pending: int) -> None:
    """Waits until at most `pending` of the thread's committed groups are still in flight."""
    w.asm(f"cp.async.wait_group {pending};")


def ldmatrix_x4(w: Writer, addr: str, trans: bool = False) -> list[str]:
    """Four 8x8 matrices of 16-bit elements, each row 16 bytes at the shared address lanes 8i..8i+7 give for
    matrix i; register i of lane l holds row l/4, elements 2(l%4) and 2(l%4)+1 of matrix i — or, with
    `trans`, column l/4, rows 2(l%4) and 2(l%4)+1."""
    ty = "{i32, i32, i32, i32}"
    op = "ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "") + ".shared.b16"
    res = w.asm(f"{op} {{$0, $1, $2, $3}}, [$4];", "=r,=r,=r,=r,r", [("i32", addr)], ret=ty, hint="frag")
    return [w.v(f"extractvalue {ty} {res}, {i}", "f") for i in range(4)]


def lds32(w: Writer, addr: str) -> str:
    """One 32-bit word of shared memory (inline, so that it stays between the barriers around it)."""
    return w.asm("ld.shared.b32 $0, [$1];", "=r,r", [("i32", addr)], ret="i32", hint="frag")


def mma(w: Writer, acc: list[str], a: list[str], b: list[str], dtype: str) -> list[str]:
    """acc += A·B on one m16n8 block: four fp32 accumulators, A's four and B's two registers of `dtype`
    (m16n8k16 for bf16/f16, m16n8k8 for tf32). The accumulators are tied to the results, so they stay in
    their registers."""
    shape, t = MMA[dtype]
    ty = "{float, float, float, float}"
    res = w.asm(f"mma.sync.aligned.{shape}.row.col.f32.{t}.{t}.f32 {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, "
                f"{{$8, $9}}, {{$0, $1, $2, $3}};", "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3",
                [("i32", x) for x in a] + [("i32", x) for x in b] + [("float", x) for x in acc], ret=ty, hint="acc")
    return [w.v(f"extractvalue {ty} {res}, {i}", "d") for i in range(4)]


def k_loop(w: Writer, stages: int, stage_bytes: int, smem: str, kt_n: str, nacc: int, copy_tile, multiply) -> list[str]:
    """The multistage cp.async K loop of the sm_80 GEMMs (gemm_sm80's mma.sync kernel, gemm_fma's FMA kernel),
    CUTLASS's and Triton's Ampere pipeline: the prologue copies K tiles 0 … stages-2 into as many stages of
    `stage_bytes` at shared address `smem`, a commit group each; then each K tile kt waits until its own group
    has landed (cp.async.wait_group stages-2) and the CTA has finished reading tile kt-1 (bar.sync), starts
    copying tile kt+stages-1 into kt-1's stage and multiplies tile kt. `copy_tile(kt, stage)` issues a thread's
    copies of K tile `kt` (an i32 value, nothing past the last of `kt_n`) into the stage at shared address
    `stage`; `multiply(acc, stage)` returns the `nacc` f32 accumulators after the stage at `stage`. Returns
    them after the loop, in block `kdone`, with no copies left in flight."""
    S = stages
    for s in range(S - 1):
        copy_tile(str(s), smem if s == 0 else w.v(f"add i32 {smem}, {s * stage_bytes}"))
        commit(w)
    any_k = w.v(f"icmp ugt i32 {kt_n}, 0")
    pre = w.current
    w.cbr(any_k, "kloop", "kdone")

    w.label("kloop")
    kt, kt_next = w.fresh("kt"), w.fresh("ktn")
    rs, rs_next = w.fresh("rs"), w.fresh("rsn")   # the stage read now, and the one being written
    ws, ws_next = w.fresh("ws"), w.fresh("wsn")
    acc_in = [w.fresh("acc") for _ in range(nacc)]
    phis_at = len(w.lines)
    wait_group(w, S - 2)             # tile kt has landed (this thread's copies) …
    w.asm("bar.sync 0;")             # … everyone's, and nobody still reads tile kt-1's stage
    copy_tile(w.v(f"add i32 {kt}, {S - 1}"), w.v(f"add i32 {smem}, {w.v(f'mul i32 {ws}, {stage_bytes}')}"))
    commit(w)
    acc = multiply(acc_in, w.v(f"add i32 {smem}, {w.v(f'mul i32 {rs}, {stage_bytes}')}"))
    w.emit(f"{kt_next} = add i32 {kt}, 1")
    for cur, nxt in ((rs, rs_next), (ws, ws_next)):
        inc = w.v(f"add i32 {cur}, 1")
        w.emit(f"{nxt} = select i1 {w.v(f'icmp eq i32 {inc}, {S}')}, i32 0, i32 {inc}")
    more = w.v(f"icmp ult i32 {kt_next}, {kt_n}")
    latch = w.current
    w.cbr(more, "kloop", "kdone")
    w.lines[phis_at:phis_at] = [f"  {kt} = phi i32 [0, %{pre}], [{kt_next}, %{latch}]",
                                f"  {rs} = phi i32 [0, %{pre}], [{rs_next}, %{latch}]",
                                f"  {ws} = phi i32 [{S - 1}, %{pre}], [{ws_next}, %{latch}]"] + \
        [f"  {a} = phi float [0.0, %{pre}], [{o}, %{latch}]" for a, o in zip(acc_in, acc)]

    w.label("kdone")
    fin = [w.v(f"phi float [0.0, %{pre}], [{o}, %{latch}]", "f") for o in acc]
    wait_group(w, 0)  # only empty groups remain; a kernel leaves none behind
    return fin
