"""The CPU backend: warp-vectorized SIMT kernels in a host shared object, run by libtessera's thread pool."""

from .. import register
from .backend import CPUBackend

register(CPUBackend)

__all__ = ["CPUBackend"]
