"""Lower to the backend: each fusion group of a Graph IR function becomes a kernel in the module, and the
function becomes a launch plan (tessera/plan.py) that runs those kernels on its inputs.

Kernels are generated as Tessera SIMT source (kernelgen.py) and compiled by the kernel frontend into the
same module, so every later stage treats them like kernels a user wrote. Group kinds the backend lowers
itself (its `lowerings()`: GEMMs, attention) go to those, with the function's LoweringContext.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Callable, Mapping

from .. import plan
from ..diagnostics import LoweringError
from ..mlir import ir
from ..dialects.tdist import ROWS_OF
from ..dialects.ttensor import matmul_transposes
from . import convolution, fourier, fp8_fallback, fusion, graph_shapes, kernelgen, linalg_kernels, pipeline_collectives, \
    schedule_ir
from .lowering_context import LoweringContext


def _groups(fn) -> list[tuple[int, str, list]]:
    """The fusion groups in execution order: a group runs where its last op stands, when every value it
    reads — a fused epilogue's residual may be computed after its matmul — exists."""
    groups: dict[int, tuple[str, list]] = {}
    last: dict[int, int] = {}
    for i, op in enumerate(fn.entry_block.operations):
        if "tessera.group" in op.attributes:
            gid = ir.IntegerAttr(op.attributes["tessera.group"]).value
            kind = ir.StringAttr(op.attributes["tessera.group_kind"]).value
            groups.setdefault(gid, (kind, []))[1].append(op)
            last[gid] = i
    return [(gid, kind, ops) for gid, (kind, ops) in sorted(groups.items(), key=lambda g: last[g[0]])]


def _assign_buffers(fn, values: dict, steps: list, args: list, results: list, ids: dict) -> None:
    """Intermediate tensors share storage as the memory phase planned (`tmem.slot`), except where
    fusion moved a kernel so that two values of one slot are alive at once, or where the planned slot went
    to a value fusion kept in registers: then a value takes a slot free during its life, one whose tenants
    have its dtype and extents first (the runtime sizes a slot for its largest tenant), a new slot only
    when none is free, so that the plan has as many slots as values its kernels keep alive at once.
    Arguments and results never share (the caller holds them)."""
    planned = {ids[r]: schedule_ir.buffer_of(r) for op in schedule_ir.graph_ops(fn) for r in op.results
               if r in ids and schedule_ir.buffer_of(r) is not None}
    born: dict[str, int] = {}
    dies: dict[str, int] = {}
    for i, step in enumerate(steps):
        for v in plan.uses(step):
            born.setdefault(v, i)
            dies[v] = i
    for i, step in enumerate(steps):
        # libtessera runs an all_reduce on the communication stream, reading its input until the first step
        # that reads its result settles it: a kernel given the input's slot before then would wait for the
        # whole collective (nothing of the backward would overlap a gradient bucket), so the input lives as long
        if isinstance(step, plan.CollectiveStep) and step.collective == "all_reduce":
            first_read = next((j for j in range(i + 1, len(steps)) if step.output in plan.uses(steps[j])),
                              len(steps) - 1)
            dies[step.input] = max(dies.get(step.input, i), first_read)
    fixed = set(args) | set(results)
    views = {step.alias: step.of for step in steps if isinstance(step, plan.AliasStep)}
    for view, source in views.items():  # a view is its source's storage: both live as long as either
        while source in views:
            source = views[source]
        if view in fixed:
            fixed.add(source)
        dies[source] = max(dies.get(source, 0), dies.get(view, 0))
    fixed |= set(views)  # views never allocate
    occupied: dict[int, list[tuple[int, int]]] = {}
    shapes: dict[int, set] = {}   # slot -> its tenants' (dtype, dims)
    next_slot = max(planned.values(), default=-1) + 1
    for vid in sorted(planned, key=lambda v: born.get(v, 0)):
        if vid in fixed or vid not in born or vid not in values:
            continue
        span, shape = (born[vid], dies[vid]), (values[vid].dtype, values[vid].dims)
        free = [s for s in sorted(occupied) if all(span[0] > e or span[1] < b for b, e in occupied[s])]
        same = [s for s in free if shapes[s] == {shape}]
        if same:
            slot = planned[vid] if planned[vid] in same else same[0]
        elif planned[vid] in free:
            slot = planned[vid]
        elif free:
            slot = free[0]
        elif planned[vid] not in occupied:
            slot = planned[vid]
        else:
            slot, next_slot = next_slot, next_slot + 1
        occupied.setdefault(slot, []).append(span)
        shapes.setdefault(slot, set()).add(shape)
        values[vid] = dataclasses.replace(values[vid], buffer=slot)


