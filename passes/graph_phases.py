"""The annotation phases of the Graph IR pipeline (spec/system-architecture.md §3.3), in normative order:

    schedule   tiling & scheduling: launch geometry and tile sizes per op, from a cost model and hints
    vectorize  vector width and warp width (fragment shape) per op, from the target
    memory     buffers: liveness-based reuse of intermediate tensors between kernels, and each matmul's
               tile-local staging buffers with their copies (multi-buffering: `stages` rotating copies)
    (fusion)   see fusion.py
    quantize   dtype legalization: types the target cannot compute in are widened, and the fallback recorded

Schedule, vectorize and memory state their decisions as ops of the Schedule IR and memory dialects, each
right before the Graph IR op it decides for: `tsched.schedule` (launch geometry; vectorize adds its lanes and
warp width), `tmem.stage` (a matmul's staging buffers) and `tmem.slot` (the buffer a result lives in). The
kernel lowering reads them through schedule_ir.py. Quantize records its widening as `tessera.compute`.
`--dump-ir-after-all` shows them phase by phase.
Per-function hints (`@function(schedule={...})`, recorded as `tessera.hints`) override the cost model.
"""

from __future__ import annotations

from ..diagnostics import LoweringError
from ..dialects import tmem, tsched
from ..dialects.ttensor import SEQ_HEADS, matmul_transposes
from ..mlir import ir
from ..targets import TargetFacts
from . import fp8_fallback, fusion
from .schedule_ir import decision, graph_ops, schedule_of


def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _ints(d: ir.DictAttr) -> dict:
    return {na.name: ir.IntegerAttr(na.attr).value for na in d if isinstance(na.attr, ir.IntegerAttr)}


def _hints(fn, target: "TargetFacts | None" = None) -> dict:
    """The function's hints, then those of every `op.specialize` whose `when` matches the target."""
    out = _ints(ir.DictAttr(fn.attributes["tessera.hints"])) if "tessera.hints" in fn.attributes else {}
    if target is not None and "tessera.specialize" in fn.attributes:
        for spec in ir.ArrayAttr(fn.attributes["tessera.specialize"]):
            spec = ir.DictAttr(spec)
            when = {na.name: ir.StringAttr(na.attr).value for na in ir.DictAttr(spec["when"])
                    if isinstance(na.attr, ir.StringAttr)}
            if all(target.matches(k, v) for k, v in when.items()):
                out.update(_ints(ir.DictAttr(spec["use"])))
    return out


def _op_hints(op) -> dict:
    if "tessera.hints" not in op.attributes:
        return {}
    return {na.name: ir.IntegerAttr(na.attr).value for na in ir.DictAttr(op.attributes["tessera.hints"])}


def _ops(fn):
    return [op for op in graph_ops(fn) if op.operation.name.startswith("ttensor.")]


def _schedule_op(op):
    """`op`'s `tsched.schedule`, made right before it when it has none yet."""
    found = decision(op, "tsched.schedule")
    if found is None:
        with op.location, ir.InsertionPoint(op):
            found = tsched.ScheduleOp()
    return found


def _set(decision_op, values: dict) -> None:
    for k, v in values.items():
        decision_op.attributes[k] = _i64(v)


# what a flash attention's schedule takes: keys per block (the N of its S = Q·Kᵀ tile) and the K/V ring's depth
ATTENTION_KEYS = ("NC", "stages")


# -- schedule ---------------------------------------------------------------------------------------------

def matmul_key(op) -> tuple[tuple, str]:
    """A matmul's (M, N, K) as compile time knows them (None: known at run time only) and its dtypes
    (`bf16xbf16->f32`): what an autotuning record is stored under (tessera/tuning.py)."""
    t = ir.RankedTensorType(op.results[0].type)
    k_type = ir.RankedTensorType(op.operands[0].type)
    k_axis = k_type.rank - (2 if matmul_transposes(op)[0] else 1)   # Aᵀ stored: K is its rows
    static = tuple(None if ty.is_dynamic_dim(i) else ty.get_dim_size(i)
                   for ty, i in ((t, t.rank - 2), (t, t.rank - 1), (k_type, k_axis)))
    a, b = (ir.RankedTensorType(o.type).element_type for o in op.operands[:2])
    return static, f"{a}x{b}->{t.element_type}"


def attention_key(op) -> tuple[tuple, str]:
    """A flash attention's (SQ, SK, D) as compile time knows them and its kind and dtype
    (`flash_attention:bf16`, `flash_attention_causal:bf16`: a causal one visits half the key blocks): the key
    of the fused kernel's stored blocking (keys per block, stages), apart from every matmul's."""
    q, k = (ir.RankedTensorType(o.type) for o in op.operands[:2])
    seq = 3 if SEQ_HEADS in op.attributes else 2   # the sequence axis from the end
    static = tuple(None if ty.is_dynamic_dim(i) else ty.get_dim_size(i)
                   for ty, i in ((q, q.rank - seq), (k, k.rank - seq), (q, q.rank - 1)))
    causal = "causal" in op.attributes and ir.BoolAttr(op.attributes["causal"]).value
    return static, f"flash_attention{'_causal' if causal else ''}:{q.element_type}"


