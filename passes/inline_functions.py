"""Calls between `@function`s inlined, so that the Graph IR phases (fusion above all) see one body per function.

The frontend writes a call of another @function of the file as a ``func.call`` of its ``func.func``, with a
``tensor.cast`` where the caller knows an extent statically that the callee names (and back, on a result).
This pass, the first of the ``canonical`` stage (``tessera-inline-functions`` in tessera-opt), replaces each
call of a ``tessera.function`` by a copy of the callee's body, callees first, so that nested calls inline
whole. The casts go with it: the copy reads the caller's values, and a result the caller knew more precisely
takes that type. The callee stays in the module, with its own launch plan.

A function's own schedule hints (``tessera.hints``) govern its own plan; an inlined body is scheduled by its
caller's. A reshape's ``tessera.result_dims`` names extents in the callee's symbols: they are renamed to the
caller's where the caller's argument names or knows them, else left to the type (``?``).
"""

from __future__ import annotations

from ..diagnostics import LoweringError
from ..mlir import ir
from . import graph_shapes


def _name(op) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _callee(call) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def _functions(module) -> dict:
    return {_name(op): op for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func" and "tessera.function" in op.attributes}


def _calls(fn) -> list:
    if not fn.regions[0].blocks:
        return []
    return [op for op in fn.regions[0].blocks[0].operations if op.operation.name == "func.call"]


def run(module) -> None:
    """Inlines every call of a `tessera.function` in every `tessera.function` of `module` (an Operation)."""
    functions = _functions(module)
    done: set[str] = set()
    active: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in active:
            raise LoweringError(functions[name], f"'{name}' calls itself ({' -> '.join(active + [name])}): "
                                                 f"recursion cannot be inlined")
        active.append(name)
        fn = functions[name]
        known = graph_shapes.arg_dims(fn)   # caller value -> its extents in the caller's names, where known
        for call in _calls(fn):
            callee = _callee(call)
            if callee in functions:
                visit(callee)
                with call.location:
                    _inline(call, functions[callee], known)
        active.pop()
        done.add(name)

    for name in functions:
        visit(name)


def _refine(op) -> None:
    """Gives a copied op's results the static extents its operands now have (the caller's), by the rules
    that carry extents through ops for the launch plan, so that the copy's types are what the frontend would
    have built in the caller; an extent the rules cannot tell stays as the callee typed it."""
    ins = []
    for i, v in enumerate(op.operands):
        t = v.type
        if not isinstance(t, ir.RankedTensorType):
            return
        ins.append([f"?{i}_{k}" if t.is_dynamic_dim(k) else str(t.get_dim_size(k)) for k in range(t.rank)])
    try:
        outs = graph_shapes._rule(op, ins)
    except (LoweringError, IndexError, KeyError, ValueError):
        return
    for r, dims in zip(op.results, outs):
        t = r.type
        if not isinstance(t, ir.RankedTensorType) or t.has_static_shape or len(dims) != t.rank:
            continue
        shape = [int(d) if t.is_dynamic_dim(k) and d.isdigit() else t.get_dim_size(k) for k, d in enumerate(dims)]
        r.set_type(ir.RankedTensorType.get(shape, t.element_type, t.encoding))


def _source(value):
    """The value a `tensor.cast` casts (the caller's own, more precise one), or `value`."""
    owner = value.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "tensor.cast":
        return owner.operands[0]
    return value


def _inline(call, callee, known: dict) -> None:
    body = callee.regions[0].blocks[0]
    try:
        callee_dims = graph_shapes.infer(callee)
    except (LoweringError, IndexError, KeyError, ValueError):
        callee_dims = {}
    mapping: dict = {}
    rename: dict[str, str] = {}   # callee extent symbol -> the caller's name or digits for it
    for arg, names, operand in zip(body.arguments, graph_shapes.arg_dims(callee).values() or [[]] * len(body.arguments),
                                   call.operands):
        src = _source(operand)
        mapping[arg] = src
        t = src.type
        dims = known.get(src)
        for i, n in enumerate(names):
            if n.isdigit() or n in rename:
                continue
            if dims is not None and dims[i] is not None:
                rename[n] = dims[i]
            elif isinstance(t, ir.RankedTensorType) and not t.is_dynamic_dim(i):
                rename[n] = str(t.get_dim_size(i))
    ip = ir.InsertionPoint(call)
    made = set()
    results = None
    for op in body.operations:
        if op.operation.name == "func.return":
            results = [mapping.get(v, v) for v in op.operands]
            break
        new = op.operation.clone(ip=ip)
        for i, v in enumerate(new.operands):
            if v in mapping:
                new.operands[i] = mapping[v]
        _refine(new)
        for old, r in zip(op.results, new.results):
            mapping[old] = r
            made.add(r)
            if old in callee_dims:
                known[r] = [d if d.isdigit() else rename.get(d) for d in callee_dims[old]]
        if "tessera.result_dims" in new.attributes:
            named = [ir.StringAttr(a).value for a in ir.ArrayAttr(new.attributes["tessera.result_dims"])]
            new.attributes["tessera.result_dims"] = ir.ArrayAttr.get(
                [ir.StringAttr.get(graph_shapes.rename(n, rename)) for n in named])
    if results is None:
        raise LoweringError(call, f"'{_name(callee)}' has no return")
    for r, value in zip(call.results, results):
        casts = [u.owner.operation for u in r.uses if u.owner.operation.name == "tensor.cast"]
        for c in casts:
            if c.results[0].type == value.type:
                c.results[0].replace_all_uses_with(value)
                c.erase()
        r.replace_all_uses_with(value)
    operands = list(call.operands)
    call.operation.erase()
    for v in operands:   # the casts into the callee's types, now unused
        owner = v.owner
        if isinstance(owner, ir.OpView) and owner.operation.name == "tensor.cast" and not list(v.uses):
            owner.operation.erase()
