"""Derivatives of `@function`s: `g = grad(loss, argnums=(1, 2))` at the top level of a source file.

A derivative is a function of the module like any other, named by the assignment: other functions call it,
images export it, the interpreter runs it. The frontend only declares it: it checks the request (a
`@function` of the file, valid `argnums`, a scalar result for `grad`) and writes a body-less
``func.func private @g`` with its signature and a ``tessera.derivative`` attribute (`kind`, `of`, `argnums`).
The body is the Graph IR transformation of passes/autodiff.py, run by the canonical stage before calls are
inlined and by the interpreter before it runs a module: the frontend cannot build it, as it sits below
the passes.

Signatures (JAX's conventions, as one function each, since a Tessera function returns tensors, not closures):

    grad(f, argnums=0)           (*params) -> d f / d params[argnums]            f returns one 0-d float tensor
    value_and_grad(f, argnums=0) (*params) -> (f(*params), *grads)
    vjp(f, argnums=all)          (*params, *cotangents of f's results) -> (*f's results, *cotangents of params)
    jvp(f, argnums=all)          (*params, *tangents of params[argnums]) -> (*f's results, *tangents of results)
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

from ..diagnostics import CompileError
from ..mlir import func, ir
from .oplib import GTensor

KINDS = ("grad", "value_and_grad", "vjp", "jvp")


@dataclass(frozen=True)
class Request:
    """`name = kind(of, argnums=…)`; `argnums` None is the kind's default; `node` locates errors."""

    name: str
    kind: str
    of: str
    argnums: tuple[int, ...] | None
    node: ast.AST


def _kind(call: ast.expr) -> str | None:
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    return name if name in KINDS else None


def requests(tree: ast.Module, filename: str) -> list[Request]:
    """The derivatives a file defines: top-level `name = grad(f, argnums=…)` (also `tessera.grad`, `ts.vjp`)."""
    out = []
    for target, call in _assignments(tree, filename):
        kind = _kind(call)
        if kind is None:
            continue
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Name):
            raise CompileError.at(call, filename, f"{kind}(f, argnums=…) takes the name of a @function of this file")
        argnums = None
        for k in call.keywords:
            if k.arg != "argnums":
                raise CompileError.at(k.value if k.arg else call, filename,
                                      f"{kind}() takes argnums= only, not {k.arg or '**'}")
            try:
                v = ast.literal_eval(k.value)
            except (ValueError, TypeError):  # TypeError: a literal that cannot be built ({[1]: 2}, unhashable)
                v = None
            argnums = (v,) if type(v) is int else tuple(v) if isinstance(v, tuple) else None
            if argnums is None or not argnums or not all(type(i) is int for i in argnums):
                raise CompileError.at(k.value, filename, "argnums is an int or a non-empty tuple of ints")
        out.append(Request(target, kind, call.args[0].id, argnums, call))
    return out


def _assignments(tree: ast.Module, filename: str):
    """(name, value) of each top-level `name = value` and of each pair of `a, b = x, y`. A derivative call
    in any other top-level assignment (`a, b = grad(f)`, `g: T = grad(f)`, `h = [grad(f)]`) is an error at
    the call: the frontend would otherwise leave it undeclared, and the name undefined, without a word."""
    for s in tree.body:
        pairs = []
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t = s.targets[0]
            if isinstance(t, ast.Name):
                pairs = [(t.id, s.value)]
            elif isinstance(t, ast.Tuple) and isinstance(s.value, ast.Tuple) and len(t.elts) == len(s.value.elts) \
                    and all(isinstance(e, ast.Name) for e in t.elts):
                pairs = [(e.id, v) for e, v in zip(t.elts, s.value.elts)]
        yield from pairs
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and s.value is not None:
            declared = {id(v) for _, v in pairs}
            call = next((n for n in ast.walk(s.value) if _kind(n) is not None and id(n) not in declared), None)
            if call is not None:
                raise CompileError.at(call, filename, f"declare a derivative as `name = {_kind(call)}(f, …)` (or "
                                                      f"`a, b = grad(f), vjp(g)`) at the top level of the file")


def signature(req: Request, primal, filename: str):
    """The derivative's (params, arg types, results, result types) from the primal's `Signature`; a mistake
    in the request is an error at it."""
    def error(msg):
        return CompileError.at(req.node, filename, msg)
    n = len(primal.params)
    default = (0,) if req.kind in ("grad", "value_and_grad") else tuple(range(n))
    argnums = req.argnums if req.argnums is not None else default
    picked = []
    for i in argnums:
        if not -n <= i < n:
            raise error(f"argnums {i} is out of range: '{req.of}' takes {n} parameter(s)")
        i %= n
        if i in picked:
            raise error(f"argnums names parameter {i} twice")
        pname, p = primal.params[i]
        if p.dtype.kind != "float":
            raise error(f"parameter {i} ('{pname}') of '{req.of}' is a tensor of {p.dtype.name}: only floating "
                        f"tensors are differentiable")
        picked.append(i)
    params = list(primal.params)
    arg_types = list(primal.arg_types)
    results = []
    result_types = []
    if req.kind in ("grad", "value_and_grad"):
        if len(primal.results) != 1 or primal.results[0][1] or primal.results[0][0].kind != "float":
            shown = ", ".join(f"tensor[{dt.name}{''.join(', ' + repr(d) for d in dims)}]"
                              for dt, dims, _ in primal.results)
            raise error(f"{req.kind} needs a function returning one scalar (0-d) floating tensor; '{req.of}' "
                        f"returns {shown} (use vjp for other results)")
        if req.kind == "value_and_grad":
            results.append(primal.results[0])
            result_types.append(primal.result_types[0])
    if req.kind == "vjp":
        for k, (dt, dims, _) in enumerate(primal.results):
            params.append((f"d_out{k}", GTensor(None, dt, list(dims))))
            arg_types.append(primal.result_types[k])
    if req.kind in ("vjp", "jvp"):
        results += primal.results
        result_types += primal.result_types
    if req.kind == "jvp":
        for i in picked:
            pname, p = primal.params[i]
            params.append((f"t_{pname}", p))
            arg_types.append(primal.arg_types[i])
        for k, (dt, dims, _) in enumerate(primal.results):
            if dt.kind == "float":
                results.append((dt, dims, None))
                result_types.append(primal.result_types[k])
    else:
        for i in picked:
            p = primal.params[i][1]
            results.append((p.dtype, list(p.dims), None))
            result_types.append(primal.arg_types[i])
    return params, arg_types, results, result_types, tuple(picked)


def declare(req: Request, argnums: tuple[int, ...], params: list, arg_types: list, result_types: list,
            arg_attr, filename: str) -> func.FuncOp:
    """The body-less `func.func private @name` that passes/autodiff.py fills (at the insertion point)."""
    node = req.node
    with ir.Location.file(filename, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1):
        f = func.FuncOp(req.name, ir.FunctionType.get(arg_types, result_types), visibility="private")
    f.attributes["tessera.function"] = ir.UnitAttr.get()
    f.arg_attrs = ir.ArrayAttr.get([arg_attr(n, p) for n, p in params])
    f.attributes["tessera.derivative"] = ir.StringAttr.get(json.dumps(
        {"kind": req.kind, "of": req.of, "argnums": list(argnums)}))
    return f
