"""Fast GEMM for the CPU backend: C = epilogue(A·B), packed and register-blocked, a tile of C per block.

The generator writes a tile kernel directly in the per-block form every CPU kernel has after
``simt_to_warps`` (docs/image-format.md, "The CPU code section")::

    func.func @name(%A: memref<?x?xf32>, %B, %C, <epilogue parameters>,
                    %bid_x, %bid_y, %bid_z, %bdim_x, %bdim_y, %bdim_z, %gdim_x, %gdim_y, %gdim_z: index)
        attributes {tessera.kernel, tessera.tile_kernel}

Block (bid_x, bid_y) computes the MB×NC tile of C at rows bid_y·MB, columns bid_x·NC (`gemm_grid`), the
runtime running blocks in parallel on its thread pool. The loop nest is the BLIS one, per block::

    for k0 in 0, KC, 2·KC, …  (at least once, so K = 0 still writes epilogue(0))
        pack B[k0:k0+KC, j0:j0+NC] into NR-column strips, k-major: strip[k][c]   (one strip stays in L1)
        for i0 in the block's rows, MC at a time:
            pack A[i0:i0+MC, k0:k0+KC] into MR-row strips, k-major: strip[k][r]  (the A block stays in L2)
            for each NR strip of B, for each MR strip of A:
                prefetch the C tile
                acc[MR][NR] = Σ_k broadcast(a[k][r]) · b[k][:]                   (MR·NR/VW vector FMAs)
                not the first chunk: acc += C tile
                C tile = epilogue(acc) on the last chunk, else acc

With `stages` ≥ 2 the packed B panel is multi-buffered: `stages` panels rotate, chunk k0 computes from
panel (k0/KC) mod stages while the panel `stages`-1 chunks ahead is packed into another one, in bursts
before each micro-kernel (`_PanelCopy`), each burst prefetching the lines of the next. A CPU has no copy
engine to run ahead (a GPU's cp.async/TMA): overlapping copies with compute means putting them in the
compute's instruction stream. What the bursts do not reach (the partial strip, a remainder) is packed after
the chunk. On Zen 3 this measured no faster than one panel (docs/performance.md); `choose_schedule` keeps 1.

Packing zero-pads the edge strips, so the micro-kernel always runs a full MR×NR tile; only the C tile's
loads and stores are masked at the matrix edges. Inputs narrower than f32 (f16, bf16; one-byte fp8, e4m3 and
e5m2, each operand its own format, whose bytes passes/fp8_convert.py widens exactly, vectors at a time) are
widened while packing: the micro-kernel and the epilogue are always f32.

An operand may be stored transposed (`trans_a`: A given as Aᵀ[K, M]; `trans_b`: B as Bᵀ[N, K]; the Graph
IR's `tessera.transpose_a/_b`): packing reads it in that layout, so the transpose costs no copy kernel, and
the packed strips and the micro-kernel are the same. Aᵀ is read along its rows (a strip's MR values of one
k are adjacent); Bᵀ strip by strip, each of the strip's NR rows of Bᵀ streaming along k, as A is packed.

The blocking and the register tile are the schedule's (gemm_schedule.py, the cost model).

No bounds checks (simt_to_warps checks SIMT kernels' accesses; this kernel never goes through it): every
index is a tile origin plus an offset that its loop bounds by the extents M, N, K read from A and B, and C and
the epilogue tensors share those extents by name (one dimension argument each, so the entry builds every
descriptor from the same values, and the runtime checks the buffers against them at launch). A block past
the matrix (a grid larger than `gemm_grid`'s) does nothing: `_Body.emit` guards it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...mlir import arith, func, ir, memref, scf, vector
from ...passes import vmath
from .gemm_schedule import Schedule, ceil_div, choose_schedule
from .irbuild import (LAUNCH_ARGS, add, elem_type, f32, idx, lt, mul, scf_for, smin, sub, transpose_vectors,
                      zeros)
from .target import cache_sizes, host, worker_threads

# Epilogue steps, applied in order to the f32 accumulator before the single store. Steps with a parameter
# add it to the kernel's signature after C, in step order: (name, dims) for tensors, (name, None) for a scalar.
# "scale_by" multiplies by a one-element f32 tensor read at run time (a 0-d learning rate, passed as [1] like
# generated kernels take 0-d tensors); "sub_from" is minuend − acc: the two make W − lr·(A·B), an SGD update
# fused into the GEMM that computes the gradient. "gelu_grad" and "gelu_tanh_grad" multiply by the GELU's
# derivative at a tensor Z of C's extents: dZ = (dH·W2ᵀ) ∘ gelu'(Z), a backward's cotangent through the GELU,
# without a pass that reads dH and Z back.
_STEP_PARAMS = {"scale": ("alpha", None), "scale_by": ("factor", ("ONE",)), "bias": ("bias", ("N",)),
                "add": ("residual", ("M", "N")), "sub_from": ("minuend", ("M", "N")),
                "gelu_grad": ("z", ("M", "N")), "gelu_tanh_grad": ("z_tanh", ("M", "N"))}
_ACTIVATIONS = {
    "relu": lambda v: arith.MaximumFOp(v, zeros(v.type)).result,
    "gelu": vmath.gelu, "gelu_tanh": vmath.gelu_tanh, "silu": vmath.silu, "sigmoid": vmath.sigmoid,
    "tanh": vmath.tanh,
}
_DERIVATIVES = {"gelu_grad": vmath.gelu_grad, "gelu_tanh_grad": vmath.gelu_tanh_grad}
EPILOGUE_STEPS = ("scale", "scale_by", "bias", *_ACTIVATIONS, "add", "sub_from", *_DERIVATIVES)
INPUT_DTYPES = ("f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2")
FP8 = {"fp8_e4m3": ir.Float8E4M3FNType, "fp8_e5m2": ir.Float8E5M2Type}   # stored as bytes (i8 memrefs)
# Packing by register transposes (_transpose_rows) asks for each row's line this many elements ahead along k:
# the rows are far apart (4 KiB at K = 1024: one L1 set), so the hardware prefetcher does not bring them, and
# each group of row loads waited on L3 or memory. Measured on a Zen 5 EPYC at 1024³, one thread: A·B 4% less
# CPU time (the pack of A had cost 6-7%); 64, 128 and 256 within noise of each other.
PACK_PREFETCH = 256
PANEL_PAD = 16   # f32 elements between the strips of a packed B panel (see _Body)
# Row counts of the micro-kernels that run a strip of fewer than MR rows (the 16-lane tile, one B panel):
# with MR 14, 1024 rows end in a strip of 2, 2048 in one of 4, 512 in one of 8, whose full-height micro-kernel
# did 12, 10 and 6 rows of zeros' FMAs.
EDGE_ROWS = (2, 4, 8)
# Streaming (non-temporal) stores of C: where C is written once (one K chunk, no epilogue that reads C back),
# its rows start on a cache line (an aligned buffer, as the runtime allocates them, and a row length that is a
# multiple of the vector) and it is at least NT_MIN_BYTES, the 16-lane tile's whole-tile stores bypass the
# caches, so the store does not read each line of C from memory first. Measured on a 2-core Zen 5 EPYC, two
# threads, process CPU time against the plain stores in one process: A·B 1024³ 1.3-3.5% less (six runs), the
# graph MLPs (H written so, then read by the second GEMM) 512×512×2048 9.45 against 9.74 ms, 512×1024×4096
# 36.8 against 37.3. C is then not in the caches for its consumer, hence the floor (about this machine's L2s).
# Streaming stores are weakly ordered; a block's are visible to other threads once its worker takes the pool's
# lock to leave the job (a locked instruction drains the write-combining buffers, on Intel and AMD alike), before
# the caller is told the launch is done; the caller's own blocks it sees in program order.
NT_STORES = True
NT_MIN_BYTES = 2 << 20
# A read in place (not packed) by the 16-lane tile's micro-kernels, where A is f32, stored untransposed, and
# its rows are at most DIRECT_A bytes apart (0: always packed), in micro-kernels of DIRECT_MR rows over blocks
# of DIRECT_MC rows (see _Body._block). Packing A cost its first read from memory plus a copy, and on two
# threads each block of a 1×2 grid packs all of A. Eight rows: A's rows 4 KiB apart (K = 1024) map to one L1
# set, and 14 of them (the packed tile's MR) are more than its 12 ways hold.
# Only in kernels whose blocks are at most DIRECT_NC columns wide: packing A costs a block in proportion to its
# rows, the 8-row micro-kernels (which read the B micro-panel once per 8 rows, not 14) in proportion to its
# columns too. Measured on a 2-core Zen 5 EPYC, process CPU time, two threads: 512^3 (256-column blocks) and
# 1024^3 (512) 3-5% less in place, A·B and A·Bᵀ; 512×2048×512 (1024) the same within noise; 512×4096×1024
# (2048) 1-3% more.
DIRECT_A = 4096
DIRECT_MR = 8
DIRECT_MC = 128
DIRECT_NC = 512


@dataclass(frozen=True)
class GemmSpec:
    """C[M,N] = epilogue(A[M,K] · B[K,N]); `schedule` None picks the cost model's for a mid-size problem on
    this machine (its worker threads and caches as the CPU backend's options default to them)."""

    name: str
    dtype: str = "f32"                     # of A and B; C and the arithmetic are f32
    b_dtype: str = ""                      # B's, where it differs (fp8: e4m3 by e5m2)
    epilogue: tuple = ()                   # steps such as ("bias",), ("gelu",), applied in order
    schedule: Schedule | None = None
    trans_a: bool = False                  # A is stored as Aᵀ[K, M]
    trans_b: bool = False                  # B is stored as Bᵀ[N, K]

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"GEMM kernel name '{self.name}' is not an identifier")
        for dt in (self.dtype, self.b_dtype or self.dtype):
            if dt not in INPUT_DTYPES:
                raise ValueError(f"GEMM input dtype '{dt}' is not one of {', '.join(INPUT_DTYPES)}")
        if (self.b_dtype or self.dtype) != self.dtype and not {self.dtype, self.b_dtype} <= set(FP8):
            raise ValueError(f"GEMM operands of two dtypes are fp8 formats only, not {self.dtype} and {self.b_dtype}")
        steps = tuple((s,) if isinstance(s, str) else tuple(s) for s in self.epilogue)
        for s in steps:
            if len(s) != 1 or s[0] not in EPILOGUE_STEPS:
                raise ValueError(f"unknown epilogue step {s!r} (steps: {', '.join(EPILOGUE_STEPS)})")
        with_param = [s[0] for s in steps if s[0] in _STEP_PARAMS]
        if len(set(with_param)) != len(with_param):
            raise ValueError(f"epilogue steps with a parameter may appear once each, got {with_param}")
        object.__setattr__(self, "epilogue", steps)
        if self.schedule is None:
            object.__setattr__(self, "schedule", choose_schedule(1024, 1024, 1024, host(), worker_threads(),
                                                                 cache_sizes()))

    @property
    def extra_params(self) -> list[tuple[str, tuple | None]]:
        return [_STEP_PARAMS[s[0]] for s in self.epilogue if s[0] in _STEP_PARAMS]