def lower_function(fn, module: ir.Module, lowerings: Mapping[str, Callable], targets: str) -> plan.Plan:
    """Adds the kernels of `fn` to `module` and returns its plan. `lowerings` are the backend's own lowerings
    of fusion-group kinds ("gemm", "attention"), `lower(ctx, kname, ops) -> list[plan step]`; the other groups
    become generated kernels. `targets` names the target(s) in messages."""
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    ctx = LoweringContext(module, graph_shapes.infer(fn), targets)
    dims, record = ctx.dims, ctx.record
    args = [record(a) for a in fn.entry_block.arguments]
    ret = list(fn.entry_block.operations)[-1]
    returned = set(ret.operands)
    steps = []
    chunked = set()   # the results of all_reduces lowered with their matmul's chunks
    # groups of ops that run in the row chunks of the all_reduce their rows lead to (ROWS_OF), lowered whole
    # and held back until that all_reduce's matmul: (ops, steps, the values their lowering made)
    deferred: list[tuple[list, list, set]] = []
    held = None   # (ops, its first step, the values before it) of the group just lowered where it is held back
    for gid, kind, ops in _groups(fn):
        if held is not None:
            deferred.append((held[0], steps[held[1]:], set(ctx.values) - held[2]))
            del steps[held[1]:]
            held = None
        marked = [ROWS_OF in op.attributes for op in ops]
        if all(marked) and (kind in lowerings or kind == "elementwise"):
            held = (ops, len(steps), set(ctx.values))
        elif any(marked):   # fused with other ops, or of a kind not chunked: the held groups run whole first
            for d in deferred:
                steps.extend(d[1])
            deferred = []
        inside = {r for op in ops for r in op.results}
        members = {op.operation for op in ops}
        inputs, outputs = [], []
        for op in ops:
            for o in fusion.data_operands(op):
                if o not in inside and o not in inputs and not fusion.is_scalar_constant(o):
                    inputs.append(o)
            for r in op.results:
                if r in returned or any(u not in members for u in _users(r)):
                    outputs.append(r)
        if held is None and deferred and (kind not in lowerings or _chunked_reduce(ops) is None) and \
                any(r in inputs for d in deferred for op in d[0] for r in op.results):
            for d in deferred:   # a reader of held rows that is not their all_reduce's GEMM: they run whole first
                steps.extend(d[1])
            deferred = []
        kname = f"{name}__{kind}{gid}"
        if kind == "view":
            (op,) = ops
            steps.append(plan.AliasStep(alias=record(op.results[0]), of=record(op.operands[0])))
            continue
        if kind == "call":
            (op,) = ops
            steps.append(plan.CallStep(call=ir.FlatSymbolRefAttr(op.attributes["callee"]).value,
                                       args=tuple(record(o) for o in op.operands),
                                       results=tuple(record(r) for r in op.results)))
            continue
        if kind == "collective":
            (op,) = ops
            if op.results[0] not in chunked:
                steps.append(_collective(op, record))
            continue
        if kind in lowerings:
            reduce = _chunked_reduce(ops)
            if reduce is not None:
                chain = {o.operation for o in pipeline_collectives.row_chain(reduce)}
                mine = [d for d in deferred if all(o.operation in chain for o in d[0])]
                deferred = [d for d in deferred if not all(o.operation in chain for o in d[0])]
                steps.extend(_lower_chunked(ctx, lowerings[kind], kname, ops[0], reduce, mine))
                chunked.add(reduce.results[0])
                continue
            steps.extend(lowerings[kind](ctx, kname, ops))
            continue
        if kind == "elementwise":
            block_x = schedule_ir.schedule_of(ops[-1]).get("block_x", 128)
            ks = kernelgen.elementwise(kname, ops, inputs, outputs, dims, block_x)
        elif kind == "row" and _splits(ops[0], dims):
            steps.extend(_split_reduce(ctx, kname, ops[0], schedule_ir.vector_of(ops[0]).get("warp", 32),
                                       schedule_ir.schedule_of(ops[0]).get("rows_per_block", 4)))
            continue
        elif kind == "row" and _splits_columns(ops[0], dims):
            steps.extend(_split_strided(ctx, kname, ops[0], schedule_ir.vector_of(ops[0]).get("warp", 32) *
                                        schedule_ir.schedule_of(ops[0]).get("rows_per_block", 4)))
            continue
        elif kind == "row":
            ks = kernelgen.row(kname, ops[0], dims, schedule_ir.vector_of(ops[0]).get("warp", 32),
                               schedule_ir.schedule_of(ops[0]).get("rows_per_block", 4), epilogue=ops[1:],
                               registers=ctx.target in kernelgen.REGISTER_TARGETS)
        elif kind == "layout":
            ks = kernelgen.transpose(kname, ops[0], dims)
        elif kind == "push":
            ks = kernelgen.push(kname, ops[0])
        elif kind in ("blocks", "im2col", "col2im", "fourier", "linalg"):
            src, step = kernelgen.blocks(kname, ops[0], dims, schedule_ir.schedule_of(ops[0]).get("block_x", 128)) \
                if kind == "blocks" else fourier.kernel(kname, ops[0]) if kind == "fourier" \
                else linalg_kernels.kernel(kname, ops[0]) if kind == "linalg" \
                else convolution.window_kernel(kname, ops[0], dims)
            ctx.build(src, f"<tessera:{kname}>")
            steps.append(plan.ArgsStep(
                kernel=kname, source=src, env=step["env"], block=tuple(step["block"]), grid=tuple(step["grid"]),
                args=tuple(plan.TensorArg(record(a["value"]), tuple(a["shape"])) for a in step["args"])))
            continue
        else:
            raise LoweringError(ops[0], f"'{ops[0].operation.name}' has no {targets} lowering yet "
                                        f"(run it with tessera.interpret)")
        ctx.build(ks.source, f"<tessera:{kname}>")
        out_dims = dims[ks.outputs[0]] if kind in ("elementwise", "push") else dims[ks.inputs[0]]
        rows, cols = _matrix(ops[0], kind, out_dims)
        steps.append(plan.ViewStep(
            kernel=kname, source=ks.source, R=rows, C=cols, block=tuple(ks.block), grid=tuple(ks.grid),
            tensors=tuple(plan.TensorView(record(v), view) for v, view in zip(ks.inputs + ks.outputs, ks.views)),
            B=graph_shapes.product(out_dims[:-2]) if kind == "layout" else "1",
            scalars=tuple(ks.extra.get("scalars", ()))))
    if held is not None:
        deferred.append((held[0], steps[held[1]:], set()))
        del steps[held[1]:]
    for d in deferred:   # held for an all_reduce lowered otherwise: run whole
        steps.extend(d[1])
    results = [record(v) for v in ret.operands]
    _assign_buffers(fn, ctx.values, steps, args, results, ctx.ids)
    fallbacks = [ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes["tessera.fallbacks"])] \
        if "tessera.fallbacks" in fn.attributes else []
    outputs = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(fn.attributes["tessera.outputs"])] \
        if "tessera.outputs" in fn.attributes else []
    same = [[ir.StringAttr(x).value for x in ir.ArrayAttr(pair)]
            for pair in ir.ArrayAttr(fn.attributes["tessera.same_extents"])] \
        if "tessera.same_extents" in fn.attributes else []
    arg_attrs = [ir.DictAttr(a) for a in ir.ArrayAttr(fn.attributes["arg_attrs"])]
    params = [ir.StringAttr(a["tessera.name"]).value for a in arg_attrs]
    # an argument the quantize phase stores as another dtype, or an i4 argument or result taken or returned as
    # its bytes (passes/decompose.py)
    res_attrs = [ir.DictAttr(a) for a in ir.ArrayAttr(fn.attributes["res_attrs"])] \
        if "res_attrs" in fn.attributes else []
    for vid, attrs in [*zip(args, arg_attrs), *zip(results, res_attrs)]:
        if fp8_fallback.DECLARED in attrs:
            declared = ir.StringAttr(attrs[fp8_fallback.DECLARED]).value
            ctx.values[vid] = dataclasses.replace(ctx.values[vid], declared=declared)
    return plan.Plan(params=tuple(params), args=tuple(args), results=tuple(results), values=ctx.values,
                     steps=tuple(steps), fallbacks=tuple(fallbacks), outputs=tuple(outputs),
                     same_extents=tuple(tuple(p) for p in same),
                     broadcasts=tuple(graph_shapes.broadcasts(fn, dims)),
                     operators=tuple(plan.OperatorRecord(**{**r, "payload": tuple(r["payload"]),
                                                            "flags": tuple(r["flags"])})
                                     for r in json.loads(ir.StringAttr(fn.attributes["tessera.operators"]).value))
                     if "tessera.operators" in fn.attributes else ())


