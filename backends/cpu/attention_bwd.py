"""Fused attention backward for the CPU backend: dQ, dK and dV of O = softmax(scale · Q·Kᵀ [causal]) · V
without writing the S×S probabilities (FlashAttention-2's backward).

The fusion phase groups the `attention_grad` ops of one attention (identical operands q, k, v, dO, lse,
delta; `wrt` q, k or v) into an "attention_bwd" group; this generator writes its kernel in the per-block form
of gemm.py and attention.py (docs/image-format.md)::

    func.func @name(%Q: memref<?x?x?xf32>, %K, %V, %dO, %LSE: memref<?x?xf32>, %DELTA, [%dQ], [%dK], [%dV],
                    %bid_x, …, %gdim_z: index) attributes {tessera.kernel, tessera.tile_kernel}

with Q [B, SQ, D], K [B, SK, D], V [B, SK, E], dO [B, SQ, E], LSE and DELTA [B, SQ] (f32: the forward's
log-sum-exp of each row of scale·QKᵀ, and rowsum(dO ∘ O)), and the gradients present in the shapes of Q, K, V.

Block (0, b) computes batch entry b (batch and heads folded) whole: its keys in blocks of NR (one register
tile wide), each in four passes over two SQ×NR strips that stay in cache:

    P, dS    for the query rows that see the block (causal: from its first key on; the rows before see none of
             its keys and are skipped), MR×NR register tiles: S = Q·K_jᵀ over D (K_jᵀ packed once per key
             block), P = exp(scale·S − lse) (0 past Sk and, causal, past each row's own key), dP = dO·V_jᵀ over
             E (V_jᵀ packed), dS = scale · P ∘ (dP − delta); P and dS go to the strips
    dV_j     = Pᵀ·dO, computed as dV_jᵀ: MR columns of E × the block's NR keys a register tile (the strip's
             rows are its vectors), summed over the rows, written once, transposed through a tile buffer
    dK_j     = dSᵀ·Q, the same over D
    dQ      += dS·K_j: MR rows × NR columns of D a tile, added to the block's dQ rows

A block owns its batch entry's dQ rows, so the accumulation over key blocks has no race and the sum is in one
fixed order (deterministic); the parallelism is the batch × heads extent (grid (1, B)). The work is the five
products of the backward (S and dP recomputed once), packing aside; nothing S×S is written: the strips hold
SQ×NR floats each (and one MR×NR tile buffer).

No bounds checks, for gemm.py's reason: the tensors share their extents by name (B, SQ, SK, D, E), every
index is a block's origin plus an offset its loop bounds by them (rows past the last are clamped to it and
not stored), and a block outside the grid of `attention_bwd_grid` does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import plan
from ...diagnostics import LoweringError
from ...mlir import arith, func, ir, memref, scf, vector
from ...passes import vmath
from ...passes.graph_shapes import product
from ...passes.kernelgen import element_dtype
from .attention import TileKernel, declare_kernel, default_tile
from .irbuild import add, idx, lt, mul, scf_for, smin, sub, zeros

WRT = ("q", "k", "v")


@dataclass(frozen=True)
class AttentionBwdSpec:
    """One fused attention backward kernel computing the gradients named in `wrt` (a subset of q, k, v);
    `rows` (MR) and `cols` (NR: the key block) default to the host's GEMM register tile."""

    name: str
    scale: float = 1.0
    causal: bool = False
    wrt: tuple = WRT
    rows: int | None = None
    cols: int | None = None
    vector_width: int | None = None

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"attention backward kernel name '{self.name}' is not an identifier")
        if not self.wrt or any(w not in WRT for w in self.wrt) or len(set(self.wrt)) != len(self.wrt):
            raise ValueError(f"wrt must name distinct ones of q, k, v, got {self.wrt}")
        object.__setattr__(self, "wrt", tuple(w for w in WRT if w in self.wrt))   # the parameters' order
        default_tile(self)


def attention_bwd_grid(spec: AttentionBwdSpec, batch: int) -> tuple[int, int, int]:
    return 1, max(1, batch), 1


_GRADS = {"q": ("dQ", ("B", "SQ", "D")), "k": ("dK", ("B", "SK", "D")), "v": ("dV", ("B", "SK", "E"))}


