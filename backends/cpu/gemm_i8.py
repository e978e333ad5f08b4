"""int8 GEMM for the CPU backend: C[M,N] (i32) = A[M,K] (i8) · B[K,N] (i8), exact, wrapped to i32 as the
interpreter's reference is (int64 products and sums, wrapped to the i32 accumulator: every path here adds in
i32 without saturation, which is that sum modulo 2^32).

Three paths, picked by the capability of the machine the code is built for (`available_paths`, from LLVM's
feature string, as gemm_schedule.vector_isa picks the f32 register tile):

* ``amx`` (AMX-INT8, `tdpbssd`): 2×2 tiles of 16×16 i32 accumulators per 32×32 of C, A tiles loaded from A
  in place (16 rows of 64 bytes at A's row stride; an edge tile is first copied, zero-padded), B tiles from
  the block's packed panel. Linux grants AMX state only on request (arch_prctl(ARCH_REQ_XCOMP_PERM,
  XFEATURE_XTILEDATA)): the kernel asks once per process, and where the kernel refuses (a container's
  seccomp, an old kernel) runs the next path instead.
* ``vnni`` (AVX-512 VNNI, `vpdpbusd`): 8×32 of C in 16 zmm accumulators, A's words broadcast from A in
  place. vpdpbusd multiplies u8 by s8, so the panel holds B + 128 (each byte's sign bit flipped while
  packing) and each row's result loses 128·Σ_k A[i, k], its sum over K (vpdpbusd against ones).
* ``plain``: sign-extending loops LLVM vectorizes for whatever the target has (a 2-core Zen 3 without
  AVX-512, a generic x86-64 or aarch64 build).

`TESSERA_CPU_INT8_GEMM` (amx, vnni, plain, or auto) pins the path; the CPU backend's options read it
(options.py), so it is hashed into the compile cache's key like the worker threads.

Packing (the amx and vnni paths): each block packs its columns of B (`width`) once into the layout both
instructions read, groups of 16 columns with 4 consecutive k per column in a 64-byte row: panel[g][q][c][r] =
B[4q+r][j0+16g+c], zero past K and N (vnni's: + 128, see `_pack`). Interior 4×16 pieces are interleaved
with vector shuffles.

The kernel is a per-block tile kernel of the usual signature (A, B, C, launch arguments; gemm.py's
docstring), generated whole as LLVM IR (the MLIR Python bindings here have no AMX dialect) and declared to
the module as backends/ptx/generated.py's kernels are; the `llir` stage links it in (compiler.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...mlir import func, ir
from .gemm_schedule import ceil_div
from .irbuild import LAUNCH_ARGS
from .target import HostTarget

PATHS = ("amx", "vnni", "plain")
# arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) on x86-64 Linux
_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA = 158, 0x1023, 18
# amx: 64-byte k steps per chunk. Each chunk re-reads and re-writes C's tiles, and its A strip (2 KiB a step)
# is read by every column pair of the block. With the blocks `rows`/`width` choose, 64 (a 128 KiB strip, in
# L2 beside the 1 MiB panel) measured 1.35-1.38 / 1.35-1.42 TOPS at 2048³ / 4096³ against 1.18-1.46 /
# 1.32-1.34 for 32 and 1.00-1.30 / 0.97-1.20 for 16 (2-core SPR, loaded; in one process, 2 runs).
_KT_CHUNK = 64
_ANY_ROWS = 1 << 20   # MB where M is symbolic: `rows` then decides alone
_SPLIT = 256   # the fewest columns `width` narrows a block to for the threads (narrower: A packed more often)
_MR = 8   # vnni: rows of C per micro-tile (8 rows × 2 zmm of 16 columns: 16 accumulators of 32 zmm)


def available_paths(target: HostTarget) -> tuple[str, ...]:
    """The paths `target` can run, fastest first (plain always)."""
    feats = set(f[1:] for f in target.features.split(",") if f.startswith("+"))
    paths = []
    if target.arch == "x86_64" and {"amx-tile", "amx-int8"} <= feats:
        paths.append("amx")
    if target.arch == "x86_64" and {"avx512f", "avx512bw", "avx512vnni"} <= feats:
        paths.append("vnni")
    return (*paths, "plain")


def choose_path(target: HostTarget, pinned: str = "auto") -> str:
    """`pinned` if `target` has it, the fastest available for "auto"; ValueError otherwise."""
    return _choose("int8", PATHS, available_paths(target), target, pinned)


def _choose(what: str, known: tuple[str, ...], paths: tuple[str, ...], target: HostTarget, pinned: str) -> str:
    """choose_path's rule, gemm_bf16's too: `what` names the GEMM in the errors, `known` its paths, `paths`
    those `target` has."""
    if pinned == "auto":
        return paths[0]
    if pinned not in known:
        raise ValueError(f"unknown {what} GEMM path {pinned!r} (paths: auto, {', '.join(known)})")
    if pinned not in paths:
        raise ValueError(f"the {what} GEMM path {pinned!r} needs a CPU feature this one ({target.cpu}) lacks "
                         f"(available: {', '.join(paths)})")
    return pinned


@dataclass(frozen=True)
class I8GemmSpec:
    """One int8 kernel: `path`, and the block of C each grid block computes, chosen at the call from M, N
    and K (`rows`, `width`; multiples of 32): as many columns as a B panel (K × columns) of `panel` bytes
    holds, at most NB; rows enough for `threads` blocks in all, at most MB."""

    name: str
    path: str
    mb: int = 512
    nb: int = 256
    fallback: str = "plain"   # amx: what runs where the OS refuses AMX state (vnni where the CPU has it)
    panel: int = 1 << 20      # bytes: half of L2 (choose_blocks' measurements)
    threads: int = 1          # the runtime pool's workers

    def __post_init__(self):
        if self.path not in PATHS or self.fallback not in PATHS[1:]:
            raise ValueError(f"int8 GEMM: path {self.path!r}/{self.fallback!r} not among {PATHS}")
        if self.mb % 32 or self.nb % 32 or self.mb < 32 or self.nb < 32:
            raise ValueError(f"int8 GEMM blocks must be positive multiples of 32, not {self.mb}x{self.nb}")
        if self.panel < 32 or self.threads < 1:
            raise ValueError(f"int8 GEMM: a B panel of {self.panel} bytes for {self.threads} threads")


def choose_blocks(M: int | None, N: int | None, K: int | None, l2: int) -> tuple[int, int]:
    """MB×NB, the most rows and columns a block takes (None: a mid-size 1024 stands in for N and K; any
    number of rows for M); `rows` and `width` choose within them at the call. Each block packs its B panel
    (K × columns) and, per column pair, streams A's strips: the panel as wide as half of L2 holds (A is
    packed once per block column), the rows as many as keep every worker busy (B is packed once per block
    row). Measured on a 2-core Sapphire Rapids against XLA (1.27-2.17 TOPS): 2048³ at 2048×512 1.81 TOPS,
    512×512 1.39, 512×256 1.07-1.19, 512×2048 (a 4 MiB panel) 0.85; 1024³ at 512×1024 1.57, 256×512 1.41,
    512×256 1.30."""
    n, k = N or 1024, max(K or 1024, 1)
    nb = max(32, min(l2 // 2 // k // 32 * 32, ceil_div(n, 32) * 32))
    return max(32, ceil_div(M, 32) * 32 if M is not None else _ANY_ROWS), nb


def width(spec: I8GemmSpec) -> str:
    """The block's columns at the call's K and N, as an extent expression (the kernel computes the same in
    _block_start): the panel's bytes over K, in multiples of 32, between 32 and NB; and, down to _SPLIT
    columns, no more than give each thread a block column. Chosen per call because with a symbolic K the
    compile-time guess is off by the ratio: 2048 × 1024 columns is all of a 2 MiB L2. Column blocks before
    row blocks since each row block packs B again and each column block A: at 1024³ on 2 threads 2 blocks of
    1024×512 ran 0.75-0.93 ms against 0.83-0.94 for 512×1024 (best of 300, alternating, 2 runs)."""
    split = f"max({_SPLIT}, ceil(ceil(N/{spec.threads})/32) * 32)"
    return f"max(32, min({spec.nb}, min({spec.panel} // max(K, 1) // 32 * 32, {split})))"


def rows(spec: I8GemmSpec) -> str:
    """The block's rows at the call, as an extent expression (the kernel computes the same in _block_start):
    M split into as few row blocks as give every thread a block beside the column blocks, in multiples of
    32, between 32 and MB. Each row block packs B again; at 2048³ on 2 cores 2048×512 ran 1.08-1.15 TOPS
    against 512×512's 0.96-1.01 (XLA 0.98-1.45, the machine loaded)."""
    row_blocks = f"ceil({spec.threads}/(max(1, ceil(N/({width(spec)})))))"
    return f"max(32, min({spec.mb}, ceil(ceil(M/({row_blocks}))/32) * 32))"


