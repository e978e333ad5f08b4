"""Errors located at a user's source: `CompileError` for a mistake in their program, `LoweringError` for an
op a pass or backend cannot lower, and `parse_location` for the `"file":line:col` that MLIR prints.

A leaf: it imports nothing of Tessera's and no MLIR. MLIR locations and diagnostics are read through
`str(loc)` and their attributes, so the frontend, passes, backends and tools share these without a cycle.
"""

from __future__ import annotations

import ast
import re

_LOC = re.compile(r'"(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)')


def parse_location(text: str) -> tuple[str, int, int] | None:
    """(file, line, col) of the first file location in `text` (an MLIR location as printed, `loc("f.py":3:5)`,
    possibly inside a name or call-site location); None when it holds none (`loc(unknown)`)."""
    m = _LOC.search(text)
    return None if m is None else (m["file"], int(m["line"]), int(m["col"]))


class LoweringError(Exception):
    """An op a lowering cannot take. `at` is the op (or its location) the failure is reported at; the driver
    turns it into a CompileError at the user's line, a textual pipeline into an MLIR diagnostic."""

    def __init__(self, at, message: str):
        super().__init__(message)
        self.location = getattr(at, "location", at)
        self.message = message


class CompileError(Exception):
    """A mistake in the user's program. ``str()`` reads ``file:line:col: error: message`` (1-based column),
    the form editors and compilers use, so tools can jump to it."""

    def __init__(self, message: str, filename: str = "<unknown>", line: int = 0, col: int = 0):
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.col = col

    @classmethod
    def at(cls, node: ast.AST, filename: str, message: str) -> CompileError:
        return cls(message, filename, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1)

    @classmethod
    def located(cls, message: str, location, filename: str) -> CompileError:
        """`message` at the file location `location` (an MLIR location) holds, else at the start of
        `filename` (line 1, column 1: editors jump to a position, and 0 is none)."""
        where = parse_location(str(location))
        return cls(message, filename, 1, 1) if where is None else cls(message, *where)

    @classmethod
    def from_mlir(cls, err, filename: str) -> CompileError:
        """The first diagnostic of an ``ir.MLIRError``, at the source location MLIR carried for it."""
        diags = list(getattr(err, "error_diagnostics", []) or [])
        if not diags:
            return cls(str(err), filename, 1, 1)
        d = diags[0]
        notes = "".join(f"\n  note: {n.message}" for n in getattr(d, "notes", []))
        return cls.located(d.message + notes, d.location, filename)

    @classmethod
    def from_lowering(cls, err: LoweringError, filename: str) -> CompileError:
        return cls.located(err.message, err.location, filename)

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}: error: {self.message}"