def _params(spec: AttentionBwdSpec) -> list:
    return [("Q", ("B", "SQ", "D")), ("K", ("B", "SK", "D")), ("V", ("B", "SK", "E")), ("dO", ("B", "SQ", "E")),
            ("LSE", ("B", "SQ")), ("DELTA", ("B", "SQ"))] + [_GRADS[w] for w in spec.wrt]


def build_attention_bwd(module: ir.Module, spec: AttentionBwdSpec) -> func.FuncOp:
    """Appends the kernel `spec` to `module` (in the module's context, under a location) and returns it."""
    i64 = ir.IntegerType.get_signless(64)
    props = {"rows": ir.IntegerAttr.get(i64, spec.rows), "cols": ir.IntegerAttr.get(i64, spec.cols),
             "scale": ir.FloatAttr.get(ir.F32Type.get(), spec.scale), "causal": ir.BoolAttr.get(spec.causal),
             "wrt": ir.ArrayAttr.get([ir.StringAttr.get(w) for w in spec.wrt])}
    fn, tensors, launch = declare_kernel(module, spec.name, _params(spec), "tessera.attention_bwd", props)
    with ir.InsertionPoint(fn.entry_block):
        _Backward(spec, tensors, launch).emit()
        func.ReturnOp([])
    return fn