def _collective(op, record) -> plan.CollectiveStep:
    """The plan step of a tdist op: the same for every target, run by the communicator the call is given."""
    a = op.attributes
    kind = op.operation.name.split(".", 1)[1]
    has = plan.COLLECTIVES[kind]
    return plan.CollectiveStep(
        collective=kind, input=record(op.operands[0]), output=record(op.results[0]),
        mesh_axes=tuple(ir.StringAttr(x).value for x in ir.ArrayAttr(a["mesh_axes"])),
        mesh_shape=tuple(ir.IntegerAttr(x).value for x in ir.ArrayAttr(a["mesh_shape"])),
        axis=ir.StringAttr(a["axis"]).value,
        reduce=ir.StringAttr(a["op"]).value if "reduce" in has else None,
        dim=ir.IntegerAttr(a["dim"]).value if "dim" in has else None,
        root=ir.IntegerAttr(a["root"]).value if "root" in has else None,
        deterministic=ir.BoolAttr(a["deterministic"]).value if "reduce" in has else False,
        algo=ir.StringAttr(a["algo"]).value if "reduce" in has else "auto")


def _chunked_reduce(ops: list):
    """The all_reduce that GEMM group `ops` feeds where it is marked to run in row chunks
    (passes/pipeline_collectives.py), else None."""
    mm = ops[0]
    if mm.operation.name != "ttensor.matmul" or len(ops) != 1:
        return None
    users = list(_users(mm.results[0]))
    if len(users) != 1 or users[0].name != "tdist.all_reduce" or \
            pipeline_collectives.chunks_of(users[0].opview) < 2:
        return None
    if matmul_transposes(mm)[0]:
        raise LoweringError(mm, "a matmul whose lhs is read transposed cannot run in row chunks "
                                "(tessera.chunks on its all_reduce): a row range of its lhs is not contiguous")
    return users[0].opview


