"""Streams and events (execution model §3): queues of work that run in order, independently of each other.

    from tessera import stream

    s1, s2 = stream.new(), stream.new()
    stream.memcpy_async(dst=device_X, src=host_X, stream=s1)   # async copy on s1
    gemm[grid, block, s2](A, B, C)                              # launch on s2
    stream.synchronize()                                        # wait for both

A launch or copy given a stream returns at once; it runs when the stream gets to it. Launches given no stream
go to the current stream (`with stream.use(s):`, or a graph capture) and otherwise run at once, on the
synchronous default stream. Arrays given to queued work are kept alive by the stream until it is known to
have run them (a `synchronize` or a `query` that returns True).

Errors of queued work (a debug-mode memory fault) are raised by the stream's next `synchronize` or `query`,
once; meanwhile the stream skips its later launches and copies.

Waits take a limit: `s.synchronize(timeout=0.5)`, `event.synchronize(timeout=…)`, `stream.synchronize(ctx,
timeout=…)` (seconds) raise `Error` with status_name "TSR_ERROR_TIMEOUT" when the work is still running then
(a kernel that never ends is reported, and the program lives on); the work keeps running, and the arrays it
uses stay kept. Without a limit, the context's watchdog applies ($TESSERA_WAIT_TIMEOUT_MS or
`_runtime.Context(wait_timeout_ms=…)`), if any.
"""

from __future__ import annotations

import contextlib
import weakref

import numpy as np

from . import _runtime
from . import runtime as _rt

Error = _runtime.Error
_streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()  # so that a context-wide synchronize can drop keeps


class Stream:
    """A stream of a context (default: tessera.runtime's default context). Hints, which the runtime may
    ignore: `priority` (higher first when streams compete for the CPU workers) and `affinity` (bit i allows CPU
    worker i)."""

    def __init__(self, priority: int = 0, affinity: int = 0, context: _runtime.Context | None = None):
        self.context = context or _rt.default_context()
        self.native = _runtime.Stream(self.context, priority, affinity)
        self._kept: list = []
        self.capture = None   # the tessera.graph.Graph being recorded, if any
        _streams.add(self)

    def __del__(self):
        self.native = None  # releasing the stream finishes its queue: before the arrays in _kept can go

    def keep(self, *objects) -> None:
        """Keeps `objects` (arrays queued work reads or writes) alive until that work has run; while the stream
        records a graph, for as long as the graph lives."""
        objects = [o for o in objects if not isinstance(o, (int, float, complex, bool, np.generic))]
        if self.capture is not None:
            self.capture.keep(*objects)
        else:
            self._kept.extend(objects)

    def synchronize(self, timeout: float | None = None) -> None:
        """Waits for everything queued, for at most `timeout` seconds if given; raises the error the stream
        kept, if any, or TSR_ERROR_TIMEOUT (the work still running keeps its arrays)."""
        _finished(self.native.synchronize, timeout, [self])

    def query(self) -> bool:
        """True when everything queued has run (raising a kept error), False while work is pending."""
        done = self.native.query()
        if done:
            self._kept.clear()
        return done

    def wait_event(self, event: "Event") -> None:
        """Makes later work on this stream wait for the event's most recent record."""
        self.native.wait_event(event.native)

    def record(self, event: "Event | None" = None) -> "Event":
        """Records `event` (a new one if None) at the end of this stream's queue and returns it."""
        event = event or Event(self.context)
        event.record(self)
        return event

    def __enter__(self) -> "Stream":
        _push(self)
        return self

    def __exit__(self, *exc) -> None:
        _pop(self)