def grid(spec: I8GemmSpec) -> tuple[str, str, str]:
    return (f"ceil(N/({width(spec)}))", f"ceil(M/({rows(spec)}))", "1")


def build(module: ir.Module, spec: I8GemmSpec) -> func.FuncOp:
    """Appends the kernel to `module` (in its context, under a location) as a kernel generated whole as LLVM
    IR (the contract of backends/ptx/generated.py): a bodiless declaration carrying its IR
    (``tessera.llvm_ir``) and the argument it writes (``tessera.writes``: C)."""
    i8, i32 = (ir.IntegerType.get_signless(w) for w in (8, 32))
    return _declare(module, spec, (i8, i32), "gemm_i8", llvm_ir(spec, f"{spec.name}_i8gemm"), f"{spec.name}_i8gemm",
                    _I8)


def _declare(module: ir.Module, spec, types, attr: str, body: str, body_name: str, dot: _Dot) -> func.FuncOp:
    """build's declaration, gemm_bf16's too: A and B of `types`[0], C of `types`[1], `tessera.<attr>` naming
    the path and block, and as its IR `body` (which defines `body_name`) with the entry that calls it."""
    elem, acc = types
    dyn = ir.ShapedType.get_dynamic_size()
    params = [("A", ir.MemRefType.get([dyn, dyn], elem), ("M", "K")),
              ("B", ir.MemRefType.get([dyn, dyn], elem), ("K", "N")),
              ("C", ir.MemRefType.get([dyn, dyn], acc), ("M", "N"))]
    index = ir.IndexType.get()
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(spec.name, ir.FunctionType.get([t for _, t, _ in params] + [index] * len(LAUNCH_ARGS), []),
                         visibility="private")
    fn.arg_attrs = ir.ArrayAttr.get(
        [ir.DictAttr.get({"tessera.name": ir.StringAttr.get(n),
                          "tessera.dims": ir.ArrayAttr.get([ir.StringAttr.get(d) for d in dims])})
         for n, _, dims in params] + [ir.DictAttr.get({})] * len(LAUNCH_ARGS))
    fn.attributes["tessera.kernel"] = ir.UnitAttr.get()
    fn.attributes["tessera.tile_kernel"] = ir.UnitAttr.get()
    fn.attributes[f"tessera.{attr}"] = ir.DictAttr.get({
        "path": ir.StringAttr.get(spec.path), "block": ir.DenseI64ArrayAttr.get([spec.mb, spec.nb])})
    fn.attributes["tessera.writes"] = ir.DenseI64ArrayAttr.get([2])
    fn.attributes["tessera.llvm_ir"] = ir.StringAttr.get(body + _entry(spec.name, body_name, dot))
    return fn


def generated(module: ir.Module) -> list[str]:
    """The LLVM IR of the kernels generated whole as LLVM IR in `module` (read before it is lowered)."""
    return [ir.StringAttr(op.attributes["tessera.llvm_ir"]).value for op in module.body.operations
            if op.operation.name == "func.func" and "tessera.llvm_ir" in op.attributes]


