"""Operators crossing a function's ABI (dialects/tod_abi.py): the first step of ``tessera-tod-lower``.

Each `tod.descriptor` becomes the tod ops its representation stands for, which the rest of tod_lower lowers
as any operator:

    dense(M)                      tod.dense(M)
    factor(U, S, V)               tod.compose(tod.compose(tod.dense(U), tod.diag(S)), tod.adjoint(tod.dense(V)))
    implicit diag(d), conv1d(h)   tod.diag(d), tod.conv1d(h)
    … with flag "adjoint"         tod.adjoint(…)

and each one that crosses the function's boundary is recorded in the function's `tessera.operators`
attribute, the JSON list of its launch plan's operator records (tessera.plan.OperatorRecord; graph_lowering
copies it into the plan): a descriptor whose payload tensors are all parameters is an operator parameter,
an exported one (`tod.export`, erased here) an operator result, its payload the returned tensors; records
come in the signature's order (parameters, then results, each by its first payload tensor).
A block-sparse descriptor is left as it is, for tod_lower to apply by its blocks (a gather of x's block
columns, the block products and a scatter-sum into the block rows, all GEMMs with one-hot matrices: no
operator of another kind stands for it).
"""

from __future__ import annotations

import json

from ..diagnostics import LoweringError
from ..dialects import tod
from ..dialects.tod_abi import flags_of
from ..mlir import ir

ATTRIBUTE = "tessera.operators"


def run(fn, target: str) -> None:
    descriptors = [op for op in fn.entry_block.operations if op.operation.name == "tod.descriptor"]
    if not descriptors:
        return
    args = list(fn.entry_block.arguments)
    returned = [op for op in fn.entry_block.operations if op.operation.name == "func.return"][0].operands
    records = []
    for op in descriptors:
        exports = [u.owner for u in op.results[0].uses if u.owner.name == "tod.export"]
        payload = list(op.operands)
        if exports:
            for e in exports:
                records.append(_record(op, ir.StringAttr(e.attributes["name"]).value, "result",
                                       [_index(v, returned, op, "returned") for v in payload]))
                e.erase()
        elif all(isinstance(v, ir.BlockArgument) and v.owner == fn.entry_block for v in payload):
            records.append(_record(op, ir.StringAttr(op.attributes["name"]).value, "param",
                                   [ir.BlockArgument(v).arg_number for v in payload]))
        _expand(op, target)
    records.sort(key=lambda r: (r["role"] == "result", r["payload"][0]))   # the signature's order
    fn.attributes[ATTRIBUTE] = ir.StringAttr.get(json.dumps(records))


def _index(v, values, op, what: str) -> int:
    for i, w in enumerate(values):
        if w == v:
            return i
    raise LoweringError(op, f"an exported operator's payload tensor is not {what} by the function")


def _record(op, name: str, role: str, payload: list[int]) -> dict:
    attrs = op.attributes
    rec = {"name": name, "role": role, "repr": ir.StringAttr(attrs["repr"]).value,
           "tag": ir.StringAttr(attrs["tag"]).value, "flags": list(flags_of(op)), "payload": payload}
    if "decomposition" in attrs:
        rec["decomposition"] = ir.StringAttr(attrs["decomposition"]).value
    if "frame_bytes" in attrs:
        rec["frame_bytes"] = ir.IntegerAttr(attrs["frame_bytes"]).value
        rec["depth"] = ir.IntegerAttr(attrs["depth"]).value
    return rec


def _expand(op, target: str) -> None:
    """Replaces descriptor `op` by the tod ops it stands for."""
    kind, tag = ir.StringAttr(op.attributes["repr"]).value, ir.StringAttr(op.attributes["tag"]).value
    sig = tod.operator_sig(op.results[0].type)
    adjoint = "adjoint" in flags_of(op)
    din, dout = (sig.dout, sig.din) if adjoint else (sig.din, sig.dout)

    def optype(i, o, elem=sig.elem):
        return tod.operator_type(i, o, elem, sig.accum)

    def dims(v):
        t = ir.RankedTensorType(v.type)
        return [None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]

    if kind == "blocksparse":   # stays: tod_lower applies it by its blocks (one-hot GEMMs, _Lowering._blocksparse)
        if not list(op.results[0].uses):
            op.erase()
        return
    with op.location, ir.InsertionPoint(op):
        p = list(op.operands)
        if kind == "dense":
            out = tod.DenseOp(p[0], result=optype(din, dout)).result
        elif kind == "factor":
            (r,) = dims(p[1])
            s_elem = ir.RankedTensorType(p[1].type).element_type
            u = tod.DenseOp(p[0], result=optype(r, dout)).result
            s = tod.DiagOp(p[1], result=optype(r, r, s_elem)).result
            v = tod.DenseOp(p[2], result=optype(r, din)).result
            vh = tod.AdjointOp(v, result=optype(din, r)).result
            out = tod.ComposeOp(u, tod.ComposeOp(s, vh, result=optype(din, r)).result, result=optype(din, dout)).result
        elif tag == "diag":
            out = tod.DiagOp(p[0], result=optype(din, dout)).result
        else:
            out = tod.Conv1dOp(p[0], result=optype(din, dout)).result
        if adjoint:
            out = tod.AdjointOp(out, result=optype(dout, din)).result
    op.results[0].replace_all_uses_with(out)
    op.erase()
