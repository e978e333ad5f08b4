"""Loading `.tessera` images and launching their kernels from Python, through libtessera.

    mod = tessera.runtime.load("saxpy.tessera")
    mod.saxpy(2.0, X, Y, Out, grid=(ceil_div(n, 256),), block=(256,))

On the CPU backend arrays are numpy arrays. On a GPU backend (``select_backend("cuda")``, or
``TESSERA_BACKEND=cuda``) they live in device memory: a `DeviceArray` (``DeviceArray.from_numpy(x)``, then
``.numpy()``), or any array exposing ``__cuda_array_interface__`` (a PyTorch CUDA tensor, a CuPy array), used
in place. The launcher checks each against the kernel's metadata (dtype, rank, contiguity, extents shared
between tensors, writeable where the kernel writes it) and fills the dimension arguments from their shapes. A launch returns when the kernel is done.

An array must have exactly the dtype its parameter declares (f32 a float32 array, i32 an int32 one; bf16 and
fp8, which numpy lacks, their bit patterns as uint16 and uint8; tf32 a float32 array): nothing is converted,
and any other is a TypeError naming kernel, argument and both dtypes (docs/runtime.md, "Argument dtypes").
"""

from __future__ import annotations

import math
import os
import struct
import threading

import numpy as np

from . import opencl_icd

opencl_icd.register()  # before libtessera first asks OpenCL for its platforms (opencl_icd.py)

from . import _runtime  # noqa: E402
from .abi import DIM, SCALAR, TENSOR  # noqa: E402
from . import dtypes
from .image import ImageError, read_image
from .image.format import ARG_READONLY
from .numerics import matrix_units

Error = _runtime.Error


def _error(status_name: str, message: str) -> Error:
    """An `Error` as libtessera raises it: with the status (and its name) the C API would return."""
    e = Error(message)
    e.status, e.status_name = _runtime.STATUS[status_name], status_name
    return e

# numpy has no bf16 or fp8: their tensors are passed as uint16 / uint8 arrays of their bit patterns; tf32
# tensors are float32 arrays of tf32 values; an i4 tensor [..., N] as its bytes, a uint8 array [..., N/2]
# (element 2j in the low nibble of byte j). Every other dtype is numpy's own, and nothing is converted.
_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16, "tf32": np.float32,
          "fp8_e4m3": np.uint8, "fp8_e5m2": np.uint8, "i4": np.uint8,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_,
          "index": np.int64, "c64": np.complex64, "c128": np.complex128}
# numpy has no dtype for these: a launch (and a DeviceArray) takes their bit patterns; tf32 is a float32
BIT_PATTERNS = ("bf16", "fp8_e4m3", "fp8_e5m2")


def compact(array) -> np.ndarray:
    """`array` as a C-contiguous ndarray of the same shape: np.ascontiguousarray would make a 0-d array (a
    scalar parameter) 1-d."""
    return np.asarray(array, order="C")


def storage_spelling(dtype: str) -> str:
    """How a launch takes a tensor of `dtype`, for messages: 'a float32 array', 'bf16 bit patterns as uint16'."""
    numpy_name = np.dtype(_NUMPY[dtype]).name
    if dtype == "i4":
        return "i4 pairs packed in a uint8 array (the last extent halved)"
    return f"{dtype} bit patterns as {numpy_name}" if dtype in BIT_PATTERNS else f"a {numpy_name} array"


def dtype_error(where: str, declared: str, given, takes: str) -> TypeError:
    """The one form of a refused array dtype, the launcher's and the executor's: no dtype is converted
    implicitly, so the message says what is taken."""
    return TypeError(f"{where} must have dtype {declared}, got {given}: pass {takes}; no dtype is converted "
                     f"implicitly")


_PACK = {"f32": "<f", "f64": "<d", "i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q", "bool": "<?",
         "index": "<q"}

_TORCH = {f"torch.{name}": np.dtype(name) for name in ("float32", "float64", "float16", "int8", "int16", "int32",
                                                        "int64", "bool", "uint8")}
_TORCH["torch.bfloat16"] = np.dtype(np.uint16)  # bf16 and fp8 travel as their bit patterns, as with numpy
_TORCH["torch.float8_e4m3fn"] = _TORCH["torch.float8_e5m2"] = np.dtype(np.uint8)

