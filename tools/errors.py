"""How every tool reports what stops it: one line ``tessera-X: error: …`` on standard error and exit status 1.

A mistake in the user's program keeps its own form, ``file:line:col: error: …`` (CompileError); everything else
the environment can do to a tool — a source that is a directory, a symlink loop or not UTF-8, an output
directory that is missing or not writable, an input too deeply nested for the parser — reads as one line,
never as a traceback.
"""

from __future__ import annotations

import errno
import functools
import os
import sys

from ..diagnostics import CompileError


class ToolError(Exception):
    """What stops a tool, said in one sentence."""


def tool_main(prog: str):
    """Decorates a tool's `main(argv) -> int`: the failures above become one line and exit status 1."""
    def wrap(main):
        @functools.wraps(main)
        def run(argv=None) -> int:
            try:
                return main(argv)
            except CompileError as e:
                located = e.line >= 1 and not e.filename.startswith("<")
                print(e if located else f"{prog}: error: {e.message}", file=sys.stderr)
            except ToolError as e:
                print(f"{prog}: error: {e}", file=sys.stderr)
            except OSError as e:
                print(f"{prog}: error: {describe(e)}", file=sys.stderr)
            except UnicodeDecodeError as e:
                print(f"{prog}: error: the input is not UTF-8 text (byte {e.start}: {e.reason})", file=sys.stderr)
            except (RecursionError, MemoryError) as e:
                what = "nested too deeply" if isinstance(e, RecursionError) else "too large"
                print(f"{prog}: error: the input is {what} to compile", file=sys.stderr)
            return 1
        return run
    return wrap


def describe(e: OSError) -> str:
    reason = {errno.ELOOP: "too many levels of symbolic links (a loop)"}.get(e.errno, e.strerror or str(e))
    return f"{e.filename}: {reason}" if e.filename else reason


def read_text(path: str) -> str:
    """A source file's text; a directory, a loop or bytes that are not UTF-8 are ToolErrors naming it."""
    if os.path.isdir(path):
        raise ToolError(f"{path}: is a directory, not a source file")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        line = e.object[:e.start].count(b"\n") + 1
        raise ToolError(f"{path}:{line}: not UTF-8 text (byte {e.start}: {e.reason})") from None


def check_writable(path: str, what: str, directory: bool = False) -> None:
    """Before any work: `path` (a file, or with `directory` a directory made if missing) can be written."""
    if directory and os.path.exists(path):
        if not os.path.isdir(path):
            raise ToolError(f"{what} {path} is not a directory")
        parent = path
    else:
        if not directory and os.path.isdir(path):
            raise ToolError(f"{what} {path} is a directory")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise ToolError(f"{what} {path}: the directory {os.path.dirname(path) or '.'} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ToolError(f"{what} {path}: the directory {parent} is not writable")
