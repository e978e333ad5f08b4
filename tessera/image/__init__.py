"""The `.tessera` ELF image: writer and reader (format: docs/image-format.md)."""

from . import symbols
from .format import ABI_MAJOR, ABI_MINOR, ImageError, KernelRecord, Versions
from .reader import Image, read_image
from .writer import write_image

__all__ = ["ABI_MAJOR", "ABI_MINOR", "ImageError", "KernelRecord", "Versions", "Image", "read_image", "write_image"]