# Backends whose device memory is host memory, so that numpy arrays are used in place.
_HOST_MEMORY = {"cpu"}
# The image `target` each backend runs.
_TARGET = {"cpu": "cpu", "cuda": "ptx", "opencl": "spirv", "hip": "amdgpu", "level_zero": "spirv"}

_default_lock = threading.Lock()
_default: _runtime.Context | None = None
class _Local(threading.local):
    # the stack of streams made current (tessera.stream.use, graph.capture); None in a thread that has made
    # none current: a class default, as a missing attribute costs every launch an AttributeError (~1 us)
    streams: list | None = None


_local = _Local()


def _current_stream():
    """The stream launches go to when they name none: the innermost `stream.use` or `graph.capture`."""
    streams = _local.streams
    return streams[-1] if streams else None
_default_backend = ""   # "" : $TESSERA_BACKEND, else cpu


def backends() -> list[str]:
    """The backends this machine can run, e.g. ``['cpu', 'cuda']``."""
    return list(_runtime.backends())


def select_backend(name: str) -> _runtime.Context:
    """Makes the default context (the one `load` uses when given none) a new context on backend `name`
    ('cpu', 'cuda'), and returns it. Modules loaded before keep the context they were loaded into.
    Raises `Error` (TSR_ERROR_UNSUPPORTED, saying why) when this machine cannot run `name`."""
    global _default, _default_backend
    with _default_lock:
        context = _runtime.Context(name)
        _default, _default_backend = context, name
        return context


def capabilities(context: _runtime.Context | None = None) -> dict:
    """What the device of `context` (default: the default context) can do, as the portability guide's §8
    dictionary, read from the device itself:

        {"backend": "cpu", "tensorcore": {}, "warp_size": 32, "cp_async": False,
         "shared_bytes_per_block": 65536, "threads": 8, "simd": "avx2", ...}

    `tensorcore` maps the dtypes the device multiplies in matrix units to True, `cp_async` says whether it
    copies global to shared memory asynchronously: both from the GPU's architecture, empty and False on the
    CPU (tessera/numerics/matrix_units.py). `warp_size` is the device's own: the wavefront on HIP (64 on
    CDNA, 32 on RDNA), the subgroup size our SPIR-V kernels run with on Level Zero. `threads` is the number
    of blocks that run at once (the CPU backend's workers; the GPU's multiprocessors or compute units)."""
    ctx = context or default_context()
    p = ctx.properties
    tensorcore = matrix_units.tensorcore_dtypes(p["arch"])
    cp_async = p["arch"].startswith("sm_") and "bf16" in tensorcore  # cp.async came with sm_80, as bf16 did
    return {
        "backend": p["backend"], "device": p["name"], "arch": p["arch"], "tensorcore": tensorcore,
        "warp_size": p["warp_size"], "cp_async": cp_async,
        "shared_bytes_per_block": p["max_shared_bytes_per_block"],
        "max_threads_per_block": p["max_threads_per_block"], "threads": p["compute_units"],
        "simd": p["simd_isa"], "simd_width_bytes": ctx.limit(_runtime.LIMIT["simd_width_bytes"]),
        "memory_bytes": p["total_memory_bytes"],
    }


def default_context() -> _runtime.Context:
    global _default
    with _default_lock:
        if _default is None:
            _default = _runtime.Context(_default_backend)
        return _default


