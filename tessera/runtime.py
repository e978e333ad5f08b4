"""Loading `.tessera` images and launching their kernels from Python, through libtessera.

    mod = tessera.runtime.load("saxpy.tessera")
    mod.saxpy(2.0, X, Y, Out, grid=(ceil_div(n, 256),), block=(256,))

Arrays are numpy arrays; the launcher checks each against the kernel's metadata (dtype, rank, contiguity,
extents shared between tensors) and fills the dimension arguments from their shapes.
"""

from __future__ import annotations

import os
import struct
import threading

import numpy as np

from . import _runtime
from .abi import DIM, SCALAR, TENSOR
from .frontend import dtypes
from .image import read_image

Error = _runtime.Error

# numpy has no bf16: bf16 tensors are passed as uint16 arrays of their bit patterns (tessera.executor converts).
_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16, "i8": np.int8,
          "i16": np.int16, "i32": np.int32, "i64": np.int64, "bool": np.bool_, "index": np.int64}
_PACK = {"f32": "<f", "f64": "<d", "i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q", "bool": "<?",
         "index": "<q"}

_default_lock = threading.Lock()
_default: _runtime.Context | None = None


def default_context() -> _runtime.Context:
    global _default
    with _default_lock:
        if _default is None:
            _default = _runtime.Context()
        return _default


def version() -> tuple[int, int, int]:
    return tuple(_runtime.version())


def load(image, context: _runtime.Context | None = None) -> "Module":
    """A Module from an image path or its bytes."""
    if isinstance(image, (str, os.PathLike)):
        with open(image, "rb") as f:
            image = f.read()
    return Module(bytes(image), context or default_context())


class Module:
    def __init__(self, data: bytes, context: _runtime.Context):
        self._native = context.load_module(data)   # the C loader validates the image first
        self.image = read_image(data)
        self._kernels: dict[str, Kernel] = {}

    @property
    def kernel_names(self) -> list[str]:
        return list(self._native.kernel_names())

    def kernel(self, name: str) -> "Kernel":
        if name not in self._kernels:
            native = self._native.kernel(name)
            record = next(k for k in self.image.kernels if k.name == name and k.entry and
                          len(k.args) == native.arg_count)
            self._kernels[name] = Kernel(native, record)
        return self._kernels[name]

    def __getattr__(self, name: str) -> "Kernel":
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.kernel(name)
        except Error as e:
            raise AttributeError(str(e)) from None


def _dim3(v, what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) for x in t):
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


class Kernel:
    def __init__(self, native, record):
        self._native = native
        self.record = record
        self.name = record.name
        self.params = [a for a in record.args if a.kind != DIM]

    def __getitem__(self, launch_config):
        grid, block = launch_config
        return lambda *args: self(*args, grid=grid, block=block)

    def pack(self, args) -> list[bytes]:
        """The raw argument slots for `args` (parameters only; dimension arguments are derived)."""
        if len(args) != len(self.params):
            names = ", ".join(a.name for a in self.params)
            raise TypeError(f"kernel '{self.name}' takes {len(self.params)} arguments ({names}), got {len(args)}")
        slots: list[bytes | None] = [None] * len(self.record.args)
        dims: dict[int, int] = {}
        for i, (a, v) in enumerate(zip(self.record.args, args)):
            dt = dtypes.BY_CODE[a.dtype]
            if a.kind == SCALAR:
                if isinstance(v, np.ndarray):
                    raise TypeError(f"argument '{a.name}' of '{self.name}' is a {dt.name} scalar, got an array")
                slots[i] = struct.pack(_PACK[dt.name], v)
            elif a.kind == TENSOR:
                slots[i] = struct.pack("<Q", self._check_array(a, dt, v, dims))
        for i, a in enumerate(self.record.args):
            if a.kind == DIM:
                slots[i] = struct.pack("<q", dims[i])
        return slots

    def _check_array(self, a, dt, v, dims: dict[int, int]) -> int:
        where = f"argument '{a.name}' of '{self.name}'"
        if not isinstance(v, np.ndarray):
            raise TypeError(f"{where} must be a numpy array of {dt.name}, got {type(v).__name__}")
        if v.dtype != np.dtype(_NUMPY[dt.name]):
            raise TypeError(f"{where} must have dtype {dt.name}, got {v.dtype}")
        if v.ndim != a.rank:
            raise ValueError(f"{where} must have rank {a.rank}, got shape {v.shape}")
        if not v.flags.c_contiguous:
            raise ValueError(f"{where} must be C-contiguous (use np.ascontiguousarray)")
        for axis, (d, extent) in enumerate(zip(a.dims, v.shape)):
            if d >= 0:
                if extent != d:
                    raise ValueError(f"{where} must have extent {d} on axis {axis}, got {extent}")
                continue
            slot = -d - 1
            if dims.setdefault(slot, extent) != extent:
                sym = self.record.args[slot].name
                raise ValueError(f"{where} has {sym} = {extent} on axis {axis}, but an earlier argument "
                                 f"has {sym} = {dims[slot]}")
        return v.ctypes.data

    def __call__(self, *args, grid, block, smem_bytes: int = 0):
        slots = self.pack(args)
        self._native.launch(_dim3(grid, "grid"), _dim3(block, "block"), smem_bytes, slots)
