"""The op library of `@tessera.function` programs: what `op.<name>(…)` means, one builder per op.

Each op family registers its builders here (`tensor_ops`, `dist_ops`, `operator_ops`); the function builder
looks them up by name. A builder gets the function builder (for locations, errors, types and shapes), the
call's AST node, its evaluated positional arguments and keyword arguments, and returns the result value(s).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from ..mlir import ir
from .. import dtypes


@dataclass
class GTensor:
    """A Graph IR tensor value with what the frontend knows of it beyond its MLIR type."""

    value: ir.Value
    dtype: dtypes.DType
    dims: list                     # int | str per axis (see shapes.py)
    accum: dtypes.DType | None = None

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class DTypePolicy:
    """`fp8_e4m3 @ accum(fp32)`: an element type with the accumulation type arithmetic on it uses."""

    dtype: dtypes.DType
    accum: dtypes.DType | None = None


@dataclass(frozen=True)
class Accum:
    """`accum(fp32)`, before `@` attaches it to an element type."""

    dtype: dtypes.DType


@dataclass(frozen=True)
class MeshSpec:
    """`dist.Mesh(axes=["dp", "tp"], devices=range(8), shape=(4, 2))`."""

    axes: tuple[str, ...]
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


Builder = Callable[..., object]
OPS: dict[str, Builder] = {}


def graph_op(*names: str):
    def register(fn: Builder) -> Builder:
        for n in names:
            if n in OPS:
                raise RuntimeError(f"op.{n} is defined twice")
            OPS[n] = fn if n == "dequantize" else _without_i4(fn, n)
        return fn
    return register


def _without_i4(fn: Builder, name: str) -> Builder:
    """`fn`, refusing an i4 tensor operand at the user's line: i4 has no arithmetic (no target computes in 4
    bits; it is stored two per byte), so op.dequantize is the one op that reads it."""
    @functools.wraps(fn)
    def checked(b, node, args, kwargs):
        given = [*args, *kwargs.values()]
        given += [x for a in given if isinstance(a, (list, tuple)) for x in a]
        if any(isinstance(a, GTensor) and a.dtype.name == "i4" for a in given):
            raise b.error(node, f"op.{name} cannot take an i4 tensor: i4 has no arithmetic, op.dequantize is the one "
                                f"op that reads it")
        return fn(b, node, args, kwargs)
    return checked


def describe(v) -> str:
    """What a value of a function body is, for messages: 'a tensor of f32', 'an operator 8 -> 8 of f32', …"""
    if hasattr(v, "describe"):  # values of op families that say what they are (an operator …)
        return v.describe()
    if isinstance(v, GTensor):
        return f"a tensor of {v.dtype.name}"
    if isinstance(v, DTypePolicy):
        return f"the dtype {v.dtype.name}"
    return f"{type(v).__name__} {v!r}"
