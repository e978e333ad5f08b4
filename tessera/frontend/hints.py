"""Per-kernel schedule hints (spec/system-architecture.md §10) and per-target specializations.

    @function(tile=(128, 128, 32), stages=3, vector=8, epilogue=[bias, gelu])
    @op.specialize(when={"backend": "cpu"}, use={"tile_sizes": [96, 256, 256]})
    def mlp(X: tensor[f32, "M", "K"], ...): ...

Hints become the function's `tessera.hints` (MB, NC, KC for the tile M, N, K; stages; vector); the
specializations become `tessera.specialize`, and the schedule phase applies those whose `when` matches the
target it compiles for. `epilogue=[…]` asks that the matmul's epilogue fuse exactly those steps: the fusion
phase reports an error at the function when it cannot.

`@function(numerics="strict")` (also on `@kernel`) is no schedule hint either but the numerics profile the
function asks for (tessera/numerics/profiles.py): the module's `tessera.numerics`, the strictest its compiled
functions ask for, which the compilation takes where it is stricter than the options' own.

`@function(input_precision="tf32")` is no schedule hint either but how the function's f32 matmuls multiply
where the target has a choice (CompileOptions.input_precision, which it overrides): the function's
`tessera.input_precision`, read by the ptx GEMM lowering.

`@function(checkpoint=True)` is no schedule hint but a memory policy for derivatives: the function's
`tessera.checkpoint`. A derivative that differentiates through a call of it saves only the call's operands
and results for its backward and recomputes the values inside the call there (passes/autodiff_policy.py).
"""

from __future__ import annotations

import ast

from ..diagnostics import CompileError
from ..mlir import ir
from ..numerics import profiles
from ..options import HINT_LIMITS, INPUT_PRECISIONS

_KEYS = ("tile", "stages", "vector", "epilogue")


def _literal(node: ast.expr, filename: str):
    """Python literals, with bare names read as strings (`epilogue=[bias, gelu]`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, filename) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            key = _literal(k, filename) if k is not None else None
            if not isinstance(key, (str, int)):  # `{**x}` has no key; a list or a dict is no key
                raise CompileError.at(v if k is None else k, filename, "a hint's keys are names or numbers")
            out[key] = _literal(v, filename)
        return out
    if isinstance(node, ast.Constant):
        return node.value
    raise CompileError.at(node, filename, f"a hint is a literal, not '{ast.unparse(node)}'")


def _tile(value, node, filename) -> dict:
    if isinstance(value, dict):
        value = [value.get(k) for k in ("M", "N", "K")]
    most = min(HINT_LIMITS[k] for k in ("MB", "NC", "KC"))
    if not (isinstance(value, list) and len(value) == 3 and all(_int_in(v, most) for v in value)):
        raise CompileError.at(node, filename, f"tile= takes three positive sizes (M, N, K) or {{M:, N:, K:}}, "
                                              f"each at most {most}")
    return {"MB": value[0], "NC": value[1], "KC": value[2]}


def _int_in(v, most: int) -> bool:
    return type(v) is int and 1 <= v <= most


def _normalize(pairs: dict, nodes: dict, filename: str) -> dict:
    out: dict = {}
    for key, value in pairs.items():
        node = nodes[key]
        if key in ("tile", "tile_sizes"):
            out.update(_tile(value, node, filename))
        elif key == "stages":
            if not _int_in(value, HINT_LIMITS[key]):
                raise CompileError.at(node, filename, f"stages= takes a positive integer up to {HINT_LIMITS[key]}, "
                                                      f"not {_short(value)}")
            out[key] = value
        elif key == "vector":   # lanes of a vector register
            if not _int_in(value, HINT_LIMITS[key]) or value & (value - 1):
                raise CompileError.at(node, filename, f"vector= takes a positive integer, a power of two up to "
                                                      f"{HINT_LIMITS[key]}, not {_short(value)}")
            out[key] = value
        elif key == "epilogue":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise CompileError.at(node, filename, "epilogue= takes a list of step names, e.g. [bias, gelu]")
            out[key] = value
        else:
            raise CompileError.at(node, filename, f"unknown hint '{key}' (hints: tile, stages, vector, epilogue)")
    return out


def _short(v) -> str:
    return repr(v) if len(repr(v)) <= 40 else repr(v)[:40] + "…"


def read(fn: ast.FunctionDef, filename: str) -> tuple[dict, list]:
    """(hints, [(when, hints)]) from the decorators of `fn`."""
    hints: dict = {}
    specs: list = []
    for d in fn.decorator_list:
        if not isinstance(d, ast.Call):
            continue
        name = d.func.attr if isinstance(d.func, ast.Attribute) else getattr(d.func, "id", None)
        kw = {k.arg: k.value for k in d.keywords if k.arg}
        if name in ("function", "kernel"):
            kw.pop("numerics", None)   # not a schedule hint: the compilation's profile (`numerics` below)
            kw.pop("input_precision", None)   # nor this: how its f32 matmuls multiply (`input_precision` below)
            if name == "function":
                kw.pop("export", None)   # not a hint: the module's symbol table (module.exported checks it)
                kw.pop("checkpoint", None)   # not a hint: a derivative's memory policy (`checkpoint` below)
            hints.update(_normalize({k: _literal(v, filename) for k, v in kw.items()}, kw, filename))
        elif name == "specialize":
            when, use = kw.get("when"), kw.get("use")
            if when is None or use is None:
                raise CompileError.at(d, filename, "op.specialize(when={...}, use={...})")
            when_v, use_v = _literal(when, filename), _literal(use, filename)
            if not isinstance(when_v, dict) or not isinstance(use_v, dict):
                raise CompileError.at(d, filename, "op.specialize's when= and use= are dicts")
            specs.append((when_v, _normalize(use_v, {k: use for k in use_v}, filename)))
    return hints, specs


def _attr(d: dict) -> ir.DictAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get({k: ir.IntegerAttr.get(i64, v) if isinstance(v, int) else
                            ir.ArrayAttr.get([ir.StringAttr.get(x) for x in v]) if isinstance(v, list) else
                            ir.StringAttr.get(str(v)) for k, v in d.items()})


def checkpoint(fn: ast.FunctionDef, filename: str) -> bool:
    """Whether `@function(checkpoint=True)` asks derivatives to recompute the function's values."""
    for d in fn.decorator_list:
        name = getattr(d.func, "attr", getattr(d.func, "id", None)) if isinstance(d, ast.Call) else None
        for k in d.keywords if name == "function" else ():
            if k.arg == "checkpoint":
                if not (isinstance(k.value, ast.Constant) and type(k.value.value) is bool):
                    raise CompileError.at(k.value, filename, "checkpoint= takes True or False")
                return k.value.value
    return False


