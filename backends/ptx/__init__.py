"""The NVIDIA backend: SIMT kernels as PTX text, run by libtessera's CUDA backend (docs/nvidia.md)."""

from .compiler import PTXBackend

__all__ = ["PTXBackend"]
