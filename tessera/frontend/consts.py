"""Compile-time evaluation of constant expressions, under limits.

A program's constants are integers of at most 64 bits, floats and short sequences (shapes, axes, names), so
no constant expression needs much work. Without limits, `9 ** 9 ** 9` or `1 << 10**18` would take minutes
and gigabytes before their size could be refused, `max(range(10**18))` would never end, and a loop over
`range(10**9)` would be unrolled a billion times. Each check here comes before the work it bounds.
"""

from __future__ import annotations

import ast
import math
import operator

MAX_BITS = 64            # the widest compile-time integer (signed, or unsigned as a seed is)
MAX_ITEMS = 1 << 16      # the longest sequence a constant expression may build or scan
MAX_UNROLLED = 1 << 12   # loop iterations a function may unroll, all its loops together

BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
          ast.BitXor: operator.xor, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
          ast.LShift: operator.lshift, ast.RShift: operator.rshift}


class FoldError(ValueError):
    """A constant expression that cannot or may not be evaluated; the message says why."""


def binop(op: ast.operator, a, b):
    """`a op b` for constants, or FoldError."""
    f = BINOPS.get(type(op))
    if f is None:
        raise FoldError(f"operator '{type(op).__name__}' is not defined on constants")
    _check_size(op, a, b)
    try:
        return f(a, b)
    except (ArithmeticError, TypeError, ValueError) as e:
        raise FoldError(f"cannot evaluate constant expression: {e}") from None


def _check_size(op: ast.operator, a, b) -> None:
    ints = type(a) in (int, bool) and type(b) in (int, bool)
    if isinstance(op, ast.Pow) and ints and b > 0 and abs(a) > 1 and \
            (b > MAX_BITS or b * math.log2(abs(a)) > MAX_BITS):
        raise FoldError(f"a power of more than {MAX_BITS} bits")
    if isinstance(op, ast.LShift) and ints and a and b > MAX_BITS:
        raise FoldError(f"a shift to more than {MAX_BITS} bits")
    if isinstance(op, ast.Mult):
        seq, n = (a, b) if _sequence(a) else (b, a)
        if _sequence(seq) and type(n) in (int, bool) and len(seq) * max(n, 0) > MAX_ITEMS:
            raise FoldError(f"a constant sequence of more than {MAX_ITEMS} items")
    if isinstance(op, ast.Add) and _sequence(a) and _sequence(b) and len(a) + len(b) > MAX_ITEMS:
        raise FoldError(f"a constant sequence of more than {MAX_ITEMS} items")


def too_long(value) -> bool:
    """Whether `value`, if a sequence or range, is too long to scan (min, max)."""
    if not isinstance(value, (range, tuple, list, str)):
        return False
    try:
        return len(value) > MAX_ITEMS
    except OverflowError:   # a range of 2^63 or more items
        return True


def _sequence(v) -> bool:
    return isinstance(v, (tuple, list, str))
