"""Writes a `.tessera` image: an ELF64 relocatable file whose sections carry IR, metadata and code."""

from __future__ import annotations

import struct

from .. import plan
from .format import (ABI_MAJOR, ABI_MINOR, ARG_RECORD, BYTECODE_VERSION, DIM_ENTRY, IR_MAJOR, IR_MINOR,
                     IR_VERSION_DESC, KERNEL_RECORD, META_HEADER, META_MAJOR, META_MINOR, NOTE_NAME,
                     NT_TESSERA_ABI_VERSION, NT_TESSERA_IR_VERSION, PROP_ENTRY, SEC_META, SEC_NOTE, SEC_OPS,
                     SEC_STRTAB, KernelRecord, Versions)

CURRENT_VERSIONS = Versions((IR_MAJOR, IR_MINOR), BYTECODE_VERSION, plan.VERSION)

_SHT_PROGBITS, _SHT_STRTAB, _SHT_NOTE = 1, 3, 7
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")


class StringTable:
    def __init__(self):
        self.data = bytearray(b"\0")
        self.index: dict[str, int] = {"": 0}

    def add(self, s: str) -> int:
        if s not in self.index:
            self.index[s] = len(self.data)
            self.data += s.encode() + b"\0"
        return self.index[s]


def _meta(kernels: list[KernelRecord], strtab: StringTable) -> bytes:
    krecs, arecs, drecs, precs = [], [], [], []
    for k in kernels:
        arg_first, prop_first = len(arecs), len(precs)
        for a in k.args:
            arecs.append(ARG_RECORD.pack(strtab.add(a.name), a.kind, a.dtype, a.rank, len(drecs), a.flags))
            drecs += [DIM_ENTRY.pack(d) for d in a.dims]
        for key, value in k.props.items():
            precs.append(PROP_ENTRY.pack(strtab.add(key), strtab.add(value)))
        krecs.append(KERNEL_RECORD.pack(
            strtab.add(k.name), strtab.add(k.entry), strtab.add(k.target), strtab.add(k.arch), strtab.add(k.section),
            arg_first, len(k.args), *k.block, k.warp_size, k.smem_bytes, k.regs, k.flags, prop_first, len(k.props)))
    header = META_HEADER.pack(b"TSRM", META_MAJOR, META_MINOR, len(krecs), KERNEL_RECORD.size, len(arecs),
                              ARG_RECORD.size, len(drecs), len(precs))
    return header + b"".join(krecs + arecs + drecs + precs)


def _note(major: int, minor: int, versions: Versions | None = None) -> bytes:
    out = struct.pack("<III", len(NOTE_NAME), 8, NT_TESSERA_ABI_VERSION) + NOTE_NAME + struct.pack("<II", major, minor)
    if versions is not None:
        out += (struct.pack("<III", len(NOTE_NAME), IR_VERSION_DESC.size, NT_TESSERA_IR_VERSION) + NOTE_NAME +
                IR_VERSION_DESC.pack(*versions.ir, versions.bytecode, versions.plan))
    return out


def write_image(kernels: list[KernelRecord], code: dict[str, bytes], ops: bytes | None = None,
                abi: tuple[int, int] = (ABI_MAJOR, ABI_MINOR),
                versions: Versions | None = CURRENT_VERSIONS) -> bytes:
    """The image bytes. `code` maps section names (``.tessera.code.cpu`` …) to their contents. `versions` is
    what the IR version note records (None: no note, as images made before it)."""
    strtab = StringTable()
    meta = _meta(kernels, strtab)
    sections: list[tuple[str, int, bytes, int]] = [(SEC_NOTE, _SHT_NOTE, _note(*abi, versions), 4),
                                                   (SEC_META, _SHT_PROGBITS, meta, 16)]
    if ops is not None:
        sections.append((SEC_OPS, _SHT_PROGBITS, ops, 16))
    for name, data in code.items():
        sections.append((name, _SHT_PROGBITS, data, 16))
    sections.append((SEC_STRTAB, _SHT_STRTAB, bytes(strtab.data), 1))
    shstr = StringTable()
    names = [shstr.add(s[0]) for s in sections]
    shstrtab_name = shstr.add(".shstrtab")
    sections.append((".shstrtab", _SHT_STRTAB, bytes(shstr.data), 1))
    names.append(shstrtab_name)

    body = bytearray()
    offsets = []
    pos = _EHDR.size
    for _, _, data, align in sections:
        pad = (-pos) % align
        body += b"\0" * pad
        pos += pad
        offsets.append(pos)
        body += data
        pos += len(data)
    pad = (-pos) % 8
    body += b"\0" * pad
    shoff = pos + pad
    shdrs = [_SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for (name, typ, data, align), off, n in zip(sections, offsets, names):
        shdrs.append(_SHDR.pack(n, typ, 0, 0, off, len(data), 0, 0, align, 0))
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    ehdr = _EHDR.pack(ident, 1, 0, 1, 0, 0, shoff, 0, _EHDR.size, 0, 0, _SHDR.size, len(shdrs), len(shdrs) - 1)
    return ehdr + bytes(body) + b"".join(shdrs)
