"""Numerics shared by the reference interpreter and the backends: rounding to narrow float formats, Philox."""
