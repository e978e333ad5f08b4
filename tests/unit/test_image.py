"""The `.tessera` image: a real ELF file that other ELF readers accept, and a reader that refuses bad ones."""

import struct

import pytest

from tessera.image import ImageError, KernelRecord, read_image, write_image
from tessera.image.format import ArgRecord

SAXPY = """\
@kernel
def saxpy(a: float, X: tensor[float, "N"], Y: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]
"""


@pytest.fixture(scope="module")
def image_bytes():
    from tessera import compiler
    return compiler.compile_source(SAXPY, "saxpy.py").image


def test_sections_and_note(image_bytes):
    img = read_image(image_bytes)
    names = [s.name for s in img.sections]
    for required in (".note.tessera", ".tessera.meta", ".tessera.strtab", ".tessera.ops", ".tessera.code.cpu"):
        assert required in names
    assert img.abi == (1, 0)
    assert img.targets == ["cpu"]


def test_pyelftools_reads_it(image_bytes, tmp_path):
    elftools = pytest.importorskip("elftools.elf.elffile")
    path = tmp_path / "k.tessera"
    path.write_bytes(image_bytes)
    with open(path, "rb") as f:
        elf = elftools.ELFFile(f)
        assert elf.elfclass == 64 and elf.little_endian
        section = elf.get_section_by_name(".note.tessera")
        note = next(section.iter_notes())
        assert note["n_name"] == "Tessera" and note["n_descsz"] == 8
        # pyelftools names type 1 after GNU's ABI tag; the raw descriptor is (major, minor).
        assert struct.unpack_from("<II", section.data(), 12 + 8) == (1, 0)
        code = elf.get_section_by_name(".tessera.code.cpu").data()
        assert code[:4] == b"\x7fELF"  # a host shared object inside


def test_kernel_metadata(image_bytes):
    k = read_image(image_bytes).kernel("saxpy")
    assert (k.target, k.entry, k.warp_size) == ("cpu", "tsr_cpu_saxpy", 32)
    assert [(a.name, a.kind) for a in k.args] == [("a", 0), ("X", 1), ("Y", 1), ("Out", 1), ("N", 2)]
    assert k.args[1].dims == [-5]            # extent = argument 4 (N)
    assert k.args[1].flags & 1 and not k.args[3].flags & 1   # X read-only, Out written


def test_graph_ir_round_trips(image_bytes):
    from tessera.dialects import make_context
    from tessera.mlir import ir
    with make_context():
        text = str(ir.Module.parse(read_image(image_bytes).ops))
    assert '"ttile.thread_id"' in text and "func.func @saxpy" in text


def test_write_read_round_trip():
    rec = KernelRecord("k", "entry_k", "cpu", "x86_64", ".tessera.code.cpu",
                       [ArgRecord("X", 1, 1, [16, -2]), ArgRecord("M", 2, 17)],
                       block=(128, 1, 1), smem_bytes=1024, props={"tile.M": "128"})
    img = read_image(write_image([rec], {".tessera.code.cpu": b"code"}, ops=b"ir"))
    assert img.kernels == [rec]
    assert img.section(".tessera.code.cpu") == b"code" and img.ops == b"ir"


@pytest.mark.parametrize("cut", [0, 3, 63, 64, 200])
def test_truncated_images_are_refused(image_bytes, cut):
    with pytest.raises(ImageError):
        read_image(image_bytes[:cut])


def test_missing_section_is_refused():
    rec = KernelRecord("k", "e", "cpu", "x86_64", ".tessera.code.cpu", [])
    data = bytearray(write_image([rec], {}))
    data = data.replace(b".tessera.meta", b".tessera.xxxx")
    with pytest.raises(ImageError, match="required section .tessera.meta is missing"):
        read_image(bytes(data))
