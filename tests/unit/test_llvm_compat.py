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


def test_inexact_float_decimals_become_double_hex():
    """MLIR's LLVM prints the shortest decimal that rounds to the float; LLVM 22 wants the exact value."""
    import llvmlite.binding as llvm
    value = struct.unpack(">f", struct.pack(">f", -2.95459980854025e-03))[0]
    ir_text = ("define <8 x float> @f(<8 x float> %x, float %s, double %d) {\n"
               "  %y = fadd contract <8 x float> %x, splat (float -2.954600e-03)\n"
               "  %t = fmul float %s, -2.954600e-03\n"
               "  %u = fmul double %d, -2.954600e-03\n"
               "  ret <8 x float> %y\n}\n")
    out = downgrade(ir_text)
    hex_double = "0x" + struct.pack(">d", value).hex().upper()
    assert out.count(hex_double) == 2                      # both float constants, exactly the float's value
    assert "double %d, -2.954600e-03" in out                # a double keeps its decimal
    assert downgrade("store float 5.000000e-01, ptr %p") == "store float 5.000000e-01, ptr %p"  # exact: kept
    llvm.parse_assembly(out).verify()


def test_infinities_and_nans_become_hex():
    import llvmlite.binding as llvm
    ir_text = ("define <8 x float> @f(<8 x i1> %c, <8 x float> %x, double %d, half %h) {\n"
               "  %y = select <8 x i1> %c, <8 x float> splat (float +inf), <8 x float> %x\n"
               "  %z = fadd double %d, -inf\n"
               "  %q = fadd half %h, +qnan\n"
               "  %n = fadd float 1.000000e+00, -qnan\n"
               "  ret <8 x float> %y\n}\n")
    out = downgrade(ir_text)
    assert "splat (float 0x7FF0000000000000)" in out and "double %d, 0xFFF0000000000000" in out
    assert "half %h, 0xH7E00" in out and "float 1.000000e+00, 0xFFF8000000000000" in out
    llvm.parse_assembly(out).verify()
