"""Fused attention for the CPU backend: O = dropout(softmax(scale · Q·Kᵀ [causal])) · V without writing P.

The fusion phase groups `matmul(Q, Kᵀ) → [· scale] → softmax → [dropout] → matmul(·, V)` (an
`op.flash_attention` after passes/decompose.py, or the same ops written out); this generator writes the
group's kernel directly in the per-block form of gemm.py (docs/image-format.md)::

    func.func @name(%Q: memref<?x?x?xf32>, %KT, %V, %O, %bid_x, …, %gdim_z: index)
        attributes {tessera.kernel, tessera.tile_kernel}

with Q [B, Sq, D], KT [B, D, Sk] (K transposed: its rows are contiguous along the keys), V [B, Sk, Dv],
O [B, Sq, Dv]. Where the group holds the transpose making Kᵀ from K (passes/fusion.py `keys_transpose`;
`keys_rows`), the kernel takes K [B, Sk, D] itself in KT's place and packs each key strip from K's rows by
register transposes: no layout kernel writes Kᵀ, and the packed strips, so every sum, are the same. Block (bid_x, bid_y) computes the `tiles`·BQ query rows from bid_x·tiles·BQ of batch entry
bid_y (BQ = MR, the register tile's rows), in three passes over a scratch of scores:

    scores   S = scale · Q·Kᵀ, BQ×NR register tiles (MR×NR as the GEMM micro-kernel): for each NR-key strip,
             Kᵀ's strip is packed contiguous and times the scale (D×NR; read in place, Kᵀ's rows Sk apart share
             L1 sets) and serves every register tile of the block; each row's running maximum is kept beside S.
             causal: only the keys up to the tile's last row, and -inf past each row's own
    softmax  per row: e = exp(s - max) over the keys its tile sees, and their sum; 1/sum is kept for the
             output pass (no pass scaling every e) — and dropout, the same Philox-4x32-10 stream as the
             interpreter (counter = linear index of (b, i, j) in P + offset): e / (1 - p_drop) where
             u ≥ p_drop, else 0, applied after the sum
    output   O = (E·V) / sum in BQ×NR register tiles over Dv, E broadcast from the scratch, V's rows as
             the panel

P is never written to memory: the block's rows of E live in the scratch (tiles·BQ·Sk floats, L2) for the time
of one block. The passes read Q, K and V once per block of rows — the work of the two GEMMs, a pack of Kᵀ
per block, plus one pass of exp over the scores.

No bounds checks, for gemm.py's reason: Q, KT, V and O share their extents by name (B, SQ, D, SK, DV: one
dimension argument each), every index is a block's origin plus an offset its loop bounds by them, and a block
past Sq or B (a larger grid than `attention_grid`'s) does nothing: `_Body.emit` guards it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import plan
from ...diagnostics import LoweringError
from ...mlir import arith, func, ir, math, memref, scf, vector
from ...passes import fusion
from ...passes.graph_shapes import product
from ...passes.simt_to_warps import philox_uniform
from .gemm_schedule import vector_isa
from .irbuild import LAUNCH_ARGS, add, idx, lt, mul, scf_for, smin, sub, transpose_vectors, zeros
from .target import host


def exp_nonpositive(x):
    """e^x for x ≤ 0 or -inf (a score minus its row's maximum), as vmath.exp's Cephes reduction (x = n·ln 2 + r,
    the same degree-7 polynomial) with fewer operations where the range allows: no upper clamp or overflow
    select (x ≤ 0); the polynomial's `+ r + 1` folded into its Horner chain (7 FMAs); and 2^n's biased exponent
    clamped at 0 (an integer max), which makes 2^n = 0 and the result exactly 0 for n ≤ -127 (x below about
    -87.7, -inf included through the clamp of x at -100), instead of a compare and select. 17 vector
    operations against vmath.exp's 24; within a few ulp of it elsewhere."""
    f32 = ir.F32Type.get()
    it = ir.VectorType.get(x.type.shape, ir.IntegerType.get_signless(32))
    fm = ir.Attribute.parse("#arith.fastmath<contract>")

    def const(v):
        return arith.ConstantOp(x.type, ir.DenseElementsAttr.get_splat(x.type, ir.FloatAttr.get(f32, v))).result

    def iconst(v):
        return arith.ConstantOp(it, ir.DenseElementsAttr.get_splat(it, ir.IntegerAttr.get(it.element_type, v))).result

    def fma(a, b, c):
        return math.FmaOp(a, b, c, fastmath=fm).result

    xc = arith.MaximumFOp(x, const(-100.0)).result   # NaN stays NaN
    magic = const(12582912.0)   # 1.5·2^23: adding it rounds to an integer held in the low mantissa bits
    shifted = fma(xc, const(1.4426950408889634), magic)
    n = arith.SubFOp(shifted, magic).result
    ni = arith.SubIOp(arith.BitcastOp(it, shifted).result, arith.BitcastOp(it, magic).result).result
    r = fma(n, const(-0.693359375), xc)
    r = fma(n, const(2.12194440e-4), r)
    y = const(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1, 1.0, 1.0):
        y = fma(y, r, const(c))
    biased = arith.MaxSIOp(arith.AddIOp(ni, iconst(127)).result, iconst(0)).result
    return arith.MulFOp(y, arith.BitcastOp(x.type, arith.ShLIOp(biased, iconst(23)).result).result).result


@dataclass(frozen=True)
class AttentionSpec:
    """One fused attention kernel; `rows` (BQ) and `cols` (NR) default to the host's GEMM register tile."""

    name: str
    scale: float = 1.0
    causal: bool = False
    dropout: tuple | None = None   # (p, seed, offset)
    lse: bool = False              # also write each row's log-sum-exp of the scaled scores (for the backward)
    rows: int | None = None
    cols: int | None = None
    vector_width: int | None = None
    # Register tiles of `rows` query rows per block (see _Body._block): each block packs all of K once, so
    # larger blocks pack it less often. CPU time of the kernel at B×Sk = 8×512, 2×2048, 1×4096 (D = 64, Zen 5
    # EPYC, 1 MiB L2): 4 tiles 2.91, 11.6, 22.6 ms; 6: 2.89, 11.3, 22.5; 8: 2.81, 11.2, 22.3.
    tiles: int = 8
    keys_rows: bool = False        # takes K [B, Sk, D] instead of KT [B, D, Sk] (the strips packed from its rows)

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"attention kernel name '{self.name}' is not an identifier")
        if self.tiles < 1:
            raise ValueError(f"tiles must be positive, got {self.tiles}")
        if self.dropout is not None and not 0.0 <= self.dropout[0] < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {self.dropout[0]}")
        default_tile(self)