def tunable_key(op) -> tuple[tuple, str] | None:
    """The autotuning key of an op whose schedule a stored result may set (a matmul; a flash attention
    where the target has its fused kernel), else None."""
    if op.operation.name == "ttensor.matmul":
        return matmul_key(op)
    if op.operation.name == "ttensor.flash_attention":
        return attention_key(op)
    return None


def schedule(fn, target: TargetFacts, overrides: dict | None = None, tuned=None) -> None:
    """Launch geometry per op: elementwise kernels cover their output as [R, C] with `block_x` threads per
    row segment; row kernels run `rows_per_block` warps per block (enough blocks to feed every core);
    matmuls take the target's cost model's blocking, or a stored autotuning result (`tuned(dims, dtype)`, a
    dict or None) where one is, overridden by the function's hints, then by what the program itself chose
    (tile.mma blocking), then by the compile's `overrides` (an autotuner's trial). A stored result applies
    only to a matmul no hint speaks for: its keys were timed together. A flash attention the target's fused
    kernel takes its blocking from (`attention_blocking`) takes its keys per block and stages from the
    `overrides`, else a stored result of its own key, else the kernel's table. What was applied is recorded
    on the function as `tessera.tuned` (the kernel records' `autotune` property)."""
    overrides = overrides or {}
    hints = {**_hints(fn, target), **overrides}
    applied = []
    for op in _ops(fn):
        name = op.operation.name
        if name == "ttensor.matmul":
            static, dtype = matmul_key(op)
            s = dict(target.matmul_schedule(*static)) if target.matmul_schedule else {}
            chosen = {**{k: v for k, v in hints.items() if k in ("MB", "NC", "MC", "KC", "stages")},
                      **_op_hints(op),  # what a tile program chose (tile.mma blocking, k-chunk staging)
                      **{k: v for k, v in overrides.items() if k in ("MB", "NC", "MC", "KC", "stages")}}
            record = tuned(static, dtype) if tuned is not None and not chosen else None
            if record:
                chosen = dict(record)
                applied.append(" ".join(f"{k}={v}" for k, v in sorted(record.items())))
            s.update(chosen)
            # the model's guess for extents known only at run time: a backend may choose again at launch
            s["at_launch"] = int(target.matmul_schedule is not None and None in static[:2]
                                 and not {"NC", "stages"} & set(chosen))
        elif name == "ttensor.flash_attention" and target.attention_blocking:
            # the fused kernel's keys per block (NC) and K/V ring depth (stages): a trial's (the compile's
            # overrides), else a stored result, else the kernel's own table; a function's tile and stages hints
            # are its matmuls' (an attention's blocks have other limits: 227 KiB for Q, K and V's ring)
            s = {"block_x": hints.get("block_x", 4 * target.warp_size)}
            chosen = {k: v for k, v in overrides.items() if k in ATTENTION_KEYS}
            static, dtype = attention_key(op)
            record = tuned(static, dtype) if tuned is not None and not chosen else None
            if record:
                chosen = dict(record)
                applied.append(" ".join(f"{k}={v}" for k, v in sorted(record.items())))
            s.update(chosen)
        elif name in fusion.ROW:
            s = {"rows_per_block": hints.get("rows_per_block", 4)}
        else:
            s = {"block_x": hints.get("block_x", 4 * target.warp_size)}
        _set(_schedule_op(op), s)
    if applied:
        fn.attributes["tessera.tuned"] = ir.StringAttr.get("stored: " + "; ".join(applied))


# -- vectorize --------------------------------------------------------------------------------------------

