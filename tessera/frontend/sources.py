"""Which source files a file imports from (programming model Part VIII, module.py): found from the AST alone,
without MLIR, so that a compile cache lookup (`tessera-cc`'s) keys on them without loading the compiler."""

from __future__ import annotations

import ast
import os


def import_nodes(tree: ast.Module) -> dict[str, tuple[ast.ImportFrom, str]]:
    """Local name -> (its `from M import name [as local]` statement, name), for the file's top-level imports."""
    out = {}
    for s in tree.body:
        if isinstance(s, ast.ImportFrom) and s.level == 0 and s.module:
            for a in s.names:
                if a.name != "*":
                    out[a.asname or a.name] = (s, a.name)
    return out


def find_module(module: str, filename: str, include: tuple[str, ...]) -> str | None:
    """The source file of `module` beside `filename` or in the include paths, in that order; None if none."""
    rel = module.replace(".", os.sep) + ".py"
    dirs = ([] if filename.startswith("<") else [os.path.dirname(os.path.abspath(filename))]) + list(include)
    for d in dirs:
        path = os.path.join(d, rel)
        if os.path.isfile(path):
            return path
    return None


def imported_sources(source: str, filename: str, include: tuple[str, ...]) -> list[tuple[str, str]]:
    """(path, text) of every source file `source` imports from, transitively: what a compilation of it reads
    besides `source` (the compile cache keys on them)."""
    out: dict[str, str] = {}
    todo = [(source, filename)]
    while todo:
        text, name = todo.pop()
        # A text the parser refuses (a syntax error, NUL bytes, nesting past Python's recursion limit) or a file
        # that cannot be read fails the compile, at its location, in the frontend; nothing is cached for it.
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for stmt, _ in import_nodes(tree).values():
            path = find_module(stmt.module, name, include)
            if path is not None and path not in out:
                try:
                    with open(path, encoding="utf-8") as f:
                        out[path] = f.read()
                except (OSError, UnicodeDecodeError):
                    continue
                todo.append((out[path], path))
    return sorted(out.items())


def keyed_source(source: str, filename: str, include: tuple[str, ...]) -> str:
    """`source` with the text of every file it imports from appended: what a compile cache keys on, since a
    compilation of `source` reads those too."""
    return source + "".join(f"\0{path}\0{text}" for path, text in imported_sources(source, filename, include))
