"""Reference semantics of the operators crossing the ABI (dialects/tod_abi.py): a `tod.descriptor` is the
dense matrix of its representation applied to its payload, conjugate-transposed when it carries the
"adjoint" flag, rounded once to its entry type; `tod.export` computes nothing (the function returns the
payload tensors)."""

from __future__ import annotations

import numpy as np

from ..dialects import tod
from ..dialects.tod_abi import flags_of
from ..mlir import ir
from .operator_ops import _operator, conv1d
from .registry import local


def _matrix(op, ins) -> tuple[np.ndarray, bool]:
    """The payload's matrix, and whether it is a sum of products (rounded to the accumulation type first)."""
    attrs = op.attributes
    kind, tag = ir.StringAttr(attrs["repr"]).value, ir.StringAttr(attrs["tag"]).value
    if kind == "dense":
        return ins[0], False
    if kind == "factor":
        u, s, v = ins
        return (u * s) @ v.conj().T, True
    if kind == "implicit":
        return (np.diag(ins[0]), False) if tag == "diag" else (conv1d(op, ins)[0], False)
    blocks, rows, cols = ins
    sig = tod.operator_sig(op.results[0].type)
    b = blocks.shape[1]
    adjoint = "adjoint" in flags_of(op)
    nrow, ncol = (sig.din, sig.dout) if adjoint else (sig.dout, sig.din)
    out = np.zeros((nrow, ncol), dtype=blocks.dtype)
    for k, (r, c) in enumerate(zip(rows, cols)):
        if not (0 <= r < nrow // b and 0 <= c < ncol // b):
            raise ValueError(f"block {k} at block coordinates ({r}, {c}) lies outside the {nrow}x{ncol} operator "
                             f"of {b}x{b} blocks")
        out[r * b:(r + 1) * b, c * b:(c + 1) * b] += blocks[k]
    return out, False


@local("tod.descriptor")
def descriptor(op, ins):
    m, summed = _matrix(op, ins)
    if "adjoint" in flags_of(op):
        m = m.conj().T
    return [_operator(op, m, accumulated=summed)]


@local("tod.export")
def export(op, ins):
    return []
