"""The Fourier kernels' ops as the reference interpreter computes them (a tile program's tile.fft lowers to them in
the frontend): ttensor.twiddle, ttensor.part, ttensor.interleave and ttensor.fft_stage, in float64/complex128 from
each op's definition (dialects/ttensor.py), rounded once to the result type."""

from __future__ import annotations

import numpy as np

from ..mlir import ir
from .registry import local
from .values import result


@local("ttensor.twiddle")
def twiddle(op, ins):
    n = ir.RankedTensorType(op.results[0].type).get_dim_size(0)
    jk = np.outer(np.arange(n), np.arange(n)) % n
    f = np.cos if ir.StringAttr(op.attributes["part"]).value == "cos" else np.sin
    return [result(op, f(2 * np.pi * jk / n) / np.sqrt(n))]


@local("ttensor.part")
def part(op, ins):
    return [result(op, np.asarray(ins[0])[..., 0 if ir.StringAttr(op.attributes["part"]).value == "re" else 1])]


@local("ttensor.interleave")
def interleave(op, ins):
    return [result(op, np.stack([np.asarray(ins[0]), np.asarray(ins[1])], axis=-1))]


def _complex(x, layout: str, imag=None) -> np.ndarray:
    x = np.asarray(x, np.float64)
    if layout == "pairs":
        return x[..., 0] + 1j * x[..., 1]
    if layout == "planes":
        return x[0] + 1j * x[1]
    return x + 1j * (np.asarray(imag, np.float64) if imag is not None else 0)


@local("ttensor.fft_stage")
def fft_stage(op, ins):
    """y[r·(i − q) + q + j·s] = scale · w^(j·(i − q)) · Σ_m x[i + m·n/r] · ω_r^(j·m), q = i mod s, along axis −2."""
    into, out = (ir.StringAttr(op.attributes[a]).value for a in ("input_layout", "output_layout"))
    r, s = (ir.IntegerAttr(op.attributes[a]).value for a in ("radix", "stride"))
    sign = 1 if ir.BoolAttr(op.attributes["inverse"]).value else -1
    scale = ir.FloatAttr(op.attributes["scale"]).value
    z = _complex(ins[0], into, ins[1] if len(ins) > 1 else None)
    n = z.shape[-2]
    i = np.arange(n // r)
    base = i - i % s
    y = np.empty_like(z)
    for j in range(r):
        b = sum(z[..., i + m * (n // r), :] * np.exp(sign * 2j * np.pi * j * m / r) for m in range(r))
        y[..., r * base + i % s + j * s, :] = scale * np.exp(sign * 2j * np.pi * j * base / n)[:, None] * b
    stored = np.stack([y.real, y.imag], axis=-1 if out == "pairs" else 0)
    return [result(op, stored)]