def numerics(fn: ast.FunctionDef, filename: str) -> str | None:
    """The numerics profile `@function(numerics=...)` or `@kernel(numerics=...)` asks for, if any."""
    for d in fn.decorator_list:
        name = getattr(d.func, "attr", getattr(d.func, "id", None)) if isinstance(d, ast.Call) else None
        for k in d.keywords if name in ("function", "kernel") else ():
            if k.arg == "numerics":
                value = k.value.value if isinstance(k.value, ast.Constant) else None
                try:
                    if not isinstance(value, str):
                        raise ValueError(f"not {_short(ast.unparse(k.value))}; the profiles are "
                                         f"{', '.join(profiles.PROFILES)}")
                    return profiles.canonical(value)
                except ValueError as e:
                    raise CompileError.at(k.value, filename, f"numerics= takes a profile name: {e}") from None
    return None


def input_precision(fn: ast.FunctionDef, filename: str) -> str | None:
    """How `@function(input_precision=...)` asks the function's f32 matmuls to multiply, if it does: "ieee"
    or "tf32" (CompileOptions.input_precision, which it overrides)."""
    for d in fn.decorator_list:
        name = getattr(d.func, "attr", getattr(d.func, "id", None)) if isinstance(d, ast.Call) else None
        for k in d.keywords if name in ("function", "kernel") else ():
            if k.arg == "input_precision":
                value = k.value.value if isinstance(k.value, ast.Constant) else None
                if value not in INPUT_PRECISIONS:
                    raise CompileError.at(k.value, filename, f"input_precision= takes "
                                          f"{' or '.join(repr(p) for p in INPUT_PRECISIONS)}, not "
                                          f"{_short(ast.unparse(k.value))}")
                return value
    return None


def attach(f, fn: ast.FunctionDef, filename: str) -> None:
    if checkpoint(fn, filename):
        f.attributes["tessera.checkpoint"] = ir.UnitAttr.get()
    precision = input_precision(fn, filename)
    if precision is not None:
        f.attributes["tessera.input_precision"] = ir.StringAttr.get(precision)
    hints, specs = read(fn, filename)
    if hints:
        f.attributes["tessera.hints"] = _attr(hints)
    if specs:
        f.attributes["tessera.specialize"] = ir.ArrayAttr.get(
            [ir.DictAttr.get({"when": _attr(w), "use": _attr(u)}) for w, u in specs])
