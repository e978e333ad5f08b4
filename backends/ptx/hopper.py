"""Hopper (sm_90a) building blocks as inline PTX in NVPTX LLVM IR text: mbarriers, TMA bulk tensor copies,
and wgmma on shared-memory descriptors or register fragments. Shared by the generated GEMM
(gemm_sm90.py) and attention (attention_sm90.py) kernels.

Shared-memory operands are laid out as TMA writes them with 128-byte swizzling: rows of 128 bytes, 8-row
atoms of 1024 bytes, which is what a wgmma descriptor with swizzle mode 1 describes.
"""

from __future__ import annotations

from .nvvm_text import Writer

SWIZZLE_ROW = 128        # bytes of one swizzled row: 64 elements of a 16-bit type
ATOM = 1024              # 8 swizzled rows


def tensor_map_params(names) -> list[str]:
    """Kernel parameters for the TMA tensor maps `names` (tm<NAME>): 128-byte CUtensorMaps passed by value
    (`__grid_constant__`), which the runtime encodes at launch from the kernel's `ptx.tensor_maps`."""
    return [f"ptr byval([128 x i8]) align 64 \"nvvm.grid_constant\" %tm{n}" for n in names]


def smem_base(w: Writer) -> str:
    """The dynamic shared memory's address rounded up to the 1024-byte swizzle atom (the kernels reserve the
    slack)."""
    raw = w.v("ptrtoint ptr addrspace(3) @tsr_smem to i32")
    return w.v(f"and i32 {w.v(f'add i32 {raw}, {ATOM - 1}')}, -{ATOM}")


def desc(w: Writer, addr: str, lbo: int, sbo: int) -> str:
    """A wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (each >> 4),
    128-byte swizzle (mode 1 in bits 62-63). K-major operands: rows of K at 128 bytes, 8-row groups `sbo`
    apart (lbo unused); MN-major: 8 K-rows at 128 bytes, `sbo` between groups of 8 K-rows, `lbo` between
    64-wide chunks of MN."""
    start = w.v(f"lshr i32 {addr}, 4")
    start = w.v(f"and i32 {start}, 16383")
    wide = w.v(f"zext i32 {start} to i64")
    const = (lbo >> 4) << 16 | (sbo >> 4) << 32 | 1 << 62
    return w.v(f"or i64 {wide}, {const}")


def mbar_init(w: Writer, bar: str, count: int) -> None:
    w.asm(f"mbarrier.init.shared::cta.b64 [$0], {count};", "r", [("i32", bar)])


def split_roles(w: Writer, tid: str, barriers: list[tuple[str, int]]) -> tuple[str, str]:
    """Thread 0 initializes the mbarriers (address, arrival count) and makes them visible, the CTA waits for
    it, then warpgroup 0 branches to the block `producer` and the others to `consumer`, where each role gives
    or takes registers (setmaxnreg). Returns (tid == 0, the warpgroup's index)."""
    first = w.v(f"icmp eq i32 {tid}, 0")
    w.cbr(first, "init", "roles")
    w.label("init")
    for bar, count in barriers:
        mbar_init(w, bar, count)
    w.asm("fence.mbarrier_init.release.cluster;")
    w.br("roles")
    w.label("roles")
    w.asm("bar.sync 0;")
    wg = w.v(f"lshr i32 {tid}, 7")
    w.cbr(w.v(f"icmp eq i32 {wg}, 0"), "producer", "consumer")
    return first, wg


def mbar_wait(w: Writer, bar: str, parity: str) -> None:
    """Spins until the phase of `bar` with `parity` has completed."""
    head, done = w.fresh_label("wait"), w.fresh_label("waited")
    w.br(head)
    w.label(head)
    ok = w.asm("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; selp.b32 $0, 1, 0, p; }",
               "=r,r,r", [("i32", bar), ("i32", parity)], ret="i32")
    c = w.v(f"icmp ne i32 {ok}, 0")
    w.cbr(c, done, head)
    w.label(done)


