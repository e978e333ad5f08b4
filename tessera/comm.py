"""Communicators: collectives and point-to-point transfers between the processes of a job, through libtessera's
C API (<tessera/comm.h>, docs/c-api.md "Communicators") over MPI (CPU contexts, host memory) or NCCL (CUDA
contexts, device memory). Start the processes with ``tessera-run -n N script.py`` or ``mpiexec``
(docs/launching.md), then in each::

    from tessera import comm
    c = comm.Communicator.from_env()             # rank and size from the launcher
    y = c.all_reduce(np.arange(4, dtype=np.float32))   # the sum over the ranks, on every rank

Buffers are numpy arrays (C-contiguous; outputs writable) or `DeviceArray`s of the communicator's context.
NCCL queues its transfers on the GPU, which cannot address host memory (libtessera refuses a host pointer,
TSR_ERROR_INVALID_VALUE): numpy arrays given to an NCCL communicator are staged through DeviceArrays of its
context — copied in, the operation, its stream waited for, copied out — so such a call returns when it is done,
as on MPI; pass DeviceArrays to keep the data on the device and the call asynchronous. bf16 data is passed as
uint16 arrays of its bits with ``dtype="bf16"``. Results come back in `out` when given, else in a new array.
Failures raise `tessera.runtime.Error` with the status (`status_name`: TSR_ERROR_TIMEOUT when a peer died or
stopped, ...) and libtessera's message.

Inside a graph capture (``with graph.capture() as g:``, or a `stream` that captures) an operation is recorded
as a node of the graph, not run: each launch of the graph runs it again, in order with the graph's kernels,
copies and events, on the same arrays (the graph keeps them alive; write new data into them between
launches). An operation naming no stream inside ``graph.capture()`` is recorded on the capture's stream. MPI
runs a recorded operation at its place in the replay; NCCL's kernels become part of the CUDA graph. numpy
arrays on an NCCL communicator cannot be captured (their staging copies and the wait for them are not stream
work): pass DeviceArrays. A deterministic reduction on NCCL cannot be captured either (TSR_ERROR_UNSUPPORTED).
"""

from __future__ import annotations

import numpy as np

from . import _runtime
from .runtime import DeviceArray, _current_stream, default_context

BACKENDS = {"auto": 0, "mpi": 1, "nccl": 2}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
DETERMINISTIC = 0x1  # TSR_COMM_DETERMINISTIC
# numpy dtypes -> the dtype codes of docs/image-format.md (tsr_dtype_t)
_CODES = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.float16): 3, np.dtype(np.int8): 5,
          np.dtype(np.int16): 6, np.dtype(np.int32): 7, np.dtype(np.int64): 8, np.dtype(np.uint8): 9,
          np.dtype(np.uint16): 10, np.dtype(np.uint32): 11, np.dtype(np.uint64): 12, np.dtype(np.bool_): 13,
          np.dtype(np.complex64): 18, np.dtype(np.complex128): 19}
BF16 = 4
# The backends whose transport queues on the device (comm_backend.h's TSR_COMM_TRANSPORT_DEVICE_QUEUE).
_DEVICE_QUEUE = {"nccl"}