def gemm_grid(spec: GemmSpec, M: int, N: int) -> tuple[int, int, int]:
    """The launch grid: x over the N tiles, y over the M tiles (at least one block each way)."""
    s = spec.schedule
    return max(1, ceil_div(N, s.nc)), max(1, ceil_div(M, s.mb)), 1


def operand_dims(spec: GemmSpec) -> tuple[tuple, tuple]:
    """The dimension names of A and B as stored: (M, K) and (K, N), each swapped where it is transposed."""
    return ("K", "M") if spec.trans_a else ("M", "K"), ("N", "K") if spec.trans_b else ("K", "N")


def _transposed(spec: GemmSpec) -> str:
    """The operands stored transposed, as recorded on the kernel: "", "A", "B" or "A,B"."""
    return ",".join(x for x, t in (("A", spec.trans_a), ("B", spec.trans_b)) if t)


# -- the kernel ---------------------------------------------------------------------------------------------

def build_gemm(module: ir.Module, spec: GemmSpec) -> func.FuncOp:
    """Appends the kernel `spec` to `module` (in the module's context, under a location) and returns it."""
    s = spec.schedule
    matrix = lambda t: ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * 2, t)  # noqa: E731
    params = [("A", matrix(_storage(spec.dtype)), operand_dims(spec)[0]),
              ("B", matrix(_storage(spec.b_dtype or spec.dtype)), operand_dims(spec)[1]),
              ("C", matrix(f32()), ("M", "N"))]
    for name, dims in spec.extra_params:
        if dims is None:
            params.append((name, f32(), None))
        else:
            params.append((name, ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * len(dims), f32()), dims))
    index = ir.IndexType.get()
    ftype = ir.FunctionType.get([t for _, t, _ in params] + [index] * len(LAUNCH_ARGS), [])
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(spec.name, ftype)
    fn.attributes["tessera.kernel"] = ir.UnitAttr.get()
    fn.attributes["tessera.tile_kernel"] = ir.UnitAttr.get()
    i64 = ir.IntegerType.get_signless(64)
    fn.attributes["tessera.gemm"] = ir.DictAttr.get({
        "block": ir.DenseI64ArrayAttr.get([s.mb, s.nc]), "cache_blocks": ir.DenseI64ArrayAttr.get([s.mc, s.kc]),
        "micro_tile": ir.DenseI64ArrayAttr.get([s.mr, s.nr]),
        "vector_width": ir.IntegerAttr.get(i64, s.vector_width), "stages": ir.IntegerAttr.get(i64, s.stages),
        "epilogue": ir.ArrayAttr.get([ir.StringAttr.get(st[0]) for st in spec.epilogue]),
        **({"transposed": ir.StringAttr.get(_transposed(spec))} if _transposed(spec) else {})})
    attrs = []
    for name, _, dims in params:
        d = {"tessera.name": ir.StringAttr.get(name)}
        if dims is not None:
            d["tessera.dims"] = ir.ArrayAttr.get([ir.StringAttr.get(x) for x in dims])
        dt = {"A": spec.dtype, "B": spec.b_dtype or spec.dtype}.get(name)
        if dt in FP8:   # an i8 memref holding fp8 bytes: the signature says which format
            d["tessera.dtype"] = ir.StringAttr.get(dt)
        attrs.append(ir.DictAttr.get(d))
    fn.arg_attrs = ir.ArrayAttr.get(attrs + [ir.DictAttr.get({})] * len(LAUNCH_ARGS))
    entry = fn.add_entry_block()
    args = list(entry.arguments)
    with ir.InsertionPoint(entry):
        _Body(spec, dict(zip([p[0] for p in params], args)), dict(zip(LAUNCH_ARGS, args[len(params):]))).emit()
        func.ReturnOp([])
    return fn


