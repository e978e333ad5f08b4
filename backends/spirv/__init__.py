"""The Intel backend: SIMT kernels as SPIR-V modules (Kernel capability, OpenCL memory model), for Level
Zero and OpenCL (docs/portability.md)."""

from .. import register
from .backend import SPIRVBackend

register(SPIRVBackend)

__all__ = ["SPIRVBackend"]