def _options(backend: str, deterministic: bool, timeout: float | None) -> tuple[int, int, int]:
    if backend not in BACKENDS:
        raise ValueError(f"unknown communicator backend {backend!r}; expected one of {sorted(BACKENDS)}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    ms = 0 if timeout is None else max(1, int(round(timeout * 1000)))
    return BACKENDS[backend], DETERMINISTIC if deterministic else 0, ms


def _units(units: int) -> int:
    if type(units) is not int or not 0 <= units <= 2 ** 31 - 1:
        raise ValueError(f"units must be a number of compute units >= 0 (0: the default), got {units!r}")
    return units


def unique_id(backend: str = "auto", context: _runtime.Context | None = None) -> bytes:
    """A new id for `Communicator.create` (tsrCommGetUniqueId): make it on one rank, give it to all."""
    b, _, _ = _options(backend, False, None)
    return _runtime.comm_unique_id(context or default_context(), b)


class _Buffer:
    """An array as the C API takes it: its address, element count and dtype code (keeping it alive). With
    `stage` (a context), a numpy array is staged through a DeviceArray of it: an input copied in now, an output
    copied back by `finish`."""

    def __init__(self, x, dtype: str | None, what: str, writable: bool, stage: _runtime.Context | None = None):
        self.array, self.staged = x, None
        if isinstance(x, DeviceArray):
            self.address, self.count, npdtype = x.address, x.size, x.dtype
        elif isinstance(x, np.ndarray):
            if not x.flags.c_contiguous:
                raise ValueError(f"the {what} array must be C-contiguous (np.ascontiguousarray makes one)")
            if writable and not x.flags.writeable:
                raise ValueError(f"the {what} array is read-only")
            self.address, self.count, npdtype = x.ctypes.data, x.size, x.dtype
        else:
            raise TypeError(f"the {what} buffer must be a numpy array or a DeviceArray, got {type(x).__name__}")
        if dtype == "bf16":
            if npdtype != np.uint16:
                raise TypeError(f"bf16 data is passed as uint16 arrays of its bits; the {what} array is {npdtype}")
            self.code = BF16
        elif dtype is not None:
            raise ValueError(f"dtype may only be 'bf16' (others follow the array's dtype), got {dtype!r}")
        elif npdtype in _CODES:
            self.code = _CODES[npdtype]
        else:
            raise TypeError(f"the {what} array's dtype {npdtype} cannot be communicated")
        if stage is not None and isinstance(x, np.ndarray):
            # outputs are not copied in: every operation writes the whole of its output
            self.staged = DeviceArray(x.shape, x.dtype, stage)
            if not writable:
                self.staged.copy_from(x)
            self.address = self.staged.address

    def finish(self) -> None:
        """After the operation (its stream waited for): a staged output's data back in the numpy array."""
        if self.staged is not None and self.staged.nbytes:
            self.staged.context.copy_to_host(self.array, self.staged.address)


class Communicator:
    """A communicator (tsr_comm_t): `size` ranks, this process being `rank`. Collective methods must be
    called by every rank in the same order. `stream` (a tessera.stream.Stream, or None: synchronous) orders the
    operation after the stream's earlier work."""

    def __init__(self, handle, context):
        self._c = handle
        self.context = context

    @classmethod
    def from_env(cls, backend: str = "auto", deterministic: bool = False, timeout: float | None = None,
                 context: _runtime.Context | None = None, units: int = 0) -> "Communicator":
        """The job's communicator from the launcher's environment (tsrCommCreateFromEnv): under mpiexec MPI's
        world; otherwise RANK, WORLD_SIZE and TESSERA_RENDEZVOUS (or MASTER_ADDR/MASTER_PORT). `timeout`
        bounds every wait, in seconds (None: $TESSERA_COMM_TIMEOUT_MS, else 300). `units` (NCCL): the most
        SMs one operation's kernels take, left free by a compiled function's persistent kernels while its
        collectives run, so that the two overlap, as many as cost a kernel no round of its tiles; a compiled
        function's collective that no kernel follows runs uncapped (0: $TESSERA_COMM_UNITS, else NCCL's
        choice; comm.h). Every rank passes the same units."""
        ctx = context or default_context()
        return cls(_runtime.Comm.from_env(ctx, *_options(backend, deterministic, timeout), _units(units)), ctx)

    @classmethod
    def create(cls, world: int, rank: int, uid: bytes, backend: str = "auto", deterministic: bool = False,
               timeout: float | None = None, context: _runtime.Context | None = None,
               units: int = 0) -> "Communicator":
        """Rank `rank` of `world` with an id from `unique_id` shared by the caller (tsrCommCreate); `units` as
        for from_env."""
        ctx = context or default_context()
        return cls(_runtime.Comm.create(ctx, world, rank, uid, *_options(backend, deterministic, timeout),
                                        _units(units)), ctx)

    @property
    def rank(self) -> int:
        return self._c.rank

    @property
    def size(self) -> int:
        return self._c.size

    @property
    def backend(self) -> str:
        return {v: k for k, v in BACKENDS.items()}[self._c.backend]

    def split(self, color: int, key: int | None = None) -> "Communicator | None":
        """Ranks of equal `color` (>= 0) form a new communicator, ordered by `key` (default: this rank); None
        for a negative color."""
        sub = self._c.split(color, self.rank if key is None else key)
        return None if sub is None else Communicator(sub, self.context)

    def _out(self, out, like, shape):
        if out is None:
            if isinstance(like, DeviceArray):
                return DeviceArray(shape, like.dtype, like.context)
            return np.empty(shape, like.dtype)
        return out

    def _stage(self) -> _runtime.Context | None:
        """The context numpy arrays are staged through: the communicator's, where its backend queues on the
        device (whose transfers would fault on host memory); None where it takes host memory."""
        return self.context if self.backend in _DEVICE_QUEUE else None

    def _buffers(self, x, out, dtype, stream) -> tuple[_Buffer, _Buffer]:
        return self._buffer(x, dtype, "send", False, stream), self._buffer(out, dtype, "out", True, stream)

    def _buffer(self, x, dtype, what: str, writable: bool, stream) -> _Buffer:
        stage = self._stage()
        if stage is not None and isinstance(x, np.ndarray) and _capturing(stream):
            raise ValueError(f"the {what} array is a numpy array, which the {self.backend} backend stages through "
                             "device memory with copies and a wait that a graph capture cannot record; pass a "
                             "DeviceArray of the communicator's context")
        return _Buffer(x, dtype, what, writable, stage)

    def _done(self, stream, *buffers: _Buffer):
        """The last buffer's array (the result), once staged outputs are back: the operation is waited for
        first (on a stream it is only queued), as the staging arrays are freed when this returns. A recorded
        operation's arrays are kept alive by the capture's graph."""
        if _capturing(stream) and hasattr(stream, "keep"):
            stream.keep(*(b.array for b in buffers))
        if any(b.staged is not None for b in buffers):
            native = _native(stream)
            if native is not None:
                native.synchronize(None)
            for b in buffers:
                b.finish()
        return buffers[-1].array

    def all_reduce(self, x, op: str = "sum", out=None, dtype: str | None = None, stream=None):
        """The elementwise reduction of `x` over the ranks (`op`: sum, prod, max, min, avg), in `out` (may be
        `x` itself) or a new array."""
        stream = _resolve(stream)
        out = self._out(out, x, getattr(x, "shape", ()))
        s, r = self._buffers(x, out, dtype, stream)
        self._c.all_reduce(s.address, r.address, s.count, s.code, _op(op), _native(stream))
        return self._done(stream, s, r)

    def reduce_scatter(self, x, op: str = "sum", out=None, dtype: str | None = None, stream=None):
        """The reduction of `x` (flattened; its size a multiple of the ranks), of which rank r keeps the r-th
        of `size` equal parts: a 1-d array."""
        stream = _resolve(stream)
        out = self._out(out, x, (int(np.prod(x.shape)) // self.size,))
        s, r = self._buffers(x, out, dtype, stream)
        self._c.reduce_scatter(s.address, r.address, s.count, s.code, _op(op), _native(stream))
        return self._done(stream, s, r)

    def all_gather(self, x, out=None, dtype: str | None = None, stream=None):
        """Every rank's `x`, stacked along a new first axis of length `size`."""
        stream = _resolve(stream)
        out = self._out(out, x, (self.size, *x.shape))
        s, r = self._buffers(x, out, dtype, stream)
        self._c.all_gather(s.address, r.address, s.count, s.code, _native(stream))
        return self._done(stream, s, r)

    def all_to_all(self, x, out=None, dtype: str | None = None, stream=None):
        """`x` (flattened; its size a multiple of the ranks) cut into `size` blocks, block j going to rank j;
        the result's block j came from rank j."""
        stream = _resolve(stream)
        out = self._out(out, x, x.shape)
        s, r = self._buffers(x, out, dtype, stream)
        self._c.all_to_all(s.address, r.address, s.count, s.code, _native(stream))
        return self._done(stream, s, r)

    def broadcast(self, x, root: int = 0, out=None, dtype: str | None = None, stream=None):
        """Rank `root`'s `x` on every rank (`x` is read on root only; elsewhere it gives the shape and dtype)."""
        stream = _resolve(stream)
        out = self._out(out, x, x.shape)
        s, r = self._buffers(x, out, dtype, stream)
        self._c.broadcast(s.address, r.address, r.count, r.code, root, _native(stream))
        return self._done(stream, s, r)

    def send(self, x, peer: int, dtype: str | None = None, stream=None) -> None:
        stream = _resolve(stream)
        b = self._buffer(x, dtype, "send", False, stream)
        self._c.send(b.address, b.count, b.code, peer, _native(stream))
        self._done(stream, b)

    def recv(self, out, peer: int, dtype: str | None = None, stream=None):
        """Fills `out` with what `peer` sends (as many elements, of its dtype)."""
        stream = _resolve(stream)
        b = self._buffer(out, dtype, "out", True, stream)
        self._c.recv(b.address, b.count, b.code, peer, _native(stream))
        return self._done(stream, b)

    def check(self) -> None:
        """Raises the communicator's asynchronous error (tsrCommGetAsyncError), if any."""
        self._c.async_error()

    def abort(self) -> None:
        """Breaks the communicator now (tsrCommAbort): waiting operations raise TSR_ERROR_LAUNCH_FAILED."""
        self._c.abort()

    def close(self) -> None:
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _resolve(stream):
    """`stream`, or where it is None the current stream while that one captures (inside `graph.capture()`):
    there an operation naming no stream is recorded, as a launch is. Otherwise None stays the synchronous
    default stream."""
    if stream is None:
        current = _current_stream()
        if current is not None and _capturing(current):
            return current
    return stream


def _capturing(stream) -> bool:
    native = _native(stream)
    return native is not None and native.capturing


def _native(stream):
    """The _runtime.Stream of a tessera.stream.Stream (its `native`), or None: the synchronous default."""
    return getattr(stream, "native", stream)


def _op(op: str) -> int:
    if op not in OPS:
        raise ValueError(f"unknown reduction {op!r}; expected one of {sorted(OPS)}")
    return OPS[op]
