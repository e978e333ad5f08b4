"""f32 GEMM on FMA units: C[M,N] = epilogue(A[M,K] · B[K,N]) for f32 operands on sm_80 and later, the ptx
target's default for f32 data (tf32 tensor cores are an opt-in precision: gemm_lowering.py).

The register-blocked SIMT sgemm of CUTLASS's and the classic hand-written kernels. One CTA of 256 threads
computes a 128×128 tile of C; thread (tx, ty) = (tid % 16, tid / 16) owns an 8×8 block of it, as four
4×4 quarters — rows 4·ty … and 64 + 4·ty …, columns 4·tx … and 64 + 4·tx … — so that its operand loads are two
16-byte ld.shared.v4 of A's column and two of B's row per k, which a warp's lanes read broadcast (A) or
from 512 consecutive bytes (B) without bank conflicts. Each k is 64 fma.rn.f32 (outer products in registers).

The K loop is gemm_sm80's multistage cp.async pipeline (ampere.k_loop) over tiles of BK = 8.

A stage holds A transposed, BK rows of BM (+4 padding) elements, and B's BK rows of BN elements. A is copied
element by element (4-byte cp.async: a thread's four elements of one K tile are consecutive k of its rows, so
a warp reads 32-byte row segments), landing transposed; the padding puts the 32 elements a warp stores in
distinct banks (row stride 132 words: bank 4·k + m). B is copied in 16-byte chunks where N is a multiple of 4
(its rows are then 16-byte aligned), else element by element (`vec_b`).

Copies at the matrix edges read only what is inside (src-size 0 zero-fills), so M, N and K are arbitrary;
stores of C are predicated. Each element of C is one thread's: its k order (ascending, one fused multiply-add
per k) is fixed, so results repeat bit for bit (the deterministic profile; strict uses the SIMT kernel's
separate product and sum, backends/simt_gemm.py). The epilogue is the tensor-core kernels' (gemm_common.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..symbol_names import llvm_global
from . import ampere as am
from . import gemm_common as gc
from .nvvm_text import Writer, module

BM = BN = 128
BK = 8
THREADS = 256
PAD = 4                  # elements after each of A's BM-element rows in shared memory
A_ROW = (BM + PAD) * 4   # bytes
B_ROW = BN * 4


@dataclass(frozen=True)
class FmaGemmSpec:
    name: str
    out_dtype: str = "f32"        # C; accumulation is f32
    stages: int = 4
    vec_b: bool = True            # B copied in 16-byte chunks (N a multiple of 4) rather than by element
    group_m: int = 8              # tile rows visited before moving right (L2 reuse of B's columns)
    epilogue: tuple = ()
    bias_dtype: str = "f32"
    residual_dtype: str = "f32"
    bm: int = BM                  # fixed: tile_origin and the launch read them
    bn: int = BN
    bk: int = BK

    def __post_init__(self):
        gc.check("fma", self)
        if not 2 <= self.stages <= 8:
            raise ValueError(f"the f32 FMA GEMM pipelines 2 to 8 stages, not {self.stages}")

    threads = THREADS
    # 128 registers a thread (two CTAs an SM): the 64 accumulators, a k's 16 operands and the addresses
    min_blocks = 2

    @property
    def stage_bytes(self) -> int:
        return BK * (A_ROW + B_ROW)

    @property
    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        return (-(-m // BM) * -(-n // BN), 1, 1)


def generate(spec: FmaGemmSpec, activations: str = "") -> str:
    """The kernel as NVPTX LLVM IR text, with `activations` (the definitions of its epilogue's
    ``@tsr_act_*`` functions; declarations when empty). Parameters: A, B, C, the epilogue's parameters in
    step order (alpha, bias, residual), M, K, N, all f32 but C, bias and residual (their spec dtypes). One
    CTA per tile: launch `spec.grid(M, N)`."""
    w = Writer()
    w.label("entry")
    gc.prologue(w, spec)
    tid = w.sreg("tid.x")
    smem = w.v("ptrtoint ptr addrspace(3) @tsr_smem to i32")
    m32, n32, k32 = (w.v(f"trunc i64 %{d} to i32") for d in "MNK")
    kt_n = w.v(f"udiv i32 {w.v(f'add i32 {k32}, {BK - 1}')}, {BK}")
    num_m = w.v(f"udiv i32 {w.v(f'add i32 {m32}, {BM - 1}')}, {BM}")
    num_n = w.v(f"udiv i32 {w.v(f'add i32 {n32}, {BN - 1}')}, {BN}")
    m0, n0 = gc.tile_origin(w, spec, w.sreg("ctaid.x"), (num_m, num_n))
    copies = _copy_plan(w, spec, tid, m0, n0, m32, n32)

    tx = w.v(f"and i32 {tid}, 15")
    ty = w.v(f"lshr i32 {tid}, 4")
    a_off = w.v(f"shl i32 {ty}, 4")                              # bytes: 4·ty floats into A's row
    b_off = w.v(f"add i32 {w.v(f'shl i32 {tx}, 4')}, {BK * A_ROW}")
    fin = am.k_loop(w, spec.stages, spec.stage_bytes, smem, kt_n, 64,
                    lambda kt, stage: _copy_tile(w, copies, kt, stage, kt_n, k32),
                    lambda acc, stage: _multiply_stage(w, acc, w.v(f"add i32 {stage}, {a_off}"),
                                                       w.v(f"add i32 {stage}, {b_off}")))
    _epilogue(w, spec, fin, tx, ty, m0, n0, m32, n32)
    w.emit("ret void")

    body = "\n".join(w.lines)
    kernel = (f"@tsr_smem = external addrspace(3) global [0 x i8], align 16\n"
              f"define ptx_kernel void @{llvm_global(spec.name)}({', '.join(gc.params(spec))}) "
              f"\"nvvm.maxntid\"=\"{THREADS}\" \"nvvm.minctasm\"=\"{spec.min_blocks}\" {{\n{body}\n}}\n")
    decls = "declare float @llvm.fma.f32(float, float, float)\n" + gc.declarations(spec, activations)
    return module(kernel, decls)


@dataclass
class _Copy:
    """One copy a thread issues per K tile: its bytes (4 or 16), where it lands in the stage, the first
    element it reads (i64, at K tile 0), its k within a tile, the operand, and whether its row (A) or columns
    (B) are inside the matrix."""
    operand: str
    size: int
    dst: int | str
    first: str
    k_offset: int | str
    inside: str


def _copy_plan(w: Writer, spec: FmaGemmSpec, tid: str, m0: str, n0: str, m32: str, n32: str) -> list[_Copy]:
    out = []
    # A: thread t copies k = t % 8 of rows t / 8 + 32·i, into A's transposed row k at element m
    ka = w.v(f"and i32 {tid}, {BK - 1}")
    ra = w.v(f"lshr i32 {tid}, 3")
    ka64 = w.v(f"zext i32 {ka} to i64")
    for i in range(BM * BK // THREADS):
        row = w.v(f"add i32 {ra}, {i * THREADS // BK}") if i else ra
        dst = w.v(f"add i32 {w.v(f'mul i32 {ka}, {A_ROW}')}, {w.v(f'shl i32 {row}, 2')}")
        gm = w.v(f"add i32 {m0}, {row}")
        gm64 = w.v(f"zext i32 {gm} to i64")
        first = w.v(f"add i64 {w.v(f'mul i64 {gm64}, %K')}, {ka64}")
        out.append(_Copy("A", 4, dst, first, ka, w.v(f"icmp ult i32 {gm}, {m32}")))
    # B: consecutive threads along a row, a 16-byte chunk or an element each
    per = 4 if spec.vec_b else 1
    cols = BN // per
    c = w.v(f"and i32 {tid}, {cols - 1}")
    rb = w.v(f"udiv i32 {tid}, {cols}")
    gn = w.v(f"add i32 {n0}, {w.v(f'mul i32 {c}, {per}')}")
    n_inside = w.v(f"icmp ult i32 {gn}, {n32}")   # vec_b: N is a multiple of 4, so the chunk is whole
    gn64 = w.v(f"zext i32 {gn} to i64")
    for i in range(BK * cols // THREADS):
        row = w.v(f"add i32 {rb}, {i * THREADS // cols}") if i else rb
        dst = w.v(f"add i32 {w.v(f'mul i32 {row}, {B_ROW}')}, {w.v(f'mul i32 {c}, {4 * per}')}")
        dst = w.v(f"add i32 {dst}, {BK * A_ROW}")
        row64 = w.v(f"zext i32 {row} to i64")
        first = w.v(f"add i64 {w.v(f'mul i64 {row64}, %N')}, {gn64}")
        out.append(_Copy("B", 4 * per, dst, first, row, n_inside))
    return out


def _copy_tile(w: Writer, copies: list[_Copy], kt: str, stage: str, kt_n: str, k32: str) -> None:
    """This thread's copies of K tile `kt` into the stage at shared address `stage`: nothing past the last
    tile, zeros for elements outside the matrix (which read no bytes; their address is the operand's first
    element, as in gemm_sm80)."""
    issue = w.v(f"zext i1 {w.v(f'icmp ult i32 {kt}, {kt_n}')} to i32")
    k0 = w.v(f"mul i32 {kt}, {BK}")
    k0_64 = w.v(f"zext i32 {k0} to i64")
    step_b = w.v(f"mul i64 {k0_64}, %N")
    for cp in copies:
        k = w.v(f"add i32 {k0}, {cp.k_offset}")
        ok = w.v(f"and i1 {cp.inside}, {w.v(f'icmp ult i32 {k}, {k32}')}")
        moved = w.v(f"add i64 {cp.first}, {k0_64 if cp.operand == 'A' else step_b}")
        elem = w.v(f"select i1 {ok}, i64 {moved}, i64 0")
        at = w.v(f"getelementptr float, ptr addrspace(1) %{cp.operand}, i64 {elem}")
        src = w.v(f"ptrtoint ptr addrspace(1) {at} to i64")
        nbytes = w.v(f"select i1 {ok}, i32 {cp.size}, i32 0")
        dst = w.v(f"add i32 {stage}, {cp.dst}")
        if cp.size == 16:
            am.cp_async(w, dst, src, nbytes, issue)
        else:   # 4-byte copies go through L1 (.ca: .cg copies 16 bytes only)
            w.asm("{ .reg .pred p; setp.ne.b32 p, $3, 0; @p cp.async.ca.shared.global [$0], [$1], 4, $2; }",
                  "r,l,r,r", [("i32", dst), ("i64", src), ("i32", nbytes), ("i32", issue)])


def _lds4(w: Writer, addr: str) -> list[str]:
    """Four f32 of shared memory at a 16-byte aligned address (inline, so that it stays between the
    barriers around it)."""
    ty = "{float, float, float, float}"
    res = w.asm("ld.shared.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,r", [("i32", addr)], ret=ty, hint="ld")
    return [w.v(f"extractvalue {ty} {res}, {i}", "x") for i in range(4)]


def _multiply_stage(w: Writer, acc: list[str], a_at: str, b_at: str) -> list[str]:
    """acc += the stage's A block · B block for this thread's 8×8 of C: per k, A's eight rows and B's eight
    columns (two ld.shared.v4 each), then their 64 products. acc[8·i + j] is row i, column j of the block
    (rows/columns 0-3 the first quarter's, 4-7 the second's, 64 apart in C)."""
    acc = list(acc)
    for k in range(BK):
        a = _lds4(w, w.v(f"add i32 {a_at}, {k * A_ROW}")) + _lds4(w, w.v(f"add i32 {a_at}, {k * A_ROW + 256}"))
        b = _lds4(w, w.v(f"add i32 {b_at}, {k * B_ROW}")) + _lds4(w, w.v(f"add i32 {b_at}, {k * B_ROW + 256}"))
        for i in range(8):
            for j in range(8):
                acc[8 * i + j] = w.v(f"call float @llvm.fma.f32(float {a[i]}, float {b[j]}, float {acc[8 * i + j]})",
                                     "acc")
    return acc


def _epilogue(w: Writer, spec: FmaGemmSpec, acc: list[str], tx: str, ty: str, m0: str, n0: str, m32: str,
              n32: str) -> None:
    """The steps in f32 on each of the thread's 64 elements, then one predicated store each."""
    alpha = "%alpha" if "scale" in spec.epilogue else None
    out_t = gc.OUT[spec.out_dtype]
    row0 = w.v(f"add i32 {m0}, {w.v(f'shl i32 {ty}, 2')}")
    col0 = w.v(f"add i32 {n0}, {w.v(f'shl i32 {tx}, 2')}")
    cols = []
    for j in range(8):
        cj = w.v(f"add i32 {col0}, {j % 4 + 64 * (j // 4)}")
        cols.append((w.v(f"zext i32 {cj} to i64"), w.v(f"icmp ult i32 {cj}, {n32}")))
    for i in range(8):
        r = w.v(f"add i32 {row0}, {i % 4 + 64 * (i // 4)}")
        r_ok = w.v(f"icmp ult i32 {r}, {m32}")
        rbase = w.v(f"mul i64 {w.v(f'zext i32 {r} to i64')}, %N")
        for j, (c64, c_ok) in enumerate(cols):
            idx = w.v(f"add i64 {rbase}, {c64}")
            x = gc.apply(w, spec, acc[8 * i + j], c64, idx, 0, alpha)
            at = w.v(f"getelementptr {out_t}, ptr addrspace(1) %C, i64 {idx}")
            addr = w.v(f"ptrtoint ptr addrspace(1) {at} to i64")
            ok = w.v(f"zext i1 {w.v(f'and i1 {r_ok}, {c_ok}')} to i32")
            if spec.out_dtype == "f32":
                w.asm("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.f32 [$0], $1; }", "l,f,r",
                      [("i64", addr), ("float", x), ("i32", ok)])
            else:
                h = w.v(f"fptrunc float {x} to {out_t}")
                h = w.v(f"bitcast {out_t} {h} to i16")
                w.asm("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b16 [$0], $1; }", "l,h,r",
                      [("i64", addr), ("i16", h), ("i32", ok)])