def _lower_chunked(ctx: LoweringContext, lower: Callable, kname: str, mm, reduce, held: list = ()) -> list:
    """The steps of matmul `mm` and the all_reduce `reduce` of its result in k row chunks (k: its
    tessera.chunks): the GEMM lowered once (one kernel), launched per chunk on aliases of a row range of the
    lhs and of the all_reduce's result (docs/image-format.md, "Alias step"), each chunk's all_reduce in place
    right after its GEMM, so that it overlaps the next chunk's compute. `held`: the groups before the GEMM whose
    rows lead to its lhs (ROWS_OF; their ops, lowered steps and new values, in order): each runs per chunk
    too, on aliases of its tensors' rows, before that chunk's GEMM (the whole MLP of a chunk, then its
    all_reduce beside the next chunk's), so that only the last chunk's all_reduce follows the last kernel;
    those of them, from the first on, whose steps cannot take a row range (not one env extent of rows, a
    view step that is not rows of matrices) run whole before the chunks. Chunks are whole multiples of the
    GEMMs' M tile (pipeline_collectives.ROW_ALIGN) but the last, so each starts at a tile boundary (equal, or
    by tessera.chunk_weights: pipeline_collectives.chunk_bounds); where M is
    small the last chunks have no rows (the runtime launches nothing, and a collective of no elements does
    nothing). The partial product is never stored apart: each chunk's GEMM writes the result's rows, reduced
    in place. Every backend's GEMM steps fit this (argument steps whose tensors' rows are one env extent);
    one that did not would be a LoweringError here, saying how to run the pair whole."""
    k = pipeline_collectives.chunks_of(reduce)
    before = set(ctx.values)
    whole = lower(ctx, kname, [mm])
    a, p, r = ctx.record(mm.operands[0]), ctx.record(mm.results[0]), ctx.record(reduce.results[0])
    M = graph_shapes.product(ctx.dims[mm.operands[0]][:-1])
    # the values whose rows are the product's rows, each with its columns: the lhs, the product (whose rows
    # go to the result's storage) and the temporaries the backend made of its shape (a wider accumulator)
    rows = {a: (a, ctx.dims[mm.operands[0]][-1]), p: (r, ctx.dims[mm.results[0]][-1])}

    def temporaries(made: set) -> dict:
        out = {}
        for vid in sorted(made - set(rows) - {r}):
            d = ctx.values[vid].dims
            if len(d) >= 2 and graph_shapes.product(list(d[:-1])) == M:
                out[vid] = (vid, d[-1])
        return out
    rows.update(temporaries(set(ctx.values) - before))
    once, per_chunk = [], []
    for s in whole:
        touched = any(v in rows for v in plan.uses(s))
        if touched and (not isinstance(s, plan.ArgsStep) or _row_names(s, rows, M) is None):
            raise LoweringError(mm, f"the {ctx.target} GEMM's step '{getattr(s, 'kernel', s)}' cannot run in row "
                                    f"chunks (its tensors' rows are not one extent a chunk may set); "
                                    f"op.all_reduce(chunks=1) or the compile option collective_chunks=1 runs "
                                    f"it whole")
        (per_chunk if touched else once).append(s)
    # the held groups, last first, while each one's steps take row ranges (the rest run whole, first)
    before_chunks, upstream = [], []
    for i in range(len(held) - 1, -1, -1):
        ops, group_steps, made = held[i]
        used = {v for s in group_steps for v in plan.uses(s)}
        values = {ctx.ids[v]: v for op in ops for v in (op.results[0], pipeline_collectives.row_input(op))
                  if v in ctx.ids and ctx.ids[v] in used}   # those stored (not fused away)
        mine = dict(rows)
        mine.update({vid: (vid, ctx.dims[v][-1]) for vid, v in values.items() if vid not in rows})
        mine.update(temporaries(made - set(mine)))
        fits = all(graph_shapes.product(ctx.dims[v][:-1]) == M for v in values.values())
        group_once, group_chunk = [], []
        for s in group_steps:
            touched = any(v in mine for v in plan.uses(s))
            if touched and not (isinstance(s, plan.ArgsStep) and _row_names(s, mine, M) is not None or
                                isinstance(s, plan.ViewStep) and _view_rows(s, mine, M)):
                fits = False
            (group_chunk if touched else group_once).append(s)
        if not fits:
            before_chunks = [s for _, st, _ in held[:i + 1] for s in st]
            break
        rows = mine
        upstream = [(group_once, group_chunk)] + upstream
    collective = _collective(reduce, ctx.record)
    del ctx.values[p]   # written only through the chunks' aliases of the result
    bounds = pipeline_collectives.chunk_bounds(M, k, pipeline_collectives.weights_of(reduce))
    out = before_chunks + [s for group_once, _ in upstream for s in group_once] + once
    for i in range(k):
        start, end = _fold(bounds[i]), bounds[i + 1]
        n = _fold(end if start == "0" else f"{end} - {start}")
        ids = {}
        for vid, (of, cols) in rows.items():
            ids[vid] = f"{of}_chunk{i}"
            ctx.values[ids[vid]] = plan.Value(ctx.values[of].dtype, (n, cols))
            out.append(plan.AliasStep(ids[vid], of, _offset(start, cols)))
        for s in [s for _, group_chunk in upstream for s in group_chunk] + per_chunk:
            if isinstance(s, plan.ViewStep):
                out.append(dataclasses.replace(s, R=n, tensors=tuple(
                    plan.TensorView(ids[t.value], t.view) if t.value in rows else t for t in s.tensors)))
                continue
            names = _row_names(s, rows, M)
            out.append(dataclasses.replace(
                s, env={key: n if key in names else e for key, e in s.env.items()},
                args=tuple(dataclasses.replace(x, value=ids[x.value])
                           if isinstance(x, plan.TensorArg) and x.value in rows else x for x in s.args)))
        reduced = f"{r}_chunk{i}_reduced"
        ctx.values[reduced] = ctx.values[ids[p]]
        out += [plan.AliasStep(reduced, r, _offset(start, rows[p][1])),
                dataclasses.replace(collective, input=ids[p], output=reduced)]
    return out


