"""Tessera: an ahead-of-time compiler toolchain for tile-centric AI/HPC kernels, on MLIR.

    from tessera import kernel, launch, tile, tensor

Heavy parts (MLIR, llvmlite, the runtime) load on first use, so importing tessera is cheap.
"""

from .language import Kernel, ceil_div, kernel, launch, tensor, tile

__version__ = "0.1.0"

__all__ = ["Kernel", "ceil_div", "kernel", "launch", "tensor", "tile", "compile", "runtime", "__version__"]


def compile(source: str, filename: str = "<string>", **options):
    """Compiles `source` (Python text with @kernel functions) and returns the `.tessera` image bytes."""
    from .compiler import CompileOptions, compile_source
    return compile_source(source, filename, CompileOptions(**options)).image


def __getattr__(name):
    if name == "runtime":
        import importlib
        return importlib.import_module(".runtime", __name__)
    raise AttributeError(f"module 'tessera' has no attribute {name!r}")
