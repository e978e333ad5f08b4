"""Ampere-class GEMM: C[M,N] = epilogue(A[M,K] · B[K,N]) on mma.sync tensor cores, for sm_80 … sm_90.

One CTA computes a BM×BN tile of C (128×128 by default) with (BM/32)·(BN/64) warps, each owning a 32×64 block:
two m16 rows of eight n8 columns of mma.sync products, 64 fp32 accumulators a thread. The K loop is the
multistage cp.async pipeline of CUTLASS's and Triton's Ampere kernels:

    prologue    the first `stages - 1` K tiles are copied (cp.async.cg, 16 bytes a thread at a time) into
                as many shared-memory stages, one commit group each (the loop is ampere.k_loop)
    K tile kt   wait until tile kt's group has landed (cp.async.wait_group stages-2) and the CTA has
                finished reading tile kt-1 (bar.sync); start copying tile kt+stages-1 into kt-1's stage;
                then multiply tile kt from shared memory — A fragments by ldmatrix.x4, B fragments by
                ldmatrix.x4.trans (B is row-major [K, N]: mma wants its K pairs, which the transposed load
                gathers) or, for tf32, by 32-bit loads (ldmatrix transposes only 16-bit elements)

A stage holds A's BM rows of 64 bytes (BK = 32 bf16/f16 or 16 tf32 elements) and B's BK rows of BN
elements. Both are XOR-swizzled by 16-byte chunk so that the eight rows one ldmatrix phase reads (and the
four K rows of a tf32 B load) fall in distinct banks:

    A   chunk c of row r at c ^ ((r >> 1) & 3)      (two 64-byte rows share a 128-byte bank line)
    B   chunk c of row k at c ^ (k & 7)             (16-bit; rows are BN·2 bytes, a multiple of 128)
        chunk c of row k at c ^ ((k & 3) << 1)      (tf32: a warp's load reads K rows t and t + 4)

Copies at the matrix edges read only what is inside (cp.async's src-size 0 zero-fills the chunk), so M, N
and K need not be multiples of the tile; a chunk is 16 bytes of a row, so K and N must be multiples of 8
(bf16/f16) or 4 (tf32), which gemm_lowering checks (statically, or in the plan). tf32 operands are f32
words holding tf32 values: the tensor cores read their top 19 bits.

The epilogue is gemm_sm90's: scale, bias, activations and the residual add in fp32, then predicated stores
of bf16, f16 or f32 pairs. Tiles are numbered in groups of `group_m` tile rows for L2 reuse of B's columns.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..symbol_names import llvm_global
from . import ampere as am
from . import gemm_common as gc
from .nvvm_text import Writer, module

ROW_BYTES = 64           # of a stage's A rows: 4 chunks of 16 bytes
WM, WN = 32, 64          # a warp's block of C
_SIZE = {"bf16": 2, "f16": 2, "tf32": 4}
# Dynamic shared memory a block may opt into (CUDA's per-architecture limits)
SMEM_PER_BLOCK = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024, "sm_89": 99 * 1024,
                  "sm_90": 227 * 1024, "sm_90a": 227 * 1024}
ARCHS = tuple(SMEM_PER_BLOCK)
# BM x BN: 8 or 4 warps. (64x64's 2 warps would copy 4 chunks of each operand a thread per K tile, whose
# addresses alone push it past 128 registers.)
TILES = ((128, 128), (128, 64), (64, 128))


@dataclass(frozen=True)
class Sm80GemmSpec:
    name: str
    dtype: str = "bf16"           # A and B: bf16, f16, or tf32 (stored as f32)
    out_dtype: str = "bf16"       # C; accumulation is always fp32
    bm: int = 128
    bn: int = 128
    stages: int = 4
    group_m: int = 8              # tile rows visited before moving right (L2 reuse of B's columns)
    epilogue: tuple = ()
    bias_dtype: str = "f32"       # of the bias and residual operands, widened to fp32 as they are read
    residual_dtype: str = "f32"
    arch: str = "sm_80"           # for its shared-memory limit

    def __post_init__(self):
        if self.dtype not in _SIZE:
            raise ValueError(f"the sm_80 GEMM takes bf16, f16 or tf32 operands, not {self.dtype}")
        gc.check("sm_80", self)
        if self.arch not in SMEM_PER_BLOCK:
            raise ValueError(f"the sm_80 GEMM targets {', '.join(ARCHS)}, not {self.arch}")
        if (self.bm, self.bn) not in TILES or not 2 <= self.stages <= 8 or self.group_m < 1:
            raise ValueError(f"unsupported sm_80 GEMM tile: {self.bm}x{self.bn}, {self.stages} stages "
                             f"({', '.join(f'{m}x{n}' for m, n in TILES)}; 2 to 8 stages)")
        if self.smem_bytes > SMEM_PER_BLOCK[self.arch]:
            raise ValueError(f"{self.stages} stages of a {self.bm}x{self.bn} tile need {self.smem_bytes} bytes of "
                             f"shared memory; {self.arch} has {SMEM_PER_BLOCK[self.arch] // 1024} KiB a block")

    @property
    def size(self) -> int:
        return _SIZE[self.dtype]

    @property
    def bk(self) -> int:
        return ROW_BYTES // self.size

    @property
    def chunk(self) -> int:
        """Elements of a 16-byte chunk: K and N must be multiples of it."""
        return 16 // self.size

    @property
    def warps(self) -> int:
        return (self.bm // WM) * (self.bn // WN)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def min_blocks(self) -> int:
        """CTAs a multiprocessor should hold at once: 16 warps, which caps registers at 128 a thread (the 64
        accumulators, a k step's fragments and the addresses fit without spills)."""
        return 512 // self.threads

    @property
    def stage_bytes(self) -> int:
        return self.bm * ROW_BYTES + self.bk * self.bn * self.size

    @property
    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        return (-(-m // self.bm) * -(-n // self.bn), 1, 1)


def generate(spec: Sm80GemmSpec, activations: str = "") -> str:
    """The kernel as NVPTX LLVM IR text, with `activations` (the definitions of its epilogue's
    ``@tsr_act_*`` functions; declarations when empty). Parameters: A, B, C, the epilogue's parameters in
    step order (alpha, bias, residual), M, K, N. One CTA per tile: launch `spec.grid(M, N)`."""
    w = Writer()
    params = gc.params(spec)

    w.label("entry")
    gc.prologue(w, spec)
    tid = w.sreg("tid.x")
    smem = w.v("ptrtoint ptr addrspace(3) @tsr_smem to i32")
    m32, n32, k32, kt_n, num_m, num_n = gc.extents(w, spec)
    m0, n0 = gc.tile_origin(w, spec, w.sreg("ctaid.x"), (num_m, num_n))
    copies = _copy_plan(w, spec, tid, m0, n0, m32, n32)

    frag = _fragment_offsets(w, spec, tid)
    fin = am.k_loop(w, spec.stages, spec.stage_bytes, smem, kt_n, 4 * (WM // 16) * (WN // 8),
                    lambda kt, stage: _copy_tile(w, spec, copies, kt, stage, kt_n, k32, n32),
                    lambda acc, stage: _multiply_stage(w, spec, acc, frag, stage))
    _epilogue(w, spec, fin, frag, m0, n0, m32, n32)
    w.emit("ret void")

    body = "\n".join(w.lines)
    kernel = (f"@tsr_smem = external addrspace(3) global [0 x i8], align 128\n"
              f"define ptx_kernel void @{llvm_global(spec.name)}({', '.join(params)}) "
              f"\"nvvm.maxntid\"=\"{spec.threads}\" \"nvvm.minctasm\"=\"{spec.min_blocks}\" {{\n{body}\n}}\n")
    return module(kernel, gc.declarations(spec, activations))


def _i(w: Writer, op: str, a, b) -> str:
    """An i32 binary operation."""
    return w.v(f"{op} i32 {a}, {b}")


@dataclass
class _Copy:
    """One 16-byte chunk a thread copies per K tile: where it lands in the stage, the first element it
    reads (i64, at K tile 0), the element offset of its K coordinate within a tile (A: along the row; B: the
    row), and whether its M row (A) or N columns (B) are inside the matrix."""
    operand: str
    dst: str
    first: str
    k_offset: int | str
    inside: str


def _copy_plan(w: Writer, spec: Sm80GemmSpec, tid: str, m0: str, n0: str, m32: str, n32: str) -> list[_Copy]:
    """The chunks of A and B this thread copies every K tile, consecutive threads on consecutive chunks of a
    row (coalesced 64-byte segments of A, BN·size-byte rows of B)."""
    T, BM, BN, BK, size = spec.threads, spec.bm, spec.bn, spec.bk, spec.size
    out = []
    a_chunks = ROW_BYTES // 16                      # per A row
    c = w.v(f"and i32 {tid}, {a_chunks - 1}")
    r = w.v(f"lshr i32 {tid}, 2")
    for i in range(BM * a_chunks // T):
        row = w.v(f"add i32 {r}, {i * T // a_chunks}") if i else r
        swz = _i(w, "xor", c, _i(w, "and", _i(w, "lshr", row, 1), 3))
        dst = _i(w, "add", _i(w, "shl", row, 6), _i(w, "shl", swz, 4))
        gm = w.v(f"add i32 {m0}, {row}")
        first = w.v(f"mul i64 {w.v(f'zext i32 {gm} to i64')}, %K")
        kc = w.v(f"mul i32 {c}, {spec.chunk}")
        first = w.v(f"add i64 {first}, {w.v(f'zext i32 {kc} to i64')}")
        out.append(_Copy("A", dst, first, kc, w.v(f"icmp ult i32 {gm}, {m32}")))
    b_chunks = BN * size // 16                      # per B row
    c = w.v(f"and i32 {tid}, {b_chunks - 1}")
    r = w.v(f"udiv i32 {tid}, {b_chunks}")
    gn = w.v(f"add i32 {n0}, {w.v(f'mul i32 {c}, {spec.chunk}')}")
    n_inside = w.v(f"icmp ult i32 {gn}, {n32}")
    for i in range(BK * b_chunks // T):
        row = w.v(f"add i32 {r}, {i * T // b_chunks}") if i else r
        key = _i(w, "and", row, 7) if size == 2 else _i(w, "shl", _i(w, "and", row, 3), 1)
        dst = _i(w, "add", _i(w, "mul", row, BN * size), _i(w, "shl", _i(w, "xor", c, key), 4))
        dst = _i(w, "add", dst, BM * ROW_BYTES)
        first = w.v(f"mul i64 {w.v(f'zext i32 {row} to i64')}, %N")
        first = w.v(f"add i64 {first}, {w.v(f'zext i32 {gn} to i64')}")
        out.append(_Copy("B", dst, first, row, n_inside))
    return out


def _copy_tile(w: Writer, spec: Sm80GemmSpec, copies: list[_Copy], kt: str, stage: str, kt_n: str, k32: str,
               n32: str) -> None:
    """Issues this thread's copies of K tile `kt` into the stage at shared address `stage`; nothing past the
    last tile, zeros for chunks outside the matrix. A chunk outside reads no bytes but still names an address:
    the operand's first element, which exists whenever a tile does."""
    BK, size = spec.bk, spec.size
    issue = w.v(f"zext i1 {w.v(f'icmp ult i32 {kt}, {kt_n}')} to i32")
    k0 = w.v(f"mul i32 {kt}, {BK}")
    k0_64 = w.v(f"zext i32 {k0} to i64")
    for cp in copies:
        k = w.v(f"add i32 {k0}, {cp.k_offset}")
        ok = w.v(f"and i1 {cp.inside}, {w.v(f'icmp ult i32 {k}, {k32}')}")
        # A advances along its row by k0 elements, B by k0 rows of N
        step = k0_64 if cp.operand == "A" else w.v(f"mul i64 {k0_64}, %N")
        elem = w.v(f"select i1 {ok}, i64 {w.v(f'add i64 {cp.first}, {step}')}, i64 0")
        at = w.v(f"getelementptr i8, ptr addrspace(1) %{cp.operand}, i64 {w.v(f'mul i64 {elem}, {size}')}")
        src = w.v(f"ptrtoint ptr addrspace(1) {at} to i64")
        nbytes = w.v(f"select i1 {ok}, i32 16, i32 0")
        am.cp_async(w, w.v(f"add i32 {stage}, {cp.dst}"), src, nbytes, issue)


@dataclass
class _Frag:
    lane: str
    wm: str               # the warp's block of C: rows wm·32 …, columns wn·64 …
    wn: str
    a: list               # shared offsets (within a stage) of A's ldmatrix, per k step
    b: list               # per k step: B's ldmatrix.x4.trans offsets per pair of n8 blocks, or tf32 words per
    #                       n8 block (its two K rows four apart)


def _fragment_offsets(w: Writer, spec: Sm80GemmSpec, tid: str) -> _Frag:
    """Where this thread's fragment loads read in a stage (loop-invariant: only the stage base moves)."""
    BN, size = spec.bn, spec.size
    lane = w.v(f"and i32 {tid}, 31")
    warp = w.v(f"lshr i32 {tid}, 5")
    wn = w.v(f"urem i32 {warp}, {BN // WN}")
    wm = w.v(f"udiv i32 {warp}, {BN // WN}")
    l15 = w.v(f"and i32 {lane}, 15")
    hi = w.v(f"lshr i32 {lane}, 4")
    ksteps = 2   # a stage's BK is two mma K steps (k16, or k8 for tf32) of 32 bytes of A's rows
    # A, ldmatrix.x4: lane l addresses row l % 16 of the 16-row block, chunk 2·ks + l/16 (bytes 0-15 or 16-31
    # of the step); matrices 0-3 are then (rows 0-7, k lo), (rows 8-15, k lo), (rows 0-7, k hi), (8-15, hi)
    a_row = w.v(f"add i32 {w.v(f'shl i32 {wm}, 5')}, {l15}")
    a_key = w.v(f"and i32 {w.v(f'lshr i32 {lane}, 1')}, 3")   # (row >> 1) & 3 of every row this lane reads
    a = []
    for ks in range(ksteps):
        chunk = w.v(f"xor i32 {w.v(f'add i32 {hi}, {2 * ks}')}, {a_key}")
        a.append(w.v(f"add i32 {w.v(f'shl i32 {a_row}, 6')}, {w.v(f'shl i32 {chunk}, 4')}"))
    b_base = spec.bm * ROW_BYTES
    row_bytes = BN * size
    b = []
    if size == 2:
        # B, ldmatrix.x4.trans: lane l addresses K row l % 16 of the step, columns 8·(l/16) of a 16-column
        # pair; matrices (k lo, n lo), (k hi, n lo), (k lo, n hi), (k hi, n hi) are two n8 blocks' B fragments
        key = w.v(f"xor i32 {hi}, {w.v(f'and i32 {lane}, 7')}")   # l/16 ^ (row & 7)
        col0 = w.v(f"shl i32 {wn}, 3")
        rows = w.v(f"add i32 {w.v(f'mul i32 {l15}, {row_bytes}')}, {b_base}")
        for ks in range(ksteps):
            per = []
            for pair in range(WN // 16):
                chunk = _i(w, "add", col0, _i(w, "xor", key, 2 * pair))
                per.append(_i(w, "add", rows, _i(w, "add", _i(w, "shl", chunk, 4), 16 * ks * row_bytes)))
            b.append(per)
    else:
        # tf32 B: lane (g, t) reads K rows t and t + 4 of the step at column g of each n8 block; chunk
        # 4·wn·… ^ (t << 1) since (row & 3) = t
        g = w.v(f"lshr i32 {lane}, 2")
        t = w.v(f"and i32 {lane}, 3")
        t2 = w.v(f"shl i32 {t}, 1")
        col0 = w.v(f"shl i32 {wn}, 4")
        gh = w.v(f"lshr i32 {g}, 2")
        word = w.v(f"shl i32 {w.v(f'and i32 {g}, 3')}, 2")
        rows = w.v(f"add i32 {w.v(f'mul i32 {t}, {row_bytes}')}, {b_base}")
        rows = w.v(f"add i32 {rows}, {word}")
        for ks in range(ksteps):
            per = []
            for j in range(WN // 8):
                chunk = _i(w, "add", col0, _i(w, "xor", _i(w, "add", gh, 2 * j), t2))
                per.append(_i(w, "add", rows, _i(w, "add", _i(w, "shl", chunk, 4), 8 * ks * row_bytes)))
            b.append(per)
    return _Frag(lane, wm, wn, a, b)


def _multiply_stage(w: Writer, spec: Sm80GemmSpec, acc: list[str], f: _Frag, stage: str) -> list[str]:
    """acc += the stage's A block · B block for this warp's 32×64 of C: per k step, two m16 A fragments and
    eight n8 B fragments into 16 mma.sync. acc[4·(8·mi + j) + c] is C element c of m16 block mi, n8 block j."""
    acc = list(acc)
    row_bytes = spec.bn * spec.size
    for ks in range(2):
        a = [am.ldmatrix_x4(w, w.v(f"add i32 {stage}, {w.v(f'add i32 {f.a[ks]}, {mi * 16 * ROW_BYTES}')}"))
             for mi in range(WM // 16)]
        bfr = []
        if spec.size == 2:
            for off in f.b[ks]:
                r = am.ldmatrix_x4(w, w.v(f"add i32 {stage}, {off}"), trans=True)
                bfr += [r[0:2], r[2:4]]
        else:
            for off in f.b[ks]:
                at = w.v(f"add i32 {stage}, {off}")
                bfr.append([am.lds32(w, at), am.lds32(w, w.v(f"add i32 {at}, {4 * row_bytes}"))])
        for mi in range(WM // 16):
            for j in range(WN // 8):
                i = 4 * (8 * mi + j)
                acc[i:i + 4] = am.mma(w, acc[i:i + 4], a[mi], bfr[j], spec.dtype)
    return acc


def _epilogue(w: Writer, spec: Sm80GemmSpec, acc: list[str], f: _Frag, m0: str, n0: str, m32: str,
              n32: str) -> None:
    """C element c of block (mi, j) sits at row wm·32 + 16·mi + g + 8·(c >= 2), column wn·64 + 8·j + 2·t +
    c % 2 (mma's C layout). The steps apply in fp32; each pair of columns is then one predicated store."""
    g = w.v(f"lshr i32 {f.lane}, 2")
    col = _i(w, "add", n0, _i(w, "add", _i(w, "shl", f.wn, 6), _i(w, "shl", _i(w, "and", f.lane, 3), 1)))
    row = _i(w, "add", m0, _i(w, "add", _i(w, "shl", f.wm, 5), g))
    alpha = "%alpha" if "scale" in spec.epilogue else None
    out_t = gc.OUT[spec.out_dtype]
    for mi in range(WM // 16):
        for half in range(2):
            r = w.v(f"add i32 {row}, {16 * mi + 8 * half}")
            r_ok = w.v(f"icmp ult i32 {r}, {m32}")
            rbase = w.v(f"mul i64 {w.v(f'zext i32 {r} to i64')}, %N")
            for j in range(WN // 8):
                cj = w.v(f"add i32 {col}, {8 * j}")
                c64 = w.v(f"zext i32 {cj} to i64")
                idx = w.v(f"add i64 {rbase}, {c64}")
                ok = w.v(f"and i1 {r_ok}, {w.v(f'icmp ult i32 {cj}, {n32}')}")  # N is even: the pair is inside
                i = 4 * (8 * mi + j) + 2 * half
                x, y = (gc.apply(w, spec, acc[i + k], c64, idx, k, alpha) for k in range(2))
                at = w.v(f"getelementptr {out_t}, ptr addrspace(1) %C, i64 {idx}")
                addr = w.v(f"ptrtoint ptr addrspace(1) {at} to i64")
                okw = w.v(f"zext i1 {ok} to i32")
                if spec.out_dtype == "f32":
                    w.asm("{ .reg .pred p; setp.ne.b32 p, $3, 0; @p st.global.v2.f32 [$0], {$1, $2}; }",
                          "l,f,f,r", [("i64", addr), ("float", x), ("float", y), ("i32", okw)])
                else:
                    w.asm("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b32 [$0], $1; }", "l,r,r",
                          [("i64", addr), ("i32", gc.pack(w, spec, x, y)), ("i32", okw)])