def _view_rows(s: plan.ViewStep, rows: dict, M: str) -> bool:
    """Can view step `s` (a generated kernel over [R, C]) run on a row range of its tensors in `rows` (M, their
    rows): R is M, no batch or scalar extents, those tensors seen whole as matrices, the others only along
    the columns (broadcast over the rows)."""
    if s.R != M or s.B != "1" or s.scalars:
        return False
    return all(t.view == "matrix" and rows[t.value][1] == s.C if t.value in rows else t.view in ("cols", "scalar")
               for t in s.tensors)


def _row_names(s: plan.ArgsStep, rows: dict, M: str) -> set | None:
    """The env names of step `s` that count the rows of its tensors in `rows` (M, the product's rows), or
    None where one of them is not M, is a batch, or sits in a multiple_of check that a chunk (a multiple of
    the M tile but the last) may not keep."""
    names = set()
    for x in s.args:
        if isinstance(x, plan.TensorArg) and x.value in rows:
            if len(x.shape) != 2 or x.shape[1] != rows[x.value][1] and s.env.get(x.shape[1]) != rows[x.value][1]:
                return None
            names.add(x.shape[0])
    if s.batch is not None or not all(s.env.get(name) == M for name in names):
        return None
    for m in s.multiple_of:
        if names & set(re.findall(r"[A-Za-z_]\w*", m.expr)) and pipeline_collectives.ROW_ALIGN % m.m:
            return None
    return names


