"""An emulator of generated NVPTX kernels on the CPU, for checking their numerics without a GPU.

It runs a kernel's LLVM IR as the generator wrote it (before LLVM optimizes it), all threads of a CTA in lock
step (each SSA value a numpy array over the threads; branches must be uniform), one CTA after another, with
the inline PTX the sm_80 GEMM uses (backends/ptx/ampere.py) modelled from the PTX ISA:

    cp.async.cg 16 bytes    the copy lands at the cp.async.wait_group that retires its group, not at issue,
                            so a read of its stage before the wait sees the old bytes; a shared-memory read
                            of bytes a copy in flight will write raises (a pipeline race)
    ldmatrix .x4 (.trans)   lanes 8i..8i+7 address matrix i's rows; lane l gets row l/4, elements 2(l%4),
                            2(l%4)+1 (with .trans: column l/4, rows 2(l%4), 2(l%4)+1)
    mma.sync                m16n8k16 bf16/f16 and m16n8k8 tf32 (the top 19 bits of each f32 word) with fp32
                            accumulators, fragments laid out as the ISA's tables (CUTLASS's SM80 MMA traits
                            say the same); products summed exactly, rounded once to f32
    ld.shared.b32, predicated st.global.b32 / .v2.f32, bar.sync (a no-op in lock step)
    and what the f32 FMA GEMM adds (gemm_fma.py): cp.async.ca of 4 bytes, ld.shared.v4.f32, llvm.fma.f32
    (in float64, then rounded to f32), predicated st.global.f32 / .b16
    and what the sm_80 attention adds (attention_sm80.py): llvm.maxnum.f32, llvm.nvvm.ex2.approx.ftz.f (exact
    exp2, subnormal results flushed), llvm.nvvm.shfl.sync.bfly.f32, two-dimensional grids

Shared memory starts as 0xFF bytes (a NaN in every float format), so reading a byte nobody wrote shows in the
result. Shared-memory reads count bank conflicts (`conflicts`: extra wavefronts, per 8-lane phase for 16-byte
accesses, per warp for 4-byte ones), which is how the swizzles are checked. What it cannot show: anything
LLVM or ptxas do to the kernel, ordering between warps (lock step hides a missing barrier), timing.
Any instruction it does not know raises NotImplementedError.
"""

from __future__ import annotations

import math
import re
import struct

import numpy as np

