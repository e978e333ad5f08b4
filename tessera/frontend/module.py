"""A source file becomes an MLIR module: its `@kernel` and `@function` definitions, read from the AST,
never executed.

Modules (programming model Part VIII): a file exports a function with `@function(export=True)`, and another
file imports it with a plain Python import, `from blocks import mlp_block`, resolved against the files beside
the importing file and the include paths (`tessera-cc -I DIR`, `tessera.compile(..., include=(DIR,))`).
A call of an imported function is checked against the signature the imported source declares. The compiler
writes it as a `func.call` of a bodiless declaration (`tessera.import = "blocks"`), which becomes a launch
plan's call step, resolved by `tessera-link`; the interpreter builds the imported function (and what it
calls) into the module from its source instead, and runs it.
"""

from __future__ import annotations

import ast
import json
import os

from ..diagnostics import CompileError
from ..mlir import func, ir
from ..numerics import profiles
from . import derivatives, dist_ops, operator_abi, operator_ops, tensor_ops  # noqa: F401 — they register the op.* builders
from . import hints
from .function import ModuleFunctions, Signature, module_env
from .sources import find_module, import_nodes


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


def exported(fn: ast.FunctionDef, filename: str) -> bool:
    """`@function(export=True)`: the function is a symbol other files import and images link against."""
    for d in fn.decorator_list:
        if isinstance(d, ast.Call):
            for k in d.keywords:
                if k.arg == "export":
                    if not (isinstance(k.value, ast.Constant) and isinstance(k.value.value, bool)):
                        raise CompileError.at(k.value, filename, "export= takes True or False")
                    return k.value.value
    return False


def signature_json(sig: Signature) -> dict:
    """A function's signature as images record it (docs/image-format.md, `.tessera.rel`): its parameters'
    names, dtypes and extents, its results' dtypes and extents; an extent is a name, digits, or '?' where the
    parameters do not determine it."""
    def dim(d) -> str:
        return "?" if isinstance(d, str) and d.startswith("?") else str(d)
    return {"params": [{"name": n, "dtype": p.dtype.name, "dims": [dim(d) for d in p.dims]} for n, p in sig.params],
            "results": [{"dtype": dt.name, "dims": [dim(d) for d in dims]} for dt, dims, _ in sig.results]}


class Imports:
    """The functions one file imports, each built (once) from its own source file: into `body` as a
    declaration (`define` False, compiling) or as the whole function with the functions it calls (`define`
    True, interpreting). Shared by every file of one compilation, so that a file is read once and a cycle
    of imports is found."""

    def __init__(self, include: tuple[str, ...], define: bool, body: ir.Block):
        self.include = tuple(include)
        self.define = define
        self.body = body
        self.files: dict[str, ModuleFunctions] = {}
        self.loading: list[str] = []
        self.declared: dict[str, tuple[str, Signature]] = {}   # symbol -> (its source file, signature)

    def of(self, tree: ast.Module, filename: str, local: set[str]):
        """The resolver of `filename`'s imports (ModuleFunctions.imports)."""
        return FileImports(self, import_nodes(tree), filename, local)

    def functions(self, path: str, node: ast.AST, filename: str) -> ModuleFunctions:
        if path in self.files:
            return self.files[path]
        if path in self.loading:
            chain = " -> ".join(os.path.basename(p) for p in self.loading[self.loading.index(path):] + [path])
            raise CompileError.at(node, filename, f"imports form a cycle ({chain})")
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except UnicodeDecodeError as e:
            raise CompileError.at(node, filename, f"cannot import from {os.path.basename(path)}: it is not UTF-8 text "
                                                  f"(byte {e.start}: {e.reason})") from None
        except OSError as e:
            raise CompileError.at(node, filename, f"cannot import from {os.path.basename(path)}: "
                                                  f"{e.strerror or e}") from None
        tree = parse_source(source, path)
        every = tessera_defs(tree)
        kinds = {d.name: _decorator(d) for d in every}
        if self.define:
            body = self.body
        else:
            with ir.Location.file(path, 1, 1):
                body = ir.Module.create().body
        self.loading.append(path)
        try:
            mf = ModuleFunctions([d for d in every if kinds[d.name] == "function"], kinds, path,
                                 module_env(tree, path), body)
            mf.imports = self.of(tree, path, set(kinds))
            mf.exported = {d.name for d in every if exported(d, path)}
            mf.scratch = None if self.define else body   # keeps the declaration-only build's module alive
        finally:
            self.loading.pop()
        self.files[path] = mf
        return mf