def _entry(name: str, body: str, dot: _Dot) -> str:
    """The kernel as the MLIR lowering of its declaration calls it: each memref<?x?x…> as (allocated,
    aligned, offset, 2 sizes, 2 strides), contiguous by its type, then the nine launch indices; it calls
    `body` with the three base pointers (offsets count `dot`'s elements)."""
    memref = lambda m: (f"ptr %{m}_alloc, ptr %{m}_base, i64 %{m}_off, i64 %{m}_d0, i64 %{m}_d1, "  # noqa: E731
                        f"i64 %{m}_s0, i64 %{m}_s1")
    launch = ", ".join(f"i64 %{a}" for a in LAUNCH_ARGS)
    return f"""
define hidden void @{name}({memref("A")}, {memref("B")}, {memref("C")}, {launch}) {{
entry:
  %a = getelementptr {dot.elt}, ptr %A_base, i64 %A_off
  %b = getelementptr {dot.elt}, ptr %B_base, i64 %B_off
  %c = getelementptr {dot.acc}, ptr %C_base, i64 %C_off
  call void @{body}(ptr %a, ptr %b, ptr %c, i64 %A_d0, i64 %B_d1, i64 %A_d1, i64 %bid_x, i64 %bid_y)
  ret void
}}
"""


# -- LLVM IR generation ------------------------------------------------------------------------------------
class _Fn:
    """Straight-line LLVM IR text with counted loops (the induction variable and loop-carried values as
    phis) and one-armed ifs."""

    def __init__(self, prefix: str):
        self.lines: list[str] = []
        self.n = 0
        self.prefix = prefix
        self.cur = "entry"
        self.panel_heap = ""   # _panel's slot of a heap panel's pointer (null: on the stack)

    def val(self, text: str) -> str:
        self.n += 1
        name = f"%v{self.n}"
        self.lines.append(f"  {name} = {text}")
        return name

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.cur = name

    def uid(self) -> int:
        self.n += 1
        return self.n

    def loop(self, lo, hi, step, body, carried=()):
        """for iv in lo, lo+step, … < hi: body(iv, carried values) -> new carried values; returns the last."""
        u = self.uid()
        pre = self.cur
        self.do(f"br label %h{u}")
        self.label(f"h{u}")
        iv = f"%iv{u}"
        self.do(f"{iv} = phi i64 [ {lo}, %{pre} ], [ %nx{u}, %l{u} ]")
        phis = []
        for j, (ty, init) in enumerate(carried):
            phis.append(len(self.lines))
            self.do(f"%c{u}_{j} = phi {ty} [ {init}, %{pre} ], [ @@, %l{u} ]")
        cond = self.val(f"icmp slt i64 {iv}, {hi}")
        self.do(f"br i1 {cond}, label %b{u}, label %e{u}")
        self.label(f"b{u}")
        outs = body(iv, [f"%c{u}_{j}" for j in range(len(carried))]) or []
        self.do(f"br label %l{u}")
        self.label(f"l{u}")
        self.do(f"%nx{u} = add i64 {iv}, {step}")
        self.do(f"br label %h{u}")
        for at, out in zip(phis, outs):
            self.lines[at] = self.lines[at].replace("@@", out)
        self.label(f"e{u}")
        return [f"%c{u}_{j}" for j in range(len(carried))]

    def if_(self, cond, then) -> None:
        u = self.uid()
        self.do(f"br i1 {cond}, label %t{u}, label %f{u}")
        self.label(f"t{u}")
        then()
        self.do(f"br label %f{u}")
        self.label(f"f{u}")

    def if_else(self, cond, then, otherwise) -> None:
        u = self.uid()
        self.do(f"br i1 {cond}, label %t{u}, label %o{u}")
        self.label(f"t{u}")
        then()
        self.do(f"br label %j{u}")
        self.label(f"o{u}")
        otherwise()
        self.do(f"br label %j{u}")
        self.label(f"j{u}")

    def gather(self, ty, src, dst, count, locate) -> None:
        """dst[e] = src[index] for e < count, where locate(e) -> (inside, index), else 0: an edge's copy,
        which never loads outside the tensor."""
        def elem(e, _):
            inside, index = locate(e)
            at = self.gep(ty, src, self.val(f"select i1 {inside}, i64 {index}, i64 0"))
            v = self.val(f"select i1 {inside}, {ty} {self.val(f'load {ty}, ptr {at}')}, {ty} 0")
            self.do(f"store {ty} {v}, ptr {self.gep(ty, dst, e)}")
        self.loop(0, count, 1, elem)

    def gep(self, ty, ptr, i) -> str:
        return self.val(f"getelementptr {ty}, ptr {ptr}, i64 {i}")

    def smin(self, a, b) -> str:
        return self.val(f"call i64 @llvm.smin.i64(i64 {a}, i64 {b})")

    def smax(self, a, b) -> str:
        return self.val(f"call i64 @llvm.smax.i64(i64 {a}, i64 {b})")

    def add(self, a, b) -> str:
        return self.val(f"add i64 {a}, {b}")

    def mul(self, a, b) -> str:
        return self.val(f"mul i64 {a}, {b}")

    def cdiv(self, a, b) -> str:   # ⌈a / b⌉ for a >= 0, b > 0
        return self.val(f"udiv i64 {self.val(f'sub i64 {self.add(a, b)}, 1')}, {b}")

    def cmp(self, pred, a, b) -> str:
        return self.val(f"icmp {pred} i64 {a}, {b}")

    def both(self, a, b) -> str:
        return self.val(f"and i1 {a}, {b}")


_DECLS = """
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.smax.i64(i64, i64)
declare ptr @aligned_alloc(i64, i64)
declare void @free(ptr)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare i64 @syscall(i64, ...)
declare x86_amx @llvm.x86.tileloadd64.internal(i16, i16, ptr, i64)
declare x86_amx @llvm.x86.tdpbssd.internal(i16, i16, i16, x86_amx, x86_amx, x86_amx)
declare void @llvm.x86.tilestored64.internal(i16, i16, ptr, i64, x86_amx)
declare x86_amx @llvm.x86.tilezero.internal(i16, i16)
declare <16 x i32> @llvm.x86.avx512.vpdpbusd.512(<16 x i32>, <64 x i8>, <64 x i8>)
declare void @llvm.masked.store.v16i32.p0(<16 x i32>, ptr, i32, <16 x i1>)
declare <64 x i8> @llvm.masked.load.v64i8.p0(ptr, i32, <64 x i1>, <64 x i8>)
declare i32 @llvm.vector.reduce.add.v16i32(<16 x i32>)
"""
_ARGS = "ptr noalias %A, ptr noalias %B, ptr noalias %C, i64 %M, i64 %N, i64 %K, i64 %bx, i64 %by"