def default_tile(spec) -> None:
    """Fills a kernel spec's unset `rows`, `cols` and `vector_width` from the host's GEMM register tile (also
    attention_bwd's) and checks that `cols` is whole vectors."""
    tile = vector_isa(host())
    for field, value in (("rows", tile.mr), ("cols", tile.nr), ("vector_width", tile.vector_width)):
        if getattr(spec, field) is None:
            object.__setattr__(spec, field, value)
    if spec.cols % spec.vector_width:
        raise ValueError(f"cols={spec.cols} must be a multiple of vector_width={spec.vector_width}")


def attention_grid(spec: AttentionSpec, batch: int, sq: int) -> tuple[int, int, int]:
    return max(1, -(-sq // (spec.rows * spec.tiles))), max(1, batch), 1


def declare_kernel(module: ir.Module, name: str, params: list, attr: str, props: dict) -> tuple:
    """Appends an empty per-block f32 tile kernel `name` to `module` and opens its entry block: one memref
    parameter per (name, dims) of `params` (rank len(dims), named and dimensioned for the launch plan), then
    the launch arguments; `props` become its attribute `attr`. Returns (the function, {name: memref},
    {launch arg: index}) for the body, which the caller emits into its entry block, ending with func.return."""
    f32 = ir.F32Type.get()
    index = ir.IndexType.get()
    ftype = ir.FunctionType.get([ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * len(dims), f32)
                                 for _, dims in params] + [index] * len(LAUNCH_ARGS), [])
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp(name, ftype)
    fn.attributes["tessera.kernel"] = ir.UnitAttr.get()
    fn.attributes["tessera.tile_kernel"] = ir.UnitAttr.get()
    fn.attributes[attr] = ir.DictAttr.get(props)
    attrs = [ir.DictAttr.get({"tessera.name": ir.StringAttr.get(n),
                              "tessera.dims": ir.ArrayAttr.get([ir.StringAttr.get(d) for d in dims])})
             for n, dims in params]
    fn.arg_attrs = ir.ArrayAttr.get(attrs + [ir.DictAttr.get({})] * len(LAUNCH_ARGS))
    args = list(fn.add_entry_block().arguments)
    return fn, dict(zip([p[0] for p in params], args)), dict(zip(LAUNCH_ARGS, args[len(params):]))


def build_attention(module: ir.Module, spec: AttentionSpec) -> func.FuncOp:
    """Appends the kernel `spec` to `module` (in the module's context, under a location) and returns it."""
    f32 = ir.F32Type.get()
    keys = ("K", ("B", "SK", "D")) if spec.keys_rows else ("KT", ("B", "D", "SK"))
    params = [("Q", ("B", "SQ", "D")), keys, ("V", ("B", "SK", "DV")), ("O", ("B", "SQ", "DV"))]
    if spec.lse:
        params.append(("LSE", ("B", "SQ")))
    i64 = ir.IntegerType.get_signless(64)
    props = {"rows": ir.IntegerAttr.get(i64, spec.rows), "cols": ir.IntegerAttr.get(i64, spec.cols),
             "scale": ir.FloatAttr.get(f32, spec.scale), "causal": ir.BoolAttr.get(spec.causal)}
    if spec.dropout is not None:
        props["dropout"] = ir.FloatAttr.get(f32, spec.dropout[0])
    if spec.lse:
        props["lse"] = ir.UnitAttr.get()
    if spec.keys_rows:
        props["keys_rows"] = ir.UnitAttr.get()
    fn, tensors, launch = declare_kernel(module, spec.name, params, "tessera.attention", props)
    with ir.InsertionPoint(fn.entry_block):
        _Body(spec, tensors, launch).emit()
        func.ReturnOp([])
    return fn


class TileKernel:
    """What the per-block attention kernels (this module's forward, attention_bwd.py's backward) share: masks,
    constants, NR-wide column tiles and the GEMM micro-kernel's MR×NR register-tile product. `spec` has
    `rows` (MR), `cols` (NR) and `vector_width`."""

    def __init__(self, spec, p: dict, launch: dict):
        self.spec, self.p, self.launch = spec, p, launch
        self.vw = spec.vector_width
        self.vtype = ir.VectorType.get([self.vw], ir.F32Type.get())
        self.mtype = ir.VectorType.get([self.vw], ir.IntegerType.get_signless(1))

    def _mask(self, n) -> ir.Value:
        return vector.CreateMaskOp(self.mtype, [n]).result   # lanes below n (clamped to [0, VW]) are on

    def _splat(self, x: float) -> ir.Value:
        f32 = ir.F32Type.get()
        return arith.ConstantOp(self.vtype, ir.DenseElementsAttr.get_splat(self.vtype, ir.FloatAttr.get(f32, x))).result

    def _lanes(self) -> ir.Value:
        """[0, 1, …, VW-1] as indices."""
        i64 = ir.VectorType.get([self.vw], ir.IntegerType.get_signless(64))
        lanes = arith.ConstantOp(i64, ir.DenseElementsAttr.get(np.arange(self.vw, dtype=np.int64), type=i64)).result
        return arith.IndexCastOp(ir.VectorType.get([self.vw], ir.IndexType.get()), lanes).result

    def _row(self, i0, r):
        """Query row r of the block, clamped into Q (the last block's missing rows repeat its last row)."""
        return smin(add(i0, r), sub(self.SQ, 1))

    def _tiles(self, extent, body) -> None:
        """body(j0, count, full) over [0, extent) in steps of NR; `full` says count == NR."""
        nr = self.spec.cols
        loop = scf_for(0, arith.CeilDivSIOp(extent, idx(nr)).result)
        with ir.InsertionPoint(loop.body):
            j0 = mul(loop.induction_variable, nr)
            count = smin(nr, sub(extent, j0))
            full = arith.CmpIOp(arith.CmpIPredicate.eq, count, idx(nr)).result
            branch = scf.IfOp(full, has_else=True)
            with ir.InsertionPoint(branch.then_block):
                body(j0, count, True)
                scf.YieldOp([])
            with ir.InsertionPoint(branch.else_block):
                body(j0, count, False)
                scf.YieldOp([])
            scf.YieldOp([])

    def _load(self, m, at, count, c, full: bool) -> ir.Value:
        if full:
            return vector.LoadOp(self.vtype, m, at).result
        return vector.MaskedLoadOp(self.vtype, m, at, self._mask(sub(count, c)), zeros(self.vtype)).result

    def _store(self, v, m, at, count, c, full: bool) -> None:
        if full:
            vector.StoreOp(v, m, at)
        else:
            vector.MaskedStoreOp(m, at, self._mask(sub(count, c)), v)

    def _tile_product(self, k_extent, a_of, b_of, k_start=0) -> list:
        """acc[r][c] = Σ_k a_of(r, k) · b_of(k)[c] for k_start ≤ k < k_extent: MR broadcast values and NR/VW
        vectors a step, as the GEMM micro-kernel."""
        spec = self.spec
        n = spec.rows * (spec.cols // self.vw)
        loop = scf_for(k_start, k_extent, 1, [zeros(self.vtype)] * n)
        with ir.InsertionPoint(loop.body):
            k = loop.induction_variable
            acc = list(loop.inner_iter_args)
            bs = b_of(k)
            out = []
            for r in range(spec.rows):
                a = vector.BroadcastOp(self.vtype, a_of(r, k)).result
                for c, bv in enumerate(bs):
                    out.append(vector.FMAOp(a, bv, acc[r * len(bs) + c]).result)
            scf.YieldOp(out)
        return list(loop.results)


class _Body(TileKernel):
    def emit(self) -> None:
        p = self.p
        self.B = memref.DimOp(p["Q"], idx(0)).result
        self.SQ = memref.DimOp(p["Q"], idx(1)).result
        self.D = memref.DimOp(p["Q"], idx(2)).result
        self.SK = memref.DimOp(p["K"], idx(1)).result if self.spec.keys_rows else \
            memref.DimOp(p["KT"], idx(2)).result
        self.DV = memref.DimOp(p["V"], idx(2)).result
        i0 = mul(self.launch["bid_x"], self.spec.rows * self.spec.tiles)
        b = self.launch["bid_y"]
        inside = arith.AndIOp(lt(i0, self.SQ), lt(b, self.B)).result
        guard = scf.IfOp(inside)
        with ir.InsertionPoint(guard.then_block):
            self._block(b, i0)
            scf.YieldOp([])

    def _block(self, b, i0) -> None:
        spec, vw, f32 = self.spec, self.vw, ir.F32Type.get()
        mr = spec.rows
        rows = smin(mr * spec.tiles, sub(self.SQ, i0))
        tiles = arith.CeilDivSIOp(rows, idx(mr)).result   # register tiles of query rows in this block
        # Keys any row of the block sees: causal rows i see keys j <= i (top-left aligned).
        keys = smin(self.SK, add(i0, rows)) if spec.causal else self.SK
        # Scratch rows padded to whole vectors and one more: at a power-of-two length (Sk = 512) the rows
        # the output pass broadcasts from would share L1 sets. On the heap (workers' stacks are 8 MiB).
        self.ld = mul(add(arith.CeilDivSIOp(self.SK, idx(vw)).result, 1), vw)
        dyn = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], f32)
        alloc = lambda n: memref.AllocOp(dyn, [idx(n)], [], alignment=64).result  # noqa: E731
        scratch = alloc(mul(self.ld, mr * spec.tiles))
        # Per row: the running maximum of its scores (a vector, reduced in the softmax pass), then 1/Σ.
        self.stats = alloc(mr * spec.tiles * vw)
        self.inv = alloc(mr * spec.tiles)
        # One NR-key strip of Kᵀ packed contiguous (D×NR): Kᵀ's rows are Sk apart, a power of two for the
        # usual Sk, so reading the strip in place maps its D rows onto a few L1 sets that it thrashes.
        self.strip = alloc(mul(self.D, spec.cols))
        ninf = self._splat(float("-inf"))
        init = scf_for(0, mr * spec.tiles)
        with ir.InsertionPoint(init.body):
            vector.StoreOp(ninf, self.stats, [mul(init.induction_variable, vw)])
            scf.YieldOp([])
        self._scores(scratch, b, i0, rows, tiles, keys)
        loop = scf_for(0, tiles)
        with ir.InsertionPoint(loop.body):
            t = loop.induction_variable
            ti0 = add(i0, mul(t, mr))
            t_rows = smin(mr, sub(self.SQ, ti0))
            t_keys = smin(self.SK, add(ti0, t_rows)) if spec.causal else self.SK
            self._softmax(scratch, b, ti0, t, t_rows, t_keys)
            self._output(scratch, b, ti0, t, t_rows, t_keys)
            scf.YieldOp([])
        for m in (scratch, self.stats, self.inv, self.strip):
            memref.DeallocOp(m)

    # -- pass 1: scores -----------------------------------------------------------------------------------
    def _scores(self, S, b, i0, rows, tiles, keys) -> None:
        """S = scale · Q·Kᵀ for the block's register tiles of rows, key strip by key strip (each strip packed
        once for all of them), and each row's running maximum."""
        spec, vw = self.spec, self.vw
        mr, nr = spec.rows, spec.cols
        per = nr // vw
        scale = self._splat(spec.scale)
        ninf = self._splat(float("-inf"))
        lanes = self._lanes()
        self.scale_v = scale if spec.scale != 1.0 else None   # the key strips are packed times the scale

        def strip_tile(j0, count, full):
            if spec.keys_rows:
                self._pack_rows(b, j0, count, full)
            else:
                self._pack_columns(b, j0, count, full)
            tl = scf_for(0, tiles)
            with ir.InsertionPoint(tl.body):
                t = tl.induction_variable
                ti0 = add(i0, mul(t, mr))
                if spec.causal:   # a tile whose rows all precede the strip sees none of its keys
                    t_rows = smin(mr, sub(self.SQ, ti0))
                    seen = scf.IfOp(lt(j0, add(ti0, t_rows)))
                    with ir.InsertionPoint(seen.then_block):
                        self._score_tile(S, b, ti0, t, j0, count, full, ninf, lanes, per)
                        scf.YieldOp([])
                else:
                    self._score_tile(S, b, ti0, t, j0, count, full, ninf, lanes, per)
                scf.YieldOp([])

        self._tiles(keys, strip_tile)

    def _pack_columns(self, b, j0, count, full) -> None:
        """The strip of keys j0:j0+count from Kᵀ: D rows of NR contiguous values (lanes past the keys: 0)."""
        vw, nr = self.vw, self.spec.cols
        pack = scf_for(0, self.D)
        with ir.InsertionPoint(pack.body):
            d = pack.induction_variable
            for c in range(0, nr, vw):
                v = self._scaled(self._load(self.p["KT"], [b, d, add(j0, c)], count, c, full))
                vector.StoreOp(v, self.strip, [add(mul(d, nr), c)], alignment=vw * 4)
            scf.YieldOp([])

    def _pack_rows(self, b, j0, count, full) -> None:
        """The same strip from K's rows j0:j0+count: each VW keys × VW values of d loaded as VW contiguous row
        vectors and transposed in registers (log2 VW stages of two-source shuffles, as gemm.py packs A), the
        last D mod VW values of d a scalar at a time. Keys past `count` read the strip's last key and store 0,
        so every load stays inside K."""
        vw, nr, K = self.vw, self.spec.cols, self.p["K"]
        f32 = ir.F32Type.get()
        last = sub(add(j0, count), 1)
        rows = [add(j0, c) if full else smin(add(j0, c), last) for c in range(nr)]
        there = [None if full or c == 0 else lt(c, count) for c in range(nr)]
        whole = sub(self.D, arith.RemSIOp(self.D, idx(vw)).result)
        dl = scf_for(0, whole, vw)
        with ir.InsertionPoint(dl.body):
            d0 = dl.induction_variable
            for g in range(0, nr, vw):
                vecs = []
                for c in range(g, g + vw):
                    v = vector.LoadOp(self.vtype, K, [b, rows[c], d0]).result
                    vecs.append(v if there[c] is None else arith.SelectOp(there[c], v, zeros(self.vtype)).result)
                for k, v in enumerate(transpose_vectors(vecs)):   # vecs[k]: keys g:g+VW of value d0 + k
                    vector.StoreOp(self._scaled(v), self.strip, [add(mul(add(d0, k), nr), g)], alignment=vw * 4)
            scf.YieldOp([])
        rest = scf_for(whole, self.D)
        with ir.InsertionPoint(rest.body):
            d = rest.induction_variable
            for c in range(nr):
                v = memref.LoadOp(K, [b, rows[c], d]).result
                if there[c] is not None:
                    v = arith.SelectOp(there[c], v, zeros(f32)).result
                if self.scale_v is not None:
                    v = arith.MulFOp(v, arith.ConstantOp(f32, ir.FloatAttr.get(f32, self.spec.scale)).result).result
                memref.StoreOp(v, self.strip, [add(mul(d, nr), c)])
            scf.YieldOp([])

    def _scaled(self, v):
        """A vector of the packed key strip times the scale: the scores come out of the tile product scaled
        (exactly as scale · (Q·Kᵀ) where the scale is a power of two, 1/√64; within an ulp of it otherwise)."""
        return v if self.scale_v is None else arith.MulFOp(v, self.scale_v).result

    def _score_tile(self, S, b, ti0, t, j0, count, full, ninf, lanes, per) -> None:
        spec, vw, nr = self.spec, self.vw, self.spec.cols
        q_rows = [self._row(ti0, r) for r in range(spec.rows)]
        acc = self._tile_product(
            self.D, lambda r, d: memref.LoadOp(self.p["Q"], [b, q_rows[r], d]).result,
            lambda d: [vector.LoadOp(self.vtype, self.strip, [add(mul(d, nr), c)], alignment=vw * 4).result
                       for c in range(0, nr, vw)])
        for r in range(spec.rows):
            row = add(mul(t, spec.rows), r)
            top = None
            for c in range(per):
                s = acc[r * per + c]   # scaled: the key strip was packed times the scale
                j = arith.AddIOp(vector.BroadcastOp(lanes.type, add(j0, c * vw)).result, lanes).result
                if spec.causal:   # keys past row ti0 + r: -inf, so exp gives 0
                    later = arith.CmpIOp(arith.CmpIPredicate.sgt, j, vector.BroadcastOp(
                        lanes.type, add(ti0, r)).result).result
                    s = arith.SelectOp(later, ninf, s).result
                self._store(s, S, [add(mul(row, self.ld), add(j0, c * vw))], count, c * vw, full)
                if not full:   # lanes past the keys take no part in the maximum
                    inside = arith.CmpIOp(arith.CmpIPredicate.slt, j, vector.BroadcastOp(
                        lanes.type, add(j0, count)).result).result
                    s = arith.SelectOp(inside, s, ninf).result
                top = s if top is None else arith.MaximumFOp(top, s).result
            at = [mul(row, self.vw)]
            vector.StoreOp(arith.MaximumFOp(vector.LoadOp(self.vtype, self.stats, at).result, top).result,
                           self.stats, at)

    # -- pass 2: softmax and dropout, row by row -------------------------------------------------------------
    def _softmax(self, S, b, ti0, t, t_rows, t_keys) -> None:
        """Per row of register tile t: e = exp(s - max) over the keys the tile sees (0 past a causal row's own)
        stored over s, its sum, the log-sum-exp, and 1/Σ for the output pass — which scales O's rows by it,
        instead of a pass scaling every e. Dropout, the same Philox-4x32-10 stream as the interpreter (counter
        = linear index of (b, i, j) in P + offset), keeps e / (1 - p_drop) where u ≥ p_drop, else 0, after
        the sum."""
        spec, vw, f32 = self.spec, self.vw, ir.F32Type.get()
        loop = scf_for(0, t_rows)
        with ir.InsertionPoint(loop.body):
            r = loop.induction_variable
            i = add(ti0, r)
            row = add(mul(t, spec.rows), r)
            base = mul(row, self.ld)
            top = vector.ReductionOp(f32, vector.CombiningKind.MAXIMUMF,
                                     vector.LoadOp(self.vtype, self.stats, [mul(row, vw)]).result).result
            top_v = vector.BroadcastOp(self.vtype, top).result
            ninf = self._splat(float("-inf"))
            lanes = self._lanes()
            it = lanes.type

            def step(j, total, m):
                """The keys j:j+VW (the first `m` of them where m is a mask): e stored over s, added to total."""
                if m is None:
                    s = vector.LoadOp(self.vtype, S, [add(base, j)]).result
                else:
                    s = vector.MaskedLoadOp(self.vtype, S, [add(base, j)], m, ninf).result
                e = exp_nonpositive(arith.SubFOp(s, top_v).result)   # masked lanes, causal -inf: exp = 0
                total = arith.AddFOp(total, e).result
                if spec.dropout is not None:
                    e = self._dropout(e, b, i, arith.AddIOp(vector.BroadcastOp(it, j).result, lanes).result)
                if m is None:
                    vector.StoreOp(e, S, [add(base, j)])
                else:
                    vector.MaskedStoreOp(S, [add(base, j)], m, e)
                return total

            # Whole vectors unmasked, then the partial one (the same sums in the same order).
            whole = arith.DivSIOp(t_keys, idx(vw)).result
            vl = scf_for(0, whole, 1, [zeros(self.vtype)])
            with ir.InsertionPoint(vl.body):
                scf.YieldOp([step(mul(vl.induction_variable, vw), vl.inner_iter_args[0], None)])
            j = mul(whole, vw)
            tail = scf.IfOp(lt(j, t_keys), [self.vtype], has_else=True)
            with ir.InsertionPoint(tail.then_block):
                scf.YieldOp([step(j, vl.results[0], self._mask(sub(t_keys, j)))])
            with ir.InsertionPoint(tail.else_block):
                scf.YieldOp([vl.results[0]])
            total = vector.ReductionOp(f32, vector.CombiningKind.ADD, tail.results[0]).result
            if spec.lse:   # the scores are scaled already: lse = max + log Σ exp(s - max)
                memref.StoreOp(arith.AddFOp(top, math.LogOp(total).result).result, self.p["LSE"], [b, i])
            one = arith.ConstantOp(f32, ir.FloatAttr.get(f32, 1.0)).result
            memref.StoreOp(arith.DivFOp(one, total).result, self.inv, [row])
            scf.YieldOp([])

    def _dropout(self, p, b, i, jv):
        """The interpreter's mask: u(counter) ≥ p_drop keeps p / (1 - p_drop), counter = ((b·Sq + i)·Sk + j)
        + offset, the element's linear index in P."""
        drop, seed, offset = self.spec.dropout
        row = add(mul(add(mul(b, self.SQ), i), self.SK), offset)
        counter = arith.AddIOp(vector.BroadcastOp(jv.type, row).result, jv).result
        u = philox_uniform(counter, seed)
        keep = arith.CmpFOp(arith.CmpFPredicate.OGE, u, self._splat(drop)).result
        kept = arith.DivFOp(p, self._splat(1.0 - drop)).result
        return arith.SelectOp(keep, kept, self._splat(0.0)).result

    # -- pass 3: the output -----------------------------------------------------------------------------
    def _output(self, S, b, ti0, t, t_rows, t_keys) -> None:
        """O = (E·V) / Σ for register tile t's rows, NR columns of Dv at a time, E broadcast from the scratch
        and V's rows as the panel."""
        spec, vw = self.spec, self.vw
        per = spec.cols // vw
        first = mul(t, spec.rows)

        def tile(d0, count, full):
            def v(j):
                return [self._load(self.p["V"], [b, j, add(d0, c)], count, c, full) for c in range(0, spec.cols, vw)]
            acc = self._tile_product(
                t_keys, lambda r, j: memref.LoadOp(S, [add(mul(add(first, r), self.ld), j)]).result, v)
            for r in range(spec.rows):
                there = scf.IfOp(lt(r, t_rows))
                with ir.InsertionPoint(there.then_block):
                    inv = vector.BroadcastOp(self.vtype, memref.LoadOp(self.inv, [add(first, r)]).result).result
                    for c in range(per):
                        self._store(arith.MulFOp(acc[r * per + c], inv).result, self.p["O"],
                                    [b, add(ti0, r), add(d0, c * vw)], count, c * vw, full)
                    scf.YieldOp([])

        self._tiles(self.DV, tile)


