"""The CPU backend: warp-vectorized SIMT kernels in a host shared object, run by libtessera's thread pool."""

from .compiler import CPUBackend

__all__ = ["CPUBackend"]
