"""Interpreter values: float tensors as float64 arrays holding values of their declared type."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes
from ..mlir import ir
from ..numerics.rounding import round_to


class InterpreterError(RuntimeError):
    """An op the interpreter cannot run, or inputs that do not fit the function; names the op's location."""


# What users get back: numpy's own type where it has one, float32 for bf16/tf32/fp8.
_USER = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32, "tf32": np.float32,
         "fp8_e4m3": np.float32, "fp8_e5m2": np.float32, "i4": np.int8, "i8": np.int8, "i16": np.int16, "i32": np.int32,
         "i64": np.int64, "u8": np.uint8, "bool": np.bool_, "c64": np.complex64, "c128": np.complex128}
# an integer type's least and greatest value, as np.iinfo's (i4 has no numpy type of its own)
_Range = namedtuple("_Range", "min max")
# the real type of each part of a complex type
_PARTS = {"c64": "f32", "c128": "f64"}


def dtype_of(t: ir.Type) -> dtypes.DType:
    return dtypes.of_ir_type(ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t)


def shape_of(t: ir.RankedTensorType) -> list[int | None]:
    return [None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]


def cast(x: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    """`x` (any numeric array) converted to the interpreter's representation of `dt`."""
    if dt.kind == "complex":
        z = np.asarray(x, dtype=np.complex128)
        out = np.empty(z.shape, np.complex128)  # parts set one by one: 1j * inf would make the real part nan
        out.real, out.imag = round_to(z.real, _PARTS[dt.name]), round_to(z.imag, _PARTS[dt.name])
        return out
    if np.iscomplexobj(x):
        raise ValueError(f"complex values cannot be held by a {dt.name} tensor")
    if dt.kind == "float":
        if dt.name == "f32" and np.asarray(x).dtype.kind in "iu":  # one rounding of an i64 (numpy's astype), not
            return np.asarray(x).astype(np.float32).astype(np.float64)  # two through float64
        return round_to(np.asarray(x, dtype=np.float64), dt.name)
    if dt.kind == "bool":
        return np.asarray(x).astype(np.bool_)
    info = np.iinfo(_USER[dt.name])
    if dt.bits < 8:  # i4 lives in an int8 holding -8..7
        info = _Range(-(1 << dt.bits - 1), (1 << dt.bits - 1) - 1)
    if np.asarray(x).dtype.kind == "f":
        # float -> integer truncates toward zero (numpy's astype), saturating at the type's range with NaN
        # -> 0 where numpy's is undefined: what every target's conversion does (docs/language.md)
        f = np.asarray(x, np.float64)
        with np.errstate(invalid="ignore"):
            t = np.trunc(np.nan_to_num(f, nan=0.0))
            # the range's edges as floats: [-2^(b-1), 2^(b-1)) signed, [0, 2^b) unsigned (u8: a negative is 0)
            lo, hi = float(info.min), float(info.max) + 1.0
            out = np.where(t >= hi, info.max, np.where(t < lo, info.min, 0))
            inside = (t < hi) & (t >= lo)
            return np.where(inside, np.where(inside, t, 0).astype(np.int64), out).astype(np.int64)
    return np.asarray(x).astype(np.int64) if dt.bits == 64 else \
        ((np.asarray(x).astype(np.int64) - info.min) % (1 << dt.bits) + info.min).astype(np.int64)


def from_user(x, t: ir.Type, what: str) -> np.ndarray:
    if not isinstance(t, ir.RankedTensorType):
        raise TypeError(f"{what}: unsupported parameter type {t}")
    a = np.asarray(x)
    want = shape_of(t)
    if dtype_of(t).name == "i4":   # its bytes, as a compiled call takes them (tessera/runtime.py)
        take = want[:-1] + [want[-1] // 2]   # the last extent is static and even (ttensor's i4 rule)
        if a.dtype != np.uint8 or a.ndim != len(take) or any(w is not None and w != s for w, s in zip(take, a.shape)):
            raise InterpreterError(f"{what} is i4 {['?' if w is None else w for w in want]}: pass its bytes, a "
                                   f"uint8 array of the last extent halved, got {a.dtype} {list(a.shape)}")
        return unpack_i4(a)
    if a.ndim != len(want) or any(w is not None and w != s for w, s in zip(want, a.shape)):
        raise InterpreterError(f"{what} must have shape {['?' if w is None else w for w in want]}, got {list(a.shape)}")
    return cast(a, dtype_of(t))


def pack_i4(q: np.ndarray) -> np.ndarray:
    """i4 values [..., N] (N even) as their bytes [..., N/2]: element 2j in the low nibble of byte j."""
    q = np.asarray(q).astype(np.int64)
    return ((q[..., 0::2] & 15) | ((q[..., 1::2] & 15) << 4)).astype(np.uint8)


def unpack_i4(b: np.ndarray) -> np.ndarray:
    """`pack_i4`'s inverse: bytes [..., M] as i4 values [..., 2M] (int64 holding -8..7, as `cast` holds them)."""
    b = np.asarray(b).astype(np.int64)
    pairs = np.stack([b & 15, b >> 4], axis=-1)
    return ((pairs ^ 8) - 8).reshape(b.shape[:-1] + (2 * b.shape[-1],))


def to_user(v: np.ndarray, t: ir.Type) -> np.ndarray:
    if dtype_of(t).name == "i4":
        return pack_i4(v)
    return np.asarray(v).astype(_USER.get(dtype_of(t).name, np.float64))


def result(op, x: np.ndarray, index: int = 0) -> np.ndarray:
    """`x` rounded to the type of the op's result."""
    return cast(x, dtype_of(op.results[index].type))
