"""`op.*` builders for collectives on a `dist.Mesh` (the ``tdist`` dialect)."""

from __future__ import annotations

import re

from ..dialects import tdist
from ..dialects.support import create
from ..mlir import ir
from .oplib import GTensor, MeshSpec, graph_op
from .tensor_ops import _check_kwargs, _i64

_UNITS = {"": 1, "b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20, "gb": 1 << 30, "gib": 1 << 30}


def bucket_bytes(b, node, v) -> int:
    """`bucket=16MB`, `"16MiB"`, or a byte count."""
    if isinstance(v, int) and v >= 0:
        return v
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(v)) if isinstance(v, str) else None
    if m is None or m.group(2).lower() not in _UNITS:
        raise b.error(node, f"bucket must be a byte count or a size like \"16MB\", got {v!r}")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _common(b, node, args, kwargs, what: str, extra: tuple):
    _check_kwargs(b, node, kwargs, ("mesh", "axis") + extra)
    if len(args) != 1 or not isinstance(args[0], GTensor):
        raise b.error(node, f"{what} takes one tensor (and keyword arguments)")
    mesh = kwargs.get("mesh")
    if not isinstance(mesh, MeshSpec):
        raise b.error(node, f"{what} needs mesh=dist.Mesh(...)")
    axis = kwargs.get("axis", mesh.axes[0])
    if axis not in mesh.axes:
        raise b.error(node, f"axis {axis!r} is not an axis of the mesh {list(mesh.axes)}")
    attrs = {"mesh_axes": ir.ArrayAttr.get([ir.StringAttr.get(a) for a in mesh.axes]),
             "mesh_shape": ir.ArrayAttr.get([_i64(s) for s in mesh.shape]),
             "axis": ir.StringAttr.get(axis)}
    return args[0], mesh.shape[mesh.axes.index(axis)], attrs


def _reduction_attrs(b, node, kwargs) -> dict:
    red = kwargs.get("op", "sum")
    if red not in tdist.REDUCTIONS:
        raise b.error(node, f"op={red!r}: the reduction is one of {', '.join(tdist.REDUCTIONS)}")
    algo = kwargs.get("algo", "auto")
    if algo not in tdist.ALGOS:
        raise b.error(node, f"algo={algo!r}: choose one of {', '.join(tdist.ALGOS)}")
    return {"op": ir.StringAttr.get(red), "algo": ir.StringAttr.get(algo),
            "deterministic": ir.BoolAttr.get(bool(kwargs.get("deterministic", False)))}


@graph_op("all_reduce")
def all_reduce(b, node, args, kwargs):
    """op.all_reduce(X, mesh=…, axis=…, op="sum", algo="auto", deterministic=False, bucket=0, chunks=None).
    `chunks`: the row chunks of the matmul producing X, over the compile option collective_chunks
    (passes/pipeline_collectives.py; 1: whole): a count, or a tuple of weights for uneven chunks (6, 6, 3, 1)."""
    x, _, attrs = _common(b, node, args, kwargs, "op.all_reduce",
                          ("op", "algo", "deterministic", "bucket", "chunks"))
    attrs.update(_reduction_attrs(b, node, kwargs))
    attrs["bucket_bytes"] = _i64(bucket_bytes(b, node, kwargs.get("bucket", 0)))
    chunks = kwargs.get("chunks")
    spec = None if chunks is None else tdist.chunk_spec(chunks)
    if chunks is not None and spec is None:
        raise b.error(node, f"chunks must be a positive int or a non-empty sequence of positive int weights "
                            f"(uneven chunks, e.g. (6, 6, 3, 1)), got {chunks!r}")
    with b.loc(node):
        op = create(tdist.AllReduceOp, x.value, result=x.value.type, **attrs)
    if spec is not None:
        op.attributes[tdist.CHUNKS] = _i64(spec[0])
        if spec[1] is not None:
            op.attributes[tdist.CHUNK_WEIGHTS] = ir.ArrayAttr.get([_i64(w) for w in spec[1]])
    return GTensor(op.result, x.dtype, x.dims, x.accum)


def _scaled_dim(b, node, x: GTensor, dim, n: int, grow: bool):
    if not isinstance(dim, int) or not -x.rank <= dim < x.rank:
        raise b.error(node, f"dim {dim!r} is not an axis of the rank-{x.rank} tensor")
    dim %= x.rank
    d = b.shapes.resolve(x.dims[dim])
    dims = list(x.dims)
    if isinstance(d, int):
        if not grow and d % n:
            raise b.error(node, f"extent {d} of dim {dim} is not divisible by the {n} devices of the axis")
        dims[dim] = d * n if grow else d // n
    else:
        dims[dim] = f"{d}*{n}" if grow else f"{d}/{n}"
    return dim, dims


@graph_op("all_gather")
def all_gather(b, node, args, kwargs):
    """op.all_gather(X, mesh=…, axis=…, dim=0): concatenation along `dim` in device order."""
    x, n, attrs = _common(b, node, args, kwargs, "op.all_gather", ("dim",))
    dim, dims = _scaled_dim(b, node, x, kwargs.get("dim", 0), n, grow=True)
    with b.loc(node):
        op = tdist.AllGatherOp(x.value, dim=_i64(dim), result=b.tensor_type(x.dtype, dims), **attrs)
    return GTensor(op.result, x.dtype, dims, x.accum)


@graph_op("reduce_scatter")
def reduce_scatter(b, node, args, kwargs):
    """op.reduce_scatter(X, mesh=…, axis=…, dim=0, op="sum", algo=…, deterministic=…)."""
    x, n, attrs = _common(b, node, args, kwargs, "op.reduce_scatter", ("dim", "op", "algo", "deterministic"))
    attrs.update(_reduction_attrs(b, node, kwargs))
    dim, dims = _scaled_dim(b, node, x, kwargs.get("dim", 0), n, grow=False)
    with b.loc(node):
        op = create(tdist.ReduceScatterOp, x.value, dim=_i64(dim), result=b.tensor_type(x.dtype, dims), **attrs)
    return GTensor(op.result, x.dtype, dims, x.accum)


@graph_op("broadcast")
def broadcast(b, node, args, kwargs):
    """op.broadcast(X, mesh=…, axis=…, root=0): every device gets the root's tensor."""
    x, n, attrs = _common(b, node, args, kwargs, "op.broadcast", ("root",))
    root = kwargs.get("root", 0)
    if not isinstance(root, int) or not 0 <= root < n:
        raise b.error(node, f"root {root!r} is not a device of the axis (0..{n - 1})")
    with b.loc(node):
        op = tdist.BroadcastOp(x.value, root=_i64(root), result=x.value.type, **attrs)
    return GTensor(op.result, x.dtype, x.dims, x.accum)