REGION = 40          # global buffer i lives at addresses (i + 1) << REGION
_ACT = {"relu": lambda x: np.maximum(x, 0), "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "silu": lambda x: x / (1 + np.exp(-x)),
        "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))}


def bf16_bits(x) -> np.ndarray:
    """float32 values as bf16 bit patterns, rounded to nearest even."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    return np.where(np.isnan(x), 0x7FC0, (u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def f32_of(bits, ty: str) -> np.ndarray:
    """The float32 value of 16-bit bf16/f16 patterns, or of f32 words read as tf32."""
    bits = np.asarray(bits)
    if ty == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    if ty == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


class Kernel:
    def __init__(self, llvm_ir: str):
        m = re.search(r"define ptx_kernel void @(\w+)\((.*?)\) \"nvvm", llvm_ir)
        self.name = m.group(1)
        self.params = [p.split()[-1] for p in m.group(2).split(", ")]
        body = llvm_ir[llvm_ir.index("{", m.end()) + 1:]
        self.blocks: dict[str, list[str]] = {}
        cur = None
        for line in body[:body.index("\n}\n")].splitlines():
            line = line.strip()
            if line.endswith(":") and not line.startswith("%"):
                cur = self.blocks.setdefault(line[:-1], [])
            elif line:
                cur.append(line)
        self.conflicts = {"ldmatrix": 0, "ld.shared": 0, "cp.async": 0}

    def launch(self, args: list, grid: tuple, block: tuple, smem_bytes: int) -> None:
        """Runs the kernel on numpy arrays (written in place) and scalars (np.float32 as float, others as
        integers), in parameter order."""
        if grid[2] != 1 or tuple(block[1:]) != (1, 1):
            raise NotImplementedError("one-dimensional blocks and two-dimensional grids only")
        gmem, values = {}, []
        for a in args:
            if isinstance(a, np.ndarray):
                region = len(gmem) + 1
                gmem[region] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                if not np.shares_memory(gmem[region], a):
                    raise ValueError("arrays must be contiguous")
                values.append(region << REGION)
            else:
                values.append(float(a) if isinstance(a, (float, np.floating)) else int(a))
        for y in range(grid[1]):
            for cta in range(grid[0]):
                _CTA(self, block[0], smem_bytes, gmem).run(values, (cta, y), grid[0])


class _CTA:
    def __init__(self, kernel: Kernel, threads: int, smem_bytes: int, gmem: dict):
        self.k, self.T, self.gmem = kernel, threads, gmem
        self.smem = np.full(smem_bytes, 0xFF, np.uint8)
        self.inflight = np.zeros(smem_bytes, np.int32)   # cp.async copies issued into each byte, not retired
        self.open = [[] for _ in range(threads)]         # per thread: copies since its last commit
        self.closed = [[] for _ in range(threads)]       # per thread: committed groups, oldest first
        self.tid = np.arange(threads, dtype=np.int64)

    def run(self, args: list, ctaid: tuple[int, int], nctaid: int) -> None:
        self.env = {p: np.full(self.T, a, np.float32 if isinstance(a, float) else np.int64)
                    for p, a in zip(self.k.params, args)}
        self.env["@tsr_smem"] = np.zeros(self.T, np.int64)
        self.sregs = {"tid.x": self.tid, "ctaid.x": np.full(self.T, ctaid[0], np.int64),
                      "ctaid.y": np.full(self.T, ctaid[1], np.int64),
                      "nctaid.x": np.full(self.T, nctaid, np.int64), "laneid": self.tid % 32}
        prev, label = None, "entry"
        while label is not None:
            prev, label = label, self._block(label, prev)
        if any(self.open) or any(self.closed):
            raise RuntimeError("cp.async copies left in flight at exit")

    # -- control flow and values ------------------------------------------------------------------------
    def _block(self, label: str, prev: str | None) -> str | None:
        lines = self.k.blocks[label]
        phis, i = {}, 0
        while i < len(lines) and " = phi " in lines[i]:
            d, rest = lines[i].split(" = phi ", 1)
            ty, incoming = rest.split(" ", 1)
            for v, b in re.findall(r"\[\s*([^,]+),\s*%([\w.]+)\s*\]", incoming):
                if b == prev:
                    phis[d] = self._val(v, ty)
            i += 1
        self.env.update(phis)   # all of a block's phis read the values from before it
        for line in lines[i:]:
            if line == "ret void":
                return None
            if line.startswith("br "):
                if m := re.match(r"br label %([\w.]+)$", line):
                    return m.group(1)
                m = re.match(r"br i1 (\S+), label %([\w.]+), label %([\w.]+)$", line)
                c = self._val(m.group(1))
                if not (c.all() or not c.any()):
                    raise NotImplementedError("a branch that diverges within the CTA")
                return m.group(2) if c[0] else m.group(3)
            if line.startswith("call void asm"):
                m = re.match(r'call void asm sideeffect "(.*)", "[^"]*"\((.*)\)$', line)
                self._effect(m.group(1), self._args(m.group(2)))
                continue
            d, e = line.split(" = ", 1)
            self.env[d] = self._expr(e)
        raise RuntimeError(f"block {label} has no terminator")

    def _val(self, tok: str, ty: str | None = None):
        tok = tok.strip()
        if tok[0] in "%@":
            return self.env[tok]
        if tok == "poison":
            return None
        if tok in ("true", "false"):
            return np.full(self.T, tok == "true")
        if ty == "float":   # LLVM writes exact and special values as the hex of a double
            return np.full(self.T, struct.unpack("<d", struct.pack("<Q", int(tok, 16)))[0] if tok.startswith("0x")
                           else float(tok), np.float32)
        return np.full(self.T, int(tok), np.int64)

    def _args(self, s: str) -> list:
        return [self._val(v, ty) for ty, v in (a.rsplit(" ", 1) for a in s.split(", "))] if s else []

    def _expr(self, e: str):
        if m := re.match(r"(add|sub|mul|udiv|urem|and|or|xor|shl|lshr) (i1|i32|i64) ([^,]+), (.+)$", e):
            op, ty, a, b = m.group(1), m.group(2), self._val(m.group(3)), self._val(m.group(4))
            if ty == "i1":
                return {"and": a & b, "or": a | b, "xor": a ^ b}[op]
            r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "udiv": np.floor_divide,
                 "urem": np.remainder, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
                 "shl": np.left_shift, "lshr": np.right_shift}[op](a, b)
            return r & 0xFFFFFFFF if ty == "i32" else r   # i32 values are kept unsigned
        if m := re.match(r"icmp (\w+) i(?:32|64) ([^,]+), (.+)$", e):
            a, b = self._val(m.group(2)), self._val(m.group(3))
            return {"ult": a < b, "ugt": a > b, "ule": a <= b, "uge": a >= b, "eq": a == b, "ne": a != b}[m.group(1)]
        if m := re.match(r"select i1 ([^,]+), (\w+) ([^,]+), \w+ (.+)$", e):
            ty = m.group(2)
            return np.where(self._val(m.group(1)), self._val(m.group(3), ty), self._val(m.group(4), ty))
        if m := re.match(r"zext i(?:1|32) (\S+) to i(?:32|64)$", e):
            return self._val(m.group(1)).astype(np.int64)
        if m := re.match(r"trunc i64 (\S+) to i32$", e):
            return self._val(m.group(1)) & 0xFFFFFFFF
        if m := re.match(r"ptrtoint ptr addrspace\([13]\) (\S+) to i(?:32|64)$", e):
            return self._val(m.group(1))
        if m := re.match(r"getelementptr (\w+), ptr addrspace\(1\) (\S+), i64 (\S+)$", e):
            size = {"i8": 1, "i16": 2, "bfloat": 2, "half": 2, "float": 4}[m.group(1)]
            return self._val(m.group(2)) + self._val(m.group(3)) * size
        if m := re.match(r"call i32 @llvm\.nvvm\.read\.ptx\.sreg\.(\S+)\(\)$", e):
            return self.sregs[m.group(1)]
        if m := re.match(r"extractvalue \{[^}]*\} (\S+), (\d+)$", e):
            return self._val(m.group(1))[int(m.group(2))]
        if m := re.match(r"(fadd|fmul|fsub|fdiv) float (\S+), (\S+)$", e):
            a, b = self._val(m.group(2), "float"), self._val(m.group(3), "float")
            with np.errstate(divide="ignore", invalid="ignore"):
                return {"fadd": np.add, "fmul": np.multiply, "fsub": np.subtract,
                        "fdiv": np.divide}[m.group(1)](a, b).astype(np.float32)
        if m := re.match(r"fneg float (\S+)$", e):
            return -self._val(m.group(1), "float")
        if m := re.match(r"fcmp (one|oeq|olt|ogt) float (\S+), (\S+)$", e):
            a, b = self._val(m.group(2), "float"), self._val(m.group(3), "float")
            return {"one": np.not_equal, "oeq": np.equal, "olt": np.less, "ogt": np.greater}[m.group(1)](a, b) \
                & ~np.isnan(a) & ~np.isnan(b)
        if m := re.match(r"call float @llvm\.maxnum\.f32\(float (\S+), float (\S+)\)$", e):
            return np.fmax(self._val(m.group(1), "float"), self._val(m.group(2), "float"))
        if m := re.match(r"call float @llvm\.nvvm\.ex2\.approx\.ftz\.f\(float (\S+)\)$", e):
            y = np.exp2(self._val(m.group(1), "float").astype(np.float64))
            return np.where(y < 2.0 ** -126, 0, y).astype(np.float32)    # ftz: subnormal results flush to 0
        if m := re.match(r"call float @llvm\.nvvm\.shfl\.sync\.bfly\.f32\(i32 -1, float (\S+), i32 (\d+), "
                         r"i32 31\)$", e):
            return self._val(m.group(1), "float")[self.tid ^ int(m.group(2))]
        if m := re.match(r"load (float|bfloat|half), ptr addrspace\(1\) (\S+)$", e):
            ty = m.group(1)
            raw = self._gload(self._val(m.group(2)), 4 if ty == "float" else 2)
            if ty == "float":
                return raw.view(np.float32).reshape(-1)
            return f32_of(raw.view(np.uint16).reshape(-1), "bf16" if ty == "bfloat" else "f16")
        if m := re.match(r"fpext (?:bfloat|half) (\S+) to float$", e):
            return self._val(m.group(1))      # 16-bit values are held as their float32 values
        if m := re.match(r"insertelement <2 x float> (\S+), float (\S+), i32 ([01])$", e):
            v = list(self._val(m.group(1)) or [None, None])
            v[int(m.group(3))] = self._val(m.group(2), "float")
            return v
        if m := re.match(r"fptrunc <2 x float> (\S+) to <2 x (bfloat|half)>$", e):
            v = self._val(m.group(1))
            if m.group(2) == "bfloat":
                return [bf16_bits(x) for x in v]
            return [np.asarray(x, np.float32).astype(np.float16).view(np.uint16) for x in v]
        if m := re.match(r"bitcast <2 x (?:bfloat|half)> (\S+) to i32$", e):
            lo, hi = self._val(m.group(1))
            return lo.astype(np.int64) | (hi.astype(np.int64) << 16)
        if m := re.match(r"call float @llvm\.fma\.f32\(float (\S+), float (\S+), float (\S+)\)$", e):
            # the product is exact in float64; the sum rounds there and again to f32 (a double rounding fma
            # avoids: off by an ulp at most, and rarely)
            a, b, c = (self._val(m.group(i), "float").astype(np.float64) for i in (1, 2, 3))
            return (a * b + c).astype(np.float32)
        if m := re.match(r"fptrunc float (\S+) to (bfloat|half)$", e):
            x = self._val(m.group(1), "float")
            return bf16_bits(x) if m.group(2) == "bfloat" else np.asarray(x, np.float32).astype(np.float16).view(np.uint16)
        if m := re.match(r"bitcast (?:bfloat|half) (\S+) to i16$", e):
            return self._val(m.group(1)).astype(np.int64)
        if m := re.match(r"call float @tsr_act_(\w+)\(float (\S+)\)$", e):
            return _ACT[m.group(1)](self._val(m.group(2), "float").astype(np.float64)).astype(np.float32)
        if m := re.match(r'call (?:\{[^}]*\}|i32) asm sideeffect "(.*)", "[^"]*"\((.*)\)$', e):
            return self._result(m.group(1), self._args(m.group(2)))
        raise NotImplementedError(e)

    # -- memory ----------------------------------------------------------------------------------------
    def _region(self, addr):
        r = addr >> REGION
        if ((r < 1) | (r > len(self.gmem))).any():
            raise RuntimeError("a global access outside every buffer")
        return r

    def _gload(self, addr, n: int) -> np.ndarray:
        out = np.zeros((self.T, n), np.uint8)
        regions = self._region(addr)
        for r in np.unique(regions):
            sel = regions == r
            off, buf = addr[sel] - (int(r) << REGION), self.gmem[int(r)]
            if (off < 0).any() or (off + n > len(buf)).any():
                raise RuntimeError(f"global read outside buffer {r}")
            out[sel] = buf[off[:, None] + np.arange(n)]
        return out

    def _gstore(self, addr, data: np.ndarray, on) -> None:
        n = data.shape[1]
        if not on.any():
            return
        regions = self._region(np.where(on, addr, 1 << REGION))
        for r in np.unique(regions[on]):
            sel = on & (regions == r)
            off, buf = addr[sel] - (int(r) << REGION), self.gmem[int(r)]
            if (off < 0).any() or (off + n > len(buf)).any() or (off % n).any():
                raise RuntimeError(f"misaligned or out-of-bounds store to buffer {r}")
            buf[off[:, None] + np.arange(n)] = data[sel]

    def _sread(self, addr, n: int) -> np.ndarray:
        at = addr[:, None] + np.arange(n)
        if (addr % n).any() or (addr < 0).any() or (addr + n > len(self.smem)).any():
            raise RuntimeError("misaligned or out-of-bounds shared read")
        if self.inflight[at].any():
            raise RuntimeError("shared read of bytes a cp.async in flight writes (a pipeline race)")
        return self.smem[at]

    def _count_conflicts(self, kind: str, addr, lanes: int, width: int) -> None:
        """Extra wavefronts: per phase of `lanes` lanes, the most distinct 4-byte words one bank serves, - 1."""
        extra = 0
        for p in range(0, self.T, lanes):
            banks: dict[int, set] = {}
            for a in addr[p:p + lanes]:
                for word in range(int(a) // 4, (int(a) + width) // 4):
                    banks.setdefault(word % 32, set()).add(word)
            extra += max(len(v) for v in banks.values()) - 1
        self.k.conflicts[kind] += extra

    # -- inline PTX ------------------------------------------------------------------------------------
    def _effect(self, text: str, args: list) -> None:
        if m := re.search(r"cp\.async\.(?:cg|ca)\.shared\.global \[\$0\], \[\$1\], (4|16), \$2;", text):
            size = int(m.group(1))
            dst, src, nbytes, issue = args
            on = issue != 0
            if (dst % size).any() or ((src % size != 0) & on & (nbytes > 0)).any() or \
                    not np.isin(nbytes, (0, size)).all():
                raise RuntimeError(f"cp.async: misaligned, or a src-size other than 0 or {size}")
            self._count_conflicts("cp.async", dst, 8 if size == 16 else 32, size)
            for t in np.nonzero(on)[0]:
                self.open[t].append((int(dst[t]), int(src[t]), int(nbytes[t]), size))
                self.inflight[int(dst[t]):int(dst[t]) + size] += 1
        elif text == "cp.async.commit_group;":
            for t in range(self.T):
                self.closed[t].append(self.open[t])
                self.open[t] = []
        elif m := re.fullmatch(r"cp\.async\.wait_group (\d+);", text):
            for t in range(self.T):
                while len(self.closed[t]) > int(m.group(1)):
                    for dst, src, nb, size in self.closed[t].pop(0):
                        data = np.zeros(size, np.uint8)
                        if nb:
                            r = int(self._region(np.array([src]))[0])
                            off = src - (r << REGION)
                            if off + nb > len(self.gmem[r]):
                                raise RuntimeError(f"cp.async read outside buffer {r}")
                            data[:nb] = self.gmem[r][off:off + nb]
                        self.smem[dst:dst + size] = data
                        self.inflight[dst:dst + size] -= 1
        elif text == "bar.sync 0;":
            pass
        elif text == "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p st.global.v2.f32 [$0], {$1, $2}; }":
            addr, x, y, ok = args
            self._gstore(addr, np.stack([x, y], 1).astype(np.float32).view(np.uint8), ok != 0)
        elif text == "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.f32 [$0], $1; }":
            addr, v, ok = args
            self._gstore(addr, np.asarray(v, np.float32).view(np.uint8).reshape(self.T, 4), ok != 0)
        elif text == "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b16 [$0], $1; }":
            addr, v, ok = args
            self._gstore(addr, (v & 0xFFFF).astype(np.uint16).view(np.uint8).reshape(self.T, 2), ok != 0)
        elif text == "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.b32 [$0], $1; }":
            addr, v, ok = args
            self._gstore(addr, (v & 0xFFFFFFFF).astype(np.uint32).view(np.uint8).reshape(self.T, 4), ok != 0)
        else:
            raise NotImplementedError(text)

    def _result(self, text: str, args: list):
        lane = np.arange(32)
        g, t = lane // 4, lane % 4
        if m := re.fullmatch(r"ldmatrix\.sync\.aligned\.m8n8\.x4(\.trans)?\.shared\.b16 "
                             r"\{\$0, \$1, \$2, \$3\}, \[\$4\];", text):
            (addr,) = args
            self._count_conflicts("ldmatrix", addr, 8, 16)
            rows = self._sread(addr, 16).view(np.uint16)          # [thread, 8]: the row each lane addresses
            regs = [np.zeros(self.T, np.int64) for _ in range(4)]
            for w in range(0, self.T, 32):
                for j in range(4):
                    mat = rows[w + 8 * j: w + 8 * j + 8]            # [row, column]
                    if m.group(1):
                        lo, hi = mat[2 * t, g], mat[2 * t + 1, g]
                    else:
                        lo, hi = mat[g, 2 * t], mat[g, 2 * t + 1]
                    regs[j][w:w + 32] = lo.astype(np.int64) | (hi.astype(np.int64) << 16)
            return tuple(regs)
        if text == "ld.shared.v4.f32 {$0, $1, $2, $3}, [$4];":
            (addr,) = args
            self._count_conflicts("ld.shared", addr, 8, 16)
            v = self._sread(addr, 16).view(np.float32)
            return tuple(v[:, i].copy() for i in range(4))
        if text == "ld.shared.b32 $0, [$1];":
            (addr,) = args
            self._count_conflicts("ld.shared", addr, 32, 4)
            return self._sread(addr, 4).view(np.uint32).reshape(-1).astype(np.int64)
        if m := re.fullmatch(r"mma\.sync\.aligned\.(m16n8k16|m16n8k8)\.row\.col\.f32\.(bf16|f16|tf32)\.\2\.f32 "
                             r"\{\$0, \$1, \$2, \$3\}, \{\$4, \$5, \$6, \$7\}, \{\$8, \$9\}, \{\$0, \$1, \$2, \$3\};",
                             text):
            shape, ty = m.groups()
            if (shape == "m16n8k8") != (ty == "tf32"):
                raise NotImplementedError(text)
            W = self.T // 32
            a, b, c = ([x.reshape(W, 32) for x in args[i:j]] for i, j in ((0, 4), (4, 6), (6, 10)))
            if ty == "tf32":
                A, B = np.zeros((W, 16, 8)), np.zeros((W, 8, 8))
                A[:, g, t], A[:, g + 8, t], A[:, g, t + 4], A[:, g + 8, t + 4] = (f32_of(x, ty) for x in a)
                B[:, t, g], B[:, t + 4, g] = (f32_of(x, ty) for x in b)
            else:
                A, B = np.zeros((W, 16, 16)), np.zeros((W, 16, 8))
                for r, (dr, dk) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
                    A[:, g + dr, 2 * t + dk] = f32_of(a[r] & 0xFFFF, ty)
                    A[:, g + dr, 2 * t + dk + 1] = f32_of(a[r] >> 16, ty)
                for r, dk in enumerate((0, 8)):
                    B[:, 2 * t + dk, g] = f32_of(b[r] & 0xFFFF, ty)
                    B[:, 2 * t + dk + 1, g] = f32_of(b[r] >> 16, ty)
            C = np.zeros((W, 16, 8))
            C[:, g, 2 * t], C[:, g, 2 * t + 1], C[:, g + 8, 2 * t], C[:, g + 8, 2 * t + 1] = c
            D = (A @ B + C).astype(np.float32)
            return tuple(D[:, g + dr, 2 * t + dc].reshape(-1) for dr, dc in ((0, 0), (0, 1), (8, 0), (8, 1)))
        raise NotImplementedError(text)
