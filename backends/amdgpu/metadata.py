"""The code object metadata of an HSACO: its NT_AMDGPU_METADATA note, read without a msgpack package.

LLVM writes the kernels' descriptions (name, arguments, .kernarg_segment_size, .wavefront_size, register
and LDS use) as a MessagePack map in an ELF note owned by "AMDGPU" (AMDGPUUsage, "Code Object V3+
Metadata"). The backend reads it to fill the image's resource fields; tests read it to check what HIP will
see. The decoder takes the MessagePack subset that LLVM emits (maps, arrays, strings, integers, booleans).
"""

from __future__ import annotations

import struct

NT_AMDGPU_METADATA = 32
SHT_NOTE = 7


def notes(elf: bytes) -> list[tuple[str, int, bytes]]:
    """(owner, type, descriptor) of every note in the SHT_NOTE sections of an ELF64 little-endian file."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    out = []
    for i in range(shnum):
        _, sh_type, _, _, offset, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        if sh_type != SHT_NOTE:
            continue
        pos, end = offset, offset + size
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            pos += 12
            name = elf[pos:pos + namesz].rstrip(b"\0").decode()
            pos += (namesz + 3) & ~3
            out.append((name, ntype, elf[pos:pos + descsz]))
            pos += (descsz + 3) & ~3
    return out


def code_object_metadata(hsaco: bytes) -> dict:
    """The decoded NT_AMDGPU_METADATA map (keys `amdhsa.kernels`, `amdhsa.target`, `amdhsa.version`)."""
    for owner, ntype, desc in notes(hsaco):
        if owner == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
            value, _ = _unpack(desc, 0)
            return value
    raise ValueError("the code object has no NT_AMDGPU_METADATA note")


def _unpack(b: bytes, i: int):
    t = b[i]
    if t <= 0x7F:
        return t, i + 1
    if t >= 0xE0:
        return t - 0x100, i + 1
    if 0x80 <= t <= 0x8F:
        return _map(b, i + 1, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _array(b, i + 1, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[i + 1:i + 1 + n].decode(), i + 1 + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if t in fixed:
        return fixed[t], i + 1
    ints = {0xCC: "<B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
    if t in ints:
        fmt = ints[t]
        return struct.unpack_from(fmt, b, i + 1)[0], i + 1 + struct.calcsize(fmt)
    lengths = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xDC: ">H", 0xDD: ">I", 0xDE: ">H", 0xDF: ">I"}
    if t in lengths:
        n = struct.unpack_from(lengths[t], b, i + 1)[0]
        j = i + 1 + struct.calcsize(lengths[t])
        if t <= 0xDB:
            return b[j:j + n].decode(), j + n
        return (_array if t <= 0xDD else _map)(b, j, n)
    raise ValueError(f"MessagePack type 0x{t:02x} at offset {i} is not one LLVM writes")


def _array(b: bytes, i: int, n: int):
    out = []
    for _ in range(n):
        v, i = _unpack(b, i)
        out.append(v)
    return out, i


def _map(b: bytes, i: int, n: int):
    out = {}
    for _ in range(n):
        k, i = _unpack(b, i)
        v, i = _unpack(b, i)
        out[k] = v
    return out, i