class DeviceArray:
    """A C-contiguous array in a context's device memory: the argument a GPU kernel takes in place of a
    numpy array. Freed when the last reference goes (or by `free`).

        X = DeviceArray.from_numpy(x)           # allocate and copy in
        Y = DeviceArray((n,), np.float32)       # allocate, uninitialized
        mod.saxpy(a, X, X, Y, grid=…, block=…)
        y = Y.numpy()                           # copy out

    On the CUDA backend it exposes ``__cuda_array_interface__``, so ``torch.as_tensor(Y, device="cuda")``
    sees the same memory. Views (`reshape`, `view`, indexing) share it; once it is freed (`free`, or its
    context destroyed), every use of the array or of a view of it raises `Error` (TSR_ERROR_INVALID_VALUE)
    rather than reaching memory that may belong to a newer allocation."""

    def __init__(self, shape, dtype, context: _runtime.Context | None = None):
        self.context = context or default_context()
        self.shape = tuple(int(d) for d in ((shape,) if isinstance(shape, (int, np.integer)) else shape))
        self.dtype = np.dtype(dtype)
        self._owner = None
        self._offset = 0
        self._base = 0   # the allocation's address; 0 before it succeeds (for __del__) and once freed
        self._base = self.context.alloc(self.nbytes)

    _foreign = None   # a DLPack producer's tensor (_runtime.DLPackTensor) whose memory this array is
    _registration = None  # its range registered with the context (_DeviceRegistration), while the array lives

    @classmethod
    def _of_dlpack(cls, tensor, dtype, context: _runtime.Context, register: bool = True) -> "DeviceArray":
        """An array of a DLPack producer's device memory, keeping the producer's tensor until it goes, its range
        known to the context (tsrDeviceRegister) so that the runtime's copies (`numpy`, `copy_from`) accept it;
        `register` False: not registered, for an array that only a launch or function call uses (unknown memory
        is unchecked there), which saves the registration's three calls into libtessera."""
        out = object.__new__(cls)
        out.context, out.shape, out.dtype = context, tuple(tensor.shape), np.dtype(dtype)
        out._owner, out._offset, out._base, out._foreign = None, 0, tensor.address, tensor
        if register:
            out._registration = _DeviceRegistration.cover(context, out._base, out.nbytes)
        return out

    def _live_base(self) -> int:
        owner = self._owner or self
        if not owner._base or self.context.closed:
            raise _error("TSR_ERROR_INVALID_VALUE", f"{self!r} is used after its memory was freed"
                         + (" (it is a view of an array freed meanwhile)" if self._owner else ""))
        return owner._base

    @property
    def address(self) -> int:
        """The device address of the first element; `Error` once the memory is gone."""
        return self._live_base() + self._offset

    @classmethod
    def from_numpy(cls, array, context: _runtime.Context | None = None) -> "DeviceArray":
        array = compact(array)
        out = cls(array.shape, array.dtype, context)
        out.copy_from(array)
        return out

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize  # math.prod: np.prod costs microseconds per call

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def copy_from(self, array) -> None:
        array = compact(array)
        if array.dtype != self.dtype:
            raise TypeError(f"cannot copy an array of {array.dtype} into a DeviceArray of {self.dtype}; no dtype "
                            f"is converted implicitly")
        if array.shape != self.shape:
            raise ValueError(f"cannot copy an array of shape {array.shape} into a DeviceArray of shape {self.shape}")
        if self.nbytes:
            self.context.copy_to_device(self.address, array)

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            self.context.copy_to_host(out, self.address)
        return out

    def _at(self, offset: int, shape: tuple, dtype) -> "DeviceArray":
        """A view of this array's memory from byte `offset`, keeping its owner alive."""
        self._live_base()  # no views of freed memory
        view = object.__new__(DeviceArray)
        view.context, view.shape, view.dtype = self.context, tuple(int(d) for d in shape), np.dtype(dtype)
        view._owner, view._offset = self._owner or self, self._offset + offset
        return view

    def reshape(self, *shape) -> "DeviceArray":
        """The same memory seen with another shape (of as many elements)."""
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) else shape
        shape = np.empty(self.shape, dtype=np.bool_).reshape(shape).shape  # numpy's rules, -1 included
        return self._at(0, shape, self.dtype)

    def view(self, dtype, shape) -> "DeviceArray":
        """The first bytes of this array's memory seen as `shape` elements of `dtype` (as a numpy byte buffer's
        ``buf[:n].view(dtype).reshape(shape)``)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes > self.nbytes:
            raise ValueError(f"a view of {nbytes} bytes does not fit in a DeviceArray of {self.nbytes}")
        return self._at(0, shape, dtype)

    def __getitem__(self, index) -> "DeviceArray":
        """``a[i]``: entry i of the first axis, a view (the only indexing device arrays have)."""
        if not isinstance(index, (int, np.integer)) or not self.shape:
            raise TypeError("a DeviceArray is indexed by one int, on its first axis")
        i = int(index) + (self.shape[0] if index < 0 else 0)
        if not 0 <= i < self.shape[0]:
            raise IndexError(f"index {index} is out of range for an axis of {self.shape[0]}")
        inner = self.shape[1:]
        return self._at(i * int(np.prod(inner, dtype=np.int64)) * self.dtype.itemsize, inner, self.dtype)

    def free(self) -> None:
        """Gives the memory back now; using the array or a view of it afterwards raises `Error`. Freeing a
        view does nothing: its memory is its base array's. An array of another library's memory
        (`from_dlpack`) hands it back to that library (the producer's DLPack deleter)."""
        if self._owner is None and self._base:
            address, self._base = self._base, 0
            if self._foreign is not None:
                # unregistered first: once the producer frees the memory, a new allocation may take its addresses
                registration, self._registration = self._registration, None
                try:
                    if registration is not None:
                        registration.release()
                finally:
                    self._foreign.release()
            elif not self.context.closed:
                self.context.free(address)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this array's memory, for `torch.from_dlpack`, `jax.dlpack.from_dlpack`,
        `np.from_dlpack` (the Python array API's protocol). Zero-copy: the capsule keeps this array alive until
        the consumer is done. Work queued on the context's streams is waited for first, unless `stream` is -1
        (the consumer asks for no synchronization). A DLPack 1.0 versioned capsule when `max_version` >= (1, 0).
        bf16 and fp8 arrays hold bit patterns and are exported as uint16 and uint8."""
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"__dlpack__: this DeviceArray is on DLPack device {device}, not {tuple(dl_device)}; "
                              f"it is not copied across devices")
        if copy:
            raise BufferError("__dlpack__: a DeviceArray is exported in place, never copied (copy=True)")
        address = self.address  # an Error for freed memory, before anything is exported
        if stream != -1:
            self.context.synchronize()
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return _runtime.dlpack_capsule(self, address, self.shape, self.dtype, device[0], device[1], versioned)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(DLPack device type, device id) of this array's memory: kDLCPU on the CPU backend, kDLCUDA on CUDA,
        kDLROCM on HIP, kDLOneAPI on Level Zero, kDLOpenCL on OpenCL; the context's device, 0."""
        return _DLPACK_DEVICE[self.context.backend], 0

    def __del__(self):
        try:
            self.free()
        except Error:
            pass  # the context went away first, and with it the memory

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.context.backend != "cuda":
            raise AttributeError("__cuda_array_interface__: this DeviceArray is not in CUDA memory")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.address, False), "strides": None,
                "version": 3}

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, backend={self.context.backend})"


