"""Numerics shared by the reference interpreter and the backends: rounding to narrow float formats, Philox,
and the numerics profiles (`numerics.profile("strict")`, profiles.py)."""

from .profiles import current, profile

__all__ = ["current", "profile"]
