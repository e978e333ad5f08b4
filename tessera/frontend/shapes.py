"""Compile-time shapes of Graph IR values: static extents, named symbols, and their unification.

An extent is an int, a symbol the user named in an annotation (`"M"`), or an anonymous variable (`"?3"`)
that an op introduced. Unification is what a reader of the program would assume: a symbol may take one
static value (binding it everywhere), an anonymous variable may take anything, but two different symbols
the user named are different extents — `tensor[f32, "M", "K"] @ tensor[f32, "J", "N"]` is a mistake,
reported at the user's line.
"""

from __future__ import annotations

import ast
import itertools

Dim = int | str
MAX_EXTENT = 2 ** 63 - 1  # extents are signed 64-bit integers in MLIR's shapes and in the runtime
DIM_RULE = "a tensor dimension is a symbol name (\"N\", in ASCII) or a positive int (at most 2**63 - 1)"


def annotated(node: ast.expr) -> Dim | None:
    """The extent a tensor annotation writes at `node` (a symbol name "N" or a positive int), else None."""
    # ASCII: a symbol is a name in launch plans' extent expressions and in C headers too
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier() \
            and node.value.isascii():
        return node.value
    if isinstance(node, ast.Constant) and type(node.value) is int and 0 < node.value <= MAX_EXTENT:
        return node.value
    return None


class ShapeError(Exception):
    pass


class ShapeEnv:
    def __init__(self):
        self.binding: dict[str, Dim] = {}
        self.flexible: set[str] = set()   # symbols no user wrote (tile programs' unannotated extents)
        self._fresh = itertools.count()

    def fresh(self) -> str:
        return f"?{next(self._fresh)}"

    def resolve(self, d: Dim) -> Dim:
        while isinstance(d, str) and d in self.binding:
            d = self.binding[d]
        return d

    def unify(self, a: Dim, b: Dim, what: str) -> Dim:
        a, b = self.resolve(a), self.resolve(b)
        if a == b:
            return a
        if isinstance(a, str) and (a.startswith("?") or a in self.flexible):
            self.binding[a] = b
            return b
        if isinstance(b, str) and (b.startswith("?") or b in self.flexible):
            self.binding[b] = a
            return a
        if isinstance(a, str) and isinstance(b, int):
            self.binding[a] = b
            return b
        if isinstance(b, str) and isinstance(a, int):
            self.binding[b] = a
            return a
        raise ShapeError(f"{what}: {show(a)} and {show(b)} differ")

    def broadcast(self, a: list[Dim], b: list[Dim], what: str) -> list[Dim]:
        out = []
        for i in range(max(len(a), len(b))):
            x = self.resolve(a[len(a) - 1 - i]) if i < len(a) else 1
            y = self.resolve(b[len(b) - 1 - i]) if i < len(b) else 1
            if x == 1:
                out.append(y)
            elif y == 1:
                out.append(x)
            else:
                out.append(self.unify(x, y, f"{what} (axis {-1 - i})"))
        return list(reversed(out))

    def show_shape(self, dims) -> str:
        return "[" + ", ".join(show(self.resolve(d)) for d in dims) + "]"


def show(d: Dim) -> str:
    return str(d) if isinstance(d, int) or d.startswith("?") else repr(d)


def static(d: Dim) -> int | None:
    return d if isinstance(d, int) else None


def product(dims: list[Dim]) -> Dim:
    """The element count, when static; else a symbol naming it."""
    if all(isinstance(d, int) for d in dims):
        n = 1
        for d in dims:
            n *= d
        return n
    return "*".join(str(d) for d in dims)
