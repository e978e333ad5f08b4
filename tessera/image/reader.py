"""Reads a `.tessera` image, checking every offset, as the C loader does."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .. import dtypes, plan
from ..abi import KIND_NAMES

from .format import (ARG_RECORD, CODE_PREFIX, DIM_ENTRY, IR_VERSION_DESC, KERNEL_RECORD, META_HEADER, NOTE_NAME,
                     NT_TESSERA_ABI_VERSION, NT_TESSERA_IR_VERSION, PROP_ENTRY, SEC_META, SEC_NOTE, SEC_OPS,
                     SEC_STRTAB, ArgRecord, ImageError, KernelRecord, Versions, ir_refusal, plan_refusal)

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")


@dataclass
class Section:
    name: str
    type: int
    offset: int
    size: int
    data: bytes


@dataclass
class Image:
    abi: tuple[int, int]
    sections: list[Section]
    kernels: list[KernelRecord]
    versions: Versions = Versions.NONE   # the IR version note's record; NONE where the image has none

    def section(self, name: str) -> bytes | None:
        for s in self.sections:
            if s.name == name:
                return s.data
        return None

    @property
    def ops(self) -> bytes | None:
        """The `.tessera.ops` section as it is, unchecked (`graph_ir` checks its version)."""
        return self.section(SEC_OPS)

    @property
    def graph_ir(self) -> bytes | None:
        """The Graph IR's bytecode, None where the image has none; ImageError, naming the image's version and
        this reader's, where the compatibility rule refuses it (format.ir_refusal)."""
        data = self.section(SEC_OPS)
        if data is not None and (why := ir_refusal(self.versions)):
            raise ImageError(f"{SEC_OPS}: {why}")
        return data

    @property
    def plan(self) -> bytes | None:
        """The launch plans' document, None where the image has none; ImageError, naming both versions, where
        the compatibility rule refuses it (format.plan_refusal)."""
        data = self.section(plan.SECTION)
        if data is not None and (why := plan_refusal(self.versions, plan.READS)):
            raise ImageError(f"{plan.SECTION}: {why}")
        return data

    @property
    def targets(self) -> list[str]:
        return [s.name[len(CODE_PREFIX):] for s in self.sections if s.name.startswith(CODE_PREFIX)]

    def kernel(self, name: str, target: str | None = None) -> KernelRecord:
        for k in self.kernels:
            if k.name == name and (target is None or k.target == target):
                return k
        have = ", ".join(sorted({k.name for k in self.kernels})) or "none"
        raise KeyError(f"no kernel '{name}' in this image (kernels: {have})")


def _cstr(table: bytes, off: int) -> str:
    if off >= len(table):
        raise ImageError(f"string offset {off} is outside the string table ({len(table)} bytes)")
    end = table.find(b"\0", off)
    if end < 0:
        raise ImageError(f"string at offset {off} is not NUL-terminated")
    return table[off:end].decode("utf-8", errors="replace")


def _unpack(st: struct.Struct, data: bytes, off: int, what: str):
    if off < 0 or off + st.size > len(data):
        raise ImageError(f"{what} at offset {off} runs past the end ({len(data)} bytes)")
    return st.unpack_from(data, off)


def read_image(data: bytes) -> Image:
    if len(data) < _EHDR.size or data[:4] != b"\x7fELF":
        raise ImageError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ImageError("not a little-endian ELF64 file")
    (_, _, _, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx) = _EHDR.unpack_from(data, 0)
    if shentsize != _SHDR.size or shnum == 0 or shstrndx >= shnum:
        raise ImageError("bad section header table")
    raw = []
    for i in range(shnum):
        name, typ, _, _, off, size, *_ = _unpack(_SHDR, data, shoff + i * _SHDR.size, f"section header {i}")
        if i and (off < _EHDR.size or off + size > len(data)):
            raise ImageError(f"section {i} [{off}, {off + size}) lies outside the file")
        raw.append((name, typ, off, size))
    shstr = data[raw[shstrndx][2]:raw[shstrndx][2] + raw[shstrndx][3]]
    sections = [Section(_cstr(shstr, n), t, o, s, data[o:o + s]) for n, t, o, s in raw[1:]]
    by_name = {s.name: s.data for s in sections}
    for required in (SEC_NOTE, SEC_META, SEC_STRTAB):
        if required not in by_name:
            raise ImageError(f"required section {required} is missing")
    abi, versions = _notes(by_name[SEC_NOTE])
    kernels = _kernels(by_name[SEC_META], by_name[SEC_STRTAB])
    return Image(abi, sections, kernels, versions)