class _Backward(TileKernel):
    def emit(self) -> None:
        p = self.p
        self.B = memref.DimOp(p["Q"], idx(0)).result
        self.SQ = memref.DimOp(p["Q"], idx(1)).result
        self.D = memref.DimOp(p["Q"], idx(2)).result
        self.SK = memref.DimOp(p["K"], idx(1)).result
        self.E = memref.DimOp(p["V"], idx(2)).result
        b = self.launch["bid_y"]
        zero = arith.CmpIOp(arith.CmpIPredicate.eq, self.launch["bid_x"], idx(0)).result
        guard = scf.IfOp(arith.AndIOp(zero, lt(b, self.B)).result)
        with ir.InsertionPoint(guard.then_block):
            self._block(b)
            scf.YieldOp([])

    def _alloc(self, size) -> ir.Value:
        # on the heap: workers' stacks are 8 MiB and SQ is unbounded
        return memref.AllocOp(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], ir.F32Type.get()),
                              [size], [], alignment=64).result

    def _block(self, b) -> None:
        spec, nr = self.spec, self.spec.cols
        wrt = spec.wrt
        self.ds = "q" in wrt or "k" in wrt   # dS is needed (dV needs P only)
        kt = self._alloc(mul(self.D, nr))
        strip = mul(self.SQ, nr)
        P = self._alloc(strip)
        tile = self._alloc(idx(spec.rows * nr))   # one register tile, for dV and dK's transposed stores
        bufs = [kt, P, tile]
        if self.ds:
            vt, dS = self._alloc(mul(self.E, nr)), self._alloc(strip)
            bufs += [vt, dS]
        if "q" in wrt:   # dQ accumulates over the key blocks
            rows = scf_for(0, self.SQ)
            with ir.InsertionPoint(rows.body):
                def clear(d0, count, full):
                    for c in range(0, nr, self.vw):
                        self._store(zeros(self.vtype), self.p["dQ"], [b, rows.induction_variable, add(d0, c)],
                                    count, c, full)
                self._tiles(self.D, clear)
                scf.YieldOp([])
        blocks = scf_for(0, arith.CeilDivSIOp(self.SK, idx(nr)).result)
        with ir.InsertionPoint(blocks.body):
            j0 = mul(blocks.induction_variable, nr)
            cnt = smin(nr, sub(self.SK, j0))
            # causal (top-left aligned): row i sees keys j <= i, so rows before j0 see none of this block's
            first = smin(j0, self.SQ) if spec.causal else idx(0)
            self._pack(kt, self.p["K"], self.D, b, j0)
            if self.ds:
                self._pack(vt, self.p["V"], self.E, b, j0)
            self._strips(b, j0, first, kt, P, *((vt, dS) if self.ds else (None, None)))
            if "v" in wrt:
                self._key_grad(P, self.p["dO"], self.p["dV"], self.E, b, j0, cnt, first, tile)
            if "k" in wrt:
                self._key_grad(dS, self.p["Q"], self.p["dK"], self.D, b, j0, cnt, first, tile)
            if "q" in wrt:
                self._query_grad(dS, b, j0, cnt, first)
            scf.YieldOp([])
        for buf in bufs:
            memref.DeallocOp(buf)

    def _pack(self, dst, src, width, b, j0) -> None:
        """dst[d·NR + c] = src[b, j0 + c, d]: the key block transposed, so that its NR keys are one register
        tile's vectors. Keys past Sk repeat the last one (their P is masked to 0)."""
        nr = self.spec.cols
        last = sub(self.SK, 1)
        loop = scf_for(0, width)
        with ir.InsertionPoint(loop.body):
            d = loop.induction_variable
            inner = scf_for(0, nr)
            with ir.InsertionPoint(inner.body):
                c = inner.induction_variable
                x = memref.LoadOp(src, [b, smin(add(j0, c), last), d]).result
                memref.StoreOp(x, dst, [add(mul(d, nr), c)])
                scf.YieldOp([])
            scf.YieldOp([])

    def _row_tiles(self, first, body) -> None:
        """body(i0, [row r clamped into Q]) over the rows [first, SQ) in steps of MR."""
        mr = self.spec.rows
        loop = scf_for(0, arith.CeilDivSIOp(sub(self.SQ, first), idx(mr)).result)
        with ir.InsertionPoint(loop.body):
            i0 = add(first, mul(loop.induction_variable, mr))
            body(i0, [smin(add(i0, r), sub(self.SQ, 1)) for r in range(mr)])
            scf.YieldOp([])

    def _strips(self, b, j0, first, kt, P, vt, dS) -> None:
        spec, vw, nr = self.spec, self.vw, self.spec.cols
        per = nr // vw
        lanes = self._lanes()
        lt_ = lanes.type
        # keys of the block's lanes, and which exist
        keys = [arith.AddIOp(vector.BroadcastOp(lt_, add(j0, c * vw)).result, lanes).result for c in range(per)]
        inside = [arith.CmpIOp(arith.CmpIPredicate.slt, j, vector.BroadcastOp(lt_, self.SK).result).result
                  for j in keys]
        scale = self._splat(spec.scale)

        def body(i0, rows):
            acc = self._tile_product(self.D, lambda r, d: memref.LoadOp(self.p["Q"], [b, rows[r], d]).result,
                                     lambda d: [vector.LoadOp(self.vtype, kt, [add(mul(d, nr), c)]).result
                                                for c in range(0, nr, vw)])
            for r in range(spec.rows):
                lse = vector.BroadcastOp(self.vtype, memref.LoadOp(self.p["LSE"], [b, rows[r]]).result).result
                for c in range(per):
                    p = vmath.exp(arith.SubFOp(arith.MulFOp(acc[r * per + c], scale).result, lse).result)
                    seen = inside[c]
                    if spec.causal:
                        mine = arith.CmpIOp(arith.CmpIPredicate.sle, keys[c],
                                            vector.BroadcastOp(lt_, rows[r]).result).result
                        seen = arith.AndIOp(seen, mine).result
                    p = arith.SelectOp(seen, p, self._splat(0.0)).result
                    vector.StoreOp(p, P, [add(mul(rows[r], nr), c * vw)])
            if not self.ds:
                return
            # P is stored and reloaded: keeping it in registers during dP's product would spill them
            acc = self._tile_product(self.E, lambda r, e: memref.LoadOp(self.p["dO"], [b, rows[r], e]).result,
                                     lambda e: [vector.LoadOp(self.vtype, vt, [add(mul(e, nr), c)]).result
                                                for c in range(0, nr, vw)])
            for r in range(spec.rows):
                delta = vector.BroadcastOp(self.vtype, memref.LoadOp(self.p["DELTA"], [b, rows[r]]).result).result
                for c in range(per):
                    at = [add(mul(rows[r], nr), c * vw)]
                    p = vector.LoadOp(self.vtype, P, at).result
                    ds = arith.MulFOp(arith.MulFOp(p, arith.SubFOp(acc[r * per + c], delta).result).result,
                                      scale).result
                    vector.StoreOp(ds, dS, at)

        self._row_tiles(first, body)

    def _key_grad(self, strip, lhs, out, width, b, j0, cnt, first, tile) -> None:
        """out[b, j0 + c, x] = Σ_i lhs[b, i, x] · strip[i, c] over the rows i ≥ first (dV from dO and P, dK
        from Q and dS), as outᵀ: MR columns x of lhs a step against the key block's NR keys, the strip's rows
        as the vector operand (the GEMM micro-kernel's shape: every lane of the register tile used, where MR
        keys a step would leave part of the last tile idle). Each MR×NR tile goes through `tile` to be
        written transposed."""
        spec, vw, nr, mr = self.spec, self.vw, self.spec.cols, self.spec.rows
        last = sub(width, 1)
        loop = scf_for(0, arith.CeilDivSIOp(width, idx(mr)).result)
        with ir.InsertionPoint(loop.body):
            x0 = mul(loop.induction_variable, mr)
            xs = [smin(add(x0, r), last) for r in range(mr)]
            acc = self._tile_product(
                self.SQ, lambda r, i: memref.LoadOp(lhs, [b, i, xs[r]]).result,
                lambda i: [vector.LoadOp(self.vtype, strip, [add(mul(i, nr), c)]).result for c in range(0, nr, vw)],
                k_start=first)
            per = nr // vw
            for r in range(mr):
                for c in range(per):
                    vector.StoreOp(acc[r * per + c], tile, [idx(r * nr + c * vw)])
            keys = scf_for(0, cnt)
            with ir.InsertionPoint(keys.body):
                c = keys.induction_variable
                rows = scf_for(0, smin(mr, sub(width, x0)))
                with ir.InsertionPoint(rows.body):
                    r = rows.induction_variable
                    memref.StoreOp(memref.LoadOp(tile, [add(mul(r, nr), c)]).result, out,
                                   [b, add(j0, c), add(x0, r)])
                    scf.YieldOp([])
                scf.YieldOp([])
            scf.YieldOp([])

    def _query_grad(self, dS, b, j0, cnt, first) -> None:
        """dQ[b, i, :] += Σ_c dS[i, c] · K[b, j0 + c, :] for the rows i ≥ first."""
        spec, vw, nr = self.spec, self.vw, self.spec.cols
        per = nr // vw

        def body(i0, rows):
            def tile(d0, count, full):
                acc = self._tile_product(
                    cnt, lambda r, c: memref.LoadOp(dS, [add(mul(rows[r], nr), c)]).result,
                    lambda c: [self._load(self.p["K"], [b, add(j0, c), add(d0, x)], count, x, full)
                               for x in range(0, nr, vw)])
                for r in range(spec.rows):
                    there = scf.IfOp(lt(add(i0, r), self.SQ))
                    with ir.InsertionPoint(there.then_block):
                        for c in range(per):
                            at = [b, rows[r], add(d0, c * vw)]
                            old = self._load(self.p["dQ"], at, count, c * vw, full)
                            self._store(arith.AddFOp(old, acc[r * per + c]).result, self.p["dQ"], at, count,
                                        c * vw, full)
                        scf.YieldOp([])
            self._tiles(self.D, tile)

        self._row_tiles(first, body)


