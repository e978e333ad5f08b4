"""The NVIDIA backend: SIMT kernels as PTX text, run by libtessera's CUDA backend (docs/nvidia.md)."""

from .. import register
from .backend import PTXBackend

register(PTXBackend)

__all__ = ["PTXBackend"]