def _offset(start: str, cols: str) -> str:
    """The offset of a chunk from row `start` of a tensor of `cols` columns: an offset, "0" included, makes
    the alias a window of its storage (docs/image-format.md, "Alias step"), which a chunk is."""
    return "0" if start == "0" else _fold(f"({start})*({cols})")


def _fold(expr: str) -> str:
    """`expr` as an integer where it names no extent."""
    try:
        return str(plan.evaluate(expr, {}))
    except plan.PlanError:
        return expr


def _splits(op, dims: dict) -> bool:
    """Does reduction `op` run as two kernels (kernelgen.SPLIT_CHUNK): a float reduction over trailing axes
    whose rows may split into more than one chunk — always where its extents are symbolic."""
    if op.operation.name != "ttensor.reduce" or kernelgen.element_dtype(op.operands[0]) not in ("f64", "f32", "f16", "bf16"):
        return False
    d, axes = dims[op.operands[0]], kernelgen.reduced_axes(op)
    if axes != list(range(len(d) - len(axes), len(d))):
        return False
    try:
        return plan.evaluate(kernelgen.split_chunks(*_matrix(op, "row", d)), {}) > 1
    except plan.PlanError:   # a symbolic extent: the split is chosen when the extents are known
        return True


def _splits_columns(op, dims: dict) -> bool:
    """Does reduction `op`, over axes not all trailing, run as two kernels (kernelgen.STRIDED_CHUNK): a float
    reduction whose outermost reduced run may split into more than one chunk — always where symbolic."""
    if op.operation.name != "ttensor.reduce" or kernelgen.element_dtype(op.operands[0]) not in ("f64", "f32", "f16", "bf16"):
        return False
    d, axes = dims[op.operands[0]], kernelgen.reduced_axes(op)
    if axes == list(range(len(d) - len(axes), len(d))):
        return False
    rows, _ = _matrix(op, "row", d)
    first = [d[a] for a in axes[:next((i for i in range(1, len(axes)) if axes[i] != axes[i - 1] + 1), len(axes))]]
    try:
        return plan.evaluate(kernelgen.strided_chunks(rows, graph_shapes.product(first)), {}) > 1
    except plan.PlanError:   # a symbolic extent: the split is chosen when the extents are known
        return True


