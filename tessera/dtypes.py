"""Element types of the language: their spellings, MLIR types, C types and image codes.

A leaf: it imports nothing of Tessera's, and MLIR not at all (`ir.Type.parse(dt.mlir)` builds the type),
so the runtime, the ABI and the tools read dtypes without loading the compiler."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str          # canonical spelling, as in `tensor[bf16]`
    mlir: str          # MLIR type spelling
    c_type: str        # C spelling of one element, for generated headers
    code: int          # dtype code in the image metadata (docs/image-format.md)
    bits: int
    kind: str          # "float" | "complex" | "int" | "uint" | "bool" | "index"

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)


_TABLE = [
    DType("f32", "f32", "float", 1, 32, "float"),
    DType("f64", "f64", "double", 2, 64, "float"),
    DType("f16", "f16", "uint16_t", 3, 16, "float"),
    DType("bf16", "bf16", "uint16_t", 4, 16, "float"),
    DType("i8", "i8", "int8_t", 5, 8, "int"),
    DType("i16", "i16", "int16_t", 6, 16, "int"),
    DType("i32", "i32", "int32_t", 7, 32, "int"),
    DType("i64", "i64", "int64_t", 8, 64, "int"),
    # MLIR's unsigned spelling keeps u8 apart from i8 in Graph IR (of_ir_type); kernels hold it in signless
    # i8 storage and compute it zero-extended (tessera/frontend/kernel.py)
    DType("u8", "ui8", "uint8_t", 9, 8, "uint"),
    # signed 4-bit (-8..7), a quantization target only, stored two per byte along the last axis (element 2j in
    # the low nibble of byte j): the schedule stage rewrites it into bytes (passes/decompose.py), so no kernel
    # sees an i4, and a call passes its bytes as u8 (the plan's `declared` says i4)
    DType("i4", "i4", "uint8_t", 20, 4, "int"),
    DType("bool", "i1", "bool", 13, 8, "bool"),
    DType("fp8_e4m3", "f8E4M3FN", "uint8_t", 14, 8, "float"),
    DType("fp8_e5m2", "f8E5M2", "uint8_t", 15, 8, "float"),
    DType("tf32", "tf32", "float", 16, 32, "float"),
    DType("index", "index", "int64_t", 17, 64, "index"),
    # complex values arise in operator programs (the Fourier transform, eigenvalues); bits count both parts
    DType("c64", "complex<f32>", "float _Complex", 18, 64, "complex"),
    DType("c128", "complex<f64>", "double _Complex", 19, 128, "complex"),
]

BY_NAME = {d.name: d for d in _TABLE}
BY_CODE = {d.code: d for d in _TABLE}

# Spellings users write. `float` and `int` mean what a C kernel author expects: 32-bit.
ALIASES = {
    "float": "f32", "float32": "f32", "fp32": "f32",
    "double": "f64", "float64": "f64", "fp64": "f64",
    "half": "f16", "float16": "f16", "fp16": "f16",
    "bfloat16": "bf16",
    "int": "i32", "int32": "i32", "int8": "i8", "int16": "i16", "int64": "i64",
    "uint8": "u8", "int4": "i4",
    "complex64": "c64", "complex128": "c128",
    "e4m3": "fp8_e4m3", "float8_e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2",
}


def lookup(spelling: str) -> DType | None:
    return BY_NAME.get(ALIASES.get(spelling, spelling))


def of_ir_type(t) -> DType:
    s = str(t)
    for d in _TABLE:
        if d.mlir == s:
            return d
    raise KeyError(f"no Tessera dtype for MLIR type {s}")
