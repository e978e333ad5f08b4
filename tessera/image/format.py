"""Constants and records of the `.tessera` image format, shared by its writer and reader."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

ABI_MAJOR, ABI_MINOR = 1, 0
META_MAJOR, META_MINOR = 1, 0

NOTE_NAME = b"Tessera\0"
NT_TESSERA_ABI_VERSION = 1

SEC_NOTE = ".note.tessera"
SEC_META = ".tessera.meta"
SEC_STRTAB = ".tessera.strtab"
SEC_OPS = ".tessera.ops"
CODE_PREFIX = ".tessera.code."

META_HEADER = struct.Struct("<4sHHIIIIII")        # magic, major, minor, kernels, ksize, args, asize, dims, props
KERNEL_RECORD = struct.Struct("<5I2I3I4I2I")      # 64 bytes
ARG_RECORD = struct.Struct("<IBBHII")             # 16 bytes
DIM_ENTRY = struct.Struct("<q")
PROP_ENTRY = struct.Struct("<II")

FLAG_SIMT = 1
ARG_READONLY = 1


class ImageError(ValueError):
    """A malformed image, or one this reader cannot read."""


@dataclass
class ArgRecord:
    name: str
    kind: int
    dtype: int
    dims: list[int] = field(default_factory=list)   # dimension-table entries (see docs/image-format.md)
    flags: int = 0

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class KernelRecord:
    name: str
    entry: str
    target: str
    arch: str
    section: str
    args: list[ArgRecord]
    block: tuple[int, int, int] = (0, 0, 0)
    warp_size: int = 32
    smem_bytes: int = 0
    regs: int = 0
    flags: int = FLAG_SIMT
    props: dict[str, str] = field(default_factory=dict)