def llvm_ir(spec: I8GemmSpec, name: str) -> str:
    """The LLVM IR module text of the kernel body `name`(A, B, C, M, N, K, bid_x, bid_y: i64)."""
    parts = [_DECLS]
    if spec.path == "plain" or (spec.path == "amx" and spec.fallback == "plain"):
        parts.append(_plain(spec, f"{name}_plain"))
    if spec.path == "vnni" or (spec.path == "amx" and spec.fallback == "vnni"):
        # vnni's panel holds B + 128 (u8), amx's B as it is
        parts.append(_pack(spec, f"{name}_upack", flip=True))
        parts.append(_vnni(spec, f"{name}_vnni", f"{name}_upack"))
    if spec.path == "amx":
        parts.append(_pack(spec, f"{name}_pack"))
        parts.append(_amx(spec, f"{name}_amx", f"{name}_pack"))
    parts.append(_body(name, spec.path, spec.fallback))
    return "\n".join(parts)


def _body(name: str, path: str, fallback: str) -> str:
    """The kernel body `name` (gemm_bf16's too): on the amx path the choice between `name`_amx and
    `name`_`fallback` by the OS's grant of AMX state, else a call of `name`_`path`."""
    if path == "amx":
        return f"@{name}_amx_state = internal global i32 0\n" + _dispatch(
            name, f"{name}_amx", f"{name}_{fallback}", f"@{name}_amx_state")
    return f"define hidden void @{name}({_ARGS}) {{\nentry:\n  {_call(f'{name}_{path}')}\n  ret void\n}}\n"


def _call(fn: str) -> str:
    return f"call void @{fn}(ptr %A, ptr %B, ptr %C, i64 %M, i64 %N, i64 %K, i64 %bx, i64 %by)"


def _dispatch(name: str, amx: str, fallback: str, state: str) -> str:
    # state: 0 not asked yet, 1 granted, 2 refused. Threads racing on the first call each ask: the request
    # is idempotent, and they store the same answer.
    return f"""
define hidden void @{name}({_ARGS}) {{
entry:
  %s = load atomic i32, ptr {state} monotonic, align 4
  %ask = icmp eq i32 %s, 0
  br i1 %ask, label %request, label %known
request:
  %r = call i64 (i64, ...) @syscall(i64 {_SYS_ARCH_PRCTL}, i64 {_ARCH_REQ_XCOMP_PERM}, i64 {_XFEATURE_XTILEDATA})
  %ok = icmp eq i64 %r, 0
  %ns = select i1 %ok, i32 1, i32 2
  store atomic i32 %ns, ptr {state} monotonic, align 4
  br label %known
known:
  %st = phi i32 [ %s, %entry ], [ %ns, %request ]
  %granted = icmp eq i32 %st, 1
  br i1 %granted, label %tiles, label %vectors
tiles:
  {_call(amx)}
  ret void
vectors:
  {_call(fallback)}
  ret void
}}
"""


def _block_start(f: _Fn, spec: I8GemmSpec):
    """(i0, j0, mb, nb) of this block, returning early for a block past the matrix."""
    cols = f.val(f"udiv i64 {spec.panel}, {f.smax('%K', 1)}")   # width(spec)
    split = f.smax(_SPLIT, f.mul(f.cdiv(f.cdiv("%N", spec.threads), 32), 32))
    cols = f.smax(32, f.smin(spec.nb, f.smin(f.mul(f.val(f"udiv i64 {cols}, 32"), 32), split)))
    row_blocks = f.cdiv(spec.threads, f.smax(1, f.cdiv("%N", cols)))   # rows(spec)
    height = f.smax(32, f.smin(spec.mb, f.mul(f.cdiv(f.cdiv("%M", row_blocks), 32), 32)))
    i0 = f.mul("%by", height)
    j0 = f.mul("%bx", cols)
    out = f.val(f"or i1 {f.val(f'icmp sge i64 {i0}, %M')}, {f.val(f'icmp sge i64 {j0}, %N')}")
    f.do(f"br i1 {out}, label %done, label %go")
    f.label("go")
    mb = f.smin(height, f.val(f"sub i64 %M, {i0}"))
    nb = f.smin(cols, f.val(f"sub i64 %N, {j0}"))
    return i0, j0, mb, nb


def _finish(f: _Fn, name: str, attrs: str = "") -> str:
    f.do("br label %done")
    f.label("done")
    f.do("ret void")
    return f"define internal void @{name}({_ARGS}) {attrs}{{\nentry:\n" + "\n".join(f.lines) + "\n}\n"


def _plain(spec: I8GemmSpec, name: str) -> str:
    """Row by row: C[i, j0:j0+nb] = Σ_k A[i, k] · B[k, j0:j0+nb], the k loop outside the vectorized j loop."""
    f = _Fn(name)
    i0, j0, mb, nb = _block_start(f, spec)
    iend = f.val(f"add i64 {i0}, {mb}")

    def row(i, _):
        crow = f.gep("i32", "%C", f.val(f"add i64 {f.val(f'mul i64 {i}, %N')}, {j0}"))
        f.do(f"call void @llvm.memset.p0.i64(ptr {crow}, i8 0, i64 {f.val(f'mul i64 {nb}, 4')}, i1 false)")
        arow = f.gep("i8", "%A", f.val(f"mul i64 {i}, %K"))

        def kstep(k, _):
            ap = f.gep("i8", arow, k)
            a = f.val(f"sext i8 {f.val(f'load i8, ptr {ap}')} to i32")
            brow = f.gep("i8", "%B", f.val(f"add i64 {f.val(f'mul i64 {k}, %N')}, {j0}"))

            def col(j, _):
                cp = f.gep("i32", crow, j)
                bp = f.gep("i8", brow, j)
                bv = f.val(f"sext i8 {f.val(f'load i8, ptr {bp}')} to i32")
                sum_ = f.val(f"add i32 {f.val(f'load i32, ptr {cp}')}, {f.val(f'mul i32 {a}, {bv}')}")
                f.do(f"store i32 {sum_}, ptr {cp}")
            f.loop(0, nb, 1, col)
        f.loop(0, "%K", 1, kstep)
    f.loop(i0, iend, 1, row)
    return _finish(f, name)


