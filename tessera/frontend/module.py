"""A source file becomes an MLIR module: every `@kernel` function in it, read from the AST, never executed."""

from __future__ import annotations

import ast

from ..mlir import ir
from .errors import CompileError
from .kernel import KernelBuilder

KERNEL_DECORATORS = {"kernel"}


def _is_kernel(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name in KERNEL_DECORATORS:
            return True
    return False


def parse_source(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as e:
        raise CompileError(e.msg, filename, e.lineno or 0, e.offset or 0) from None


def kernel_defs(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_kernel(n)]


def build_module(source: str, filename: str, only: list[str] | None = None) -> ir.Module:
    """Emits the module for `source` into the current MLIR context (with Tessera's dialects loaded)."""
    tree = parse_source(source, filename)
    defs = kernel_defs(tree)
    if only:
        missing = sorted(set(only) - {d.name for d in defs})
        if missing:
            raise CompileError(f"no @kernel named {', '.join(missing)} in this file", filename, 1, 1)
        defs = [d for d in defs if d.name in only]
    if not defs:
        raise CompileError("no @kernel function in this file", filename, 1, 1)
    seen: dict[str, ast.FunctionDef] = {}
    for d in defs:
        if d.name in seen:
            raise CompileError.at(d, filename, f"kernel '{d.name}' is defined twice "
                                               f"(first at line {seen[d.name].lineno})")
        seen[d.name] = d
    with ir.Location.file(filename, 1, 1):
        module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        for d in defs:
            KernelBuilder(d, filename).build()
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise CompileError.from_mlir(e, filename) from None
    return module
