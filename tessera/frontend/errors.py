"""Errors in a user's program, located at file:line:col of their source."""

from __future__ import annotations

import ast
import re

_LOC = re.compile(r'"(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)')


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
    def at(cls, node: ast.AST, filename: str, message: str) -> "CompileError":
        return cls(message, filename, getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1)

    @classmethod
    def from_mlir(cls, err, filename: str) -> "CompileError":
        """The first diagnostic of an ``ir.MLIRError``, at the source location MLIR carried for it."""
        diags = list(getattr(err, "error_diagnostics", []) or [])
        if not diags:
            return cls(str(err), filename, 0, 0)
        d = diags[0]
        notes = "".join(f"\n  note: {n.message}" for n in getattr(d, "notes", []))
        m = _LOC.search(str(d.location))
        if m is None:
            return cls(d.message + notes, filename, 0, 0)
        return cls(d.message + notes, m["file"], int(m["line"]), int(m["col"]))

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}: error: {self.message}"
