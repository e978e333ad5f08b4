"""LLVM IR text from MLIR's LLVM, made readable by llvmlite's older LLVM.

MLIR's translation prints floating-point constants that have no short decimal form in the newer
`f0x<bits>` syntax (the value's own bits: 4 hex digits for half/bfloat, 8 for float, 16 for double).
llvmlite's LLVM 22 reads only the older forms: `0x<16 digits>` holding the value as a double for float and
double, `0xH<4>` for half, `0xR<4>` for bfloat. Rewriting is exact: every float is exactly a double.
"""

from __future__ import annotations

import re
import struct

_HEX = re.compile(r"\bf0x([0-9A-Fa-f]+)\b")
_TYPE = re.compile(r"\b(half|bfloat|float|double)\b")


def _replace(line: str) -> str:
    def sub(m: re.Match) -> str:
        digits = m.group(1)
        if len(digits) == 16:
            return "0x" + digits.upper()
        if len(digits) == 8:
            value = struct.unpack(">f", bytes.fromhex(digits))[0]
            return "0x" + struct.pack(">d", value).hex().upper()
        if len(digits) == 4:
            types = _TYPE.findall(line[:m.start()])
            return ("0xR" if types and types[-1] == "bfloat" else "0xH") + digits.upper()
        raise ValueError(f"unexpected float constant f0x{digits}")
    return _HEX.sub(sub, line)


def downgrade(text: str) -> str:
    if "f0x" not in text:
        return text
    return "\n".join(_replace(line) if "f0x" in line else line for line in text.split("\n"))
