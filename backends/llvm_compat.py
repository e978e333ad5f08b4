"""LLVM IR text from MLIR's LLVM, made readable by llvmlite's older LLVM.

MLIR's translation prints floating-point constants that have no short decimal form in the newer
`f0x<bits>` syntax (the value's own bits: 4 hex digits for half/bfloat, 8 for float, 16 for double).
llvmlite's LLVM 22 reads only the older forms: `0x<16 digits>` holding the value as a double for float and
double, `0xH<4>` for half, `0xR<4>` for bfloat. Rewriting is exact: every float is exactly a double.

It also prints a float constant as the shortest decimal that rounds to it (`float -2.954600e-03`), where
LLVM 22 wants a decimal that is the float's exact value, and refuses the line otherwise ("floating point
constant invalid for type"); such decimals become the same `0x<16 digits>` form. Infinities and the
default NaNs it prints as `+inf`, `-inf`, `+qnan`, `-qnan`, which LLVM 22 reads only in hex.
"""

from __future__ import annotations

import re
import struct

_HEX = re.compile(r"\bf0x([0-9A-Fa-f]+)\b")
_TYPE = re.compile(r"\b(half|bfloat|float|double)\b")
_DECIMAL = re.compile(r"(?<![\w.])-?\d\.\d+e[+-]\d+\b")
_SPECIAL = re.compile(r"(?<![\w.])[+-](inf|qnan)\b")
_SPECIAL_HEX = {  # (type, sign, name) -> the old form; float constants are written as doubles
    **{(t, "+", "inf"): "0x7FF0000000000000" for t in ("float", "double")},
    **{(t, "-", "inf"): "0xFFF0000000000000" for t in ("float", "double")},
    **{(t, "+", "qnan"): "0x7FF8000000000000" for t in ("float", "double")},
    **{(t, "-", "qnan"): "0xFFF8000000000000" for t in ("float", "double")},
    ("half", "+", "inf"): "0xH7C00", ("half", "-", "inf"): "0xHFC00",
    ("half", "+", "qnan"): "0xH7E00", ("half", "-", "qnan"): "0xHFE00",
    ("bfloat", "+", "inf"): "0xR7F80", ("bfloat", "-", "inf"): "0xRFF80",
    ("bfloat", "+", "qnan"): "0xR7FC0", ("bfloat", "-", "qnan"): "0xRFFC0",
}


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


def _exact_float(line: str) -> str:
    def sub(m: re.Match) -> str:
        types = _TYPE.findall(line[:m.start()])
        if not types or types[-1] != "float":
            return m.group(0)  # a double takes any decimal
        value = float(m.group(0))
        rounded = struct.unpack(">f", struct.pack(">f", value))[0]
        return m.group(0) if rounded == value else "0x" + struct.pack(">d", rounded).hex().upper()
    return _DECIMAL.sub(sub, line)


def _special(line: str) -> str:
    def sub(m: re.Match) -> str:
        types = _TYPE.findall(line[:m.start()])
        key = (types[-1] if types else "", m.group(0)[0], m.group(1))
        return _SPECIAL_HEX.get(key, m.group(0))
    return _SPECIAL.sub(sub, line)


def downgrade(text: str) -> str:
    lines = text.split("\n")
    lines = [_replace(line) if "f0x" in line else line for line in lines]
    lines = [_special(line) if "inf" in line or "qnan" in line else line for line in lines]
    return "\n".join(_exact_float(line) if "float" in line else line for line in lines)
