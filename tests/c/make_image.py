"""Test helper: packs a CPU shared object into a `.tessera` image, per docs/image-format.md.

Hand-rolled on purpose (struct only), so that the C loader is tested against an independent writer; the
product writer lives in tessera/image/. Usage: python make_image.py KERNELS.so OUT.tessera [--abi MAJOR.MINOR]
"""
import argparse
import struct

SCALAR, TENSOR, DIMENSION = 0, 1, 2
F32, BF16, I32, I64, INDEX = 1, 4, 7, 8, 17
SIMT = 1
READ_ONLY = 1


def test_kernels():
    """The kernels of the standard test image: what kernels_cpu.c exports, for both CPU archs, plus GPU-only
    records."""
    saxpy_args = [("a", SCALAR, F32, []), ("x", TENSOR, F32, [-4], READ_ONLY), ("y", TENSOR, F32, [-4]),
                  ("N", DIMENSION, INDEX, [])]
    fill_args = [("out", TENSOR, F32, [-3]), ("value", SCALAR, F32, []), ("N", DIMENSION, INDEX, [])]
    cpu = [
        dict(name="saxpy", entry="saxpy_entry", args=saxpy_args, props={"compiler": "make_image.py"}),
        dict(name="fill_fixed", entry="fill_fixed_entry", args=fill_args, block=(64, 1, 1), smem=1024,
             props={"tile.M": "64", "tile.N": "1", "tile.K": "8"}),
        dict(name="scale_add", entry="scale_add_entry",
             args=[("out", TENSOR, F32, [-3]), ("k", SCALAR, F32, []), ("N", DIMENSION, INDEX, [])]),
        dict(name="spin_until", entry="spin_until_entry",
             args=[("flag", TENSOR, I32, [-3]), ("seen", TENSOR, I32, [-3]), ("F", DIMENSION, INDEX, [])]),
        dict(name="set_flag", entry="set_flag_entry", args=[("flag", TENSOR, I32, [-2]), ("F", DIMENSION, INDEX, [])]),
        dict(name="overrun", entry="overrun_entry",
             args=[("out", TENSOR, F32, [-3]), ("extra", SCALAR, I64, []), ("N", DIMENSION, INDEX, [])]),
        dict(name="sleep_ms", entry="sleep_ms_entry", args=[("ms", SCALAR, I32, [])]),
        dict(name="add_one", entry="add_one_entry", args=[("x", TENSOR, I64, [-2]), ("N", DIMENSION, INDEX, [])]),
    ]
    records = [dict(k, target="cpu", arch=arch, section=".tessera.code.cpu")
               for k in cpu for arch in ("x86_64", "aarch64")]
    return records + [
        dict(name="saxpy", entry="saxpy", target="ptx", arch="sm_90a", section=".tessera.code.ptx", args=saxpy_args),
        dict(name="gpu_only", entry="gpu_only", target="ptx", arch="sm_90a", section=".tessera.code.ptx", args=[]),
        # a kernel that never ends until the host sets its flag: fake_cuda.c's stream that never completes
        dict(name="spin_until", entry="spin_until", target="ptx", arch="sm_90a", section=".tessera.code.ptx",
             args=[("flag", TENSOR, I32, [-3]), ("seen", TENSOR, I32, [-3]), ("F", DIMENSION, INDEX, [])]),
    ]


def tma_kernels():
    """PTX records of kernels that read their operands with TMA, for which the runtime encodes a map per
    ptx.tensor_maps entry: A [M, K] bf16 and Q [B, S, 64] bf16, as the sm_90a GEMM and attention read them, and
    Q as [B, S, 2, 32]."""
    args = [("A", TENSOR, BF16, [-3, -4], READ_ONLY), ("Q", TENSOR, BF16, [-5, -6, 64], READ_ONLY),
            ("M", DIMENSION, INDEX, []), ("K", DIMENSION, INDEX, []), ("B", DIMENSION, INDEX, []),
            ("S", DIMENSION, INDEX, [])]
    ptx = dict(target="ptx", arch="sm_90a", section=".tessera.code.ptx", args=args)
    return [dict(ptx, name="tma_kernel", entry="tma_kernel",
                 props={"ptx.tensor_maps": "A:0:64x128:128;Q:1:64x128x1:128"}),
            dict(ptx, name="tma_malformed", entry="tma_malformed", props={"ptx.tensor_maps": "A:0:64by128:128"}),
            # Q as [B, S, 2, 32] read one head at a time (the attention's [B, S, H, D] layout): a 4-D map
            dict(ptx, name="tma_heads", entry="tma_heads", args=args[:1] + [("Q", TENSOR, BF16, [-5, -6, 2, 32],
                                                                            READ_ONLY)] + args[2:],
                 props={"ptx.tensor_maps": "Q:1:32x1x64x1:64"})]


