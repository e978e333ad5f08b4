"""`op.descriptor`: operators crossing a function's boundary as the spec's TessOperatorDesc.

    @function
    def f(U: tensor[f32, "M", "R"], S: tensor[f32, "R"], V: tensor[f32, "N", "R"], x: tensor[f32, "N"]):
        A = op.descriptor("factor", U, S, V, decomposition="svd", name="A")   # an operator parameter
        return A @ x, op.adjoint(A)                                          # ... and an operator result

A descriptor whose payload tensors are all parameters is an operator parameter of the function's signature;
returning a descriptor (or its adjoint, which crosses as the same payload with the "adjoint" flag toggled)
makes it an operator result: the function returns its payload tensors in its place. The rules are the
verifier's (dialects/tod_abi.py), reported here at the user's line.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..dialects import tod_abi
from ..mlir import ir
from .oplib import GTensor, describe, graph_op
from .operator_ops import GOperator, _default_accum, _operator_type, _size, _tensor_arg
from .tensor_ops import _check_kwargs

_RANKS = {"dense": (2,), "factor": (2, 1, 2), "implicit": (1,), "blocksparse": (3, 1, 1)}


@dataclass(frozen=True)
class Descriptor:
    """What a descriptor operator crosses the ABI with: its payload tensors and its tod.descriptor attributes."""
    payload: tuple[GTensor, ...]
    attrs: dict


def _attrs(b, node, kind: str, kwargs) -> dict:
    tag = kwargs.get("tag", "none")
    if tag not in tod_abi.TAGS[kind]:
        raise b.error(node, f"a {kind} descriptor's tag is one of {', '.join(tod_abi.TAGS[kind])}, got {tag!r}")
    flags = kwargs.get("flags", ())
    flags = (flags,) if isinstance(flags, str) else flags
    if not isinstance(flags, tuple) or any(f not in tod_abi.FLAGS for f in flags):
        raise b.error(node, f"flags= takes names among {', '.join(tod_abi.FLAGS)}, got {flags!r}")
    decomposition = kwargs.get("decomposition")
    if (kind == "factor") != (decomposition is not None) or decomposition not in (None, *tod_abi.DECOMPOSITIONS):
        raise b.error(node, "a factor (spectral) operator declares its decomposition= (svd, eig or eigh), ABI spec "
                            "§5.3" if kind == "factor" else f"only a factor operator declares a decomposition, not a "
                                                              f"{kind} one")
    recursion = "recursion" in flags
    frame, depth = kwargs.get("frame_bytes"), kwargs.get("depth")
    if recursion != (frame is not None) or recursion != (depth is not None):
        raise b.error(node, "a recursion operator (flags=('recursion',)), and only one, declares its stack-frame "
                            "size frame_bytes= and its depth=, ABI spec §5.3")
    name = kwargs.get("name", f"op{len(b.__dict__.setdefault('_descriptors', []))}")
    if not isinstance(name, str) or not name:
        raise b.error(node, f"name= takes a string, got {describe(name)}")
    attrs = {"name": ir.StringAttr.get(name), "repr": ir.StringAttr.get(kind), "tag": ir.StringAttr.get(tag),
             "flags": ir.ArrayAttr.get([ir.StringAttr.get(f) for f in sorted(set(flags), key=tod_abi.FLAGS.index)])}
    if decomposition is not None:
        attrs["decomposition"] = ir.StringAttr.get(decomposition)
    if recursion:
        i64 = ir.IntegerType.get_signless(64)
        attrs["frame_bytes"] = ir.IntegerAttr.get(i64, _size(b, node, frame, "frame_bytes"))
        attrs["depth"] = ir.IntegerAttr.get(i64, _size(b, node, depth, "depth"))
    return attrs


def _extents(b, node, kind: str, payload: list[GTensor], kwargs):
    """(Din, Dout) of the operator the payload describes, before any adjoint."""
    if kind == "dense":
        return payload[0].dims[1], payload[0].dims[0]
    if kind == "factor":
        u, s, v = payload
        b.unify(node, u.dims[1], s.dims[0], "op.descriptor: U's and S's rank")
        b.unify(node, v.dims[1], s.dims[0], "op.descriptor: V's and S's rank")
        return v.dims[0], u.dims[0]
    if kind == "implicit" and kwargs.get("tag") == "diag":
        return payload[0].dims[0], payload[0].dims[0]
    if kind == "implicit":
        n = _size(b, node, kwargs.get("n"), "n= (the convolution's signal length)")
        return n, n
    return _size(b, node, kwargs.get("din"), "din="), _size(b, node, kwargs.get("dout"), "dout=")


@graph_op("descriptor")
def descriptor(b, node, args, kwargs):
    """op.descriptor(repr, *payload, tag=, flags=, decomposition=, frame_bytes=, depth=, name=, n=, din=, dout=):
    the operator a TessOperatorDesc of representation `repr` (dense, factor, implicit, blocksparse) describes."""
    _check_kwargs(b, node, kwargs, ("tag", "flags", "decomposition", "frame_bytes", "depth", "name", "n", "din",
                                    "dout"))
    if not args or args[0] not in _RANKS:
        raise b.error(node, f"op.descriptor's first argument is the representation, one of {', '.join(_RANKS)}")
    kind, payload = args[0], list(args[1:])
    ranks = _RANKS[kind]
    if len(payload) != len(ranks):
        raise b.error(node, f"a {kind} descriptor carries {len(ranks)} payload tensor(s), got {len(payload)}")
    for i, (p, r) in enumerate(zip(payload, ranks)):
        if kind == "blocksparse" and i:
            if not isinstance(p, GTensor) or p.rank != 1 or p.dtype.name != "i32":
                raise b.error(node, f"a block-sparse descriptor's block coordinates are 1-D i32 tensors, got "
                                    f"{describe(p)}")
        else:
            _tensor_arg(b, node, p, r, f"payload {i} of a {kind} descriptor")
    attrs = _attrs(b, node, kind, kwargs)
    # The plan gives each parameter or result to one operator at most (docs/image-format.md, "Operators"): a
    # tensor described twice would cross the ABI as two operators' payloads.
    owners = b.__dict__.setdefault("_payload_owners", {})
    for i, p in enumerate(payload):
        if p.value in owners:
            raise b.error(node, f"payload {i} is already the payload of operator '{owners[p.value]}': a tensor "
                                f"crosses the ABI as one operator's payload")
    for p in payload:
        owners[p.value] = ir.StringAttr(attrs["name"]).value
    din, dout = _extents(b, node, kind, payload, kwargs)
    if "adjoint" in kwargs.get("flags", ()):
        din, dout = dout, din
    entries = payload[0].dtype
    g = _described(b, node, payload, attrs, GOperator(None, din, dout, entries, _default_accum(entries)))
    b.__dict__.setdefault("_descriptors", []).append(g)
    g.descriptor = Descriptor(tuple(payload), attrs)
    return g


def _described(b, node, payload, attrs: dict, like: GOperator) -> GOperator:
    """The tod.descriptor of `payload` with `attrs`, an operator of `like`'s extents and types."""
    with b.loc(node):
        values = [p.value for p in payload] + [None] * (3 - len(payload))
        op = tod_abi.DescriptorOp(values[0], result=_operator_type(b, like.din, like.dout, like.dtype, like.accum),
                                  payload1=values[1], payload2=values[2])
    for k, v in attrs.items():
        op.operation.attributes[k] = v
    return GOperator(op.result, like.din, like.dout, like.dtype, like.accum)


def exported(b, node, g: GOperator, index: int) -> list[GTensor]:
    """The payload tensors a returned operator `g` crosses the ABI as (its tod.export is built here): a
    descriptor's, or an adjoint's (a descriptor with the "adjoint" flag toggled)."""
    d = g.descriptor
    if d is None:
        raise b.error(node, f"result {index} is {g.describe()} built here: an operator crosses the ABI as an "
                            f"op.descriptor (or the adjoint of one), whose payload tensors the function returns")
    value = g.value
    if g.adjointed:
        flags = {ir.StringAttr(f).value for f in d.attrs["flags"]} ^ {"adjoint"}
        attrs = dict(d.attrs, flags=ir.ArrayAttr.get([ir.StringAttr.get(f) for f in tod_abi.FLAGS if f in flags]))
        value = _described(b, node, d.payload, attrs, g).value
    with b.loc(node):
        export = tod_abi.ExportOp(value)
    export.operation.attributes["name"] = d.attrs["name"]
    return list(d.payload)
