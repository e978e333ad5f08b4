"""The AMD backend: SIMT kernels as HSACO code objects, for HIP (docs/portability.md)."""

from .. import register
from .backend import AMDGPUBackend

register(AMDGPUBackend)

__all__ = ["AMDGPUBackend"]
