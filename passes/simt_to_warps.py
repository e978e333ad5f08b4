"""``tessera-simt-to-warps``: a SIMT kernel becomes a per-block function that runs each warp as one vector.

This is how the CPU backend gives warp operations (shuffles, lane ids) their GPU meaning: every value that
can differ between the lanes of a warp ("varying") becomes a ``vector<W x T>``; values equal across the warp
("uniform": parameters, block indices, loop bounds) stay scalars. Control flow on a varying condition is
predicated: both sides run under a lane mask, memory operations are masked, and ``scf.if`` results become
selects. Varying indices of the form ``uniform + lane`` become contiguous masked loads and stores.

With bounds checks on (the default; CompileOptions.bounds_checks), every access that bounds_facts cannot prove
within its tensor's extents is checked: an active lane outside them does not access memory, and the block
records its report (the first failing access's tensor and source line, docs/image-format.md) in the slot the
runtime passes, then stops at its next warp; the launch fails with TSR_ERROR_MEMORY_FAULT. The per-block
function then takes that slot, a ``memref<1xindex>``, after the launch indices. Without checks the lowering
is exactly the unchecked one.

Warps are formed along x: a warp covers up to W consecutive threads of one row of the block (the last warp of
a row is partial when block_x is not a multiple of W). The rewritten kernel is::

    func.func @k(<params>, %bid_x, %bid_y, %bid_z, %bdim_x, %bdim_y, %bdim_z, %gdim_x, %gdim_y, %gdim_z)
      for z, y, xw in block: <the body, on vectors>
"""

from __future__ import annotations

from dataclasses import dataclass

# numpy: imported where used (a compile that never gets there does not load it, 60-70 ms)

from ..diagnostics import LoweringError
from ..dialects import ttile_tile
from ..mlir import arith, func, ir, memref, scf, vector
from . import atomics, bounds_facts

LAUNCH_ARGS = ("bid_x", "bid_y", "bid_z", "bdim_x", "bdim_y", "bdim_z", "gdim_x", "gdim_y", "gdim_z")


@dataclass
class V:
    """A value of the rewritten kernel: a scalar (uniform) or a vector (varying). `lane_base`, for an index
    vector, is a uniform scalar b with the vector equal to b + [0, 1, …, W-1]."""

    value: ir.Value
    varying: bool
    lane_base: ir.Value | None = None


class _Checks:
    """A kernel's run-time bounds checks: the facts that spare them, the block's report slot, the reports."""

    def __init__(self, kernel, slot: ir.Value):
        self.facts = bounds_facts.Facts(kernel)
        self.kernel = kernel.sym_name.value
        self.module_body = kernel.operation.parent.regions[0].blocks[0]
        self.slot = slot  # memref<1xindex>: the address of the block's first report, 0 while there is none
        self.reports: dict[str, str] = {}  # report text -> its global's symbol
        self.used = False  # whether the phase being lowered checks an access

    def needed(self, mem: ir.Value, indices: list[ir.Value]) -> bool:
        """Whether an access of (the kernel's) `mem` at `indices` needs a check."""
        if self.facts.in_bounds(mem, indices):
            return False
        self.used = True
        return True

    def report(self, op, mem: ir.Value) -> None:
        """Emits: the block's report becomes this access's, unless it has one already."""
        zero = arith.ConstantOp.create_index(0).result
        first = arith.CmpIOp(arith.CmpIPredicate.eq, memref.LoadOp(self.slot, [zero]).result, zero).result
        record = scf.IfOp(first)
        with ir.InsertionPoint(record.then_block):
            text = self.facts.report(op, mem)
            data = text.encode() + b"\0"
            t = ir.MemRefType.get([len(data)], ir.IntegerType.get_signless(8))
            g = memref.GetGlobalOp(t, self._global(text, data, t)).result
            memref.StoreOp(memref.ExtractAlignedPointerAsIndexOp(g).result, self.slot, [zero])
            scf.YieldOp([])

    def report_if(self, cond: ir.Value, op, mem: ir.Value) -> None:
        failed = scf.IfOp(cond)
        with ir.InsertionPoint(failed.then_block):
            self.report(op, mem)
            scf.YieldOp([])

    def _global(self, text: str, data: bytes, t: ir.MemRefType) -> str:
        if text not in self.reports:
            import numpy as np
            name = f"__tessera_oob_{self.kernel}_{len(self.reports)}"
            value = ir.DenseElementsAttr.get(np.frombuffer(data, dtype=np.int8),
                                             type=ir.RankedTensorType.get([len(data)], t.element_type))
            with ir.InsertionPoint.at_block_begin(self.module_body):
                memref.GlobalOp(name, ir.TypeAttr.get(t), sym_visibility="private", initial_value=value,
                                constant=True)
            self.reports[text] = name
        return self.reports[text]


