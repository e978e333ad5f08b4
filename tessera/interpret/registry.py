"""Op implementations by op name, registered by the modules of this package (and by TOD's)."""

from __future__ import annotations

from typing import Callable

# name -> fn(op, inputs) -> list of outputs; runs once per device
LOCAL: dict[str, Callable] = {}
# name -> fn(op, inputs_per_device) -> outputs_per_device; sees every device at once (collectives)
SPMD: dict[str, Callable] = {}


def local(*names: str):
    def register(fn):
        for n in names:
            LOCAL[n] = fn
        return fn
    return register


def spmd(*names: str):
    def register(fn):
        for n in names:
            SPMD[n] = fn
        return fn
    return register
