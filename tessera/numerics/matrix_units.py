"""Which element types a device multiplies in its matrix units (NVIDIA tensor cores, AMD MFMA/WMMA), by
architecture name, and so which targets compute fp8 natively (portability guide §3, §5, §8).

One table serves the runtime (`runtime.capabilities()["tensorcore"]`, from the architecture the device
reports) and the compiler (whether fp8 falls back to a wider type for a compile target).

- NVIDIA (`sm_XY`): fp16 from sm_70, bf16 and tf32 from sm_80, fp8 (e4m3, e5m2) from sm_89.
- AMD CDNA: MFMA on gfx908/gfx90a (fp16, bf16); gfx942 (MI300) and gfx950 (MI350) add fp8. gfx942's fp8
  MFMA reads the "fnuz" variants of e4m3/e5m2 (no negative zero, bias one larger), gfx950's the OCP ones.
- AMD RDNA 3 (gfx11xx): WMMA on fp16 and bf16.
- Intel (SPIR-V, Level Zero): DPAS is used only where declared available (docs/portability.md), not
  inferred from a device name, so nothing is listed here.
- CPU: none.
"""

from __future__ import annotations

FP8 = ("fp8_e4m3", "fp8_e5m2")

_AMD = {"gfx908": ("fp16", "bf16"), "gfx90a": ("fp16", "bf16"), "gfx942": ("fp16", "bf16") + FP8,
        "gfx950": ("fp16", "bf16") + FP8}


def _sm(arch: str) -> int | None:
    digits = "".join(c for c in arch[3:] if c.isdigit())
    return int(digits) if arch.startswith("sm_") and digits else None


def tensorcore_dtypes(arch: str) -> dict[str, bool]:
    """{dtype: True} for the dtypes the architecture `arch` ("sm_90a", "gfx942", "x86_64", "spirv1.3")
    multiplies in matrix units; empty where it has none."""
    sm = _sm(arch)
    if sm is not None:
        return {d: True for d, since in (("fp16", 70), ("bf16", 80), ("tf32", 80), ("fp8_e4m3", 89),
                                         ("fp8_e5m2", 89)) if sm >= since}
    if arch in _AMD:
        return {d: True for d in _AMD[arch]}
    if arch.startswith("gfx11"):
        return {"fp16": True, "bf16": True}
    return {}


def has_fp8(arch: str) -> bool:
    """Whether code for `arch` computes fp8 natively (else fp8 falls back, numerics/fallbacks in
    passes/graph_phases.py)."""
    return all(tensorcore_dtypes(arch).get(d) for d in FP8)
