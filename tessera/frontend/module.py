"""A source file becomes an MLIR module: its `@kernel` and `@function` definitions, read from the AST,
never executed."""

from __future__ import annotations

import ast

from ..diagnostics import CompileError
from ..mlir import ir
from . import dist_ops, operator_ops, tensor_ops  # noqa: F401 — they register the op.* builders
from .function import ModuleFunctions, module_env
from .kernel import KernelBuilder
from .tile_program import TileProgramBuilder, is_tile_program


def _decorator(fn: ast.FunctionDef) -> str | None:
    """'kernel' or 'function' for `@kernel`, `@tessera.function`, `@ts.kernel(...)`; else None."""
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name in ("kernel", "function"):
            return name
    return None


def parse_source(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as e:
        line, col = e.lineno, e.offset
        if line is None and "\0" in source:  # Python names no place for a NUL byte: it is where the first one is
            before = source[:source.index("\0")]
            line, col = before.count("\n") + 1, len(before) - before.rfind("\n")
        raise CompileError(e.msg, filename, max(line or 1, 1), max(col or 1, 1)) from None


def tessera_defs(tree: ast.Module) -> list[ast.FunctionDef]:
    """The @kernel and @function definitions of a file, in source order."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _decorator(n)]


def build_module(source: str, filename: str, only: list[str] | None = None) -> ir.Module:
    """Emits the module for `source` into the current MLIR context (with Tessera's dialects loaded)."""
    tree = parse_source(source, filename)
    defs = every = tessera_defs(tree)
    if only:
        missing = sorted(set(only) - {d.name for d in defs})
        if missing:
            raise CompileError(f"no @kernel or @function named {', '.join(missing)} in this file", filename, 1, 1)
        defs = [d for d in defs if d.name in only]
    if not defs:
        raise CompileError("no @kernel or @function in this file", filename, 1, 1)
    seen: dict[str, ast.FunctionDef] = {}
    for d in defs:
        if d.name in seen:
            raise CompileError.at(d, filename, f"'{d.name}' is defined twice (first at line {seen[d.name].lineno})")
        seen[d.name] = d
    with ir.Location.file(filename, 1, 1):
        module = ir.Module.create()
    env = module_env(tree, filename)
    # every @function of the file may be called, `only` or not (a callee is built when first called)
    functions = ModuleFunctions([d for d in every if _decorator(d) == "function"],
                                {d.name: _decorator(d) for d in every}, filename, env, module.body)
    with ir.InsertionPoint(module.body):
        for d in defs:
            if _decorator(d) == "kernel" and is_tile_program(d):
                TileProgramBuilder(d, filename, env).build()
            elif _decorator(d) == "kernel":
                KernelBuilder(d, filename).build()
            else:
                functions.build(d.name)
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise CompileError.from_mlir(e, filename) from None
    return module