class _DeviceRegistration:
    """Another library's device memory registered with a context (tsrDeviceRegister), shared by the `from_dlpack`
    arrays that lie inside it and unregistered when the last of them goes. Sharing is sound: two arrays alive at
    once whose memory overlaps lie in one allocation of their producer, which each keeps alive whole."""

    _lock = threading.RLock()  # reentrant: a DeviceArray's __del__ (a release) may run in a collection under it
    _live: dict = {}  # (id(context), base) -> registration; the registration keeps its context (and so its id)

    def __init__(self, context: _runtime.Context, base: int):
        self.context, self.base, self.users = context, base, 1

    @classmethod
    def cover(cls, context: _runtime.Context, address: int, nbytes: int) -> "_DeviceRegistration | None":
        """A registration holding [address, address + nbytes): an existing one of ours, else a new one. None
        when none is needed (an empty array; memory the context allocated or another registration covers) or
        possible (the range overlaps known memory without lying inside it: it stays unknown, usable by
        launches and function calls, refused by copies, as without registration)."""
        if not nbytes:
            return None
        with cls._lock:
            info = context.pointer_info(address)
            if info["kind"] != "unknown":
                inside = address + nbytes <= info["base"] + info["bytes"]
                shared = cls._live.get((id(context), info["base"])) if inside else None
                if shared is not None:
                    shared.users += 1
                return shared
            try:
                context.device_register(address, nbytes)
            except Error:  # overlaps a known range further on
                return None
            registration = cls._live[(id(context), address)] = cls(context, address)
            return registration

    def release(self) -> None:
        with self._lock:
            self.users -= 1
            if self.users:
                return
            del self._live[(id(self.context), self.base)]
            if not self.context.closed:  # a destroyed context forgot it already
                self.context.device_unregister(self.base)