def _pack(spec: I8GemmSpec, name: str, flip: bool = False) -> str:
    """pack(B, N, K, j0, nb, panel, kq): panel[g][q][c][r] = B[4q+r][j0+16g+c] for g < _groups(nb), q < kq,
    zero past K and nb (`flip`: each byte's sign bit flipped, B + 128 as u8 for vnni; 128 past K and nb). Whole 4×16 pieces are four 16-byte loads interleaved by one shuffle; the rest
    bytewise. In 64 rows of B at a time (16 quads: one tile's 1 KiB of each group), every group in turn: the
    64 lines those rows span stay in L1 while the four groups each line holds read it. (Group by group down
    all of K, each line came from L2 four times, and packing took a tenth of a 1024³ call.)"""
    f = _Fn(name)
    ngroups = _groups(f, "%nb")

    def rows(q0, _):
        f.loop(0, ngroups, 1, lambda g, _: group(g, q0, f.smin(f.add(q0, 16), "%kq")))

    def group(g, q0, q1):
        col0 = f.val(f"mul i64 {g}, 16")
        full_cols = f.val(f"icmp sle i64 {f.val(f'add i64 {col0}, 16')}, %nb")

        def quad(q, _):
            dst = f.gep("i8", "%P", f.mul(f.add(f.mul(g, "%kq"), q), 64))
            k0 = f.mul(q, 4)
            full = f.both(full_cols, f.cmp("sle", f.add(k0, 4), "%K"))

            def edge(e):   # byte e = 4c + r of the piece: B[k0 + r, j0 + col0 + c]
                k = f.add(k0, f.val(f"urem i64 {e}, 4"))
                n = f.add(col0, f.val(f"udiv i64 {e}, 4"))
                return f.both(f.cmp("slt", k, "%K"), f.cmp("slt", n, "%nb")), f.add(f.mul(k, "%N"), f.add("%j0", n))
            def gathered():
                f.gather("i8", "%B", dst, 64, edge)
                if flip:
                    v = f.val(f"load <64 x i8>, ptr {dst}, align 64")
                    f.do(f"store <64 x i8> {f.val(f'xor <64 x i8> {v}, {_SIGNS}')}, ptr {dst}, align 64")
            f.if_else(full, lambda: _interleave_piece(f, dst, k0, col0, flip), gathered)
        f.loop(q0, q1, 1, quad)
    f.loop(0, "%kq", 16, rows)
    f.do("ret void")
    return (f"define internal void @{name}(ptr noalias %B, i64 %N, i64 %K, i64 %j0, i64 %nb, ptr noalias %P, "
            f"i64 %kq) {{\nentry:\n" + "\n".join(f.lines) + "\n}\n")


def _groups(f: _Fn, nb) -> str:
    """The panel's groups of 16 columns for `nb` columns: whole pairs, as the kernels read them."""
    return f.mul(f.val(f"udiv i64 {f.add(nb, 31)}, 32"), 2)


_SIGNS = "<i8 " + ", i8 ".join(["-128"] * 64) + ">"


def _interleave_piece(f: _Fn, dst, k0, col0, flip: bool = False) -> None:
    """dst[c·4 + r] = B[k0 + r, j0 + col0 + c] for a whole 4×16 piece: four 16-byte rows, one shuffle."""
    rows = [f.val(f"load <16 x i8>, ptr {f.gep('i8', '%B', f.add(f.mul(f.add(k0, r), '%N'), f.add('%j0', col0)))}, "
                  f"align 1") for r in range(4)]
    concat = f"<32 x i32> <{', '.join(f'i32 {i}' for i in range(32))}>"
    lo = f.val(f"shufflevector <16 x i8> {rows[0]}, <16 x i8> {rows[1]}, {concat}")
    hi = f.val(f"shufflevector <16 x i8> {rows[2]}, <16 x i8> {rows[3]}, {concat}")
    interleave = ", ".join(f"i32 {16 * r + c}" for c in range(16) for r in range(4))
    v = f.val(f"shufflevector <32 x i8> {lo}, <32 x i8> {hi}, <64 x i32> <{interleave}>")
    if flip:
        v = f.val(f"xor <64 x i8> {v}, {_SIGNS}")
    f.do(f"store <64 x i8> {v}, ptr {dst}, align 64")


# The largest B panel a block keeps on its stack: every thread that runs blocks has at least 4 MiB of stack
# (the runtime's workers 8 MiB, a helping caller TSR_CPU_CALLER_STACK_BYTES, runtime/src/cpu_pool.h), and the
# kernels' other frames take under 256 KiB (amx's A strip 128 KiB). Larger panels (K past ~16K words at the
# narrowest block) come from the heap. Until 2026-11-27 every panel did: an aligned_alloc and free per block
# per call, which glibc served from fresh mmaps or a trimmed heap top as its dynamic thresholds went — up to
# 64 page faults a block at 512³ (docs/performance.md, Session 30).
_STACK_PANEL = 1 << 21