def _storage(dtype: str) -> ir.Type:
    """The memref element type of an operand of `dtype`: fp8 tensors are their bytes."""
    return ir.IntegerType.get_signless(8) if dtype in FP8 else elem_type(dtype)


def _zeros(t: ir.VectorType) -> ir.Value:
    """A vector of zero elements, fp8 bytes (0x00, +0.0) or floats."""
    if isinstance(t.element_type, ir.IntegerType):
        return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(t.element_type, 0))).result
    return zeros(t)


class _Body:
    """The body of one kernel; `emit` writes it at the current insertion point."""

    def __init__(self, spec: GemmSpec, params: dict, launch: dict):
        self.spec = spec
        self.s = spec.schedule
        self.p = params
        self.launch = launch
        self.vw = self.s.vector_width
        self.vtype = ir.VectorType.get([self.vw], f32())
        self.dtypes = {"A": spec.dtype, "B": spec.b_dtype or spec.dtype}
        self.nt_ok = None   # streaming stores of C (NT_STORES), decided at the block's start
        self.direct_ok = None   # A read in place by the micro-kernels (DIRECT_A), decided at the block's start
        self.direct_k0 = None   # while emitting that branch: the chunk's first k
        # Multi-buffered, the strips of a packed B panel are a cache line more than NR·KC floats apart: at
        # NR·KC·4 bytes (a power of two) the same row of every strip maps to one L1 set, and a burst packing
        # a row across the strips would evict the micro-panel the micro-kernel is reading. Packed between
        # chunks, the padding measured 1-2% slower on Zen 3 (AVX2): left out there. With the 16-lane tile
        # (KC up to 1024: strips 128 KiB apart, one set of L2 as well as of L1) it is in: A·B and A·Bᵀ at
        # 1024³ took 2-3% less CPU time on a Zen 5 EPYC (two runs each; 512³ the same).
        padded = self.s.stages > 1 or self.vw >= 16
        self.strip_stride = self.s.nr * self.s.kc + (PANEL_PAD if padded else 0)
        self.panel_size = self.s.nc // self.s.nr * self.strip_stride

    # -- the block ----------------------------------------------------------------------------------------
    def emit(self) -> None:
        s, p = self.s, self.p
        ta, tb = self.spec.trans_a, self.spec.trans_b
        self.M = memref.DimOp(p["A"], idx(1 if ta else 0)).result
        self.K = memref.DimOp(p["A"], idx(0 if ta else 1)).result
        self.N = memref.DimOp(p["B"], idx(0 if tb else 1)).result
        i0 = mul(self.launch["bid_y"], s.mb)
        j0 = mul(self.launch["bid_x"], s.nc)
        # A grid larger than gemm_grid's has blocks past the matrix: they do nothing.
        inside = arith.AndIOp(lt(i0, self.M), lt(j0, self.N)).result
        guard = scf.IfOp(inside)
        with ir.InsertionPoint(guard.then_block):
            self._block(i0, j0)
            scf.YieldOp([])

    def _block(self, i0, j0) -> None:
        s = self.s
        mb = smin(s.mb, sub(self.M, i0))
        nc = smin(s.nc, sub(self.N, j0))
        if NT_STORES and self.vw >= 16 and not any(st[0] in _DERIVATIVES for st in self.spec.epilogue):
            # C's rows start on a 64-byte boundary: its base aligned and its row stride a multiple of the vector.
            C = self.p["C"]
            base = memref.ExtractAlignedPointerAsIndexOp(C).result
            meta = memref.ExtractStridedMetadataOp(C)
            start = add(base, mul(meta.offset, 4))
            aligned = arith.CmpIOp(arith.CmpIPredicate.eq, arith.RemUIOp(start, idx(self.vw * 4)).result, idx(0)).result
            rows_ok = arith.CmpIOp(arith.CmpIPredicate.eq, arith.RemUIOp(meta.strides[0], idx(self.vw)).result, idx(0)).result
            big = arith.CmpIOp(arith.CmpIPredicate.sge, mul(mul(self.M, self.N), 4), idx(NT_MIN_BYTES)).result
            one_chunk = arith.CmpIOp(arith.CmpIPredicate.sle, self.K, idx(s.kc)).result
            self.nt_ok = arith.AndIOp(arith.AndIOp(aligned, rows_ok).result,
                                      arith.AndIOp(big, one_chunk).result).result
        if (DIRECT_A and self.vw >= 16 and s.stages == 1 and s.nc <= DIRECT_NC and not self.spec.trans_a
                and self.dtypes["A"] == "f32"):
            # A's rows at most DIRECT_A bytes apart (its row stride, as stored).
            row_bytes = mul(memref.ExtractStridedMetadataOp(self.p["A"]).strides[0], 4)
            self.direct_ok = arith.CmpIOp(arith.CmpIPredicate.sle, row_bytes, idx(DIRECT_A)).result
        # Scratch on the heap: workers have 8 MiB stacks, and these are hundreds of KiB.
        # 64-byte alignment: every packed vector load then stays within one cache line.
        packed_a = memref.AllocOp(ir.MemRefType.get([s.mc * s.kc], f32()), [], [], alignment=64).result
        packed_b = memref.AllocOp(ir.MemRefType.get([s.stages * self.panel_size], f32()), [], [],
                                  alignment=64).result
        if "scale" in (st[0] for st in self.spec.epilogue):
            self.alpha = vector.BroadcastOp(self.vtype, self.p["alpha"]).result
        if "scale_by" in (st[0] for st in self.spec.epilogue):
            self.factor = vector.BroadcastOp(self.vtype, memref.LoadOp(self.p["factor"], [idx(0)]).result).result
        chunks = arith.MaxSIOp(arith.CeilDivSIOp(self.K, idx(s.kc)).result, idx(1)).result
        panel = lambda chunk: mul(arith.RemSIOp(idx(chunk), idx(s.stages)).result, self.panel_size)  # noqa: E731
        k_of = lambda chunk: smin(s.kc, sub(self.K, mul(chunk, s.kc)))  # noqa: E731
        for c in range(s.stages - 1):   # the panels packed before the first chunk runs
            ahead = scf.IfOp(lt(c, chunks))
            with ir.InsertionPoint(ahead.then_block):
                self._pack_b(packed_b, panel(c), j0, nc, mul(c, s.kc), k_of(c))
                scf.YieldOp([])
        kloop = scf_for(0, chunks)
        with ir.InsertionPoint(kloop.body):
            kb = kloop.induction_variable
            k0 = mul(kb, s.kc)
            kc = smin(s.kc, sub(self.K, k0))
            first = arith.CmpIOp(arith.CmpIPredicate.eq, kb, idx(0)).result
            last = arith.CmpIOp(arith.CmpIPredicate.eq, kb, sub(chunks, 1)).result
            job = None
            if s.stages == 1:
                # One packed B panel serves every A block of the block: B is packed mb/MC times less often.
                self._pack_b(packed_b, idx(0), j0, nc, k0, kc)
            elif self.spec.trans_b:
                # Bᵀ is packed strip by strip, not in the row-major units _PanelCopy spreads over the
                # micro-kernels: the panel `stages`-1 chunks ahead is packed whole, before this chunk's.
                ahead = add(kb, s.stages - 1)
                later = scf.IfOp(lt(ahead, chunks))
                with ir.InsertionPoint(later.then_block):
                    self._pack_b(packed_b, panel(ahead), j0, nc, mul(ahead, s.kc), k_of(ahead))
                    scf.YieldOp([])
            else:
                ahead = add(kb, s.stages - 1)
                has_next = lt(ahead, chunks)
                rows = arith.SelectOp(has_next, k_of(ahead), idx(0)).result
                tiles = mul(arith.CeilDivSIOp(mb, idx(s.mr)).result, arith.CeilDivSIOp(nc, idx(s.nr)).result)
                job = _PanelCopy(self, packed_b, panel(ahead), j0, nc, mul(ahead, s.kc), rows, tiles)
            state = job.start() if job else []
            b_base = panel(kb)

            def sweep(ia, mc, state):
                jloop = scf_for(0, arith.CeilDivSIOp(nc, idx(s.nr)).result, 1, state)
                with ir.InsertionPoint(jloop.body):
                    jt = jloop.induction_variable
                    iloop = scf_for(0, arith.CeilDivSIOp(mc, idx(self.s.mr)).result, 1, list(jloop.inner_iter_args))
                    with ir.InsertionPoint(iloop.body):
                        it = iloop.induction_variable
                        out = self._tile(packed_a, packed_b, b_base, it, jt, ia, j0, mc, nc, kc, first, last,
                                         job, list(iloop.inner_iter_args))
                        scf.YieldOp(out)
                    scf.YieldOp(list(iloop.results))
                return list(jloop.results)

            def packed(state):
                aloop = scf_for(0, arith.CeilDivSIOp(mb, idx(s.mc)).result, 1, state)
                with ir.InsertionPoint(aloop.body):
                    ia = add(i0, mul(aloop.induction_variable, s.mc))
                    mc = smin(s.mc, sub(add(i0, mb), ia))
                    self._pack_a(packed_a, ia, mc, k0, kc)
                    scf.YieldOp(sweep(ia, mc, list(aloop.inner_iter_args)))
                return list(aloop.results)

            if self.direct_ok is not None:
                # A read in place (DIRECT_A): no packed A; DIRECT_MR-row micro-kernels over A blocks of
                # DIRECT_MC rows, which stay in L2 while the B panel's strips pass.
                branch = scf.IfOp(self.direct_ok, has_else=True)
                with ir.InsertionPoint(branch.then_block):
                    self.s, self.direct_k0 = replace(s, mr=DIRECT_MR, mb=DIRECT_MC, mc=DIRECT_MC), k0
                    dloop = scf_for(0, arith.CeilDivSIOp(mb, idx(DIRECT_MC)).result)
                    with ir.InsertionPoint(dloop.body):
                        ia = add(i0, mul(dloop.induction_variable, DIRECT_MC))
                        sweep(ia, smin(DIRECT_MC, sub(add(i0, mb), ia)), [])
                        scf.YieldOp([])
                    self.s, self.direct_k0 = s, None
                    scf.YieldOp([])
                with ir.InsertionPoint(branch.else_block):
                    packed([])
                    scf.YieldOp([])
                results = []
            else:
                results = packed(state)
            if job:
                job.finish(results)
            scf.YieldOp([])
        memref.DeallocOp(packed_a)
        memref.DeallocOp(packed_b)

    # -- packing ------------------------------------------------------------------------------------------
    def _role(self, src) -> str:
        return "B" if src == self.p["B"] else "A"

    def _in_vec(self, src) -> ir.Type:
        """A vector of VW of `src`'s stored elements."""
        return ir.VectorType.get([self.vw], _storage(self.dtypes[self._role(src)]))

    def _widen(self, v: ir.Value, src) -> ir.Value:
        """Loaded elements `v` of operand `src` as f32: fp8 bytes bitcast to their format first (the extension
        is fp8_convert.py's integer widening)."""
        dt = self.dtypes[self._role(src)]
        if dt == "f32":
            return v
        shaped = lambda e: ir.VectorType.get(v.type.shape, e) if isinstance(v.type, ir.VectorType) else e  # noqa: E731
        if dt in FP8:
            v = arith.BitcastOp(shaped(FP8[dt].get()), v).result
        return arith.ExtFOp(shaped(f32()), v).result

    def _pack_a(self, packed, i0, mc, k0, kc) -> None:
        """A[i0:i0+mc, k0:k0+kc] → MR-row strips, strip[k][r] at strip·MR·KC + k·MR + r; rows past mc are 0."""
        self._pack_strips(self.p["A"], self.spec.trans_a, packed, idx(0), self.s.mr, self.s.mr * self.s.kc,
                          i0, mc, k0, kc)

    def _pack_strips(self, src, k_major: bool, packed, base, width: int, stride: int, i0, n, k0, kc) -> None:
        """Rows i0:i0+n (of A, or columns of B) over k0:k0+kc → `width`-wide strips from `base`, `stride`
        apart: strip[k][r] at base + strip·stride + k·width + r; entries past n are 0. `src` is indexed
        [row, k] (A, Bᵀ), or [k, row] when `k_major` (Aᵀ)."""
        strips = arith.CeilDivSIOp(n, idx(width)).result
        loop = scf_for(0, strips)
        with ir.InsertionPoint(loop.body):
            strip = loop.induction_variable
            row0 = add(i0, mul(strip, width))
            rows = sub(add(i0, n), row0)
            # The last strip may be short: its missing rows read the strip's last row and store zero, so
            # the loop body needs no branch and every load stays inside the operand.
            full = arith.CmpIOp(arith.CmpIPredicate.sge, rows, idx(width)).result
            first = add(base, mul(strip, stride))
            k_start = idx(0)
            if not k_major and self.vw >= 16:
                # AVX-512: VW values of k at a time, by a register transpose of contiguous row vectors; the
                # rest of the chunk (kc mod VW) by the gathers below.
                k_start = sub(kc, arith.RemSIOp(kc, idx(self.vw)).result)
                tl = scf_for(0, k_start, self.vw)
                with ir.InsertionPoint(tl.body):
                    self._transpose_rows(src, row0, rows, full, add(k0, tl.induction_variable), packed,
                                         add(first, mul(tl.induction_variable, width)), width)
                    scf.YieldOp([])
            kl = scf_for(k_start, kc)
            with ir.InsertionPoint(kl.body):
                k = kl.induction_variable
                col = add(k0, k)
                dst = add(first, mul(k, width))
                if k_major:
                    # a strip's values of one k are adjacent in Aᵀ: a vector at a time (masked: MR need not be
                    # a multiple of the vector width; lanes past the operand load nothing and store zero)
                    self._copy_row(src, [col, row0], packed, dst, width, rows)
                elif self.vw >= 16:
                    # AVX-512 (the one 16-lane tile, vector_isa): a masked gather per vector, measured 4% faster
                    # than the scalar copy below on an Emerald Rapids Xeon at 512×2048×512, with Bᵀ, and at
                    # 512×512×2048 (one thread, CPU time); the AVX2 targets (Zen 3) keep the scalar copy.
                    self._gather_column(src, row0, col, packed, dst, width, rows)
                for r in range(0 if k_major or self.vw >= 16 else width):
                    row = arith.SelectOp(full, add(row0, r), add(row0, smin(r, sub(rows, 1)))).result
                    v = self._widen(memref.LoadOp(src, [row, col]).result, src)
                    if r:  # row 0 of a strip always exists
                        v = arith.SelectOp(arith.OrIOp(full, lt(r, rows)).result, v, zeros(f32())).result
                    memref.StoreOp(v, packed, [add(dst, r)])
                scf.YieldOp([])
            scf.YieldOp([])

    def _transpose_rows(self, src, row0, rows, full, col, packed, dst, width: int) -> None:
        """src[row0:row0+width, col:col+VW] (rows past `rows` as zeros) widened to packed[dst + k·width + r]
        for k < VW: each group of VW rows loaded as VW contiguous vectors and transposed in registers
        (log2 VW stages of two-source shuffles, each swapping the off-diagonal blocks of its pairs of rows).
        On a Zen 5 EPYC this packing made A·B 7-11% cheaper in CPU time than one gather per k (the per-k
        gathers cost as much as packing Aᵀ, which reads contiguous rows, saves: bench/gemm_cpu.py's rows)."""
        vw = self.vw
        in_vec = self._in_vec(src)
        last_col = sub(memref.DimOp(src, idx(1)).result, 1)
        for g in range(0, width, vw):
            vecs = []
            for q in range(vw):
                r = g + q
                if r >= width:
                    vecs.append(zeros(self.vtype))
                    continue
                row = arith.SelectOp(full, add(row0, r), add(row0, smin(r, sub(rows, 1)))).result
                if PACK_PREFETCH:
                    memref.PrefetchOp(src, [row, smin(add(col, PACK_PREFETCH), last_col)], False, 3, True)
                v = self._widen(vector.LoadOp(in_vec, src, [row, col]).result, src)
                if r:  # row 0 of a strip always exists
                    v = arith.SelectOp(arith.OrIOp(full, lt(r, rows)).result, v, zeros(self.vtype)).result
                vecs.append(v)
            vecs = transpose_vectors(vecs)
            lanes = min(vw, width - g)
            for k, v in enumerate(vecs):
                at = [add(dst, k * width + g)]
                if lanes == vw:
                    vector.StoreOp(v, packed, at)
                else:
                    vector.MaskedStoreOp(packed, at, self._mask(idx(lanes)), v)

    def _gather_column(self, src, row0, col, packed, dst, width: int, valid) -> None:
        """src[row0:row0+width, col] (the first `valid` rows; zeros after) widened to packed[dst:dst+width], a
        vector at a time: one masked gather of values a row apart. (Scalar loads and stores, which LLVM
        vectorizes along k into scatters, took 6.6% of a 512×2048×512 kernel on an AVX-512 Xeon.)"""
        index = ir.IndexType.get()
        in_vec = self._in_vec(src)
        row_step = vector.BroadcastOp(ir.VectorType.get([self.vw], index), memref.DimOp(src, idx(1)).result).result
        lanes_at = arith.ConstantOp(ir.VectorType.get([self.vw], index), ir.Attribute.parse(
            f"dense<[{', '.join(map(str, range(self.vw)))}]> : vector<{self.vw}xindex>")).result
        offsets = arith.MulIOp(lanes_at, row_step).result   # src is row-major and contiguous: rows K apart
        for c in range(0, width, self.vw):
            lanes = min(self.vw, width - c)
            v = vector.GatherOp(in_vec, src, [add(row0, c), col], offsets,
                                self._mask(smin(sub(valid, c), lanes)), _zeros(in_vec)).result
            vector.MaskedStoreOp(packed, [add(dst, c)], self._mask(idx(lanes)), self._widen(v, src))

    def _copy_row(self, src, at: list, packed, dst, width: int, valid) -> None:
        """src[at[0], at[1]:at[1]+width] (the first `valid` of them; zeros after) widened to packed[dst:dst+width],
        in vectors of up to VW lanes."""
        in_vec = self._in_vec(src)
        for c in range(0, width, self.vw):
            lanes = min(self.vw, width - c)
            v = vector.MaskedLoadOp(in_vec, src, [at[0], add(at[1], c)], self._mask(smin(sub(valid, c), lanes)),
                                    _zeros(in_vec)).result
            vector.MaskedStoreOp(packed, [add(dst, c)], self._mask(idx(lanes)), self._widen(v, src))

    def _pack_b(self, packed, base, j0, nc, k0, kc) -> None:
        """B[k0:k0+kc, j0:j0+nc] → NR-column strips from `base`, strip[k][c] at base + strip·NR·KC + k·NR + c;
        columns past nc are 0.

        Row by row: each row of the panel is one contiguous read that the hardware prefetcher streams. Strip
        by strip would read NR floats per row of B, a page apart for large N: a TLB and cache miss each.
        Bᵀ stored: strip by strip, each of a strip's NR rows of Bᵀ read along k (the layout A has).
        """
        s = self.s
        if self.spec.trans_b:
            self._pack_strips(self.p["B"], False, packed, base, s.nr, self.strip_stride, j0, nc, k0, kc)
            return
        full_strips = arith.DivSIOp(nc, idx(s.nr)).result
        kl = scf_for(0, kc)
        with ir.InsertionPoint(kl.body):
            k = kl.induction_variable
            sl = scf_for(0, full_strips)
            with ir.InsertionPoint(sl.body):
                strip = sl.induction_variable
                col0 = mul(strip, s.nr)
                dst = add(base, add(mul(strip, self.strip_stride), mul(k, s.nr)))
                for c in range(0, s.nr, self.vw):
                    self._copy_b_vector(packed, add(dst, c), add(k0, k), add(j0, add(col0, c)))
                scf.YieldOp([])
            self._pack_b_tail(packed, base, j0, nc, k0, k)
            scf.YieldOp([])

    def _copy_b_vector(self, packed, dst, row, col) -> None:
        """B[row, col:col+VW] (inside a full strip), widened, to packed[dst:dst+VW]."""
        v = vector.LoadOp(self._in_vec(self.p["B"]), self.p["B"], [row, col]).result
        vector.StoreOp(self._widen(v, self.p["B"]), packed, [dst], alignment=self.vw * 4)

    def _pack_b_tail(self, packed, base, j0, nc, k0, k) -> None:
        """Row k of the partial strip at the right edge: masked loads, zeros past the matrix."""
        s = self.s
        in_vec = self._in_vec(self.p["B"])
        full_strips = arith.DivSIOp(nc, idx(s.nr)).result
        cols = sub(nc, mul(full_strips, s.nr))
        tail = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.sgt, cols, idx(0)).result)
        with ir.InsertionPoint(tail.then_block):
            col0 = add(j0, mul(full_strips, s.nr))
            dst = add(base, add(mul(full_strips, self.strip_stride), mul(k, s.nr)))
            for c in range(0, s.nr, self.vw):
                v = vector.MaskedLoadOp(in_vec, self.p["B"], [add(k0, k), add(col0, c)], self._mask(sub(cols, c)),
                                        _zeros(in_vec)).result
                vector.StoreOp(self._widen(v, self.p["B"]), packed, [add(dst, c)], alignment=self.vw * 4)
            scf.YieldOp([])

    def _mask(self, n) -> ir.Value:
        # create_mask clamps n to [0, vw]: lanes below n are on.
        return vector.CreateMaskOp(ir.VectorType.get([self.vw], ir.IntegerType.get_signless(1)), [n]).result

    # -- one micro-tile -----------------------------------------------------------------------------------
    def _tile(self, packed_a, packed_b, b_base, it, jt, i0, j0, mc, nc, kc, first, last, job=None,
              state=(), rows_done=None) -> list:
        s, C = self.s, self.p["C"]
        i = add(i0, mul(it, s.mr))
        j = add(j0, mul(jt, s.nr))
        rows = sub(mc, mul(it, s.mr))    # may exceed MR: only "fewer than MR" matters
        # (A read in place: the DIRECT_MR-row kernel alone; a short last strip clamps its rows. Fewer kernels
        # to compile, and at most DIRECT_MR - 1 rows of zeros' FMAs a matrix.)
        if rows_done is None and job is None and self.vw >= 16 and EDGE_ROWS and self.direct_k0 is None:
            # A strip of fewer than MR rows (the matrix's last) runs a micro-kernel of the fewest rows in
            # EDGE_ROWS that covers it. Each kernel is a whole tile of its own, stores included: one kernel
            # whose accumulators an scf.if merged spilled them (measured with a variant micro-kernel).
            def chain(counts):
                if not counts:
                    self._tile(packed_a, packed_b, b_base, it, jt, i0, j0, mc, nc, kc, first, last,
                               rows_done=s.mr)
                    return
                few = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.sle, rows, idx(counts[0])).result,
                               has_else=True)
                with ir.InsertionPoint(few.then_block):
                    self._tile(packed_a, packed_b, b_base, it, jt, i0, j0, mc, nc, kc, first, last,
                               rows_done=counts[0])
                    scf.YieldOp([])
                with ir.InsertionPoint(few.else_block):
                    chain(counts[1:])
                    scf.YieldOp([])
            chain([m for m in EDGE_ROWS if m < s.mr])
            return list(state)
        mr = rows_done or s.mr           # the rows the micro-kernel computes
        cols = sub(nc, mul(jt, s.nr))
        full = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.sge, rows, idx(s.mr)).result,
                            arith.CmpIOp(arith.CmpIPredicate.sge, cols, idx(s.nr)).result).result
        if self.nt_ok is None:
            self._prefetch(C, i, j, True)
        else:   # streaming stores need no line of C brought in
            cached = scf.IfOp(arith.XOrIOp(self.nt_ok, arith.ConstantOp(self.nt_ok.type, 1).result).result)
            with ir.InsertionPoint(cached.then_block):
                self._prefetch(C, i, j, True)
                scf.YieldOp([])
        # The epilogue's operands of C's extents (Z of gelu', a minuend) likewise, read on the last chunk only.
        operands = [self.p[name] for name, dims in self.spec.extra_params if dims == ("M", "N")]
        if operands:
            ahead = scf.IfOp(last)
            with ir.InsertionPoint(ahead.then_block):
                for m in operands:
                    self._prefetch(m, i, j, False)
                scf.YieldOp([])
        # A burst of the next panel's copies first: their loads are in flight while the FMAs below run.
        state = job.burst(list(state)) if job else list(state)
        n_acc = s.mr * (s.nr // self.vw)
        direct = None
        if self.direct_k0 is not None:
            # A's rows i … i+mr-1 in place, each clamped into A: rows past M feed only the masked-off stores.
            last_row = sub(self.M, 1)
            direct = ([smin(add(i, r), last_row) for r in range(mr)], self.direct_k0)
        acc = self._micro_kernel([zeros(self.vtype)] * (mr * (s.nr // self.vw)), packed_a, packed_b,
                                 mul(it, s.mr * s.kc), add(b_base, mul(jt, self.strip_stride)), kc, mr, direct)
        acc += [zeros(self.vtype)] * (n_acc - len(acc))   # rows past mr: masked off at the stores
        if mr < s.mr:   # only the masked stores: fewer than MR rows
            full = arith.ConstantOp(ir.IntegerType.get_signless(1), 0).result

        def store(t, with_epilogue):
            # Chunks after the first add the partial sums in C, after the k loop: the prefetch had its time.
            partial = scf.IfOp(first, [self.vtype] * n_acc, has_else=True)
            with ir.InsertionPoint(partial.then_block):
                scf.YieldOp(acc)
            with ir.InsertionPoint(partial.else_block):
                scf.YieldOp([arith.AddFOp(a, c).result for a, c in zip(acc, t.load_tile(C))])
            out = list(partial.results)
            if not with_epilogue:
                t.store_tile(C, out)
                return
            if any(st[0] in _DERIVATIVES for st in self.spec.epilogue) and not t.edge:
                # A long step (gelu': erf, exp and some 40 constants) over the whole tile unrolled spills the
                # registers: the tile is stored, then read back a row at a time in a loop.
                t.store_tile(C, out)
                rows = scf_for(0, s.mr)
                with ir.InsertionPoint(rows.body):
                    row = _TileAccess(self, add(i, rows.induction_variable), j, None, None)
                    for n in range(s.nr // self.vw):
                        row.store_vector(C, n, self._epilogue(row, n, row.load_vector(C, n)))
                    scf.YieldOp([])
                return
            # The epilogue one vector at a time, each stored before the next: a vector register freed per
            # store, so a long step does not spill the tile's accumulators.
            for n, v in enumerate(out):
                t.store_vector(C, n, self._epilogue(t, n, v))

        if self.spec.epilogue:
            branch = scf.IfOp(last, has_else=True)
            with ir.InsertionPoint(branch.then_block):
                self._edge_split(full, i, j, rows, cols, lambda t: store(t, True))
                scf.YieldOp([])
            with ir.InsertionPoint(branch.else_block):
                self._edge_split(full, i, j, rows, cols, lambda t: store(t, False))
                scf.YieldOp([])
        else:
            self._edge_split(full, i, j, rows, cols, lambda t: store(t, False))
        return state

    def _prefetch(self, C, i, j, write: bool) -> None:
        """Asks for the lines of an M×N matrix's tile (C's for writing) while the micro-kernel runs: its rows
        are far apart, so the hardware prefetcher does not bring them, and each miss would stall the tile's
        epilogue or store."""
        s = self.s
        last_row, last_col = sub(self.M, 1), sub(self.N, 1)
        # Clamped into C: an edge tile's rows and columns may lie past it. A row of the tile may straddle
        # two cache lines, so both ends are asked for.
        cols = [smin(j, last_col), smin(add(j, s.nr - 1), last_col)]
        for r in range(s.mr):
            row = smin(add(i, r), last_row)
            for col in cols:
                memref.PrefetchOp(C, [row, col], write, 3, True)

    def _edge_split(self, full, i, j, rows, cols, body) -> None:
        """`body(tile_access)` twice: plain vector accesses for a whole tile, masked ones at the matrix edge."""
        branch = scf.IfOp(full, has_else=True)
        with ir.InsertionPoint(branch.then_block):
            if self.nt_ok is not None:
                nt = scf.IfOp(self.nt_ok, has_else=True)
                with ir.InsertionPoint(nt.then_block):
                    body(_TileAccess(self, i, j, None, None, nontemporal=True))
                    scf.YieldOp([])
                with ir.InsertionPoint(nt.else_block):
                    body(_TileAccess(self, i, j, None, None))
                    scf.YieldOp([])
            else:
                body(_TileAccess(self, i, j, None, None))
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            body(_TileAccess(self, i, j, rows, cols))
            scf.YieldOp([])

    def _micro_kernel(self, acc, packed_a, packed_b, a_base, b_base, kc, mr=None, direct=None) -> list:
        """acc[r·NR/VW + c] += a[k][r] · b[k][c·VW:(c+1)·VW] for k < kc and the first `mr` rows of the strip
        (all MR by default), `k_unroll` steps per loop trip. `direct` (rows, k0): a[k][r] is A[rows[r], k0 + k],
        read in place, instead of the packed strip at `a_base`."""
        s = self.s
        mr = mr or s.mr
        u = s.k_unroll
        main = sub(kc, arith.RemSIOp(kc, idx(u)).result)

        def step(acc, k):
            a_off = add(a_base, mul(k, s.mr))
            b_off = add(b_base, mul(k, s.nr))
            b = [vector.LoadOp(self.vtype, packed_b, [add(b_off, c)], alignment=self.vw * 4).result
                 for c in range(0, s.nr, self.vw)]
            out = []
            for r in range(mr):
                if direct:
                    a = memref.LoadOp(self.p["A"], [direct[0][r], add(direct[1], k)]).result
                else:
                    a = memref.LoadOp(packed_a, [add(a_off, r)]).result
                a = vector.BroadcastOp(self.vtype, a).result
                for c, bv in enumerate(b):
                    prev = acc[r * len(b) + c]
                    if s.fma:
                        out.append(vector.FMAOp(a, bv, prev).result)
                    else:
                        out.append(arith.AddFOp(arith.MulFOp(a, bv).result, prev).result)
            return out

        unrolled = scf_for(0, main, u, acc)
        with ir.InsertionPoint(unrolled.body):
            cur = list(unrolled.inner_iter_args)
            for q in range(u):
                cur = step(cur, add(unrolled.induction_variable, q))
            scf.YieldOp(cur)
        rest = scf_for(main, kc, 1, list(unrolled.results))
        with ir.InsertionPoint(rest.body):
            scf.YieldOp(step(list(rest.inner_iter_args), rest.induction_variable))
        return list(rest.results)

    # -- the epilogue -------------------------------------------------------------------------------------
    def _epilogue(self, t: "_TileAccess", n: int, v) -> ir.Value:
        """The epilogue of the tile's n-th accumulator vector `v`."""
        for (step,) in self.spec.epilogue:
            if step == "scale":
                v = arith.MulFOp(v, self.alpha).result
            elif step == "bias":
                v = arith.AddFOp(v, t.load_row_vector(self.p["bias"], n % (self.s.nr // self.vw))).result
            elif step == "scale_by":
                v = arith.MulFOp(v, self.factor).result
            elif step == "add":
                v = arith.AddFOp(v, t.load_vector(self.p["residual"], n)).result
            elif step == "sub_from":
                v = arith.SubFOp(t.load_vector(self.p["minuend"], n), v).result
            elif step in _DERIVATIVES:
                v = arith.MulFOp(v, _DERIVATIVES[step](t.load_vector(self.p[_STEP_PARAMS[step][0]], n))).result
            else:
                v = _ACTIVATIONS[step](v)
        return v


class _PanelCopy:
    """Packing of a B panel spread over a chunk's micro-tiles, a burst before each of the chunk's `tiles`
    micro-kernels, enough that the bursts cover the panel. A unit is one strip's NR columns of one row (a
    cache line of B into one of the panel); units go in row-major order of B, so consecutive bursts read
    consecutive addresses, which the hardware prefetcher streams. The state is (row, strip); rows ≥ `rows`
    mean done. A burst covers at most the rest of one row and part of the next; `finish` packs what the
    bursts did not reach, and the partial strip."""

    def __init__(self, body: "_Body", packed, base, j0, nc, k0, rows, tiles):
        self.b, self.packed, self.base, self.j0, self.nc, self.k0, self.rows = body, packed, base, j0, nc, k0, rows
        self.per_row = arith.DivSIOp(nc, idx(body.s.nr)).result   # full strips
        self.count = arith.CeilDivSIOp(mul(rows, self.per_row), arith.MaxSIOp(tiles, idx(1)).result).result
        # Each unit copied asks for the line of the unit one burst later: by the time that burst runs (a
        # micro-kernel later) its lines are in L1, so no burst waits for memory with FMAs queued behind it.
        self.ahead = smin(self.count, self.per_row)
        self.last_row = sub(memref.DimOp(body.p["B"], idx(0)).result, 1)

    def start(self) -> list:
        # no full strip (nc < NR): nothing for the bursts to copy
        none = arith.CmpIOp(arith.CmpIPredicate.eq, self.per_row, idx(0)).result
        return [arith.SelectOp(none, self.rows, idx(0)).result, idx(0)]

    def burst(self, state: list) -> list:
        left = self.count
        for _ in range(2):
            state, done = self._segment(state, left)
            left = sub(left, done)
        return state

    def _segment(self, state: list, most) -> tuple[list, ir.Value]:
        """Up to `most` units from (row, strip) to the end of that row; the new state and the count done."""
        row, strip = state
        n = arith.SelectOp(lt(row, self.rows), smin(most, sub(self.per_row, strip)), idx(0)).result
        loop = scf_for(strip, add(strip, n))
        with ir.InsertionPoint(loop.body):
            self._unit(row, loop.induction_variable, prefetch=True)
            scf.YieldOp([])
        end = add(strip, n)
        wrap = arith.CmpIOp(arith.CmpIPredicate.eq, end, self.per_row).result
        return [arith.SelectOp(wrap, add(row, 1), row).result, arith.SelectOp(wrap, idx(0), end).result], n

    def _unit(self, row, strip, prefetch=False) -> None:
        s = self.b.s
        if prefetch:
            later = add(strip, self.ahead)
            wrap = arith.CmpIOp(arith.CmpIPredicate.sge, later, self.per_row).result
            r = smin(add(add(self.k0, row), arith.SelectOp(wrap, idx(1), idx(0)).result), self.last_row)
            c0 = add(self.j0, mul(arith.SelectOp(wrap, sub(later, self.per_row), later).result, s.nr))
            later_strip = arith.SelectOp(wrap, sub(later, self.per_row), later).result
            later_row = smin(add(row, arith.SelectOp(wrap, idx(1), idx(0)).result), sub(self.b.s.kc, 1))
            d0 = add(self.base, add(mul(later_strip, self.b.strip_stride), mul(later_row, s.nr)))
            for line in range(0, s.nr, max(1, 64 // 4)):   # every cache line of the unit
                memref.PrefetchOp(self.b.p["B"], [r, add(c0, line)], False, 3, True)
                memref.PrefetchOp(self.packed, [add(d0, line)], True, 3, True)
        dst = add(self.base, add(mul(strip, self.b.strip_stride), mul(row, s.nr)))
        col = add(self.j0, mul(strip, s.nr))
        for c in range(0, s.nr, self.b.vw):
            self.b._copy_b_vector(self.packed, add(dst, c), add(self.k0, row), add(col, c))

    def finish(self, state: list) -> None:
        row, strip = state
        rest_of_row = scf.IfOp(lt(row, self.rows))
        with ir.InsertionPoint(rest_of_row.then_block):
            sl = scf_for(strip, self.per_row)
            with ir.InsertionPoint(sl.body):
                self._unit(row, sl.induction_variable)
                scf.YieldOp([])
            scf.YieldOp([])
        rl = scf_for(smin(add(row, 1), self.rows), self.rows)
        with ir.InsertionPoint(rl.body):
            sl = scf_for(0, self.per_row)
            with ir.InsertionPoint(sl.body):
                self._unit(rl.induction_variable, sl.induction_variable)
                scf.YieldOp([])
            scf.YieldOp([])
        tl = scf_for(0, self.rows)
        with ir.InsertionPoint(tl.body):
            self.b._pack_b_tail(self.packed, self.base, self.j0, self.nc, self.k0, tl.induction_variable)
            scf.YieldOp([])


class _TileAccess:
    """Loads and stores of one MR×NR tile of an M×N matrix at (i, j): plain vectors for a whole tile
    (rows, cols None), masked ones for a partial tile with `rows`×`cols` elements inside the matrix."""

    def __init__(self, body: _Body, i, j, rows, cols, nontemporal=False):
        self.b = body
        self.nontemporal = nontemporal
        self.i, self.j = i, j
        self.edge = rows is not None
        if self.edge:
            vw, mr, nr = body.vw, body.s.mr, body.s.nr
            # One mask per (row, vector): lanes inside the matrix. Rows past it get an all-off mask.
            self.masks = {}
            for c in range(0, nr, vw):
                left = sub(cols, c)
                for r in range(mr):
                    n = left if r == 0 else arith.SelectOp(lt(r, rows), left, idx(0)).result
                    self.masks[r, c] = body._mask(n)
            self.col_masks = [body._mask(sub(cols, c)) for c in range(0, nr, vw)]

    def _at(self, n):
        """(row in the tile, column in the tile, row, column) of the tile's n-th vector (row-major)."""
        per_row = self.b.s.nr // self.b.vw
        r, c = n // per_row, n % per_row * self.b.vw
        return r, c, add(self.i, r), add(self.j, c)

    def load_vector(self, m, n) -> ir.Value:
        """The n-th vector of load_tile(m)."""
        r, c, row, col = self._at(n)
        if not self.edge:
            return vector.LoadOp(self.b.vtype, m, [row, col]).result
        return vector.MaskedLoadOp(self.b.vtype, m, [row, col], self.masks[r, c], zeros(self.b.vtype)).result

    def load_tile(self, m) -> list:
        return [self.load_vector(m, n) for n in range(self.b.s.mr * (self.b.s.nr // self.b.vw))]

    def store_vector(self, m, n, v) -> None:
        """Stores the n-th vector of store_tile(m, …)."""
        r, c, row, col = self._at(n)
        if self.edge:
            vector.MaskedStoreOp(m, [row, col], self.masks[r, c], v)
        elif self.nontemporal and m == self.b.p["C"]:
            vector.StoreOp(v, m, [row, col], nontemporal=True, alignment=self.b.vw * 4)
        else:
            vector.StoreOp(v, m, [row, col])

    def store_tile(self, m, values) -> None:
        for n, v in enumerate(values):
            self.store_vector(m, n, v)

    def load_row_vector(self, m, c) -> ir.Value:
        """The c-th vector of a length-N vector (a bias) at this tile's columns."""
        col = add(self.j, c * self.b.vw)
        if not self.edge:
            return vector.LoadOp(self.b.vtype, m, [col]).result
        return vector.MaskedLoadOp(self.b.vtype, m, [col], self.col_masks[c], zeros(self.b.vtype)).result


def image_metadata(spec: GemmSpec) -> dict:
    """Kernel properties for the image: what a host needs to size the grid (see gemm_grid)."""
    s = spec.schedule
    props = {"block": f"{s.mb}x{s.nc}", "cache_blocks": f"{s.mc}x{s.kc}", "micro_tile": f"{s.mr}x{s.nr}",
             "b_panels": str(s.stages),
             "epilogue": ",".join(st[0] for st in spec.epilogue),
             **({"transposed": _transposed(spec)} if _transposed(spec) else {})}
    return {"kernel_props": {spec.name: props}}