# DLPack device types (dlpack.h's DLDeviceType): of each backend's memory, and of host memory
_DL = _runtime.DLPACK_DEVICE
_DLPACK_DEVICE = {"cpu": _DL["cpu"], "cuda": _DL["cuda"], "hip": _DL["rocm"], "level_zero": _DL["oneapi"],
                  "opencl": _DL["opencl"]}
# device memory a backend's kernels address besides its own kind: CUDA managed memory
_DLPACK_ALSO = {"cuda": (_DL["cuda_managed"],)}
_DLPACK_HOST = (_DL["cpu"], _DL["cuda_host"], _DL["rocm_host"])
_DLPACK_NAMES = {v: f"kDL{k.title().replace('_', '')}" for k, v in _DL.items()}
# DLPack dtypes (code, bits) as numpy dtypes; bf16 as its bit patterns (uint16), as launches take it
_DL_DTYPES = {(2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64, (0, 8): np.int8, (0, 16): np.int16,
              (0, 32): np.int32, (0, 64): np.int64, (1, 8): np.uint8, (1, 16): np.uint16, (1, 32): np.uint32,
              (1, 64): np.uint64, (6, 8): np.bool_, (4, 16): np.uint16, (5, 64): np.complex64,
              (5, 128): np.complex128}


def _take_dlpack(x, ctx: _runtime.Context):
    """(the producer's tensor, its numpy dtype, whether it is in host memory); refuses memory of another device
    and dtypes tessera has no storage for."""
    device_type, device_id = (int(v) for v in x.__dlpack_device__())
    host = device_type in _DLPACK_HOST
    if not host:
        mine = (_DLPACK_DEVICE.get(ctx.backend),) + _DLPACK_ALSO.get(ctx.backend, ())
        if device_type not in mine or device_id != 0:
            where = f"{_DLPACK_NAMES.get(device_type, f'DLPack device type {device_type}')} device {device_id}"
            raise ValueError(f"from_dlpack: the tensor is in {where} memory, but the {ctx.backend} context's kernels "
                             f"take host memory or {_DLPACK_NAMES[mine[0]]} device 0 memory: move it there first")
    try:
        capsule = x.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0's keyword
        capsule = x.__dlpack__()
    tensor = _runtime.DLPackTensor(capsule)
    code, bits, lanes = tensor.dtype
    dtype = _DL_DTYPES.get((code, bits))
    if dtype is None or lanes != 1:
        tensor.release()
        raise TypeError(f"from_dlpack: DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no tessera "
                        f"storage dtype")
    return tensor, np.dtype(dtype), host


def _strided(tensor) -> bool:
    """Whether a DLPack tensor is not compact row-major. An empty tensor's strides are anything (torch and numpy
    give (0, 0) for shape (0, 3)): it reaches nothing, and counts as compact; so do axes of extent 1."""
    shape, strides = tensor.shape, tensor.strides
    compact = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    return strides is not None and 0 not in shape and any(n > 1 and s != c for n, s, c in zip(shape, strides, compact))


def from_dlpack(x, context: _runtime.Context | None = None):
    """Any DLPack producer (a numpy array, a torch tensor, a JAX array, a CuPy array, a DeviceArray) as a tessera
    array, zero-copy: host memory as a numpy array (its strides kept), device memory of the context's backend
    (default: the default context) as a DeviceArray that keeps the producer's tensor alive and hands it back
    (the producer's deleter) when it goes. bf16 tensors come as their bit patterns (uint16). Memory of another
    device is a ValueError saying where it is and what the context takes; a strided device tensor is refused
    (DeviceArrays are compact: copy it first, e.g. `.contiguous()`; executor calls take it as it is)."""
    ctx = context or default_context()
    tensor, dtype, host = _take_dlpack(x, ctx)
    if host:
        return tensor.numpy(dtype)
    if _strided(tensor):
        shape, strides = tuple(tensor.shape), tuple(tensor.strides)
        tensor.release()
        raise ValueError(f"from_dlpack: a device tensor of shape {shape} with strides {strides} (in "
                         f"elements) is not compact row-major, which a DeviceArray is: copy it first "
                         f"(.contiguous(), jnp.copy), or pass it to an executor call, which takes it as it is")
    return DeviceArray._of_dlpack(tensor, dtype, ctx)


class _StridedDevice:
    """A strided DLPack tensor in a context's device memory (a transposed or sliced torch CUDA tensor), as an
    executor call takes it: zero-copy, its shape and strides passed to libtessera, which gathers it before the
    call's steps and scatters a tile program's output back (docs/c-api.md "Functions"). Not a DeviceArray, which
    is compact. Keeps the producer's tensor, and the span its strides reach registered with the context
    (tsrDeviceRegister: libtessera's staging copies accept only memory the context knows), until it goes:
    unregistered first, then the producer's deleter."""

    _tensor = _registration = None  # for __del__ after a failed __init__

    def __init__(self, producer, tensor, dtype: np.dtype, context: _runtime.Context):
        self.producer, self.context, self.dtype = producer, context, dtype
        self.shape, self.strides, self.address = tuple(tensor.shape), tuple(tensor.strides), tensor.address
        self._tensor = tensor
        low = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))  # in elements from address
        high = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        size = dtype.itemsize
        self._registration = _DeviceRegistration.cover(context, self.address + low * size, (high - low + 1) * size)

    def __del__(self):
        registration, self._registration = self._registration, None
        try:
            if registration is not None:
                registration.release()
        finally:
            if self._tensor is not None:
                self._tensor.release()