def _panel(f: _Fn, spec: I8GemmSpec, pack: str, j0, nb, kq) -> str:
    """The block's packed B panel (`_groups(nb)` groups of `kq` 64-byte rows): on the stack up to
    _STACK_PANEL bytes, else aligned_alloc'ed (`_panel_free` frees that one)."""
    size = f.mul(f.mul(_groups(f, nb), kq), 64)
    small = f.cmp("ule", size, _STACK_PANEL)
    stack = f.val(f"alloca i8, i64 {f.val(f'select i1 {small}, i64 {size}, i64 0')}, align 64")
    f.panel_heap = f.val("alloca ptr, align 8")
    f.do(f"store ptr null, ptr {f.panel_heap}")
    f.if_(f.val(f"xor i1 {small}, true"), lambda: f.do(
        f"store ptr {f.val(f'call ptr @aligned_alloc(i64 64, i64 {size})')}, ptr {f.panel_heap}"))
    heap = f.val(f"load ptr, ptr {f.panel_heap}")
    panel = f.val(f"select i1 {small}, ptr {stack}, ptr {heap}")
    f.do(f"call void @{pack}(ptr %B, i64 %N, i64 %K, i64 {j0}, i64 {nb}, ptr {panel}, i64 {kq})")
    return panel


def _panel_free(f: _Fn) -> None:
    """Frees the block's panel if `_panel` took it from the heap (free(NULL) otherwise)."""
    f.do(f"call void @free(ptr {f.val(f'load ptr, ptr {f.panel_heap}')})")


@dataclass(frozen=True)
class _Dot:
    """What the amx and AVX-512 kernels' emitters take from the element type (gemm_bf16's kernels are these
    emitters with bf16's): A and B as `k` elements of integer type `elt` per 32-bit word (the panel's and
    the A strips' layout), C's element `acc`, and the tile and vector dot-product instructions."""

    elt: str           # A's and B's elements as an integer type (bf16 moves as i16)
    k: int             # elements per 32-bit word: the k one dot product sums per accumulator
    acc: str           # C's element (i32 or float)
    tile_dot: str      # the AMX intrinsic (x86_amx acc, a, b)
    vec_dot: str       # the AVX-512 intrinsic (<16 x acc> acc, <vec> a, <vec> b)
    vec: str           # its operands' type: 64 bytes of A's (B's) words
    vec_store: str     # the masked store of a <16 x acc> row of C
    amx_features: str
    avx_features: str


_I8 = _Dot("i8", 4, "i32", "tdpbssd", "avx512.vpdpbusd.512", "<64 x i8>", "v16i32",
           "+amx-tile,+amx-int8", "+avx512f,+avx512bw,+avx512vnni")


def _amx(spec: I8GemmSpec, name: str, pack: str, dot: _Dot = _I8) -> str:
    """The amx kernel for `dot`'s elements (gemm_bf16's spec has the fields read here): 2×2 tiles of 16×16
    accumulators per 32×32 of C, B's tiles from the panel `pack` packs."""
    f = _Fn(name)
    i0, j0, mb, nb = _block_start(f, spec)
    per_row = 16 * dot.k   # A's elements in a tile row of 64 bytes
    # 64-byte steps of k, the last zero-padded
    kt = f.val(f"udiv i64 {f.val(f'add i64 %K, {per_row - 1}')}, {per_row}")
    kq = f.mul(kt, 16)
    panel = _panel(f, spec, pack, j0, nb, kq)
    # K in chunks of _KT_CHUNK 64-byte steps: per chunk, a strip's A (32 rows) is packed as its 16×64-byte
    # tiles in k order (strip[t][h] = A[i+16h : +16, t-th 64 bytes], zero-padded), read by every column pair
    # of the block; the C tiles carry the sum from chunk to chunk. (Loaded in place at A's row stride
    # instead, the 16 rows of a tile 1-2 KiB apart share few cache sets.)
    strip_buf = f.val(f"alloca [{_KT_CHUNK * 2048} x i8], align 64")
    cbuf = f.val(f"alloca [256 x {dot.acc}], align 64")
    iend = f.add(i0, mb)
    ngroups = f.val(f"udiv i64 {f.add(nb, 31)}, 32")
    shape = "i16 16, i16 64"

    def pack_strip(i, t0, t1):
        def tile_row(e, _):   # e = (t·2 + h)·16 + r: 64 bytes of row i+16h+r from step t0 + t
            t = f.add(t0, f.val(f"udiv i64 {e}, 32"))
            row = f.add(i, f.val(f"urem i64 {e}, 32"))
            k = f.mul(t, per_row)
            dst = f.gep(dot.elt, strip_buf, f.mul(e, per_row))
            whole = f.both(f.cmp("slt", row, "%M"), f.cmp("sle", f.add(k, per_row), "%K"))

            def copy():
                v = f.val(f"load <{per_row} x {dot.elt}>, ptr {f.gep(dot.elt, '%A', f.add(f.mul(row, '%K'), k))}, "
                          f"align {4 // dot.k}")
                f.do(f"store <{per_row} x {dot.elt}> {v}, ptr {dst}, align 64")

            def edge(c):
                return (f.both(f.cmp("slt", row, "%M"), f.cmp("slt", f.add(k, c), "%K")),
                        f.add(f.mul(row, "%K"), f.add(k, c)))
            f.if_else(whole, copy, lambda: f.gather(dot.elt, "%A", dst, per_row, edge))
        f.loop(0, f.mul(f.val(f"sub i64 {t1}, {t0}"), 32), 1, tile_row)

    def tile(ptr, stride):
        return f.val(f"call x86_amx @llvm.x86.tileloadd64.internal({shape}, ptr {ptr}, i64 {stride})")

    def c_at(i, n, e):   # element e of the C tile at (i, n): its row, column and whether it is inside C
        r = f.add(i, f.val(f"udiv i64 {e}, 16"))
        c = f.add(n, f.val(f"urem i64 {e}, 16"))
        return r, c, f.both(f.cmp("slt", r, "%M"), f.cmp("slt", c, "%N"))

    def c_edge(i, n):
        def locate(e):
            r, c, inside = c_at(i, n, e)
            return inside, f.add(f.mul(r, "%N"), c)
        return locate

    def whole_tile(i, n):
        return f.both(f.cmp("sle", f.add(i, 16), "%M"), f.cmp("sle", f.add(n, 16), "%N"))

    def load(first, i, n):
        """The C tile at (i, n) so far: tilezero on the first chunk (no load), else C's (an edge tile via
        cbuf, its bits copied as i32)."""
        u = f.uid()
        f.do(f"br i1 {first}, label %zero{u}, label %sofar{u}")
        f.label(f"zero{u}")
        zero = f.val(f"call x86_amx @llvm.x86.tilezero.internal({shape})")
        f.do(f"br label %tile{u}")
        f.label(f"sofar{u}")
        whole = whole_tile(i, n)
        f.if_(f.val(f"xor i1 {whole}, true"), lambda: f.gather("i32", "%C", cbuf, 256, c_edge(i, n)))
        src = f.gep(dot.acc, "%C", f.add(f.mul(i, "%N"), n))
        ptr = f.val(f"select i1 {whole}, ptr {src}, ptr {cbuf}")
        sofar = tile(ptr, f.val(f"select i1 {whole}, i64 {f.mul('%N', 4)}, i64 64"))
        came = f.cur
        f.do(f"br label %tile{u}")
        f.label(f"tile{u}")
        return f.val(f"phi x86_amx [ {zero}, %zero{u} ], [ {sofar}, %{came} ]")

    def store(acc, i, n):
        def direct():
            dst = f.gep(dot.acc, "%C", f.add(f.mul(i, "%N"), n))
            f.do(f"call void @llvm.x86.tilestored64.internal({shape}, ptr {dst}, i64 {f.mul('%N', 4)}, x86_amx {acc})")

        def edge():
            f.do(f"call void @llvm.x86.tilestored64.internal({shape}, ptr {cbuf}, i64 64, x86_amx {acc})")

            def elem(e, _):
                r, c, inside = c_at(i, n, e)

                def put():
                    v = f.val(f"load {dot.acc}, ptr {f.gep(dot.acc, cbuf, e)}")
                    f.do(f"store {dot.acc} {v}, ptr {f.gep(dot.acc, '%C', f.add(f.mul(r, '%N'), c))}")
                f.if_(inside, put)
            f.loop(0, 256, 1, elem)
        f.if_else(whole_tile(i, n), direct, edge)

    def chunk(t0, _):
        t1 = f.smin(f.add(t0, _KT_CHUNK), kt)
        first = f.cmp("eq", t0, 0)
        f.loop(i0, iend, 32, lambda i, _: strip(i, t0, t1, first))

    def strip(i, t0, t1, first):
        pack_strip(i, t0, t1)

        def pair(gp, _):
            g = f.mul(gp, 2)
            n0 = f.add(j0, f.mul(g, 16))
            init = [load(first, f.add(i, 16 * r), f.add(n0, 16 * c)) for r in (0, 1) for c in (0, 1)]

            def kstep(t, acc):
                a = [tile(f.gep("i8", strip_buf, f.mul(f.add(f.mul(f.val(f"sub i64 {t}, {t0}"), 2), h), 1024)), 64)
                     for h in (0, 1)]   # t - t0: the step within the chunk
                b = [tile(f.gep("i8", panel, f.mul(f.add(f.mul(f.add(g, h), kq), f.mul(t, 16)), 64)), 64)
                     for h in (0, 1)]
                return [f.val(f"call x86_amx @llvm.x86.{dot.tile_dot}.internal(i16 16, i16 64, i16 64, "
                              f"x86_amx {acc[2 * r + c]}, x86_amx {a[r]}, x86_amx {b[c]})")
                        for r in (0, 1) for c in (0, 1)]
            acc = f.loop(t0, t1, 1, kstep, [("x86_amx", v) for v in init])
            for r in (0, 1):
                for c in (0, 1):
                    store(acc[2 * r + c], f.add(i, 16 * r), f.add(n0, 16 * c))
        f.loop(0, ngroups, 1, pair)
    f.loop(0, f.smax(kt, 1), _KT_CHUNK, chunk)   # once at K = 0: C = 0
    _panel_free(f)
    return _finish(f, name, f'"target-features"="{dot.amx_features}" ')