def _split_strided(ctx: LoweringContext, kname: str, op, block_x: int) -> list:
    """The two view steps of a split reduction over leading axes: chunks of the outermost reduced run to
    partials in a temporary [P, K], then each column of partials to the result."""
    rows, cols = _matrix(op, "row", ctx.dims[op.operands[0]])
    part, finish, cdt, chunks = kernelgen.strided_reduce_split(kname, op, ctx.dims, block_x)
    ctx.build(part.source, f"<tessera:{kname}_part>")
    ctx.build(finish, f"<tessera:{kname}>")
    x, y = ctx.record(op.operands[0]), ctx.record(op.results[0])
    partials = ctx.temporary(y, cdt, [chunks, rows], tag="_partials")
    is_mean = ir.StringAttr(op.attributes["kind"]).value == "mean"
    return [plan.ViewStep(kernel=part.name, source=part.source, R=rows, C=chunks, block=part.block, grid=part.grid,
                          tensors=(plan.TensorView(x, "scalar"), plan.TensorView(partials, "scalar")),
                          scalars=tuple(part.extra["scalars"])),
            plan.ViewStep(kernel=kname, source=finish, R=rows, C=cols, block=(block_x, 1, 1),
                          grid=kernelgen.split_grid(f"ceil(R/{block_x})", 3),
                          tensors=(plan.TensorView(partials, "scalar"), plan.TensorView(y, "scalar")),
                          scalars=(chunks, cols) if is_mean else (chunks,))]


def _split_reduce(ctx: LoweringContext, kname: str, op, warp: int, rows_per_block: int) -> list:
    """The two view steps of a split reduction: chunks of each row to partials in a temporary [R, P], then
    each row of partials to the result."""
    rows, cols = _matrix(op, "row", ctx.dims[op.operands[0]])
    chunks = kernelgen.split_chunks(rows, cols)
    part, finish, cdt = kernelgen.split_reduce(kname, op, warp, rows_per_block)
    ctx.build(part, f"<tessera:{kname}_part>")
    ctx.build(finish, f"<tessera:{kname}>")
    x, y = ctx.record(op.operands[0]), ctx.record(op.results[0])
    partials = ctx.temporary(y, cdt, [rows, chunks], tag="_partials")
    is_mean = ir.StringAttr(op.attributes["kind"]).value == "mean"
    return [plan.ViewStep(kernel=f"{kname}_part", source=part, R=rows, C=cols, block=(warp, rows_per_block, 1),
                          grid=kernelgen.split_grid(f"ceil((R*{kernelgen.split_chunks('R', 'C')})/{rows_per_block})",
                                                    3),
                          tensors=(plan.TensorView(x, "matrix"), plan.TensorView(partials, "scalar")),
                          scalars=(chunks,)),
            plan.ViewStep(kernel=kname, source=finish, R=rows, C=chunks, block=(warp, rows_per_block, 1),
                          grid=kernelgen.split_grid(f"ceil(R/{rows_per_block})", 3),
                          tensors=(plan.TensorView(partials, "matrix"), plan.TensorView(y, "rows")),
                          scalars=(cols,) if is_mean else ())]


def _matrix(op, kind: str, d: list[str]) -> tuple[str, str]:
    """The [R, C] view of a group's iteration space."""
    if kind == "row" and op.operation.name == "ttensor.reduce":   # R: the kept extents, C: the reduced
        axes = kernelgen.reduced_axes(op)
        return (graph_shapes.product([x for i, x in enumerate(d) if i not in axes]),
                graph_shapes.product([x for i, x in enumerate(d) if i in axes]))
    if not d:
        return "1", "1"
    if kind == "layout":
        return d[-2], d[-1]
    return graph_shapes.product(d[:-1]), d[-1]


def _users(v):
    for use in v.uses:
        owner = use.owner
        yield getattr(owner, "operation", owner)