def _dlpack_argument(x, context: _runtime.Context, register: bool = True):
    """A DLPack producer as an executor call takes it: as `from_dlpack` does, except that a strided device tensor
    comes as a _StridedDevice instead of being refused; `register` False: a compact device tensor's array is
    not registered (`DeviceArray._of_dlpack`), for an argument the call only passes to libtessera."""
    tensor, dtype, host = _take_dlpack(x, context)
    if host:
        return tensor.numpy(dtype)
    if _strided(tensor):
        return _StridedDevice(x, tensor, dtype, context)
    return DeviceArray._of_dlpack(tensor, dtype, context, register)


def version() -> tuple[int, int, int]:
    return tuple(_runtime.version())


def read_metadata(data: bytes):
    """The image's tables as the Python layer reads them: whatever it cannot read is an `Error` with
    TSR_ERROR_BAD_IMAGE, as the C loader reports what it cannot."""
    try:
        return read_image(data)
    except (ImageError, KeyError, ValueError) as e:  # ValueError: UnicodeDecodeError too
        raise bad_image("metadata", e) from None


def bad_image(what: str, e: Exception) -> Error:
    return _error("TSR_ERROR_BAD_IMAGE", f"the image's {what} cannot be read: {e}")


def load(image, context: _runtime.Context | None = None) -> "Module":
    """A Module from an image path or its bytes."""
    if isinstance(image, (str, os.PathLike)):
        with open(image, "rb") as f:
            image = f.read()
    return Module(bytes(image), context or default_context())


class Module:
    def __init__(self, data: bytes, context: _runtime.Context):
        self._native = context.load_module(data)   # the C loader validates the image first
        self.context = context
        self.image = read_metadata(data)
        self._kernels: dict[str, Kernel] = {}

    @property
    def kernel_names(self) -> list[str]:
        return list(self._native.kernel_names())

    def kernel(self, name: str) -> "Kernel":
        if name not in self._kernels:
            native = self._native.kernel(name)
            target = _TARGET.get(self.context.backend)
            record = next((k for k in self.image.kernels if k.name == name and k.entry and
                           len(k.args) == native.arg_count and (target is None or k.target == target)), None)
            if record is None:
                raise _error("TSR_ERROR_BAD_IMAGE", f"the image's metadata has no record of kernel '{name}' "
                                                    f"for the {self.context.backend} backend")
            self._kernels[name] = Kernel(native, record, self.context.backend in _HOST_MEMORY)
        return self._kernels[name]

    def __getattr__(self, name: str) -> "Kernel":
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.kernel(name)
        except Error as e:
            raise AttributeError(str(e)) from None