class _Warp:
    """The rewriting of one kernel body for one warp."""

    def __init__(self, width: int, launch: dict[str, ir.Value], warp: dict[str, ir.Value],
                 checks: _Checks | None = None):
        self.W = width
        self.launch = launch
        self.warp = warp  # z, y, xw (uniform) and lane (the iota vector)
        self.map: dict[ir.Value, V] = {}
        self.checks = checks

    # -- vector helpers -------------------------------------------------------------------------------
    def vtype(self, t: ir.Type) -> ir.VectorType:
        return ir.VectorType.get([self.W], t)

    def vec(self, v: V) -> ir.Value:
        if v.varying:
            return v.value
        return vector.BroadcastOp(self.vtype(v.value.type), v.value).result

    def index_const(self, n: int) -> ir.Value:
        return arith.ConstantOp.create_index(n).result

    def all_lanes(self, mask: ir.Value) -> ir.Value:
        """True when every lane of the mask is on. Contiguous accesses branch on it: a plain vector access is
        much cheaper than a masked one on most CPUs (AMD's masked stores are microcoded)."""
        return vector.ReductionOp(ir.IntegerType.get_signless(1), vector.CombiningKind.AND, mask).result

    def lane_linear(self, base: ir.Value) -> V:
        vt = self.vtype(ir.IndexType.get())
        return V(arith.AddIOp(vector.BroadcastOp(vt, base).result, self.warp["lane"]).result, True, base)

    # -- body -----------------------------------------------------------------------------------------
    def run(self, block, mask: ir.Value, entry: bool) -> None:
        """Lowers the ops of `block` (an ir.Block, or a list of its top-level ops: one barrier phase)."""
        for op in (block.operations if isinstance(block, ir.Block) else block):
            name = op.operation.name
            if name in ("scf.yield", "func.return"):
                continue
            handler = getattr(self, "op_" + name.replace(".", "_"), None)
            with op.location:
                if handler is not None:
                    handler(op, mask, entry)
                elif name.startswith(("arith.", "math.")):
                    self.elementwise(op)
                else:
                    raise LoweringError(op, f"'{name}' has no CPU warp lowering")

    def get(self, v: ir.Value) -> V:
        return self.map[v]

    def elementwise(self, op) -> None:
        ins = [self.get(o) for o in op.operands]
        attrs = {name: op.attributes[name] for name in op.attributes}
        if not any(i.varying for i in ins):
            new = ir.Operation.create(op.operation.name, results=[r.type for r in op.results],
                                      operands=[i.value for i in ins], attributes=attrs)
            for old_r, new_r in zip(op.results, new.results):
                self.map[old_r] = V(new_r, False)
            return
        operands = [self.vec(i) for i in ins]
        if op.operation.name == "arith.select" and not ins[0].varying:
            operands[0] = ins[0].value  # a scalar condition selects whole vectors
        new = ir.Operation.create(op.operation.name, results=[self.vtype(r.type) for r in op.results],
                                  operands=operands, attributes=attrs)
        for old_r, new_r in zip(op.results, new.results):
            self.map[old_r] = V(new_r, True)
        if op.operation.name in ("arith.addi", "arith.subi"):
            self._track_lane_linear(op, ins, new.results[0])

    def _track_lane_linear(self, op, ins: list[V], result: ir.Value) -> None:
        a, b = ins
        if a.lane_base is not None and not b.varying:
            base = (arith.AddIOp if op.operation.name == "arith.addi" else arith.SubIOp)(a.lane_base, b.value).result
        elif b.lane_base is not None and not a.varying and op.operation.name == "arith.addi":
            base = arith.AddIOp(a.value, b.lane_base).result
        else:
            return
        self.map[op.results[0]] = V(result, True, base)

    def op_arith_constant(self, op, mask, entry) -> None:
        self.map[op.result] = V(op.operation.clone().results[0], False)

    # -- launch queries -------------------------------------------------------------------------------
    def _axis(self, op) -> int:
        return ir.IntegerAttr(op.attributes["dim"]).value

    def _local(self, axis: int) -> V:
        if axis == 0:
            return self.lane_linear(arith.MulIOp(self.warp["xw"], self.index_const(self.W)).result)
        return V(self.warp["y" if axis == 1 else "z"], False)

    def op_ttile_local_id(self, op, mask, entry) -> None:
        self.map[op.result] = self._local(self._axis(op))

    def op_ttile_thread_id(self, op, mask, entry) -> None:
        axis = self._axis(op)
        xyz = "xyz"[axis]
        start = arith.MulIOp(self.launch["bid_" + xyz], self.launch["bdim_" + xyz]).result
        local = self._local(axis)
        if local.varying:
            self.map[op.result] = self.lane_linear(arith.AddIOp(start, local.lane_base).result)
        else:
            self.map[op.result] = V(arith.AddIOp(start, local.value).result, False)

    def _launch_query(self, op, prefix: str) -> None:
        self.map[op.result] = V(self.launch[prefix + "xyz"[self._axis(op)]], False)

    def op_ttile_block_id(self, op, mask, entry) -> None:
        self._launch_query(op, "bid_")

    def op_ttile_block_dim(self, op, mask, entry) -> None:
        self._launch_query(op, "bdim_")

    def op_ttile_grid_dim(self, op, mask, entry) -> None:
        self._launch_query(op, "gdim_")

    def op_ttile_lane_id(self, op, mask, entry) -> None:
        self.map[op.result] = V(self.warp["lane"], True, self.index_const(0))

    def op_ttile_warp_size(self, op, mask, entry) -> None:
        self.map[op.result] = V(self.index_const(self.W), False)

    def op_ttile_warp_id(self, op, mask, entry) -> None:
        L = self.launch
        mul, add = (lambda a, b: arith.MulIOp(a, b).result), (lambda a, b: arith.AddIOp(a, b).result)
        xwarps = arith.CeilDivUIOp(L["bdim_x"], self.index_const(self.W)).result
        per_block = mul(mul(xwarps, L["bdim_y"]), L["bdim_z"])
        block = add(mul(add(mul(L["bid_z"], L["gdim_y"]), L["bid_y"]), L["gdim_x"]), L["bid_x"])
        in_block = add(mul(add(mul(self.warp["z"], L["bdim_y"]), self.warp["y"]), xwarps), self.warp["xw"])
        self.map[op.result] = V(add(mul(block, per_block), in_block), False)

    def op_ttile_shuffle_down(self, op, mask, entry) -> None:
        self._shuffle(op, lambda lane, k: lane + k)

    def op_ttile_shuffle_xor(self, op, mask, entry) -> None:
        self._shuffle(op, lambda lane, k: lane ^ k)

    def _shuffle(self, op, source) -> None:
        """Lane i reads lane source(i, k) of the warp, or keeps its own value when that lies outside."""
        name = op.operation.name
        v, idx = self.get(op.operands[0]), self.get(op.operands[1])
        if idx.varying:
            raise LoweringError(op, f"'{name}' {'offset' if 'down' in name else 'mask'} must be the same "
                                    f"on every lane of a warp")
        if not v.varying:  # every lane holds the value already
            self.map[op.result] = v
            return
        owner = op.operands[1].owner
        if isinstance(owner, ir.OpView) and owner.operation.name == "arith.constant":
            k = ir.IntegerAttr(owner.attributes["value"]).value
            perm = [source(i, k) if 0 <= source(i, k) < self.W else i for i in range(self.W)]
            self.map[op.result] = V(vector.ShuffleOp(v.value, v.value, perm).result, True)
            return
        # A uniform index known only at run time: read the warp's values back through a scratch buffer.
        t = v.value.type.element_type
        scratch = memref.AllocaOp(ir.MemRefType.get([self.W], t), [], []).result
        zero = self.index_const(0)
        vector.StoreOp(v.value, scratch, [zero])
        lanes = self.warp["lane"]
        k = vector.BroadcastOp(lanes.type, idx.value).result
        src = (arith.AddIOp(lanes, k) if "down" in name else arith.XOrIOp(lanes, k)).result
        in_warp = arith.CmpIOp(arith.CmpIPredicate.ult, src,
                               vector.BroadcastOp(lanes.type, self.index_const(self.W)).result).result
        src = arith.SelectOp(in_warp, src, lanes).result
        all_lanes = vector.BroadcastOp(self.vtype(ir.IntegerType.get_signless(1)),
                                       arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result).result
        self.map[op.result] = V(vector.GatherOp(v.value.type, scratch, [zero], src, all_lanes, v.value).result, True)

    # -- cooperative groups and reductions ----------------------------------------------------------
    def op_ttile_cooperative_group(self, op, mask, entry) -> None:
        self.map[op.results[0]] = V(op.results[0], False)  # a compile-time partition: only its size matters

    def op_ttile_group_sync(self, op, mask, entry) -> None:
        if group_size(op.operands[0]) > self.W:
            raise LoweringError(op, "a group larger than a warp synchronizes only at the top level of the "
                                    "kernel on the CPU")
        # a group within a warp: the warp's lanes run in lockstep, already synchronized

    def op_ttile_barrier(self, op, mask, entry) -> None:
        raise LoweringError(op, "a block-wide barrier inside control flow is not supported on the CPU "
                                "(barriers split the kernel into phases only at its top level)")

    def op_ttile_thread_rank(self, op, mask, entry) -> None:
        L, size = self.launch, group_size(op.operands[0])
        row = arith.AddIOp(arith.MulIOp(self.warp["z"], L["bdim_y"]).result, self.warp["y"]).result
        base = arith.AddIOp(arith.MulIOp(row, L["bdim_x"]).result,
                            arith.MulIOp(self.warp["xw"], self.index_const(self.W)).result).result
        linear = self.lane_linear(base).value
        vt = linear.type
        self.map[op.result] = V(arith.RemUIOp(linear, vector.BroadcastOp(vt, self.index_const(size)).result).result,
                                True)

    _COMBINE = {"sum": (arith.AddFOp, arith.AddIOp, vector.CombiningKind.ADD),
                "max": (arith.MaximumFOp, arith.MaxSIOp, vector.CombiningKind.MAXIMUMF),
                "min": (arith.MinimumFOp, arith.MinSIOp, vector.CombiningKind.MINIMUMF)}

    def _identity(self, kind: str, t: ir.Type) -> ir.Value:
        if isinstance(t, ir.FloatType):
            value = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[kind]
            return arith.ConstantOp(t, ir.FloatAttr.get(t, value)).result
        width = ir.IntegerType(t).width
        value = {"sum": 0, "max": -(1 << (width - 1)), "min": (1 << (width - 1)) - 1}[kind]
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, value)).result

    def op_ttile_warp_reduce(self, op, mask, entry) -> None:
        """The warp's reduction, over its active lanes: one vector reduction, the same for every lane."""
        v = self.get(op.operands[0])
        kind = ir.StringAttr(op.attributes["kind"]).value
        t = op.result.type
        if not v.varying:
            if kind == "sum":  # every active lane contributes the same value
                count = vector.ReductionOp(ir.IntegerType.get_signless(32), vector.CombiningKind.ADD,
                                           arith.ExtUIOp(ir.VectorType.get([self.W], ir.IntegerType.get_signless(32)),
                                                         mask).result).result
                n = (arith.SIToFPOp(t, count) if isinstance(t, ir.FloatType) else arith.ExtSIOp(t, count)).result \
                    if t != count.type else count
                self.map[op.result] = V((arith.MulFOp if isinstance(t, ir.FloatType) else arith.MulIOp)(v.value, n).result,
                                        False)
            else:
                self.map[op.result] = v
            return
        vt = v.value.type
        masked = arith.SelectOp(mask, v.value, vector.BroadcastOp(vt, self._identity(kind, t)).result).result
        f, i, combining = self._COMBINE[kind]
        if not isinstance(t, ir.FloatType):
            combining = {"sum": vector.CombiningKind.ADD, "max": vector.CombiningKind.MAXSI,
                         "min": vector.CombiningKind.MINSI}[kind]
        self.map[op.result] = V(vector.ReductionOp(t, combining, masked).result, False)

    def op_ttile_group_reduce(self, op, mask, entry) -> None:
        """Butterfly steps size/2 … 1 within aligned groups of lanes (xor never leaves the group)."""
        v = self.get(op.operands[0])
        size = ir.IntegerAttr(op.attributes["group_size"]).value
        if size > self.W:
            raise LoweringError(op, f"group_size {size} exceeds the CPU warp of {self.W} lanes")
        kind = ir.StringAttr(op.attributes["kind"]).value
        t = op.result.type
        if not v.varying:
            self.map[op.result] = v
            return
        vt = v.value.type
        acc = arith.SelectOp(mask, v.value, vector.BroadcastOp(vt, self._identity(kind, t)).result).result
        combine = combiner(kind, t)
        k = size // 2
        while k >= 1:
            perm = [lane ^ k for lane in range(self.W)]
            acc = combine(acc, vector.ShuffleOp(acc, acc, perm).result).result
            k //= 2
        self.map[op.result] = V(acc, True)

    def op_ttile_philox_uniform(self, op, mask, entry) -> None:
        c = self.get(op.operands[0])
        seed = ir.IntegerAttr(op.attributes["seed"]).value
        self.map[op.result] = V(philox_uniform(c.value, seed), c.varying)

    # -- memory ---------------------------------------------------------------------------------------
    def op_memref_dim(self, op, mask, entry) -> None:
        self.map[op.result] = V(memref.DimOp(self.get(op.operands[0]).value,
                                             self.get(op.operands[1]).value).result, False)

    def _flat(self, base: ir.Value, idx: list[V]) -> tuple[ir.Value, V]:
        """A rank-n access as a rank-1 one: the collapsed buffer and the linear (row-major) index."""
        mt = ir.MemRefType(base.type)
        if mt.rank == 1:
            return base, idx[0]
        flat_t = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], mt.element_type)
        flat = memref.CollapseShapeOp(flat_t, base, ir.ArrayAttr.get([ir.ArrayAttr.get(
            [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), i) for i in range(mt.rank)])])).result
        lin = idx[0]
        for k in range(1, mt.rank):
            extent = memref.DimOp(base, self.index_const(k)).result
            scaled = self._binop(arith.MulIOp, lin, V(extent, False))
            lin = self._binop(arith.AddIOp, scaled, idx[k])
        return flat, lin

    def _binop(self, cls, a: V, b: V) -> V:
        if not a.varying and not b.varying:
            return V(cls(a.value, b.value).result, False)
        return V(cls(self.vec(a), self.vec(b)).result, True)

    def _access(self, base: ir.Value, idx: list[V]):
        """('scalar'|'contiguous'|'gather', memref, indices or index vector)."""
        if not any(i.varying for i in idx):
            return "scalar", base, [i.value for i in idx]
        if all(not i.varying for i in idx[:-1]) and idx[-1].lane_base is not None:
            return "contiguous", base, [i.value for i in idx[:-1]] + [idx[-1].lane_base]
        flat, lin = self._flat(base, idx)
        return "gather", flat, self.vec(lin)

    def op_memref_load(self, op, mask, entry) -> None:
        base = self.get(op.operands[0]).value
        idx = [self.get(i) for i in list(op.operands)[1:]]
        checked = self._checked(op.operands[0], list(op.operands)[1:])
        kind, mem, where = self._access(base, idx)
        et = ir.MemRefType(base.type).element_type
        if kind == "scalar" and entry:  # lane 0 of every warp is active at the entry: the load is safe
            if not checked:
                self.map[op.result] = V(memref.LoadOp(mem, where).result, False)
                return
            ok = scf.IfOp(self._in_bounds(base, idx)[0], [et], has_else=True)
            with ir.InsertionPoint(ok.then_block):
                scf.YieldOp([memref.LoadOp(mem, where).result])
            with ir.InsertionPoint(ok.else_block):
                self.checks.report(op, op.operands[0])
                scf.YieldOp([_zero(et)])
            self.map[op.result] = V(ok.results[0], False)
            return
        vt = self.vtype(et)
        zero = vector.BroadcastOp(vt, _zero(et)).result
        if kind == "scalar":  # under a lane mask even a uniform address may be out of bounds: gather it
            mem, lin = self._flat(mem, [V(w, False) for w in where])
            kind, where = "gather", self.vec(lin)
        if kind == "contiguous":
            full = scf.IfOp(self._full(mask, base, idx, checked and op.operands[-1]), [vt], has_else=True)
            with ir.InsertionPoint(full.then_block):
                scf.YieldOp([vector.LoadOp(vt, mem, where).result])
            with ir.InsertionPoint(full.else_block):
                m = self._lanes_ok(op, op.operands[0], base, idx, mask) if checked else mask
                scf.YieldOp([vector.MaskedLoadOp(vt, mem, where, m, zero).result])
            self.map[op.result] = V(full.results[0], True)
            return
        z = self.index_const(0)
        m = self._lanes_ok(op, op.operands[0], base, idx, mask) if checked else mask
        self.map[op.result] = V(vector.GatherOp(vt, mem, [z], where, m, zero).result, True)

    def op_memref_store(self, op, mask, entry) -> None:
        val = self.get(op.operands[0])
        base = self.get(op.operands[1]).value
        idx = [self.get(i) for i in list(op.operands)[2:]]
        checked = self._checked(op.operands[1], list(op.operands)[2:])
        kind, mem, where = self._access(base, idx)
        if kind == "scalar" and entry and not val.varying:
            if not checked:
                memref.StoreOp(val.value, mem, where)
                return
            ok = scf.IfOp(self._in_bounds(base, idx)[0], [], has_else=True)
            with ir.InsertionPoint(ok.then_block):
                memref.StoreOp(val.value, mem, where)
                scf.YieldOp([])
            with ir.InsertionPoint(ok.else_block):
                self.checks.report(op, op.operands[1])
                scf.YieldOp([])
            return
        if kind == "scalar":
            mem, lin = self._flat(mem, [V(w, False) for w in where])
            kind, where = "gather", self.vec(lin)
        if kind == "contiguous":
            v = self.vec(val)
            full = scf.IfOp(self._full(mask, base, idx, checked and op.operands[-1]), [], has_else=True)
            with ir.InsertionPoint(full.then_block):
                vector.StoreOp(v, mem, where)
                scf.YieldOp([])
            with ir.InsertionPoint(full.else_block):
                m = self._lanes_ok(op, op.operands[1], base, idx, mask) if checked else mask
                vector.MaskedStoreOp(mem, where, m, v)
                scf.YieldOp([])
            return
        m = self._lanes_ok(op, op.operands[1], base, idx, mask) if checked else mask
        vector.ScatterOp(None, mem, [self.index_const(0)], where, m, self.vec(val))

    # -- atomics ----------------------------------------------------------------------------------------
    def _lane_atomics(self, op, mask, mem_at: int, emit) -> None:
        """One scalar atomic per active lane, lanes in order (a warp's lanes updating one element see each
        other's updates, as on a GPU): `emit(pointer, lane values)` gives the lane's old value. The result is
        a vector of the lanes' old values (inactive lanes: zero)."""
        operands = list(op.operands)
        base = self.get(operands[mem_at]).value
        idx = [self.get(i) for i in operands[mem_at + 1:]]
        values = [self.vec(self.get(v)) for v in operands[:mem_at]]
        checked = self._checked(operands[mem_at], operands[mem_at + 1:])
        m = self._lanes_ok(op, operands[mem_at], base, idx, mask) if checked else mask
        flat, lin = self._flat(base, idx)
        lin = self.vec(lin)
        et = ir.MemRefType(base.type).element_type
        olds = vector.BroadcastOp(self.vtype(et), _zero(et)).result
        loop = scf.ForOp(self.index_const(0), self.index_const(self.W), self.index_const(1), [olds])
        with ir.InsertionPoint(loop.body):
            lane, acc = loop.induction_variable, loop.inner_iter_args[0]
            active = scf.IfOp(vector.ExtractOp(m, [lane], [ir.ShapedType.get_dynamic_size()]).result, [acc.type],
                              has_else=True)
            with ir.InsertionPoint(active.then_block):
                def at_lane(v):
                    return vector.ExtractOp(v, [lane], [ir.ShapedType.get_dynamic_size()]).result
                pointer = atomics.element_pointer(flat, at_lane(lin), "cpu")
                old = emit(pointer, [at_lane(v) for v in values])
                scf.YieldOp([vector.InsertOp(old, acc, [lane], [ir.ShapedType.get_dynamic_size()]).result])
            with ir.InsertionPoint(active.else_block):
                scf.YieldOp([acc])
            scf.YieldOp([active.results[0]])
        self.map[op.results[0]] = V(loop.results[0], True)

    def op_ttile_atomic_rmw(self, op, mask, entry) -> None:
        self._lane_atomics(op, mask, 1, lambda p, vs: atomics.rmw(op, p, vs[0], "cpu"))

    def op_ttile_atomic_cas(self, op, mask, entry) -> None:
        self._lane_atomics(op, mask, 2, lambda p, vs: atomics.cas(op, p, vs[0], vs[1], "cpu"))

    def op_ttile_fence(self, op, mask, entry) -> None:
        atomics.fence(op, "cpu")

    # -- bounds checks --------------------------------------------------------------------------------
    def _checked(self, mem: ir.Value, indices: list[ir.Value]) -> bool:
        return self.checks is not None and self.checks.needed(mem, indices)

    def _ult(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return arith.CmpIOp(arith.CmpIPredicate.ult, a, b).result

    def _in_bounds(self, base: ir.Value, idx: list[V]) -> tuple[ir.Value | None, ir.Value | None]:
        """index < extent for every dimension, unsigned so that a negative index fails too: the conjunction
        over the uniform indices (a scalar) and over the varying ones (per lane); None where there are none."""
        uniform = lanes = None
        for k, i in enumerate(idx):
            extent = memref.DimOp(base, self.index_const(k)).result
            if i.varying:
                c = self._ult(i.value, vector.BroadcastOp(i.value.type, extent).result)
                lanes = c if lanes is None else arith.AndIOp(lanes, c).result
            else:
                c = self._ult(i.value, extent)
                uniform = c if uniform is None else arith.AndIOp(uniform, c).result
        return uniform, lanes

    def _full(self, mask: ir.Value, base: ir.Value, idx: list[V], checked) -> ir.Value:
        """A contiguous access's fast path: every lane active and, when `checked` (the access's original last
        index), every lane in bounds: scalar compares of the last lane's index, and of the first's unless it
        is provably non-negative (then the last, below 2^63 + W, does not wrap)."""
        full = self.all_lanes(mask)
        if not checked:
            return full
        last = len(idx) - 1
        extent = memref.DimOp(base, self.index_const(last)).result
        first_lane = idx[last].lane_base
        ok = self._ult(arith.AddIOp(first_lane, self.index_const(self.W - 1)).result, extent)
        if not self.checks.facts.nonneg(checked):
            ok = arith.AndIOp(self._ult(first_lane, extent), ok).result
        uniform, _ = self._in_bounds(base, idx[:last])
        if uniform is not None:
            ok = arith.AndIOp(ok, uniform).result
        return arith.AndIOp(full, ok).result

    def _lanes_ok(self, op, mem: ir.Value, base: ir.Value, idx: list[V], mask: ir.Value) -> ir.Value:
        """The active lanes whose access is in bounds; reports when some other active lane's is not."""
        uniform, lanes = self._in_bounds(base, idx)
        ok = lanes
        if uniform is not None:
            u = vector.BroadcastOp(mask.type, uniform).result
            ok = u if ok is None else arith.AndIOp(ok, u).result
        safe = arith.AndIOp(mask, ok).result
        outside = vector.ReductionOp(ir.IntegerType.get_signless(1), vector.CombiningKind.OR,
                                     arith.XOrIOp(mask, safe).result).result  # active and not in bounds
        self.checks.report_if(outside, op, mem)
        return safe

    # -- control flow ---------------------------------------------------------------------------------
    def op_scf_if(self, op, mask, entry) -> None:
        cond = self.get(op.operands[0])
        cv = self.vec(cond)
        true_v = vector.BroadcastOp(cv.type, arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result).result
        then_mask = arith.AndIOp(mask, cv).result
        else_mask = arith.AndIOp(mask, arith.XOrIOp(cv, true_v).result).result
        yields = []
        for then, region, m in ((True, op.regions[0], then_mask), (False, op.regions[1], else_mask)):
            if not region.blocks:
                yields.append([])
                continue
            blk = region.blocks[0]
            facts = self.checks.facts if self.checks else None
            assumed = facts.assume(op.operands[0]) if facts and then else 0
            self.run(blk, m, entry=False)
            if facts:
                facts.forget(assumed)
            term = blk.operations[len(blk.operations) - 1]
            yields.append([self.get(v) for v in term.operands])
        for i, r in enumerate(op.results):
            a, b = yields[0][i], yields[1][i]
            if not cond.varying and not a.varying and not b.varying:
                self.map[r] = V(arith.SelectOp(cond.value, a.value, b.value).result, False)
            else:
                c = cond.value if not cond.varying else cv
                self.map[r] = V(arith.SelectOp(c, self.vec(a), self.vec(b)).result, True)

    def op_scf_for(self, op, mask, entry) -> None:
        lb, ub, step = (self.get(o) for o in list(op.operands)[:3])
        if lb.varying or ub.varying or step.varying:
            raise LoweringError(op, "a loop's bounds must be the same on every lane of a warp "
                                    "(guard per-lane work with 'if' inside the loop instead)")
        inits = [self.get(o) for o in list(op.operands)[3:]]
        body = op.regions[0].blocks[0]
        varying = self.carried_divergence(op, [i.varying for i in inits], entry)
        loop = scf.ForOp(lb.value, ub.value, step.value,
                         [self.vec(i) if v else i.value for i, v in zip(inits, varying)])
        with ir.InsertionPoint(loop.body):
            self.map[body.arguments[0]] = V(loop.induction_variable, False)
            for old, new, v in zip(list(body.arguments)[1:], loop.inner_iter_args, varying):
                self.map[old] = V(new, v)
            facts, bounds = self.checks.facts if self.checks else None, bounds_facts.loop_bounds(op)
            assumed = facts.assume_below(*bounds) if facts and bounds else 0
            self.run(body, mask, entry)  # the bounds are uniform: the loop runs under its parent's mask
            if facts:
                facts.forget(assumed)
            term = body.operations[len(body.operations) - 1]
            scf.YieldOp([self.vec(self.get(v)) if vary else self.get(v).value
                         for v, vary in zip(term.operands, varying)])
        for old, new, v in zip(op.results, loop.results, varying):
            self.map[old] = V(new, v)

    # -- divergence analysis --------------------------------------------------------------------------
    def carried_divergence(self, loop, init_varying: list[bool], entry: bool, env: dict | None = None) -> list[bool]:
        """Which of a loop's carried values differ between lanes: varying initially, or made so by the body
        (a fixpoint; each round can only turn values varying, so it ends)."""
        env = {} if env is None else env
        varying = list(init_varying)
        body = loop.regions[0].blocks[0]
        while True:
            env.update(zip(list(body.arguments)[1:], varying))
            env[body.arguments[0]] = False
            self._divergence(body, env, entry)
            term = body.operations[len(body.operations) - 1]
            grown = [v or self._varying(y, env) for v, y in zip(varying, term.operands)]
            if grown == varying:
                return varying
            varying = grown

    def _varying(self, value: ir.Value, env: dict) -> bool:
        if value in env:
            return env[value]
        mapped = self.map.get(value)
        return mapped.varying if mapped is not None else False

    def _divergence(self, block: ir.Block, env: dict, entry: bool) -> None:
        """Marks, in `env`, the values of `block` that this lowering turns into vectors (mirrors `run`)."""
        for op in block.operations:
            name = op.operation.name
            ins = [self._varying(o, env) for o in op.operands]
            if name == "scf.if":
                branch_yields = []
                for region in op.regions:
                    if region.blocks:
                        self._divergence(region.blocks[0], env, entry=False)
                        term = region.blocks[0].operations[len(region.blocks[0].operations) - 1]
                        branch_yields.append([self._varying(v, env) for v in term.operands])
                for i, r in enumerate(op.results):
                    env[r] = ins[0] or any(y[i] for y in branch_yields)
            elif name == "scf.for":
                varying = self.carried_divergence(op, ins[3:], entry, env)
                for r, v in zip(op.results, varying):
                    env[r] = v
            elif name in ("ttile.thread_id", "ttile.local_id"):
                env[op.results[0]] = ir.IntegerAttr(op.attributes["dim"]).value == 0
            elif name in ("ttile.lane_id", "ttile.thread_rank", "ttile.group_reduce"):
                env[op.results[0]] = name != "ttile.group_reduce" or any(ins)
            elif name == "ttile.warp_reduce":
                env[op.results[0]] = False
            elif name in ("ttile.atomic_rmw", "ttile.atomic_cas"):
                env[op.results[0]] = True  # each lane's own old value
            elif name == "memref.load":
                env[op.results[0]] = any(ins[1:]) or not entry
            else:
                for r in op.results:
                    env[r] = any(ins)


def philox_uniform(counter: ir.Value, seed: int) -> ir.Value:
    """The dropout generator's uniform in [0, 1) for `counter` (index, or a vector of them: lane by lane):
    Philox-4x32-10 keyed by `seed`, the round keys compile-time constants (tessera/numerics/philox.py)."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    shape = list(counter.type.shape) if isinstance(counter.type, ir.VectorType) else None

    def ty(t):
        return ir.VectorType.get(shape, t) if shape else t

    def const(t, v):
        attr = ir.IntegerAttr.get(t, v)
        if shape:
            return arith.ConstantOp(ty(t), ir.DenseElementsAttr.get_splat(ty(t), attr)).result
        return arith.ConstantOp(t, attr).result

    wide = arith.IndexCastUIOp(ty(i64), counter).result
    c0 = arith.TruncIOp(ty(i32), wide).result
    c1 = arith.TruncIOp(ty(i32), arith.ShRUIOp(wide, const(i64, 32)).result).result
    c2 = c3 = const(i32, 0)
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    m0, m1 = const(i32, 0xD2511F53 - 2 ** 32), const(i32, 0xCD9E8D57 - 2 ** 32)
    for _ in range(10):
        p0 = arith.MulUIExtendedOp(c0, m0)
        p1 = arith.MulUIExtendedOp(c2, m1)
        key0, key1 = const(i32, _signed32(k0)), const(i32, _signed32(k1))
        c0, c1, c2, c3 = (arith.XOrIOp(arith.XOrIOp(p1.results[1], c1).result, key0).result, p1.results[0],
                          arith.XOrIOp(arith.XOrIOp(p0.results[1], c3).result, key1).result, p0.results[0])
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    top = arith.ShRUIOp(c0, const(i32, 8)).result
    f32 = ir.F32Type.get()
    u = arith.UIToFPOp(ty(f32), top).result
    scale = arith.ConstantOp(ty(f32), ir.DenseElementsAttr.get_splat(ty(f32), ir.FloatAttr.get(f32, 2.0 ** -24))
                             if shape else ir.FloatAttr.get(f32, 2.0 ** -24)).result
    return arith.MulFOp(u, scale).result


def _signed32(v: int) -> int:
    return v - (1 << 32) if v >= (1 << 31) else v


def _zero(t: ir.Type) -> ir.Value:
    if isinstance(t, ir.FloatType):
        return arith.ConstantOp(t, ir.FloatAttr.get(t, 0.0)).result
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, 0)).result


def lower_kernel(kernel: func.FuncOp, width: int, bounds_checks: bool = False) -> func.FuncOp:
    """Replaces `kernel` with its per-block form; returns the new function."""
    index = ir.IndexType.get()
    old_t = kernel.type
    slot = [ir.MemRefType.get([1], index, loc=kernel.location)] if bounds_checks else []
    new_t = ir.FunctionType.get(list(old_t.inputs) + [index] * len(LAUNCH_ARGS) + slot, [])
    with kernel.location, ir.InsertionPoint(kernel):
        new = func.FuncOp(kernel.sym_name.value, new_t)
    for name in kernel.attributes:
        if name not in ("function_type", "sym_name"):
            new.attributes[name] = kernel.attributes[name]
    new.attributes["tessera.warp_size"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), width)
    if "arg_attrs" in kernel.attributes:
        old_attrs = list(ir.ArrayAttr(kernel.attributes["arg_attrs"]))
        new.arg_attrs = ir.ArrayAttr.get(old_attrs + [ir.DictAttr.get({})] * (len(LAUNCH_ARGS) + len(slot)))
    with kernel.location:
        entry = new.add_entry_block()
    n_params = len(old_t.inputs)
    launch = dict(zip(LAUNCH_ARGS, list(entry.arguments)[n_params:]))
    checks = _Checks(kernel, entry.arguments[len(entry.arguments) - 1]) if bounds_checks else None
    phases = _phases(kernel, width)
    with kernel.location, ir.InsertionPoint(entry):
        c0, c1 = arith.ConstantOp.create_index(0).result, arith.ConstantOp.create_index(1).result
        cw = arith.ConstantOp.create_index(width).result
        xwarps = arith.CeilDivUIOp(launch["bdim_x"], cw).result
        shared = {op.results[0]: _block_buffer(op) for op in kernel.entry_block.operations if is_shared_alloca(op)}
    for phase in phases:
        _emit_phase(kernel, entry, phase, launch, width, n_params, c0, c1, cw, xwarps, checks, shared)
    with kernel.location, ir.InsertionPoint(entry):
        func.ReturnOp([])
    kernel.operation.erase()
    return new


def _phases(kernel, width: int) -> list[list]:
    """The kernel's top-level ops split at block-wide barriers: every warp runs a phase before any warp
    starts the next, which is what a barrier guarantees. A value computed in one phase cannot be used in a
    later one (each phase is its own loop over the warps), except constants and group partitions, which
    each phase recomputes."""
    phases: list[list] = [[]]
    defined_in: dict = {}
    constants: list = []
    for op in kernel.entry_block.operations:
        name = op.operation.name
        if is_shared_alloca(op):
            continue  # the block's buffer, made once before the phases (lower_kernel): every phase sees it
        if name == "ttile.barrier" or (name == "ttile.group_sync" and group_size(op.operands[0]) > width):
            phases.append(list(constants))
            continue
        for operand in op.operands:
            owner = defined_in.get(operand)
            if owner is not None and owner is not phases[-1] and not _is_constant(operand):
                raise LoweringError(op, "a value computed before a barrier is used after it; on the CPU each "
                                        "phase between barriers runs over all warps in turn, so keep such "
                                        "values in memory")
        phases[-1].append(op)
        for r in op.results:
            defined_in[r] = phases[-1]
        if name in _REMATERIALIZED:
            constants.append(op)
    return phases


# Ops each phase recomputes instead of carrying across a barrier: free, and the same in every phase. The
# launch queries are Pure, so canonicalization merges a query after a barrier with the same one before it.
_REMATERIALIZED = ("arith.constant", "ttile.cooperative_group", "ttile.thread_rank", "ttile.thread_id",
                   "ttile.local_id", "ttile.block_id", "ttile.block_dim", "ttile.grid_dim", "ttile.lane_id",
                   "ttile.warp_id", "ttile.warp_size")


def is_shared_alloca(op) -> bool:
    """Whether `op` allocates a shared array (tile.alloc_shared: memref.alloca in the workgroup space)."""
    return op.operation.name == "memref.alloca" and ir.MemRefType(op.results[0].type).memory_space is not None \
        and str(ir.MemRefType(op.results[0].type).memory_space) == "#gpu.address_space<workgroup>"


def _block_buffer(op) -> ir.Value:
    """The CPU's shared array for `op`: one per call of the per-block function (one block), on its stack, with
    the extents dynamic in its type as a tensor parameter's are (so the warp code indexes it the same way)."""
    t = ir.MemRefType(op.results[0].type)
    dynamic = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * t.rank, t.element_type)
    return memref.AllocaOp(dynamic, [arith.ConstantOp.create_index(d).result for d in t.shape], []).result