class FileImports:
    """One file's imported names."""

    def __init__(self, imports: Imports, nodes: dict, filename: str, local: set[str]):
        self.imports, self.nodes, self.filename, self.local = imports, nodes, filename, local

    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def signature(self, node: ast.AST, local_name: str) -> Signature:
        stmt, name = self.nodes[local_name]
        path = find_module(stmt.module, self.filename, self.imports.include)
        if path is None:
            where = ", ".join(self.imports.include) or "no include paths"
            raise CompileError.at(stmt, self.filename, f"cannot import '{name}': no source file for module "
                                                       f"'{stmt.module}' beside this file or in the include "
                                                       f"paths ({where})")
        mf = self.imports.functions(path, stmt, self.filename)
        shown = os.path.basename(path)
        if mf.kinds.get(name) != "function":
            raise CompileError.at(stmt, self.filename, f"cannot import '{name}': {shown} defines no @function "
                                                       f"'{name}'")
        if name not in mf.exported:
            raise CompileError.at(stmt, self.filename, f"cannot import '{name}': it is not exported by {shown} "
                                                       f"(declare it @function(export=True))")
        if name in self.local:
            raise CompileError.at(stmt, self.filename, f"imported '{name}' has the name of a function of this "
                                                       f"file: a module's symbols are unique")
        seen = self.imports.declared.get(name)
        if seen is not None and seen[0] != path:
            raise CompileError.at(stmt, self.filename, f"'{name}' is imported from {shown} and from "
                                                       f"{os.path.basename(seen[0])}: a module's symbols are unique")
        sig = mf.build(name)
        if not self.imports.define and seen is None:
            _declare(self.imports.body, name, stmt.module, sig, node, self.filename)
        self.imports.declared[name] = (path, sig)
        return sig


def _declare(body: ir.Block, name: str, module: str, sig: Signature, node: ast.AST, filename: str) -> None:
    """The bodiless `func.func private @name` a call of an imported function calls."""
    with ir.InsertionPoint.at_block_begin(body), ir.Location.file(filename, node.lineno, node.col_offset + 1):
        f = func.FuncOp(name, ir.FunctionType.get(sig.arg_types, sig.result_types), visibility="private")
    f.attributes["tessera.import"] = ir.StringAttr.get(module)
    f.attributes["tessera.signature"] = ir.StringAttr.get(json.dumps(signature_json(sig)))


def build_module(source: str, filename: str, only: list[str] | None = None, include: tuple[str, ...] = (),
                 define_imports: bool = False, derived: tuple = ()) -> ir.Module:
    """Emits the module for `source` into the current MLIR context (with Tessera's dialects loaded). Imported
    functions are declared (`define_imports` False, to compile) or built whole (True, to interpret).
    `derived` adds derivatives to the file's own `g = grad(f)` ones: (name, kind, of, argnums) tuples
    (tessera.grad(f) called from Python)."""
    tree = parse_source(source, filename)
    defs = every = tessera_defs(tree)
    requests = derivatives.requests(tree, filename) + [
        derivatives.Request(n, k, of, tuple(a) if a is not None else None, tree) for n, k, of, a in derived]
    names = {d.name for d in defs}
    for r in requests:
        if r.name in names:
            raise CompileError.at(r.node, filename, f"'{r.name}' is defined twice")
        names.add(r.name)
    if only:
        missing = sorted(set(only) - names)
        if missing:
            raise CompileError(f"no @kernel or @function named {', '.join(missing)} in this file", filename, 1, 1)
        defs = [d for d in defs if d.name in only]
    if not defs and not (only and any(r.name in only for r in requests)):
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
    kinds = {d.name: _decorator(d) for d in every} | {r.name: "function" for r in requests}
    functions = ModuleFunctions([d for d in every if _decorator(d) == "function"], kinds, filename, env,
                                module.body)
    functions.derived = {r.name: r for r in requests}
    functions.imports = Imports(include, define_imports, module.body).of(tree, filename, set(functions.kinds))
    with ir.InsertionPoint(module.body):
        for d in defs:
            if _decorator(d) == "kernel":
                # lazy: the builders of @kernels, which a file of @functions only does not need
                from .kernel import KernelBuilder
                from .tile_program import TileProgramBuilder, is_tile_program
                if is_tile_program(d):
                    TileProgramBuilder(d, filename, env).build()
                else:
                    KernelBuilder(d, filename).build()
            else:
                sig = functions.build(d.name)
                if exported(d, filename):
                    f = _func(module.body, d.name)
                    f.attributes["tessera.export"] = ir.StringAttr.get(json.dumps(signature_json(sig)))
        for r in requests:
            if not only or r.name in only:
                functions.build(r.name)
    asked = [p for p in (hints.numerics(d, filename) for d in defs) if p]
    if asked:   # the compilation takes it where it is stricter than its options' (compiler.compile_module)
        module.operation.attributes["tessera.numerics"] = ir.StringAttr.get(profiles.strictest(*asked))
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise CompileError.from_mlir(e, filename) from None
    return module


def _func(body: ir.Block, name: str):
    return next(op for op in body.operations if op.operation.name == "func.func"
                and ir.StringAttr(op.attributes["sym_name"]).value == name)
