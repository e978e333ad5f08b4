"""Rounding float64 values to the formats numpy lacks (bf16, tf32, fp8), round-to-nearest-even.

Values stay in float64 arrays holding exactly representable numbers of the target format, so the reference
interpreter can compute each op exactly and round once to the op's result type.
"""

from __future__ import annotations

from dataclasses import dataclass

# numpy is imported by the functions that compute with it, not by this module: the frontend reads
# `epsilon` (operator_ops.py) and a compile that never rounds a value here does not load numpy (60-70 ms).
F32_MAX = float.fromhex("0x1.fffffep127")   # np.finfo(np.float32).max


@dataclass(frozen=True)
class FloatFormat:
    mantissa_bits: int      # explicit fraction bits
    min_exponent: int       # exponent of the smallest normal number
    max_value: float        # largest finite value
    saturate: bool          # out-of-range values clamp to ±max (fp8) instead of becoming inf


FORMATS = {
    "f32": FloatFormat(23, -126, F32_MAX, False),
    "f16": FloatFormat(10, -14, 65504.0, False),
    "bf16": FloatFormat(7, -126, float.fromhex("0x1.fep127"), False),
    "tf32": FloatFormat(10, -126, F32_MAX, False),
    "fp8_e4m3": FloatFormat(3, -6, 448.0, True),       # e4m3fn: no infinities
    "fp8_e5m2": FloatFormat(2, -14, 57344.0, True),
}


def epsilon(dtype: str) -> float:
    """Machine epsilon of `dtype` ("f64" or a name in FORMATS): the spacing of its numbers just above 1."""
    return 2.0 ** -(52 if dtype == "f64" else FORMATS[dtype].mantissa_bits)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x` rounded to the nearest value of `dtype` (ties to even), as float64."""
    import numpy as np
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


# fp8's bit patterns (OCP 8-bit floats): exponent bits and bias, the finite codes' top, the quiet NaN the
# conversions write (e4m3fn has no infinities: S.1111.111 is its NaN)
_FP8_CODES = {"fp8_e4m3": (4, 7, 0x7E, 0x7F), "fp8_e5m2": (5, 15, 0x7B, 0x7E)}


def fp8_values(bits: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 values of fp8 bit patterns (uint8) of `dtype` ("fp8_e4m3", "fp8_e5m2")."""
    import numpy as np
    ebits, bias, top, _ = _FP8_CODES[dtype]
    m = FORMATS[dtype].mantissa_bits
    b = np.asarray(bits, dtype=np.uint8).astype(np.int64)
    e, f = (b >> m) & ((1 << ebits) - 1), b & ((1 << m) - 1)
    mag = np.where(e == 0, f * 2.0 ** (1 - bias - m), (1 + f / 2.0 ** m) * np.exp2(e - bias))
    mag = np.where((b & 0x7F) > top, np.inf if dtype == "fp8_e5m2" else np.nan, mag)
    mag = np.where((b & 0x7F) > (0x7C if dtype == "fp8_e5m2" else top), np.nan, mag)
    return np.where(b & 0x80, -mag, mag)


def fp8_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x` rounded to `dtype` as `round_to` does (ties to even, saturating), as uint8 bit patterns; NaN as the
    format's quiet NaN, -0 keeps its sign."""
    import numpy as np
    ebits, bias, top, nan = _FP8_CODES[dtype]
    y = round_to(x, dtype)
    finite = fp8_values(np.arange(top + 1, dtype=np.uint8), dtype)   # increasing with the code
    mag = np.abs(np.where(np.isnan(y), 0.0, y))
    code = np.searchsorted(finite, mag).astype(np.uint8)
    code = code | np.where(np.signbit(y), np.uint8(0x80), np.uint8(0))
    return np.where(np.isnan(y), np.uint8(nan), code).astype(np.uint8)