def _scalar_slot(where: str, dt, v) -> bytes:
    """A scalar argument's slot: a TypeError for a value of another kind (no silent truncation of a float to an
    integer), a ValueError for one outside the type's range."""
    kinds = {"bool": (bool, np.bool_), "int": (int, np.integer), "index": (int, np.integer),
             "float": (int, float, np.integer, np.floating)}.get(dt.kind)
    if kinds is None or dt.name not in _PACK:
        raise TypeError(f"{where} is a {dt.name} scalar, which this launcher cannot pass")
    if not isinstance(v, kinds) or (dt.kind != "bool" and isinstance(v, (bool, np.bool_))):
        raise TypeError(f"{where} is a {dt.name} scalar, got {type(v).__name__} {v!r:.40}")
    if dt.kind in ("int", "index"):
        lo, hi = -2 ** (dt.bits - 1), 2 ** (dt.bits - 1) - 1
        if not lo <= int(v) <= hi:
            raise ValueError(f"{where} is a {dt.name} scalar, and {v} is outside [{lo}, {hi}]")
    elif dt.kind == "float":
        try:
            x = float(v)
        except OverflowError:  # an int beyond every float
            x = math.inf
        if abs(x) > float(np.finfo(_NUMPY[dt.name]).max) and (math.isfinite(x) or isinstance(v, int)):
            shown = f"{x:.6g}" if math.isfinite(x) else "an integer this large"
            raise ValueError(f"{where} is a {dt.name} scalar, and {shown} is beyond its largest finite value")
        v = x
    return struct.pack(_PACK[dt.name], v)


def _dim3(v, what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) for x in t):
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


# What the launcher's fast path recognizes arguments by (Kernel._fast_plan).
_FAST_REFS = {"DeviceArray": DeviceArray, "integer": np.integer, "floating": np.floating, "bool_": np.bool_,
              "torch_dtypes": _TORCH}


