"""The AMD backend: SIMT kernels as HSACO code objects, for HIP (docs/portability.md)."""

from .compiler import AMDGPUBackend

__all__ = ["AMDGPUBackend"]
