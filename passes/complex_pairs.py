"""Complex values as pairs of real tensors, and the kernels' cosine and sine polynomials: what the DFT as
GEMMs (passes/fourier.py) and the FFT (passes/fft.py) share."""

from __future__ import annotations

from typing import NamedTuple

from ..mlir import ir

KERNEL_BLOCK = 256
_TERMS = {"f64": 9, "f32": 6}   # Taylor terms of cos and sin on |φ| ≤ π/4: (π/4)^(2·terms)/(2·terms)! < ulp/2


class Pair(NamedTuple):
    """A complex tensor as its real and imaginary parts (two real tensors of one type)."""
    re: ir.Value
    im: ir.Value


def _poly(x2: str, coefficients: list[float], lit) -> str:
    """Horner's form of Σ c_k x2^k as kernel source."""
    out = lit(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = f"({lit(c)} + {x2} * {out})"
    return out