class StringTable:
    def __init__(self):
        self.data = bytearray(b"\0")
        self.offsets = {"": 0}

    def add(self, s):
        if s not in self.offsets:
            self.offsets[s] = len(self.data)
            self.data += s.encode() + b"\0"
        return self.offsets[s]


def meta_section(kernels, strtab):
    records, args, dims, props = bytearray(), bytearray(), [], bytearray()
    n_args = n_props = 0
    for k in kernels:
        arg_first, prop_first = n_args, n_props
        for name, kind, dtype, shape, *flags in k["args"]:
            args += struct.pack("<IBBHII", strtab.add(name), kind, dtype, len(shape), len(dims), flags[0] if flags else 0)
            dims += shape
            n_args += 1
        for key, value in k.get("props", {}).items():
            props += struct.pack("<II", strtab.add(key), strtab.add(value))
            n_props += 1
        records += struct.pack("<5I2I3I6I", *(strtab.add(k[f]) for f in ("name", "entry", "target", "arch", "section")),
                               arg_first, len(k["args"]), *k.get("block", (0, 0, 0)), 32, k.get("smem", 0), 0, SIMT,
                               prop_first, n_props - prop_first)
    header = struct.pack("<4sHHIIIIII", b"TSRM", 1, 0, len(kernels), 64, n_args, 16, len(dims), n_props)
    return header + records + args + struct.pack(f"<{len(dims)}q", *dims) + props


def abi_note(major, minor):
    return struct.pack("<III8sII", 8, 8, 1, b"Tessera\0", major, minor)


def elf_image(sections):
    """sections: list of (name, sh_type, bytes). Returns the ELF64 ET_REL/EM_NONE file."""
    shstrtab = StringTable()
    names = [shstrtab.add(name) for name, _, _ in sections] + [shstrtab.add(".shstrtab")]
    sections = sections + [(".shstrtab", 3, bytes(shstrtab.data))]
    body, headers = bytearray(), [bytes(64)]  # section 0 is SHT_NULL
    for (name, sh_type, data), name_off in zip(sections, names):
        offset = 64 + len(body)
        offset += -offset % 16
        body += bytes(offset - 64 - len(body)) + data
        align = 4 if sh_type == 7 else 16
        headers.append(struct.pack("<IIQQQQIIQQ", name_off, sh_type, 0, 0, offset, len(data), 0, 0, align, 0))
    shoff = 64 + len(body)
    shoff += -shoff % 16
    body += bytes(shoff - 64 - len(body))
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", ident, 1, 0, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), len(headers) - 1)
    return ehdr + body + b"".join(headers)


# Stands in for the Graph IR: the runtime copies `.tessera.ops` into crash captures without reading it.
OPS = b"ML\xefR test image: no Graph IR"


def build(shared_object, kernels=None, abi=(1, 0)):
    kernels = test_kernels() if kernels is None else kernels
    strtab = StringTable()
    meta = meta_section(kernels, strtab)
    ptx = b".version 8.0\n.target sm_90a\n.address_size 64\n"  # never loaded by the CPU runtime
    return elf_image([(".note.tessera", 7, abi_note(*abi)), (".tessera.meta", 1, meta),
                      (".tessera.strtab", 3, bytes(strtab.data)), (".tessera.ops", 1, OPS),
                      (".tessera.code.cpu", 1, shared_object), (".tessera.code.ptx", 1, ptx)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shared_object")
    parser.add_argument("output")
    parser.add_argument("--abi", default="1.0", help="ABI version written into the note (default 1.0)")
    ns = parser.parse_args()
    major, minor = (int(v) for v in ns.abi.split("."))
    with open(ns.shared_object, "rb") as f:
        image = build(f.read(), abi=(major, minor))
    with open(ns.output, "wb") as f:
        f.write(image)


if __name__ == "__main__":
    main()