def _vnni(spec: I8GemmSpec, name: str, pack: str) -> str:
    """vpdpbusd multiplies u8 by s8: the panel holds B + 128 (`pack` flips each byte's sign bit), A is read
    signed in place, and each row's result loses 128·Σ_k A[i, k] (its sum over K, vpdpbusd of the row's
    64-byte pieces against ones, the last piece a masked load). Exact modulo 2^32 as every sum here."""
    f = _Fn(name)
    i0, j0, mb, nb = _block_start(f, spec)
    kq = f.val(f"udiv i64 {f.val('add i64 %K, 3')}, 4")
    kfull = f.val("udiv i64 %K, 4")
    krem = f.val("urem i64 %K, 4")
    panel = _panel(f, spec, pack, j0, nb, kq)
    ones = "<i8 " + ", i8 ".join(["1"] * 64) + ">"
    k64 = f.val("udiv i64 %K, 64")
    rem64 = f.val("urem i64 %K, 64")
    ins = f.val(f"insertelement <64 x i64> poison, i64 {rem64}, i64 0")
    ins = f.val(f"shufflevector <64 x i64> {ins}, <64 x i64> poison, <64 x i32> zeroinitializer")
    tail_mask = f.val(f"icmp slt <64 x i64> <{', '.join(f'i64 {c}' for c in range(64))}>, {ins}")

    def last_quad(rowp, q):
        """A[row, 4q:4q+4] as a word of four s8, K % 4 bytes and the rest zero (_vectors reads the whole
        quads in place)."""
        word = "0"
        for t in range(3):
            has = f.val(f"icmp ult i64 {t}, {krem}")
            at = f.val(f"select i1 {has}, i64 {f.add(f.mul(q, 4), t)}, i64 0")
            bp = f.gep("i8", rowp, at)
            byte = f.val(f"select i1 {has}, i8 {f.val(f'load i8, ptr {bp}')}, i8 0")
            wide = f.val(f"shl i32 {f.val(f'zext i8 {byte} to i32')}, {8 * t}")
            word = f.val(f"or i32 {word}, {wide}")
        return word

    def fixes(rows):
        """Per row of the strip: acc - 128·Σ_k A[row, k]."""
        out = []
        for rowp in rows:
            def piece(p, acc, rowp=rowp):
                v = f.val(f"load <64 x i8>, ptr {f.gep('i8', rowp, f.mul(p, 64))}, align 1")
                return [f.val(f"call <16 x i32> @llvm.x86.avx512.vpdpbusd.512(<16 x i32> {acc[0]}, <64 x i8> {ones}, "
                              f"<64 x i8> {v})")]
            acc = f.loop(0, k64, 1, piece, [("<16 x i32>", "zeroinitializer")])[0]
            v = f.val(f"call <64 x i8> @llvm.masked.load.v64i8.p0(ptr {f.gep('i8', rowp, f.mul(k64, 64))}, i32 1, "
                      f"<64 x i1> {tail_mask}, <64 x i8> zeroinitializer)")
            acc = f.val(f"call <16 x i32> @llvm.x86.avx512.vpdpbusd.512(<16 x i32> {acc}, <64 x i8> {ones}, "
                        f"<64 x i8> {v})")
            total = f.val(f"call i32 @llvm.vector.reduce.add.v16i32(<16 x i32> {acc})")
            ins = f.val(f"insertelement <16 x i32> poison, i32 {f.val(f'shl i32 {total}, 7')}, i64 0")
            corr = f.val(f"shufflevector <16 x i32> {ins}, <16 x i32> poison, <16 x i32> zeroinitializer")
            out.append(lambda acc, corr=corr: f.val(f"sub <16 x i32> {acc}, {corr}"))
        return out
    _vectors(f, spec, _I8, (i0, j0, mb, nb), panel, kq, kfull, last_quad, fixes)
    return _finish(f, name, f'"target-features"="{_I8.avx_features}" ')