def mbar_expect(w: Writer, bar: str, nbytes: int) -> None:
    """Arrives on `bar`, which completes once `nbytes` of bulk copies have landed too."""
    w.asm(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {nbytes};", "r", [("i32", bar)])


def mbar_arrive_if(w: Writer, bar: str, cond: str) -> None:
    on = w.v(f"zext i1 {cond} to i32")
    w.asm("{ .reg .pred p; setp.ne.b32 p, $1, 0; @p mbarrier.arrive.shared::cta.b64 _, [$0]; }", "r,r",
          [("i32", bar), ("i32", on)])


def tma_load(w: Writer, dst: str, tmap: str, coords: list[str], bar: str) -> None:
    """A bulk tensor copy of the box at `coords` (innermost first) of the map at generic address `tmap`."""
    n = len(coords)
    slots = ", ".join(f"${2 + i}" for i in range(n))
    w.asm(f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
          f"[$0], [$1, {{{slots}}}], [${2 + n}];", ",".join(["r", "l"] + ["r"] * n + ["r"]),
          [("i32", dst), ("i64", tmap)] + [("i32", c) for c in coords] + [("i32", bar)])


def tied(w: Writer, acc: list[str], text: str, extra: list[tuple[str, str]] = (),
         extra_constraints: list[str] = (), acc_type: str = "float") -> list[str]:
    """Inline PTX that reads and writes the accumulator registers in place (`{ACC}` in `text`; `{Xi}` the
    extra operands; fp32, or s32 where `acc_type` is "i32"); returns the new values. Tying keeps every later
    use after this instruction."""
    n = len(acc)
    text = text.replace("{ACC}", "{" + ", ".join(f"${i}" for i in range(n)) + "}")
    for j in range(len(extra)):
        text = text.replace(f"{{X{j}}}", f"${2 * n + j}")
    ty = "{" + ", ".join([acc_type] * n) + "}"
    constraints = ",".join([_REG[acc_type]] * n + [str(i) for i in range(n)] + list(extra_constraints))
    res = w.asm(text, constraints, [(acc_type, a) for a in acc] + list(extra), ret=ty, hint="acc")
    return [w.v(f"extractvalue {ty} {res}, {i}", "d") for i in range(n)]


FP8 = {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"}   # wgmma's names of the 8-bit operand types
_REG = {"float": "=f", "i32": "=r"}   # the inline-asm constraint of an accumulator register


def acc_type(et: str) -> str:
    """The LLVM type of a wgmma accumulator for A's operand type `et`: s32 for s8, fp32 otherwise."""
    return "i32" if et == "s8" else "float"


def _mma(n: int, et: str, bt: str | None, trans_b: int, trans_a: int = 0) -> tuple[str, str]:
    """(instruction, its operands after scale-d: immediates with their leading comma) of an m64nN wgmma on
    shared-memory operands of types `et` (A) and `bt` (B, `et` when None). 16-bit types multiply k16 slices
    and read A and B K- or MN-major (`trans_a`, `trans_b`); 8-bit types (fp8; s8, which accumulates in s32
    and has no scale immediates) multiply k32 slices, both operands K-major only (the ISA has no transpose
    for them, so both must be 0)."""
    bt = bt or et
    if et == "tf32":   # k8 slices (32 bytes), K-major only, as the 8-bit types
        if trans_b or trans_a:
            raise ValueError("wgmma reads tf32 operands K-major only")
        return f"wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32", ", 1, 1"
    if et in (*FP8.values(), "s8"):
        if trans_b or trans_a:
            raise ValueError("wgmma reads 8-bit operands K-major only")
        if et == "s8":
            return f"wgmma.mma_async.sync.aligned.m64n{n}k32.s32.s8.{bt}", ""
        return f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{et}.{bt}", ", 1, 1"
    return f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{et}.{bt}", f", 1, 1, {trans_a}, {trans_b}"


def wgmma_ss(w: Writer, acc: list[str], et: str, da: str, db: str, trans_b: int, bt: str | None = None,
             trans_a: int = 0) -> list[str]:
    """acc += A·B, m64nNk16 (k32 for fp8), both operands from shared memory (A K-major unless `trans_a`)."""
    op, imm = _mma(2 * len(acc), et, bt, trans_b, trans_a)
    return tied(w, acc, f"{op} {{ACC}}, {{X0}}, {{X1}}, 1{imm};", [("i64", da), ("i64", db)], ["l", "l"],
                acc_type(et))


def wgmma_ss_first(w: Writer, n: int, et: str, da: str, db: str, trans_b: int, bt: str | None = None,
                   trans_a: int = 0) -> list[str]:
    """A·B into fresh accumulators (n/2 a thread): scale-d false, so no instruction has to zero them — a
    non-wgmma definition of an accumulator inside a wgmma pipeline makes ptxas serialize it (C7513)."""
    op, imm = _mma(n, et, bt, trans_b, trans_a)
    regs = ", ".join(f"${i}" for i in range(n // 2))
    t = acc_type(et)
    ty = "{" + ", ".join([t] * (n // 2)) + "}"
    res = w.asm(f"{{ .reg .pred p; setp.ne.b32 p, ${n // 2 + 2}, 0; {op} {{{regs}}}, ${n // 2}, ${n // 2 + 1}, p"
                f"{imm}; }}", ",".join([_REG[t]] * (n // 2) + ["l", "l", "r"]),
                [("i64", da), ("i64", db), ("i32", "0")], ret=ty, hint="acc")
    return [w.v(f"extractvalue {ty} {res}, {i}", "d") for i in range(n // 2)]


def wgmma_rs(w: Writer, acc: list[str], et: str, a: list[str], db: str, trans_b: int) -> list[str]:
    """acc += A·B, m64nNk16, A from four registers of packed pairs (the accumulator layout of a previous
    product), B from shared memory."""
    return tied(w, acc, f"wgmma.mma_async.sync.aligned.m64n{2 * len(acc)}k16.f32.{et}.{et} {{ACC}}, "
                        f"{{{{X0}}, {{X1}}, {{X2}}, {{X3}}}}, {{X4}}, 1, 1, 1, {trans_b};",
                [("i32", x) for x in a] + [("i64", db)], ["r", "r", "r", "r", "l"])


def fence(w: Writer, floats: list[str] = (), ints: list[str] = ()) -> tuple[list[str], list[str]]:
    """Orders register writes before the wgmmas that follow. The accumulators `floats` and A fragments
    `ints` those wgmmas read pass through it, so that no instruction defining them (LLVM may sink a
    rescale or a phi's copy down to its use) lands inside the wgmma pipeline (ptxas would serialize it,
    C7513)."""
    vals = [("float", v) for v in floats] + [("i32", v) for v in ints]
    if not vals:
        w.asm("wgmma.fence.sync.aligned;")
        return [], []
    n = len(vals)
    ty = "{" + ", ".join(t for t, _ in vals) + "}"
    cons = ",".join([("=f" if t == "float" else "=r") for t, _ in vals] + [str(i) for i in range(n)])
    res = w.asm("wgmma.fence.sync.aligned;", cons, vals, ret=ty, hint="fenced")
    out = [w.v(f"extractvalue {ty} {res}, {i}", "d") for i in range(n)]
    return out[:len(floats)], out[len(floats):]


def commit(w: Writer) -> None:
    w.asm("wgmma.commit_group.sync.aligned;")


def wait_group(w: Writer, acc: list[str], pending: int, keep: list[str] = (), acc_type: str = "float") -> list[str]:
    """Waits until at most `pending` wgmma groups are in flight; `acc` (of `acc_type`) comes out of the wait,
    and the i32 registers `keep` (A fragments an in-flight wgmma reads) stay allocated until it."""
    return tied(w, acc, f"wgmma.wait_group.sync.aligned {pending};", [("i32", k) for k in keep], ["r"] * len(keep),
                acc_type)


def stmatrix_rows(w: Writer, groups: list[list[str]], warp: str, lane: str, staging: str, box_stride: int) -> None:
    """Writes a warpgroup's 64 rows of 16-bit results into shared memory laid out as TMA's 128-byte swizzle
    expects (boxes of 64 columns `box_stride` bytes apart, rows of 128 bytes, 16-byte chunk k of row r at
    chunk k ^ (r % 8)), from the accumulator layout: `groups[g]` holds a thread's four packed pairs of
    columns 16g … 16g + 15 — (row, cols 16g + 2t), (row + 8, same), (row, cols 16g + 8 + 2t), (row + 8, same)
    — as stmatrix's four 8x8 blocks."""
    quad = w.v(f"lshr i32 {lane}, 3")           # which of stmatrix's four 8x8 blocks this lane addresses
    row = w.v(f"shl i32 {w.v(f'and i32 {quad}, 1')}, 3")      # its row: the block's top or bottom 8 …
    row = w.v(f"add i32 {row}, {w.v(f'and i32 {lane}, 7')}")  # … and the lane's row in it …
    row = w.v(f"add i32 {row}, {w.v(f'shl i32 {warp}, 4')}")  # … of the warp's 16
    row_at = w.v(f"add i32 {staging}, {w.v(f'shl i32 {row}, 7')}")
    r8 = w.v(f"and i32 {row}, 7")
    upper = w.v(f"lshr i32 {quad}, 1")
    for g, regs in enumerate(groups):
        group = w.v(f"add i32 {upper}, {2 * g}")            # this lane's 8-column group
        box = w.v(f"mul i32 {w.v(f'lshr i32 {group}, 3')}, {box_stride}")
        chunk = w.v(f"xor i32 {w.v(f'and i32 {group}, 7')}, {r8}")
        chunk = w.v(f"shl i32 {chunk}, 4")
        addr = w.v(f"add i32 {w.v(f'add i32 {row_at}, {box}')}, {chunk}")
        w.asm("stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0], {$1, $2, $3, $4};", "r,r,r,r,r",
              [("i32", addr)] + [("i32", x) for x in regs])


# Thread-block clusters of two CTAs (gemm_sm90.py's cluster_m): the cluster shape is fixed at compile time
# (.reqnctapercluster, .explicitcluster in the PTX), so a plain launch forms the clusters from CTAs 2p, 2p + 1
CLUSTER_ATTR = ' "nvvm.cluster_dim"="2,1,1"'


def cluster_sync(w: Writer, aligned: bool = True) -> None:
    """Every thread of the cluster arrives (release) and waits (acquire): after the mbarriers' initialization
    (fence.mbarrier_init.release.cluster), before any CTA multicasts into or arrives on its peer's; before exit,
    so that no CTA's shared memory goes while its peer may still use it. `aligned`: the warp arrives converged."""
    a = ".aligned" if aligned else ""
    w.asm(f"barrier.cluster.arrive.release{a};")
    w.asm(f"barrier.cluster.wait.acquire{a};")


def tma_load_multicast(w: Writer, dst: str, tmap: str, coords: list[str], bar: str, mask: int, cond: str) -> None:
    """Where `cond`: tma_load's copy into shared memory at `dst` of every CTA of the cluster in `mask`, each
    completing its bytes on its own mbarrier at `bar` (the same offsets in every CTA)."""
    n = len(coords)
    slots = ", ".join(f"${2 + i}" for i in range(n))
    w.asm(f"{{ .reg .pred p; .reg .b16 m; setp.ne.b32 p, ${3 + n}, 0; mov.b16 m, {mask}; "
          f"@p cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
          f"[$0], [$1, {{{slots}}}], [${2 + n}], m; }}", ",".join(["r", "l"] + ["r"] * n + ["r", "r"]),
          [("i32", dst), ("i64", tmap)] + [("i32", c) for c in coords] + [("i32", bar)]
          + [("i32", w.v(f"zext i1 {cond} to i32"))])


def mbar_arrive_remote_if(w: Writer, bar: str, rank: int, cond: str) -> None:
    """Where `cond`: arrives on the mbarrier at `bar`'s offset in the cluster's CTA of `rank` (the thread's own CTA
    included). The arrive's semantics are the defaults, release at CTA scope, as CUTLASS's ClusterBarrier::arrive
    has them: what it orders is this CTA's reads of a stage before the refill the barrier lets through. With
    .release.cluster (a cluster-scope fence on every K step) the cluster GEMM ran 0.5-0.7x the one-CTA kernel."""
    on = w.v(f"zext i1 {cond} to i32")
    w.asm(f"{{ .reg .pred p; .reg .b32 r; setp.ne.b32 p, $1, 0; mapa.shared::cluster.u32 r, $0, {rank}; "
          "@p mbarrier.arrive.shared::cluster.b64 _, [r]; }", "r,r", [("i32", bar), ("i32", on)])