# -- a fusion group as a plan step ----------------------------------------------------------------------------

def lower(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan step of an attention group (passes/fusion.py: matmul, [scale], softmax, [dropout], matmul,
    and the `attention_lse` of the same Q, K, causal and scale when the backward needs it, and the transpose
    making Kᵀ from K where fusion.keys_transpose joined it); its kernel is added to the module (`ctx`: a
    passes.lowering_context.LoweringContext)."""
    chain = [op for op in ops if op.operation.name not in ("ttensor.attention_lse", "ttensor.transpose")]
    lse = [op for op in ops if op.operation.name == "ttensor.attention_lse"]
    if not chain:   # the kernel writes lse beside O: it reads Kᵀ, which only the forward's chain has
        raise LoweringError(lse[0], "attention_lse has no cpu kernel of its own: it runs in the kernel of the "
                                    "f32 attention of the same Q, K, causal and scale (none was fused here)")
    qk, pv = chain[0], chain[-1]
    scale, causal, drop = 1.0, False, None
    for op in chain[1:-1]:
        name = op.operation.name
        if name == "ttensor.binary":
            other = next(o for o in op.operands if fusion.is_scalar_constant(o))
            scale = ir.FloatAttr(other.owner.attributes["value"]).value
        elif name == "ttensor.softmax":
            causal = "tessera.causal" in op.attributes
        elif name == "ttensor.dropout":
            drop = (ir.FloatAttr(op.attributes["p"]).value, ir.IntegerAttr(op.attributes["seed"]).value,
                    ir.IntegerAttr(op.attributes["offset"]).value)
    for op in lse:   # the fusion phase pairs them; a mismatch would write another softmax's statistics
        if ir.BoolAttr(op.attributes["causal"]).value != causal or \
                not np.isclose(ir.FloatAttr(op.attributes["scale"]).value, scale, rtol=1e-6, atol=0):
            raise LoweringError(op, "attention_lse was grouped with an attention of another causal or scale")
    q, kt, v = qk.operands[0], qk.operands[1], pv.operands[1]
    # K itself where the group holds the transpose that makes Kᵀ (no layout kernel writes Kᵀ)
    k = next((op.operands[0] for op in ops if op.operation.name == "ttensor.transpose" and op.results[0] == kt), None)
    spec = AttentionSpec(kname, scale=scale, causal=causal, dropout=drop, lse=bool(lse), keys_rows=k is not None)
    with qk.location:
        build_attention(ctx.module, spec)
    dims = ctx.dims
    dq = dims[q]
    keys = (kt, ("B", "D", "SK")) if k is None else (k, ("B", "SK", "D"))
    env = {"B": product(dq[:-2]), "SQ": dq[-2], "D": dq[-1], "SK": dims[kt][-1], "DV": dims[v][-1]}
    args = [(q, ("B", "SQ", "D")), keys, (v, ("B", "SK", "DV")), (pv.results[0], ("B", "SQ", "DV"))]
    args += [(op.results[0], ("B", "SQ")) for op in lse]
    return [plan.ArgsStep(kname, env=env, args=tuple(plan.TensorArg(ctx.record(x), s) for x, s in args),
                          block=(1, 1, 1), grid=(f"ceil(SQ/{spec.rows * spec.tiles})", "B", "1"))]
