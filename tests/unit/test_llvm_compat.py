"""Regression: MLIR's LLVM prints f0x float constants that llvmlite's LLVM 22 cannot parse."""

import struct

from tessera.backends.llvm_compat import downgrade


def test_float_constants_become_double_hex():
    bits = struct.unpack(">I", struct.pack(">f", 0.70710678))[0]
    line = f"  %78 = fmul <32 x float> %75, splat (float f0x{bits:08X})"
    out = downgrade(line)
    assert "f0x" not in out
    value = struct.unpack(">d", bytes.fromhex(out.split("0x")[1].rstrip(")")))[0]
    assert value == struct.unpack(">f", struct.pack(">f", 0.70710678))[0]


def test_double_half_and_bfloat_forms():
    assert downgrade("fadd double %a, f0x3FE6A09E667F3BCD") == "fadd double %a, 0x3FE6A09E667F3BCD"
    assert downgrade("fmul half %a, f0x3C01") == "fmul half %a, 0xH3C01"
    assert downgrade("fmul bfloat %a, f0x3F81") == "fmul bfloat %a, 0xR3F81"
    assert downgrade("no constants here") == "no constants here"


def test_llvmlite_parses_the_result():
    import llvmlite.binding as llvm
    bits = struct.unpack(">I", struct.pack(">f", 0.1))[0]
    ir_text = f"define float @f(float %x) {{\n  %y = fmul float %x, f0x{bits:08X}\n  ret float %y\n}}\n"
    llvm.parse_assembly(downgrade(ir_text)).verify()