def _notes(note: bytes) -> tuple[tuple[int, int], Versions]:
    """The ABI version note (required) and the IR version note (optional) of `.note.tessera`; notes of other
    names or types are skipped."""
    abi = versions = None
    off = 0
    while off < len(note):
        namesz, descsz, typ = _unpack(struct.Struct("<III"), note, off, "note header")
        desc_off = off + 12 + ((namesz + 3) & ~3)
        end = desc_off + ((descsz + 3) & ~3)
        if end > len(note):
            raise ImageError(f"{SEC_NOTE}: the note at offset {off} runs past the section")
        if note[off + 12:off + 12 + namesz] == NOTE_NAME and typ in (NT_TESSERA_ABI_VERSION, NT_TESSERA_IR_VERSION):
            what = "ABI version" if typ == NT_TESSERA_ABI_VERSION else "IR version"
            size = 8 if typ == NT_TESSERA_ABI_VERSION else IR_VERSION_DESC.size
            if descsz != size:
                raise ImageError(f"the {what} note has a {descsz}-byte descriptor, expected {size}")
            if (abi if typ == NT_TESSERA_ABI_VERSION else versions) is not None:
                raise ImageError(f"{SEC_NOTE} holds more than one {what} note")
            if typ == NT_TESSERA_ABI_VERSION:
                abi = struct.unpack_from("<II", note, desc_off)
            else:
                ir_major, ir_minor, bytecode, plan_version = IR_VERSION_DESC.unpack_from(note, desc_off)
                versions = Versions((ir_major, ir_minor), bytecode, plan_version)
        off = end
    if abi is None:
        raise ImageError("the ABI note is not a Tessera ABI version note")
    return abi, versions or Versions.NONE


def _kernels(meta: bytes, strtab: bytes) -> list[KernelRecord]:
    magic, _, _, nk, ksize, na, asize, nd, npr = _unpack(META_HEADER, meta, 0, "metadata header")
    if magic != b"TSRM":
        raise ImageError("metadata does not start with TSRM")
    if ksize < KERNEL_RECORD.size or asize < ARG_RECORD.size:
        raise ImageError("metadata records are smaller than this reader's layout")
    a_off = META_HEADER.size + nk * ksize
    d_off = a_off + na * asize
    p_off = d_off + nd * DIM_ENTRY.size
    if p_off + npr * PROP_ENTRY.size > len(meta):
        raise ImageError("metadata tables run past the end of .tessera.meta")
    dims = [_unpack(DIM_ENTRY, meta, d_off + i * DIM_ENTRY.size, "dimension")[0] for i in range(nd)]
    props = [_unpack(PROP_ENTRY, meta, p_off + i * PROP_ENTRY.size, "property") for i in range(npr)]
    args = []
    for i in range(na):
        name, kind, dtype, rank, dfirst, flags = _unpack(ARG_RECORD, meta, a_off + i * asize, "argument")
        if dfirst + rank > nd:
            raise ImageError(f"argument {i} names dimensions past the dimension table")
        # what the C loader leaves to its callers, checked here so that no reader of a record meets it later
        if kind not in KIND_NAMES or dtype not in dtypes.BY_CODE:
            raise ImageError(f"argument {i} has an unknown kind ({kind}) or dtype code ({dtype})")
        args.append(ArgRecord(_cstr(strtab, name), kind, dtype, dims[dfirst:dfirst + rank], flags))
    kernels = []
    for i in range(nk):
        f = _unpack(KERNEL_RECORD, meta, META_HEADER.size + i * ksize, "kernel")
        name, entry, target, arch, section = (_cstr(strtab, x) for x in f[:5])
        arg_first, arg_count = f[5], f[6]
        prop_first, prop_count = f[14], f[15]
        if arg_first + arg_count > na or prop_first + prop_count > npr:
            raise ImageError(f"kernel '{name}' refers past the argument or property table")
        kernels.append(KernelRecord(
            name, entry, target, arch, section, args[arg_first:arg_first + arg_count],
            block=tuple(f[7:10]), warp_size=f[10], smem_bytes=f[11], regs=f[12], flags=f[13],
            props={_cstr(strtab, k): _cstr(strtab, v) for k, v in props[prop_first:prop_first + prop_count]}))
    return kernels