def _is_constant(v) -> bool:
    return isinstance(v.owner, ir.OpView) and v.owner.operation.name in _REMATERIALIZED


def combiner(kind: str, t: ir.Type):
    """The arith op that combines two lanes' values of type `t` (scalar or vector) in a `kind` reduction; the
    GPU lowering (simt_to_gpu.py) combines with the same ops, so the two agree on NaNs and signedness."""
    f, i, _ = _Warp._COMBINE[kind]
    return f if isinstance(t, ir.FloatType) else i


def group_size(v) -> int:
    """The size of the !ttile.group value `v`."""
    return ir.IntegerAttr(ttile_tile.GroupType(v.type).size).value


def _emit_phase(kernel, entry, phase, launch, width, n_params, c0, c1, cw, xwarps, checks, shared) -> None:
    index = ir.IndexType.get()
    with kernel.location, ir.InsertionPoint(entry):
        loop_z = scf.ForOp(c0, launch["bdim_z"], c1)
        with ir.InsertionPoint(loop_z.body):
            loop_y = scf.ForOp(c0, launch["bdim_y"], c1)
            with ir.InsertionPoint(loop_y.body):
                loop_x = scf.ForOp(c0, xwarps, c1)
                with ir.InsertionPoint(loop_x.body):
                    vt = ir.VectorType.get([width], index)
                    lane = vector.StepOp(vt).result
                    warp = {"z": loop_z.induction_variable, "y": loop_y.induction_variable,
                            "xw": loop_x.induction_variable, "lane": lane}
                    w = _Warp(width, launch, warp, checks)
                    for old, newarg in zip(kernel.arguments, list(entry.arguments)[:n_params]):
                        w.map[old] = V(newarg, False)
                    for old, buffer in shared.items():
                        w.map[old] = V(buffer, False)
                    local_x = arith.AddIOp(vector.BroadcastOp(vt, arith.MulIOp(loop_x.induction_variable, cw).result).result,
                                           lane).result
                    active = arith.CmpIOp(arith.CmpIPredicate.ult, local_x,
                                          vector.BroadcastOp(vt, launch["bdim_x"]).result).result
                    if checks:
                        checks.used = False
                    w.run(phase, active, entry=True)
                    if checks and checks.used:
                        _unless_reported(loop_x.body, checks.slot, c0)
                    scf.YieldOp([])
                scf.YieldOp([])
            scf.YieldOp([])


def _unless_reported(body: ir.Block, slot: ir.Value, c0: ir.Value) -> None:
    """Moves the warp's work (`body`'s ops so far) under ``if slot[0] == 0``: a block stops at its next warp
    once a check has failed."""
    work = list(body.operations)
    clear = arith.CmpIOp(arith.CmpIPredicate.eq, memref.LoadOp(slot, [c0]).result, c0).result
    guard = scf.IfOp(clear)
    with ir.InsertionPoint(guard.then_block):
        end = scf.YieldOp([])
    for op in work:
        op.operation.move_before(end)


def run(module, width: int = 32, bounds_checks: bool = False) -> None:
    """Lowers every `tessera.kernel` function of `module` (an ``ir.Module`` or its operation) in place.
    Tile kernels (``tessera.tile_kernel``, e.g. backends/cpu/gemm.py's) are already in per-block form."""
    body = module.body if isinstance(module, ir.Module) else module.regions[0].blocks[0]
    kernels = [op for op in body.operations if op.operation.name == "func.func"
               and "tessera.kernel" in op.attributes and "tessera.tile_kernel" not in op.attributes]
    for k in kernels:
        lower_kernel(k, width, bounds_checks)
