"""Rounding float64 values to the formats numpy lacks (bf16, tf32, fp8), round-to-nearest-even.

Values stay in float64 arrays holding exactly representable numbers of the target format, so the reference
interpreter can compute each op exactly and round once to the op's result type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    mantissa_bits: int      # explicit fraction bits
    min_exponent: int       # exponent of the smallest normal number
    max_value: float        # largest finite value
    saturate: bool          # out-of-range values clamp to ±max (fp8) instead of becoming inf


FORMATS = {
    "f32": FloatFormat(23, -126, float(np.finfo(np.float32).max), False),
    "f16": FloatFormat(10, -14, 65504.0, False),
    "bf16": FloatFormat(7, -126, float.fromhex("0x1.fep127"), False),
    "tf32": FloatFormat(10, -126, float(np.finfo(np.float32).max), False),
    "fp8_e4m3": FloatFormat(3, -6, 448.0, True),       # e4m3fn: no infinities
    "fp8_e5m2": FloatFormat(2, -14, 57344.0, True),
}


def epsilon(dtype: str) -> float:
    """Machine epsilon of `dtype` ("f64" or a name in FORMATS): the spacing of its numbers just above 1."""
    return 2.0 ** -(52 if dtype == "f64" else FORMATS[dtype].mantissa_bits)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x` rounded to the nearest value of `dtype` (ties to even), as float64."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "f64":
        return x
    fmt = FORMATS[dtype]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mag = np.abs(x)
        exp = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
        exp = np.maximum(exp, fmt.min_exponent)          # subnormals share the smallest normal's spacing
        spacing = np.exp2(exp - fmt.mantissa_bits)
        y = np.round(x / spacing) * spacing               # numpy rounds halves to even
        y = np.where(np.isfinite(x), y, x)
        limit = fmt.max_value
        if fmt.saturate:
            y = np.where(np.isnan(x), x, np.clip(y, -limit, limit))
        else:
            # past the largest finite value by half a spacing or more: infinity, as IEEE rounding does
            top = np.exp2(np.floor(np.log2(limit)) - fmt.mantissa_bits) / 2
            y = np.where(np.abs(y) > limit, np.where(np.abs(x) >= limit + top, np.sign(x) * np.inf,
                                                     np.sign(x) * limit), y)
    return y