class Event:
    """A point in a stream's work; it completes, with a timestamp, when the work before it has run."""

    def __init__(self, context: _runtime.Context | None = None):
        self.native = _runtime.Event(context or _rt.default_context())

    def record(self, stream: Stream | None = None) -> None:
        """Records the event at the end of `stream`'s queue (None: it completes now)."""
        if stream is not None and stream.capture is not None:
            stream.capture.keep(self)
        self.native.record(None if stream is None else stream.native)

    def query(self) -> bool:
        return self.native.query()

    def synchronize(self, timeout: float | None = None) -> None:
        """Waits for its most recent record, for at most `timeout` seconds if given (TSR_ERROR_TIMEOUT)."""
        self.native.synchronize(_milliseconds(timeout))

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event's completion to `end`'s."""
        return self.native.elapsed_ms(end.native)


def new(priority: int = 0, affinity: int = 0, context: _runtime.Context | None = None) -> Stream:
    """A new stream (see `Stream`)."""
    return Stream(priority, affinity, context)


def _push(s: Stream) -> None:
    streams = getattr(_rt._local, "streams", None)
    if streams is None:
        streams = _rt._local.streams = []
    streams.append(s)


def _pop(s: Stream) -> None:
    streams = _rt._local.streams
    if not streams or streams[-1] is not s:
        raise RuntimeError("streams made current must be left in the reverse order they were entered")
    streams.pop()


def current() -> Stream | None:
    """The stream launches go to when they name none (on this thread), or None: the synchronous default."""
    return _rt._current_stream()


@contextlib.contextmanager
def use(s: Stream):
    """Within the block, launches on this thread that name no stream go to `s`."""
    _push(s)
    try:
        yield s
    finally:
        _pop(s)


def synchronize(context: _runtime.Context | None = None, timeout: float | None = None) -> None:
    """Waits for every stream of `context` (default: the default context), for at most `timeout` seconds if
    given; raises the first error one kept, or TSR_ERROR_TIMEOUT."""
    ctx = context or _rt.default_context()
    _finished(ctx.synchronize, timeout, [s for s in list(_streams) if s.context is ctx])


def _milliseconds(timeout: float | None) -> int | None:
    if timeout is None:
        return None
    if not timeout >= 0:
        raise ValueError(f"a timeout is a number of seconds >= 0, got {timeout!r}")
    return min(int(-(-timeout * 1000 // 1)), 2**32 - 1)  # rounded up: never shorter than asked


def _finished(wait, timeout: float | None, streams: list) -> None:
    """Runs wait(timeout in ms), then drops what `streams` keep for their queued work, which has run, unless the
    wait timed out: the work is still running then."""
    timed_out = False
    try:
        wait(_milliseconds(timeout))
    except Error as e:
        timed_out = e.status_name == "TSR_ERROR_TIMEOUT"
        raise
    finally:
        if not timed_out:
            for s in streams:
                s._kept.clear()


def _where(a, written: bool):
    """(address, bytes, is device memory) of an array argument of a copy (its destination when `written`)."""
    if isinstance(a, _rt.DeviceArray):
        return a.address, a.nbytes, True
    if isinstance(a, np.ndarray):
        if not a.flags.c_contiguous:
            raise ValueError("copies need C-contiguous arrays (use np.ascontiguousarray)")
        if written and not a.flags.writeable:
            raise ValueError("the destination of a copy is a read-only array (a view of bytes, a read-only "
                             "mapping, or writeable=False)")
        return a.ctypes.data, a.nbytes, False
    raise TypeError(f"copies take numpy arrays and tessera.runtime.DeviceArray, got {type(a).__name__}")


def memcpy_async(dst, src, stream: Stream | None = None) -> None:
    """Copies `src` into `dst` (numpy arrays or DeviceArrays of the same size in bytes) on `stream` (default:
    the current stream, else now). The arrays are kept alive until the copy has run."""
    s = stream if stream is not None else current()
    (d, dbytes, ddev), (a, abytes, adev) = _where(dst, True), _where(src, False)
    if dbytes != abytes:
        raise ValueError(f"the destination has {dbytes} bytes, the source {abytes}")
    kind = {(False, False): "host_to_host", (True, False): "host_to_device", (False, True): "device_to_host",
            (True, True): "device_to_device"}[ddev, adev]
    ctx = s.context if s is not None else getattr(dst, "context", None) or getattr(src, "context", None) \
        or _rt.default_context()
    ctx.memcpy(d, a, dbytes, _runtime.MEMCPY[kind], None if s is None else s.native)
    if s is not None:
        s.keep(dst, src)
