"""bf16 GEMM for the CPU backend: C[M,N] (f32) = A[M,K] (bf16) · B[K,N] (bf16), the products of bf16 pairs
summed in f32 (a bf16 result is rounded once, from that f32 sum, by gemm_lowering's conversion kernel).

Paths, picked by the capability of the machine the code is built for (`available_paths`, from LLVM's feature
string, as gemm_i8.py picks its own):

* ``amx`` (AMX-BF16, `tdpbf16ps`): 2×2 tiles of 16×16 f32 accumulators per 32×32 of C; A's 32-row strips
  packed per K chunk as 16×32 bf16 tiles, B from the block's packed panel. Linux grants AMX state only on
  request: the kernel asks once per process (gemm_i8's dispatch) and runs ``avx512`` where it is refused.
* ``avx512`` (AVX-512 BF16, `vdpbf16ps`): 8×32 of C in 16 zmm accumulators, each step one 32-bit pair of A
  (A[i, 2q:2q+2], read in place) broadcast against a 64-byte row of the panel (16 columns × that pair of k).
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
# the panel (nb/16 groups of kq 64-byte rows), the declaration, the kernels' skeleton and their amx and
# AVX-512 emitters (with bf16's `_Dot`) are the int8 GEMM's
from .gemm_i8 import (_DECLS as _I8_DECLS, _Dot, _Fn, _amx, _block_start, _body, _choose, _declare, _finish,
                      _groups, _panel, _vectors)
from .target import HostTarget

PATHS = ("amx", "avx512", "plain")
# A and B as pairs of bf16 (moved as i16) per word, summed into f32 by tdpbf16ps / vdpbf16ps
_BF16 = _Dot("i16", 2, "float", "tdpbf16ps", "avx512bf16.dpbf16ps.512", "<32 x bfloat>", "v16f32",
             "+amx-tile,+amx-bf16", "+avx512f,+avx512bw,+avx512bf16")
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
    return _choose("bf16", PATHS, available_paths(target), target, pinned)


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
    body = f"{spec.name}_bf16gemm"
    return _declare(module, spec, (ir.BF16Type.get(), ir.F32Type.get()), "gemm_bf16", llvm_ir(spec, body), body, _BF16)


def llvm_ir(spec: Bf16GemmSpec, name: str) -> str:
    """The LLVM IR module text of the kernel body `name`(A, B, C, M, N, K, bid_x, bid_y: i64)."""
    parts = [_DECLS, _pack(f"{name}_pack"), _avx512(spec, f"{name}_avx512", f"{name}_pack")]
    if spec.path == "amx":
        parts.append(_amx(spec, f"{name}_amx", f"{name}_pack", _BF16))
    parts.append(_body(name, spec.path, "avx512"))
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


def _avx512(spec: Bf16GemmSpec, name: str, pack: str) -> str:
    f = _Fn(name)
    block = _block_start(f, spec)
    kq = f.cdiv("%K", 2)   # pairs of k, the last half zero for an odd K
    kfull = f.val("udiv i64 %K, 2")
    panel = _panel(f, spec, pack, block[1], block[3], kq)

    def last_pair(rowp, q):
        """A[row, 2q] as a word, the other half zero: an odd K's last element (_vectors reads the whole
        pairs in place)."""
        at = f.gep("i16", rowp, f.mul(q, 2))
        return f.val(f"zext i16 {f.val(f'load i16, ptr {at}')} to i32")
    _vectors(f, spec, _BF16, block, panel, kq, kfull, last_pair)
    return _finish(f, name, f'"target-features"="{_BF16.avx_features}" ')