class Kernel:
    def __init__(self, native, record, host_memory: bool = True):
        self._native = native
        self.record = record
        self.name = record.name
        self.params = [a for a in record.args if a.kind != DIM]
        self.host_memory = host_memory   # numpy arrays are used in place (else device arrays are)
        native.prepare(self._fast_plan(), host_memory, _FAST_REFS)

    def _fast_plan(self) -> list[tuple]:
        """The checks of `pack` laid out for the extension's fast path (runtime/python/launch_plan.h), one
        tuple per argument slot: (kind, the numpy dtype a tensor must have, the struct code a scalar is packed
        with, the scalar's kind, its bits, the tensor's dims, read-only). The fast path takes exactly what
        `pack` takes; for anything else it declines and `pack` judges, with its messages."""
        plan = []
        for a in self.record.args:
            dt = dtypes.BY_CODE[a.dtype]
            takes = dt.kind in ("bool", "int", "index", "float") and dt.name in _PACK
            plan.append((a.kind, np.dtype(_NUMPY[dt.name]) if a.kind == TENSOR and dt.name in _NUMPY else None,
                         _PACK[dt.name][1] if a.kind == SCALAR and takes else "",
                         {"bool": "b", "int": "i", "index": "i", "float": "f"}.get(dt.kind, ""), dt.bits,
                         tuple(a.dims), bool(a.flags & ARG_READONLY)))
        return plan

    def __getitem__(self, launch_config):
        """``kernel[grid, block](*args)`` or ``kernel[grid, block, stream](*args)``."""
        grid, block, *rest = launch_config
        if len(rest) > 1:
            raise TypeError("a launch configuration is [grid, block] or [grid, block, stream]")
        return lambda *args: self(*args, grid=grid, block=block, stream=rest[0] if rest else None)

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
                slots[i] = _scalar_slot(f"argument '{a.name}' of '{self.name}'", dt, v)
            elif a.kind == TENSOR:
                slots[i] = struct.pack("<Q", self._check_array(a, dt, v, dims))
        for i, a in enumerate(self.record.args):
            if a.kind == DIM:
                slots[i] = struct.pack("<q", dims[i])
        return slots

    def _array(self, where: str, dt, v) -> tuple[np.dtype, tuple, bool, int, bool]:
        """(dtype, shape, C-contiguous, address, writeable) of an array argument, if it lives where the kernel
        runs."""
        if isinstance(v, DeviceArray):
            return v.dtype, v.shape, True, v.address, True
        if self.host_memory:
            if not isinstance(v, np.ndarray):
                raise TypeError(f"{where} must be a numpy array of {dt.name}, got {type(v).__name__}")
            return v.dtype, v.shape, v.flags.c_contiguous, v.ctypes.data, v.flags.writeable
        if isinstance(v, np.ndarray):
            raise TypeError(f"{where} is a numpy array, in host memory, but '{self.name}' runs on a device: pass a "
                            f"tessera.runtime.DeviceArray (DeviceArray.from_numpy) or a CUDA tensor")
        if type(v).__module__ == "torch" and getattr(v, "is_cuda", False):
            # PyTorch builds __cuda_array_interface__ anew on every access, at a cost that dominates small
            # launches; its tensors say the same things directly.
            dtype = _TORCH.get(str(v.dtype))
            if dtype is None:
                raise dtype_error(where, dt.name, v.dtype, storage_spelling(dt.name))
            return dtype, tuple(v.shape), v.is_contiguous(), v.data_ptr(), True
        cai = getattr(v, "__cuda_array_interface__", None)
        if cai is None:
            raise TypeError(f"{where} must be a DeviceArray or expose __cuda_array_interface__ (a CUDA tensor), "
                            f"got {type(v).__name__}")
        dtype, shape = np.dtype(cai["typestr"]), tuple(cai["shape"])
        strides = cai.get("strides")
        contiguous = strides is None or tuple(strides) == tuple(
            int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
        return dtype, shape, contiguous, int(cai["data"][0]), not cai["data"][1]

    def _check_array(self, a, dt, v, dims: dict[int, int]) -> int:
        where = f"argument '{a.name}' of '{self.name}'"
        dtype, shape, contiguous, address, writeable = self._array(where, dt, v)
        if dtype != np.dtype(_NUMPY[dt.name]):
            raise dtype_error(where, dt.name, dtype, storage_spelling(dt.name))
        if len(shape) != a.rank:
            raise ValueError(f"{where} must have rank {a.rank}, got shape {shape}")
        if not contiguous:
            raise ValueError(f"{where} must be C-contiguous (use np.ascontiguousarray, or .contiguous())")
        if not writeable and not a.flags & ARG_READONLY:
            raise ValueError(f"{where} is written by the kernel, but the array is read-only (a view of bytes, a "
                             f"read-only mapping, or writeable=False): pass a writeable copy (np.array(x))")
        for axis, (d, extent) in enumerate(zip(a.dims, shape)):
            if d >= 0:
                if extent != d:
                    raise ValueError(f"{where} must have extent {d} on axis {axis}, got {extent}")
                continue
            slot = -d - 1
            if dims.setdefault(slot, extent) != extent:
                sym = self.record.args[slot].name
                raise ValueError(f"{where} has {sym} = {extent} on axis {axis}, but an earlier argument "
                                 f"has {sym} = {dims[slot]}")
        return address

    def __call__(self, *args, grid, block, smem_bytes: int = 0, stream=None, flops: float | None = None,
                 nbytes: float | None = None):
        """Launches the kernel. `stream` (a tessera.stream.Stream; default: the current one, see
        tessera.stream.use and tessera.graph.capture, else none) queues the launch and returns at once; with
        no stream it runs now. `flops` and `nbytes` (the launch's work) give the metrics log its GFLOP/s and
        GB/s (tessera.telemetry)."""
        s = stream if stream is not None else _current_stream()
        if self._native.call(args, grid, block, smem_bytes, None if s is None else s.native, flops, nbytes):
            if s is not None:
                s.keep(*args)
            return
        slots = self.pack(args)
        self._native.launch(_dim3(grid, "grid"), _dim3(block, "block"), smem_bytes, slots,
                            None if s is None else s.native, float(flops or 0), float(nbytes or 0))
        if s is not None:  # queued or recorded: the arrays must outlive the launch
            s.keep(*args)
