"""bf16 GEMM for the CPU backend: C[M,N] (f32) = A[M,K] (bf16) · B[K,N] (bf16), the products of bf16 pairs
summed in f32 (a bf16 result is rounded once, from that f32 sum, by gemm_lowering's conversion kernel).

Paths, picked by the capability of the machine the code is built for (`available_paths`, from LLVM's feature
string, as gemm_i8.py picks its own):

* ``amx`` (AMX-BF16, `tdpbf16ps`): 2×2 tiles of 16×16 f32 accumulators per 32×32 of C; A's 32-row strips
  packed per K chunk as 16×32 bf16 tiles, B from the block's packed panel. Linux grants AMX state only on
  request: the kernel asks once per process (gemm_i8's dispatch) and runs ``avx512`` where it is refused.
* ``avx512`` (AVX-512 BF16, `vdpbf16ps`): 8×32 of C in 16 zmm accumulators, each step one 32-bit pair of A
  (A[i, 2q:2q+2]) broadcast against a 64-byte row of the panel (16 columns × that pair of k).
* ``plain``: gemm.py's f32 GEMM, which widens bf16 to f32 while packing (gemm_lowering keeps it for CPUs
  without these units, for GEMMs with an epilogue or a transposed operand, and where this path is pinned).

`TESSERA_CPU_BF16_GEMM` (amx, avx512, plain, or auto) pins the path (options.py; hashed into the compile
cache's key). Both instructions treat bf16 denormal inputs as zero and flush f32 denormal results.

Packing: each block packs its columns of B (`gemm_i8.width`'s panel) once into the pair layout both
instructions read, groups of 16 columns with 2 consecutive k per column in a 64-byte row:
panel[g][q][c][r] = B[2q+r][j0+16g+c], zero past K and N. The blocking, grid and per-call block choice are
gemm_i8's (`grid`, `_block_start`), with the panel's budget counted in bf16 elements instead of bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...mlir import func, ir
from . import gemm_i8
# the panel (nb/16 groups of kq 64-byte rows) and the kernels' skeleton are the int8 GEMM's
from .gemm_i8 import _DECLS as _I8_DECLS, _ARGS, _Fn, _block_start, _dispatch, _finish, _groups, _panel
from .irbuild import LAUNCH_ARGS
from .target import HostTarget

PATHS = ("amx", "avx512", "plain")
# amx: 32-element k steps per chunk: a 32-row A strip of 64 steps is 128 KiB, as gemm_i8's chunk of 64 steps
_KT_CHUNK = 64
_MR = 8   # avx512: rows of C per micro-tile (8 rows × 2 zmm of 16 columns: 16 accumulators of 32 zmm)
_DECLS = _I8_DECLS + """
declare x86_amx @llvm.x86.tdpbf16ps.internal(i16, i16, i16, x86_amx, x86_amx, x86_amx)
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)
declare void @llvm.masked.store.v16f32.p0(<16 x float>, ptr, i32, <16 x i1>)
"""


def available_paths(target: HostTarget) -> tuple[str, ...]:
    """The paths `target` can run, fastest first (plain always). amx needs avx512's features too: they are
    its fallback where the OS refuses AMX state (every CPU with AMX-BF16 has them)."""
    feats = set(f[1:] for f in target.features.split(",") if f.startswith("+"))
    avx512 = target.arch == "x86_64" and {"avx512f", "avx512bw", "avx512bf16"} <= feats
    amx = avx512 and {"amx-tile", "amx-bf16"} <= feats
    return (*(("amx",) if amx else ()), *(("avx512",) if avx512 else ()), "plain")


def choose_path(target: HostTarget, pinned: str = "auto") -> str:
    """`pinned` if `target` has it, the fastest available for "auto"; ValueError otherwise."""
    paths = available_paths(target)
    if pinned == "auto":
        return paths[0]
    if pinned not in PATHS:
        raise ValueError(f"unknown bf16 GEMM path {pinned!r} (paths: auto, {', '.join(PATHS)})")
    if pinned not in paths:
        raise ValueError(f"the bf16 GEMM path {pinned!r} needs a CPU feature this one ({target.cpu}) lacks "
                         f"(available: {', '.join(paths)})")
    return pinned


@dataclass(frozen=True)
class Bf16GemmSpec:
    """One bf16 kernel on `path` (amx or avx512; plain is gemm.py's): the block of C each grid block
    computes, as gemm_i8.I8GemmSpec's (`panel` counts bf16 elements: K × columns of the B panel)."""

    name: str
    path: str
    mb: int = 512
    nb: int = 256
    panel: int = 1 << 19      # elements: half of a 2 MiB L2 in bf16
    threads: int = 1

    def __post_init__(self):
        if self.path not in PATHS[:2]:
            raise ValueError(f"bf16 GEMM kernel: path {self.path!r} not among {PATHS[:2]}")
        if self.mb % 32 or self.nb % 32 or self.mb < 32 or self.nb < 32:
            raise ValueError(f"bf16 GEMM blocks must be positive multiples of 32, not {self.mb}x{self.nb}")
        if self.panel < 32 or self.threads < 1:
            raise ValueError(f"bf16 GEMM: a B panel of {self.panel} elements for {self.threads} threads")


grid = gemm_i8.grid   # the same block choice at the call (width, rows)


def build(module: ir.Module, spec: Bf16GemmSpec) -> func.FuncOp:
    """Appends the kernel to `module` as a kernel generated whole as LLVM IR (gemm_i8.build's contract:
    ``tessera.llvm_ir``, which the llir stage links in, and ``tessera.writes``: C)."""
    bf16, f32 = ir.BF16Type.get(), ir.F32Type.get()
    dyn = ir.ShapedType.get_dynamic_size()
    params = [("A", ir.MemRefType.get([dyn, dyn], bf16), ("M", "K")),
              ("B", ir.MemRefType.get([dyn, dyn], bf16), ("K", "N")),
              ("C", ir.MemRefType.get([dyn, dyn], f32), ("M", "N"))]
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
    fn.attributes["tessera.gemm_bf16"] = ir.DictAttr.get({
        "path": ir.StringAttr.get(spec.path), "block": ir.DenseI64ArrayAttr.get([spec.mb, spec.nb])})
    fn.attributes["tessera.writes"] = ir.DenseI64ArrayAttr.get([2])
    fn.attributes["tessera.llvm_ir"] = ir.StringAttr.get(llvm_ir(spec, f"{spec.name}_bf16gemm") + _entry(spec.name))
    return fn


def _entry(name: str) -> str:
    """The kernel as the MLIR lowering of its declaration calls it (gemm_i8._entry's form; offsets count
    bf16 and f32 elements)."""
    memref = lambda m: (f"ptr %{m}_alloc, ptr %{m}_base, i64 %{m}_off, i64 %{m}_d0, i64 %{m}_d1, "  # noqa: E731
                        f"i64 %{m}_s0, i64 %{m}_s1")
    launch = ", ".join(f"i64 %{a}" for a in LAUNCH_ARGS)
    return f"""
define hidden void @{name}({memref("A")}, {memref("B")}, {memref("C")}, {launch}) {{
entry:
  %a = getelementptr i16, ptr %A_base, i64 %A_off
  %b = getelementptr i16, ptr %B_base, i64 %B_off
  %c = getelementptr float, ptr %C_base, i64 %C_off
  call void @{name}_bf16gemm(ptr %a, ptr %b, ptr %c, i64 %A_d0, i64 %B_d1, i64 %A_d1, i64 %bid_x, i64 %bid_y)
  ret void
}}
"""


def llvm_ir(spec: Bf16GemmSpec, name: str) -> str:
    """The LLVM IR module text of the kernel body `name`(A, B, C, M, N, K, bid_x, bid_y: i64)."""
    parts = [_DECLS, _pack(f"{name}_pack"), _avx512(spec, f"{name}_avx512", f"{name}_pack")]
    if spec.path == "amx":
        parts.append(_amx(spec, f"{name}_amx", f"{name}_pack"))
        parts.append(f"@{name}_amx_state = internal global i32 0\n" + _dispatch(
            name, f"{name}_amx", f"{name}_avx512", f"@{name}_amx_state"))
    else:
        parts.append(f"define hidden void @{name}({_ARGS}) {{\nentry:\n"
                     f"  call void @{name}_avx512(ptr %A, ptr %B, ptr %C, i64 %M, i64 %N, i64 %K, i64 %bx, "
                     f"i64 %by)\n  ret void\n}}\n")
    return "\n".join(parts)


def _pack(name: str) -> str:
    """pack(B, N, K, j0, nb, panel, kq): panel[g][q][c][r] = B[2q+r][j0+16g+c] (as i16) for g <
    _groups(nb), q < kq, zero past K and nb. Whole 2×16 pieces are two 32-byte loads interleaved by one
    shuffle; the rest element by element. 32 rows of B at a time, every group in turn, so that the lines
    those rows span stay in L1 while the groups each line holds read it (gemm_i8._pack's order)."""
    f = _Fn(name)
    ngroups = _groups(f, "%nb")

    def rows(q0, _):
        f.loop(0, ngroups, 1, lambda g, _: group(g, q0, f.smin(f.add(q0, 16), "%kq")))

    def group(g, q0, q1):
        col0 = f.mul(g, 16)
        full_cols = f.cmp("sle", f.add(col0, 16), "%nb")

        def pair(q, _):
            dst = f.gep("i16", "%P", f.mul(f.add(f.mul(g, "%kq"), q), 32))
            k0 = f.mul(q, 2)
            full = f.both(full_cols, f.cmp("sle", f.add(k0, 2), "%K"))

            def edge(e):   # element e = 2c + r of the piece: B[k0 + r, j0 + col0 + c]
                k = f.add(k0, f.val(f"urem i64 {e}, 2"))
                n = f.add(col0, f.val(f"udiv i64 {e}, 2"))
                return f.both(f.cmp("slt", k, "%K"), f.cmp("slt", n, "%nb")), f.add(f.mul(k, "%N"), f.add("%j0", n))

            def whole():
                src = [f.gep("i16", "%B", f.add(f.mul(f.add(k0, r), "%N"), f.add("%j0", col0))) for r in range(2)]
                r0, r1 = (f.val(f"load <16 x i16>, ptr {p}, align 2") for p in src)
                interleave = ", ".join(f"i32 {16 * r + c}" for c in range(16) for r in range(2))
                v = f.val(f"shufflevector <16 x i16> {r0}, <16 x i16> {r1}, <32 x i32> <{interleave}>")
                f.do(f"store <32 x i16> {v}, ptr {dst}, align 64")
            f.if_else(full, whole, lambda: f.gather("i16", "%B", dst, 32, edge))
        f.loop(q0, q1, 1, pair)
    f.loop(0, "%kq", 16, rows)
    f.do("ret void")
    return (f"define internal void @{name}(ptr noalias %B, i64 %N, i64 %K, i64 %j0, i64 %nb, ptr noalias %P, "
            f"i64 %kq) {{\nentry:\n" + "\n".join(f.lines) + "\n}\n")


def _amx(spec: Bf16GemmSpec, name: str, pack: str) -> str:
    f = _Fn(name)
    i0, j0, mb, nb = _block_start(f, spec)
    kt = f.val(f"udiv i64 {f.val('add i64 %K, 31')}, 32")   # 32-element steps of k, the last zero-padded
    kq = f.mul(kt, 16)
    panel = _panel(f, spec, pack, j0, nb, kq)
    # Per K chunk, a strip's A (32 rows) packed as its 16×32 tiles in k order (strip[t][h] = A[i+16h : +16,
    # 32t : +32], zero-padded), read by every column pair of the block; the C tiles carry the sum from chunk
    # to chunk (gemm_i8's amx scheme: loaded in place, a tile's 16 rows share few cache sets).
    strip_buf = f.val(f"alloca [{_KT_CHUNK * 2048} x i8], align 64")
    cbuf = f.val("alloca [256 x float], align 64")
    iend = f.add(i0, mb)
    ngroups = f.val(f"udiv i64 {f.add(nb, 31)}, 32")
    shape = "i16 16, i16 64"

    def pack_strip(i, t0, t1):
        def tile_row(e, _):   # e = (t·2 + h)·16 + r: 32 elements of row i+16h+r from k = 32(t0 + t)
            t = f.add(t0, f.val(f"udiv i64 {e}, 32"))
            row = f.add(i, f.val(f"urem i64 {e}, 32"))
            k = f.mul(t, 32)
            dst = f.gep("i16", strip_buf, f.mul(e, 32))
            whole = f.both(f.cmp("slt", row, "%M"), f.cmp("sle", f.add(k, 32), "%K"))

            def copy():
                v = f.val(f"load <32 x i16>, ptr {f.gep('i16', '%A', f.add(f.mul(row, '%K'), k))}, align 2")
                f.do(f"store <32 x i16> {v}, ptr {dst}, align 64")

            def edge(c):
                return (f.both(f.cmp("slt", row, "%M"), f.cmp("slt", f.add(k, c), "%K")),
                        f.add(f.mul(row, "%K"), f.add(k, c)))
            f.if_else(whole, copy, lambda: f.gather("i16", "%A", dst, 32, edge))
        f.loop(0, f.mul(f.val(f"sub i64 {t1}, {t0}"), 32), 1, tile_row)

    def tile(ptr, stride):
        return f.val(f"call x86_amx @llvm.x86.tileloadd64.internal({shape}, ptr {ptr}, i64 {stride})")

    def c_edge(i, n):
        def locate(e):
            r = f.add(i, f.val(f"udiv i64 {e}, 16"))
            c = f.add(n, f.val(f"urem i64 {e}, 16"))
            return f.both(f.cmp("slt", r, "%M"), f.cmp("slt", c, "%N")), f.add(f.mul(r, "%N"), c)
        return locate

    def whole_tile(i, n):
        return f.both(f.cmp("sle", f.add(i, 16), "%M"), f.cmp("sle", f.add(n, 16), "%N"))

    def load(first, i, n):
        """The C tile at (i, n) so far: tilezero on the first chunk (no load: gemm_i8's measurement), else
        C's (an edge tile via cbuf, its f32 bits copied as i32)."""
        u = f.uid()
        f.do(f"br i1 {first}, label %zero{u}, label %sofar{u}")
        f.label(f"zero{u}")
        zero = f.val(f"call x86_amx @llvm.x86.tilezero.internal({shape})")
        f.do(f"br label %tile{u}")
        f.label(f"sofar{u}")
        whole = whole_tile(i, n)
        f.if_(f.val(f"xor i1 {whole}, true"), lambda: f.gather("i32", "%C", cbuf, 256, c_edge(i, n)))
        src = f.gep("float", "%C", f.add(f.mul(i, "%N"), n))
        ptr = f.val(f"select i1 {whole}, ptr {src}, ptr {cbuf}")
        sofar = tile(ptr, f.val(f"select i1 {whole}, i64 {f.mul('%N', 4)}, i64 64"))
        came = f.cur
        f.do(f"br label %tile{u}")
        f.label(f"tile{u}")
        return f.val(f"phi x86_amx [ {zero}, %zero{u} ], [ {sofar}, %{came} ]")

    def store(acc, i, n):
        def direct():
            dst = f.gep("float", "%C", f.add(f.mul(i, "%N"), n))
            f.do(f"call void @llvm.x86.tilestored64.internal({shape}, ptr {dst}, i64 {f.mul('%N', 4)}, x86_amx {acc})")

        def edge():
            f.do(f"call void @llvm.x86.tilestored64.internal({shape}, ptr {cbuf}, i64 64, x86_amx {acc})")
            locate = c_edge(i, n)

            def elem(e, _):
                inside, at = locate(e)

                def put():
                    v = f.val(f"load float, ptr {f.gep('float', cbuf, e)}")
                    f.do(f"store float {v}, ptr {f.gep('float', '%C', at)}")
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
                local = f.val(f"sub i64 {t}, {t0}")
                a = [tile(f.gep("i8", strip_buf, f.mul(f.add(f.mul(local, 2), h), 1024)), 64) for h in (0, 1)]
                b = [tile(f.gep("i8", panel, f.mul(f.add(f.mul(f.add(g, h), kq), f.mul(t, 16)), 64)), 64)
                     for h in (0, 1)]
                return [f.val(f"call x86_amx @llvm.x86.tdpbf16ps.internal(i16 16, i16 64, i16 64, "
                              f"x86_amx {acc[2 * r + c]}, x86_amx {a[r]}, x86_amx {b[c]})")
                        for r in (0, 1) for c in (0, 1)]
            acc = f.loop(t0, t1, 1, kstep, [("x86_amx", v) for v in init])
            for r in (0, 1):
                for c in (0, 1):
                    store(acc[2 * r + c], f.add(i, 16 * r), f.add(n0, 16 * c))
        f.loop(0, ngroups, 1, pair)
    f.loop(0, f.smax(kt, 1), _KT_CHUNK, chunk)   # once at K = 0: C = 0
    f.do(f"call void @free(ptr {panel})")
    return _finish(f, name, '"target-features"="+amx-tile,+amx-bf16" ')


def _avx512(spec: Bf16GemmSpec, name: str, pack: str) -> str:
    f = _Fn(name)
    i0, j0, mb, nb = _block_start(f, spec)
    kq = f.cdiv("%K", 2)   # pairs of k, the last half zero for an odd K
    kfull = f.val("udiv i64 %K, 2")
    odd = f.cmp("ne", f.val("urem i64 %K, 2"), 0)
    panel = _panel(f, spec, pack, j0, nb, kq)
    iend = f.add(i0, mb)
    ngroups = f.val(f"udiv i64 {f.add(nb, 31)}, 32")
    last = f.val("sub i64 %M, 1")
    lanes = "<" + ", ".join(f"i64 {c}" for c in range(16)) + ">"
    # Per strip of _MR rows, A's pairs as words, pair by pair: astrip[q][r] = A[i+r, 2q:2q+2]; each step
    # broadcasts its _MR words from memory (folded into vdpbf16ps' {1to16} operand; gemm_i8's vnni measured
    # register broadcasts taking the port the dot products issue on).
    astrip = f.val(f"call ptr @aligned_alloc(i64 64, i64 {f.mul(f.cdiv(f.smax(kq, 1), 2), 64)})")   # kq·32 bytes

    def put_pair(rows, q, exact):
        for r in range(_MR):
            at = f.gep("i16", rows[r], f.mul(q, 2))
            if exact:
                word = f.val(f"load i32, ptr {at}, align 2")
            else:   # K odd: the last k's element, the pair's other half zero
                word = f.val(f"zext i16 {f.val(f'load i16, ptr {at}')} to i32")
            f.do(f"store i32 {word}, ptr {f.gep('i32', astrip, f.add(f.mul(q, _MR), r))}")

    def strip(i, _):
        rows = [f.gep("i16", "%A", f.mul(f.smin(f.add(i, r), last), "%K")) for r in range(_MR)]
        f.loop(0, kfull, 1, lambda q, _: put_pair(rows, q, True))
        f.if_(odd, lambda: put_pair(rows, kfull, False))

        def pair(gp, _):
            g = f.mul(gp, 2)

            def step(q, acc):
                rows_b = [f.gep("i8", panel, f.mul(f.add(f.mul(f.add(g, h), kq), q), 64)) for h in (0, 1)]
                b = [f.val(f"load <32 x bfloat>, ptr {p}, align 64") for p in rows_b]
                out = []
                for r in range(_MR):
                    word = f.val(f"load i32, ptr {f.gep('i32', astrip, f.add(f.mul(q, _MR), r))}, align 4")
                    splat = f.val(f"insertelement <16 x i32> poison, i32 {word}, i64 0")
                    splat = f.val(f"shufflevector <16 x i32> {splat}, <16 x i32> poison, <16 x i32> zeroinitializer")
                    a = f.val(f"bitcast <16 x i32> {splat} to <32 x bfloat>")
                    out += [f.val(f"call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> {acc[2 * r + h]}, "
                                  f"<32 x bfloat> {a}, <32 x bfloat> {b[h]})") for h in (0, 1)]
                return out
            acc = f.loop(0, kq, 1, step, [("<16 x float>", "zeroinitializer")] * (2 * _MR))
            for h in (0, 1):
                n = f.add(j0, f.mul(f.add(g, h), 16))
                left = f.val(f"sub i64 %N, {n}")
                ins = f.val(f"insertelement <16 x i64> poison, i64 {left}, i64 0")
                ins = f.val(f"shufflevector <16 x i64> {ins}, <16 x i64> poison, <16 x i32> zeroinitializer")
                mask = f.val(f"icmp slt <16 x i64> {lanes}, {ins}")
                for r in range(_MR):
                    row = f.add(i, r)

                    def put(r=r, row=row):
                        dst = f.gep("float", "%C", f.add(f.mul(row, "%N"), n))
                        f.do(f"call void @llvm.masked.store.v16f32.p0(<16 x float> {acc[2 * r + h]}, ptr {dst}, "
                             f"i32 4, <16 x i1> {mask})")
                    f.if_(f.both(f.cmp("slt", row, iend), f.cmp("slt", n, "%N")), put)
        f.loop(0, ngroups, 1, pair)
    f.loop(i0, iend, _MR, strip)
    f.do(f"call void @free(ptr {astrip})")
    f.do(f"call void @free(ptr {panel})")
    return _finish(f, name, '"target-features"="+avx512f,+avx512bw,+avx512bf16" ')
