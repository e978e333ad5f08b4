"""Constants and records of the `.tessera` image format, shared by its writer and reader."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

ABI_MAJOR, ABI_MINOR = 1, 0
META_MAJOR, META_MINOR = 1, 0

NOTE_NAME = b"Tessera\0"
NT_TESSERA_ABI_VERSION = 1
NT_TESSERA_IR_VERSION = 2   # the versions of .tessera.ops and .tessera.plan (docs/image-format.md)

# The Graph IR's version: our dialects' (major, minor), and the MLIR bytecode version `.tessera.ops` is written
# at (pinned: the compiler asks MLIR for exactly this one). A change to the dialects that an older reader would
# misread or fail to parse (an op, attribute or type removed or changed) bumps the major; one it would only fail
# to parse where the new thing is used (an op or attribute added) bumps the minor. The compatibility rule is
# `ir_refusal` below and docs/image-format.md's "Versions".
IR_MAJOR, IR_MINOR = 1, 3   # 1.1: ttensor.select, ttensor.binary floordiv, mod and the comparisons;
#                              1.2: ttensor.quantize, dequantize, push, ttensor.unary's round and
#                              invert, ttensor.binary's and, or, xor, shl, shr, and ui8 (u8) tensors;
#                              1.3: ttensor.conv, im2col, col2im
BYTECODE_VERSION = 6   # MLIR's bytecode version 6 (native properties), the newest the torch-mlir wheel writes

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


IR_VERSION_DESC = struct.Struct("<IIII")          # ir major, ir minor, bytecode version, plan version


class ImageError(ValueError):
    """A malformed image, or one this reader cannot read."""


@dataclass(frozen=True)
class Versions:
    """What an image's IR version note records; `Versions.NONE` (all 0) for an image made before it existed."""
    ir: tuple[int, int]
    bytecode: int
    plan: int

    def __str__(self) -> str:
        return f"IR {self.ir[0]}.{self.ir[1]} (bytecode {self.bytecode}), plan {self.plan}"


Versions.NONE = Versions((0, 0), 0, 0)


def ir_refusal(v: Versions) -> str | None:
    """Why this reader refuses the Graph IR of an image recording `v`, or None: it reads the same IR major at
    its own minor or an older one, written at its bytecode version or an older one."""
    if v == Versions.NONE:
        return ("the image records no IR version (it was made before images recorded one, IR version 0); "
                f"this reader reads IR {IR_MAJOR}.0 to {IR_MAJOR}.{IR_MINOR}: recompile it from its source")
    if v.ir[0] != IR_MAJOR or v.ir[1] > IR_MINOR or v.bytecode > BYTECODE_VERSION:
        return (f"the image's Graph IR is version {v.ir[0]}.{v.ir[1]} (bytecode {v.bytecode}); this reader reads "
                f"IR {IR_MAJOR}.0 to {IR_MAJOR}.{IR_MINOR} (bytecode {BYTECODE_VERSION} or older): "
                "recompile it from its source with this release")
    return None


def plan_refusal(v: Versions, reads) -> str | None:
    """Why a reader of launch plans of the versions `reads` (an int or a tuple: tessera.plan.READS) refuses the
    plans of an image recording `v`, or None."""
    reads = (reads,) if isinstance(reads, int) else tuple(reads)
    shown = " or ".join(f"version {r}" for r in reads) + (" only" if len(reads) == 1 else "")
    if v == Versions.NONE:
        return ("the image records no plan version (it was made before images recorded one, version 0); "
                f"this reader reads launch plans of {shown}: recompile it from its source")
    if v.plan not in reads:
        return (f"the image's launch plans are version {v.plan}; this reader reads {shown}: "
                "recompile it from its source with this release")
    return None


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