def _vectors(f: _Fn, spec, dot: _Dot, block, panel, kq, kfull, last_word, fixes=None) -> None:
    """The AVX-512 kernels' register tiles after the panel is packed: per strip of _MR rows and pair of
    column groups, 8×32 of C in 16 zmm accumulators, each step 2 vector loads of the panel, _MR words of A
    broadcast from A in place (A[row, k·q : k·q + k]: a load folded into `vpbroadcastd`, so no vector port;
    `last_word`(row pointer, q) builds the last, partial word of a K that is not a multiple of k, its other
    elements zero) and 16 dot products. Stored masked at N's edge; `fixes`(row pointers), where given,
    is per row what an accumulator becomes first (vnni's offset). Frees the panel.

    A was packed per strip as words before (astrip[q][r], once per block column): on a 2-core Zen 5 that
    took 10% of a 2048³ call, whose blocks are 128 columns wide (the panel holds all of K); read in place,
    A's 8 rows are 8 streams the prefetchers follow, each 64-byte line serving 16 steps.
    Measured alone on one thread (thread CPU time, best of 5, alternating builds in one process): bf16
    1024³ 420 -> 450, 2048³ 394 -> 445 GFLOP/s."""
    i0, j0, mb, nb = block
    iend = f.add(i0, mb)
    ngroups = f.val(f"udiv i64 {f.add(nb, 31)}, 32")
    last = f.val("sub i64 %M, 1")
    lanes = "<" + ", ".join(f"i64 {c}" for c in range(16)) + ">"
    acc_t = f"<16 x {dot.acc}>"

    def strip(i, _):
        rows = [f.gep(dot.elt, "%A", f.mul(f.smin(f.add(i, r), last), "%K")) for r in range(_MR)]
        fix = fixes(rows) if fixes else None

        def pair(gp, _):
            g = f.mul(gp, 2)

            def step(q, acc, exact=True):
                b = [f.val(f"load {dot.vec}, ptr {f.gep('i8', panel, f.mul(f.add(f.mul(f.add(g, h), kq), q), 64))}, "
                           f"align 64") for h in (0, 1)]
                out = []
                for r in range(_MR):
                    if exact:
                        w = f.val(f"load i32, ptr {f.gep('i8', rows[r], f.mul(q, 4))}, align {4 // dot.k}")
                    else:
                        w = last_word(rows[r], q)
                    splat = f.val(f"insertelement <16 x i32> poison, i32 {w}, i64 0")
                    splat = f.val(f"shufflevector <16 x i32> {splat}, <16 x i32> poison, <16 x i32> zeroinitializer")
                    a = f.val(f"bitcast <16 x i32> {splat} to {dot.vec}")
                    # vpdpbusd reads its first source as u8: the panel (B + 128), A signed
                    ops = [(b[h], a) if dot is _I8 else (a, b[h]) for h in (0, 1)]
                    out += [f.val(f"call {acc_t} @llvm.x86.{dot.vec_dot}({acc_t} {acc[2 * r + h]}, "
                                  f"{dot.vec} {ops[h][0]}, {dot.vec} {ops[h][1]})") for h in (0, 1)]
                return out
            acc = f.loop(0, kfull, 1, step, [(acc_t, "zeroinitializer")] * (2 * _MR))
            # the partial word, if any: one more step (kfull < kq)
            acc = f.loop(kfull, kq, 1, lambda q, a: step(q, a, False), [(acc_t, v) for v in acc])
            for h in (0, 1):
                n = f.add(j0, f.mul(f.add(g, h), 16))
                left = f.val(f"sub i64 %N, {n}")
                ins = f.val(f"insertelement <16 x i64> poison, i64 {left}, i64 0")
                ins = f.val(f"shufflevector <16 x i64> {ins}, <16 x i64> poison, <16 x i32> zeroinitializer")
                mask = f.val(f"icmp slt <16 x i64> {lanes}, {ins}")
                for r in range(_MR):
                    row = f.add(i, r)

                    def put(r=r, row=row):
                        v = fix[r](acc[2 * r + h]) if fix else acc[2 * r + h]
                        dst = f.gep(dot.acc, "%C", f.add(f.mul(row, "%N"), n))
                        f.do(f"call void @llvm.masked.store.{dot.vec_store}.p0({acc_t} {v}, ptr {dst}, i32 4, "
                             f"<16 x i1> {mask})")
                    f.if_(f.both(f.cmp("slt", row, iend), f.cmp("slt", n, "%N")), put)
        f.loop(0, ngroups, 1, pair)
    f.loop(i0, iend, _MR, strip)
    _panel_free(f)
