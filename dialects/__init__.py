"""Tessera's MLIR dialects, one module per dialect, Python-defined and backed by IRDL."""

from __future__ import annotations

from ..mlir import claim_dialect_namespaces, ir
from .tdist import TDist
from .tmem import TMem
from .tod import TOD
from .tsched import TSched
from .ttensor import TTensor
from .ttile import TTile
# The tile-level ops live in their own module, which imports TTile; importing it here registers them with
# TTile before any context loads the dialect.
from . import ttile_tile  # noqa: F401
from . import tod_abi  # noqa: F401  (tod's ops of operators crossing the ABI)

ALL_DIALECTS = (TTensor, TDist, TOD, TSched, TMem, TTile)
claim_dialect_namespaces(d.name for d in ALL_DIALECTS)


def make_context() -> ir.Context:
    """A fresh MLIR context with every upstream dialect and every Tessera dialect loaded."""
    ctx = ir.Context()
    with ctx:
        for dialect in ALL_DIALECTS:
            dialect.load()
    return ctx