# -- a fusion group as a plan step ----------------------------------------------------------------------------

def lower(ctx, kname: str, ops: list) -> list[plan.ArgsStep]:
    """The plan step of an "attention_bwd" group (passes/fusion.py: the `attention_grad` ops of one
    attention, one per gradient wanted); its kernel is added to the module."""
    first = ops[0]
    q, k, v, do, lse, delta = first.operands
    wrt = {ir.StringAttr(op.attributes["wrt"]).value: op for op in ops}
    for x in (q, k, v, do):
        if element_dtype(x) != "f32":
            raise LoweringError(first, f"the CPU's fused attention backward takes f32 operands, not "
                                       f"{element_dtype(x)} (other types take the GEMM path: passes/decompose.py)")
    spec = AttentionBwdSpec(kname, scale=ir.FloatAttr(first.attributes["scale"]).value,
                            causal=ir.BoolAttr(first.attributes["causal"]).value, wrt=tuple(wrt))
    with first.location:
        build_attention_bwd(ctx.module, spec)
    dims = ctx.dims
    dq = dims[q]
    env = {"B": product(dq[:-2]), "SQ": dq[-2], "D": dq[-1], "SK": dims[k][-2], "E": dims[v][-1]}
    values = [q, k, v, do, lse, delta] + [wrt[w].results[0] for w in spec.wrt]
    args = tuple(plan.TensorArg(ctx.record(x), dims_) for x, (_, dims_) in zip(values, _params(spec)))
    return [plan.ArgsStep(kname, env=env, args=args, block=(1, 1, 1), grid=("1", "B", "1"))]
