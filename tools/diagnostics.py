"""``--verify-diagnostics`` for tessera-opt: the errors a test expects, written as MLIR's lit tests write them.

``// expected-error {{text}}`` expects an error on its own line; ``// expected-error @+1 {{text}}`` (or ``@-2``)
on a line relative to it. Each expected error must be reported, and no other error may be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..diagnostics import parse_location

_EXPECT = re.compile(r"//\s*expected-(error|warning|remark)\s*(@[+-]\d+)?\s*\{\{(.*?)\}\}")


@dataclass
class Expectation:
    line: int
    text: str
    source_line: int
    seen: bool = False


def expectations(text: str) -> list[Expectation]:
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        for m in _EXPECT.finditer(line):
            offset = int(m.group(2)[1:]) if m.group(2) else 0
            out.append(Expectation(n + offset, m.group(3), n))
    return out


def check(text: str, diagnostics: list[tuple[str, str]], line_base: int, filename: str) -> list[str]:
    """Problems found (empty when the diagnostics match). `diagnostics` are (location, message) pairs."""
    expected = expectations(text)
    problems = []
    for loc, message in diagnostics:
        where = parse_location(loc)
        line = where[1] if where else 0
        match = next((e for e in expected if not e.seen and e.line == line and e.text in message), None)
        if match is None:
            problems.append(f"{filename}:{line + line_base}: unexpected error: {message}")
        else:
            match.seen = True
    for e in expected:
        if not e.seen:
            problems.append(f"{filename}:{e.source_line + line_base}: expected error \"{e.text}\" "
                            f"on line {e.line + line_base} was not produced")
    return problems
