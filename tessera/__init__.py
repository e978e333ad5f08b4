"""Tessera: an ahead-of-time compiler toolchain for tile-centric AI/HPC kernels, on MLIR.

    from tessera import kernel, launch, tile, tensor

Heavy parts (MLIR, llvmlite, the runtime) load on first use, so importing tessera is cheap.
"""

import importlib.util as _util
import os as _os

# dialects/, passes/, backends/ and tools/ of a source checkout become tessera.* only through an install's
# mapping (pyproject.toml); Python run in the checkout after a non-editable install finds this tessera/
# first, without them, and would fail deep inside.
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _util.find_spec(f"{__name__}.dialects") is None and _os.path.isdir(_os.path.join(_checkout, "dialects")):
    raise ImportError(f"tessera is being imported from the source checkout at {_checkout}, which is not the "
                      f"installed package: run `pip install -e .` there, or run from another directory")
del _util, _os, _checkout

from .language import (Derivative, Function, Kernel, accum, bf16, bfloat16, c64, c128, ceil_div, dist, f16, f32,
                       f64, float16, float32, fp8_e4m3, fp8_e5m2, fp16, fp32, function, grad, int4, int8, int32, int64,
                       jvp, kernel, launch, op, tensor, tf32, tile, value_and_grad, vjp)
from .version import __version__

__all__ = ["Kernel", "Function", "Derivative", "grad", "value_and_grad", "vjp", "jvp", "ceil_div", "kernel", "function", "launch", "tensor", "tile", "op", "dist",
           "accum", "f32", "f16", "bf16", "tf32", "f64", "fp8_e4m3", "fp8_e5m2", "int4", "int8", "int32", "int64", "c64",
           "c128", "compile", "runtime", "interpret", "autotune", "executor", "tessera_frontend_compile", "tessera_validate_shapes",
           "__version__"]


def compile(source: str, filename: str = "<string>", **options):
    """Compiles `source` (Python text with @kernel functions) and returns the `.tessera` image bytes."""
    # lazy: the compiler loads MLIR, which importing tessera must not
    from .compiler import CompileOptions, compile_source
    return compile_source(source, filename, CompileOptions(**options)).image


def __getattr__(name):
    import importlib
    if name in ("runtime", "interpret", "autotune", "executor"):
        return importlib.import_module(f".{name}", __name__)
    if name in ("tessera_frontend_compile", "tessera_validate_shapes"):
        return getattr(importlib.import_module(".frontend.interfaces", __name__), name)
    raise AttributeError(f"module 'tessera' has no attribute {name!r}")
