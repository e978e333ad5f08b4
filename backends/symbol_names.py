"""Kernel names as symbols of the targets' code: Python identifiers may be any Unicode identifier (`café`).

LLVM IR writes a global whose name is outside ``[-a-zA-Z$._][-a-zA-Z$._0-9]*`` quoted, with every byte outside
printable ASCII escaped (as LLVM itself prints it); the symbol is the name's UTF-8 bytes, which ELF symbol tables
(the CPU shared object, the AMDGPU code object) and the loaders' lookups by string take as they are.

PTX identifiers are ASCII (``[a-zA-Z][a-zA-Z0-9_$]*`` or ``[_$%][a-zA-Z0-9_$]+``), so a name with other
characters gets a mangled ``.entry``: each such character as ``$<hex code point>$``. The mapping is injective
(``$`` delimits every escape), and no mangled name is an ASCII Python identifier (those have no ``$``), so
entries never collide; an ASCII name stays as it is.
"""

from __future__ import annotations

import re

_LLVM_PLAIN = re.compile(r"[-a-zA-Z$._][-a-zA-Z$._0-9]*")
_PTX_KEPT = re.compile(r"[a-zA-Z0-9_]")


def llvm_global(name: str) -> str:
    """`name` as it follows ``@`` in LLVM IR text."""
    if _LLVM_PLAIN.fullmatch(name):
        return name
    return '"' + "".join(chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\{b:02X}"
                         for b in name.encode("utf-8")) + '"'


def ptx_identifier(name: str) -> str:
    """The PTX ``.entry`` name of kernel `name`."""
    if name.isascii():
        return name
    return "".join(c if _PTX_KEPT.fullmatch(c) else f"${ord(c):x}$" for c in name)