def vectorize(fn, target: TargetFacts) -> None:
    """Vector lanes per op for its compute type, and the warp width generated kernels use."""
    hints = _hints(fn, target)
    for op in _ops(fn):
        t = op.results[0].type
        bits = 64 if isinstance(t, ir.RankedTensorType) and str(t.element_type) == "f64" else 32
        lanes = hints.get("vector", target.vector_bits // bits)
        _set(_schedule_op(op), {"lanes": lanes, "warp": target.warp_size})


# -- memory -----------------------------------------------------------------------------------------------

def memory(fn, target: "TargetFacts | None" = None) -> int:
    """Assigns every op result a buffer slot, reusing slots whose value is dead (linear scan in program
    order; a value lives from its op to its last use; results returned live to the end). Returns the
    number of slots. Fusion may later keep some values in registers: their slots are then never allocated.

    Each matmul also gets its tile-local staging buffers (`tmem.stage`, from the target's GEMM for its
    schedule): per buffer its shape and how many copies rotate — `stages` copies of what is staged ahead
    of the compute, the multi-buffering the schedule chose; the kernel allocates exactly these. Each
    result's slot is a `tmem.slot`."""
    if target is not None and target.staging_buffers is not None:
        for op in _ops(fn):
            if op.operation.name == "ttensor.matmul" and decision(op, "tsched.schedule") is not None:
                plan = target.staging_buffers(schedule_of(op))
                with op.location, ir.InsertionPoint(op):
                    for name, (shape, copies) in plan.items():
                        tmem.StageOp(buffer=ir.StringAttr.get(name),
                                     shape=ir.ArrayAttr.get([_i64(d) for d in shape]), copies=_i64(copies))
    ops = graph_ops(fn)
    position = {id(op): i for i, op in enumerate(ops)}
    last_use: dict = {}
    for i, op in enumerate(ops):
        for o in op.operands:
            last_use[o] = i
    returned = set(ops[-1].operands) if ops and ops[-1].operation.name == "func.return" else set()
    free: list[int] = []
    slots = 0
    live: list = []   # (end, slot)
    for op in ops:
        if not op.operation.name.startswith("ttensor.") or op.operation.name == "ttensor.constant":
            continue
        here = position[id(op)]
        for end, slot in list(live):
            if end < here:
                live.remove((end, slot))
                free.append(slot)
        for r in op.results:
            if free:
                slot = free.pop(0)
            else:
                slot, slots = slots, slots + 1
            end = len(ops) if r in returned else last_use.get(r, here)
            live.append((end, slot))
        if op.results:  # Graph IR ops have one result
            with op.location, ir.InsertionPoint(op):
                tmem.SlotOp(slot=_i64(slot))
    return slots


# -- quantize ---------------------------------------------------------------------------------------------

FALLBACK = {"bf16": "f32", "f16": "f32", "tf32": "f32"}
INTEGERS = ("i1", "i8", "i16", "i32", "i64", "ui8")   # bool (i1) and the integers (u8 is ui8)


def quantize(fn, target: TargetFacts) -> list[str]:
    """Element types the target does not compute in are computed in the documented wider type (portability
    guide §5: equal or higher precision), and converted at loads and stores. Returns the fallbacks taken;
    they are recorded on the function (`tessera.fallbacks`) and in the kernel metadata."""
    taken: list[str] = [ir.StringAttr(x).value for x in ir.ArrayAttr(fn.attributes["tessera.fallbacks"])] \
        if "tessera.fallbacks" in fn.attributes else []   # the schedule phase's (decompose.attention_fp8)
    if not target.native_dtypes >= set(fp8_fallback.BY_NAME):  # fp8 in its f16 container (fp8_fallback.py)
        taken += fp8_fallback.legalize(fn, target.name, one_byte=target.scaled_fp8_gemm,
                                       widens=target.fp8_gemm_widens)
    for op in _ops(fn):
        types = {str(ir.RankedTensorType(v.type).element_type) for v in list(op.operands) + list(op.results)
                 if isinstance(v.type, ir.RankedTensorType)}
        for t in sorted(types):
            name = {"bf16": "bf16", "f16": "f16", "tf32": "tf32", "f32": "f32", "f64": "f64",
                    "f8E4M3FN": "fp8_e4m3", "f8E5M2": "fp8_e5m2"}.get(t)
            if t in INTEGERS:  # every target computes integers in their own type (kernelgen.compute_dtype)
                operand = ir.RankedTensorType(op.operands[0].type).element_type \
                    if op.operation.name == "ttensor.matmul" else None
                if operand and str(operand) not in target.integer_matmul:
                    raise LoweringError(op, f"integer matmul ({operand}) has no {target.name} kernel yet; op.cast "
                                            f"the operands to a float type")
                continue
            if t.startswith("complex<") and op.operation.name == "ttensor.reshape":
                continue   # a complex result viewing its parts (passes/fourier.py): computes nothing
            if name is None:
                raise LoweringError(op, f"element type {t} has no {target.name} fallback yet")
            if name in target.native_dtypes or name in fp8_fallback.BY_NAME:   # fp8 left: one byte, GEMM-read
                continue
            wide = FALLBACK[name]
            op.attributes["tessera.compute"] = ir.TypeAttr.get(ir.Type.parse(wide))
            note = f"{name} computed in {wide}"
            if note not in taken:
                taken.append(note)
    if taken:
        fn.attributes["tessera.fallbacks"] = ir.ArrayAttr.get([ir.StringAttr.get(t) for t in taken])
    return taken
