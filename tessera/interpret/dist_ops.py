"""Reference semantics of the ``tdist`` collectives over the interpreter's simulated devices.

Values are rounded to the tensor's type after every combination, so the combination order shows in the low
bits as it would on hardware. `tree`, `binary_tree` and every `deterministic` collective pair devices
((0+1)+(2+3))+…; `ring` and `auto` combine in device order 0, 1, 2, ….
"""

from __future__ import annotations

import numpy as np

from ..mlir import ir
from .registry import spmd
from .values import result

_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "mean": np.add}


def _groups(op, world: int) -> list[list[int]]:
    """Devices that communicate: those differing only in the collective's mesh-axis coordinate."""
    axes = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["mesh_axes"])]
    shape = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["mesh_shape"])]
    size = int(np.prod(shape))
    if size != world:
        raise ValueError(f"the mesh has {size} devices but the interpreter runs {world}")
    k = axes.index(ir.StringAttr(op.attributes["axis"]).value)
    coords = np.array(np.unravel_index(np.arange(world), shape)).T
    groups: dict[tuple, list[int]] = {}
    for d, c in enumerate(coords):
        key = tuple(np.delete(c, k))
        groups.setdefault(key, []).append(d)
    return list(groups.values())


def _reduce(op, vals: list[np.ndarray]) -> np.ndarray:
    kind = ir.StringAttr(op.attributes["op"]).value
    fn = _COMBINE[kind]
    tree = ir.BoolAttr(op.attributes["deterministic"]).value or ir.StringAttr(op.attributes["algo"]).value in (
        "tree", "binary_tree")
    n = len(vals)
    vals = [result(op, v) for v in vals]
    if tree:
        while len(vals) > 1:
            vals = [result(op, fn(vals[i], vals[i + 1])) if i + 1 < len(vals) else vals[i]
                    for i in range(0, len(vals), 2)]
        acc = vals[0]
    else:
        acc = vals[0]
        for v in vals[1:]:
            acc = result(op, fn(acc, v))
    return result(op, acc / n) if kind == "mean" else acc


@spmd("tdist.all_reduce")
def all_reduce(op, ins):
    (x,) = ins
    out = [None] * len(x)
    for g in _groups(op, len(x)):
        r = _reduce(op, [x[d] for d in g])
        for d in g:
            out[d] = r.copy()
    return [out]


@spmd("tdist.all_gather")
def all_gather(op, ins):
    (x,) = ins
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    out = [None] * len(x)
    for g in _groups(op, len(x)):
        r = np.concatenate([x[d] for d in g], axis=dim)
        for d in g:
            out[d] = r.copy()
    return [out]


@spmd("tdist.reduce_scatter")
def reduce_scatter(op, ins):
    (x,) = ins
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    out = [None] * len(x)
    for g in _groups(op, len(x)):
        parts = np.split(_reduce(op, [x[d] for d in g]), len(g), axis=dim)
        for i, d in enumerate(g):
            out[d] = parts[i]
    return [out]


@spmd("tdist.broadcast")
def broadcast(op, ins):
    (x,) = ins
    root = ir.IntegerAttr(op.attributes["root"]).value
    out = [None] * len(x)
    for g in _groups(op, len(x)):
        for d in g:
            out[d] = x[g[root]].copy()
    return [out]
