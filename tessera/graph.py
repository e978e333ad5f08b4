"""Graph capture and replay (execution model §5): record a sequence of launches once, replay it cheaply.

    from tessera import graph

    with graph.capture() as g:
        gemm_tc(A, B, C, grid=..., block=...)
        saxpy(alpha, X, Y, Out, grid=..., block=...)

    graph.launch(g)            # runs both again, with the same argument values

Inside the `with`, launches (and tessera.stream copies and event records) that name no stream are recorded
on the capture's stream instead of run; nothing runs until the graph is launched. Argument values are taken
when each launch is recorded: a replay reads and writes the same arrays, whatever happened to the Python
variables since. The graph keeps those arrays alive. A replay skips all per-launch work of the Python
launcher and of the runtime's validation: that is its point.
"""

from __future__ import annotations

import contextlib

from . import _runtime
from . import runtime as _rt
from .stream import Stream, _pop, _push


class Graph:
    """What a capture recorded. Launch it with `graph.launch(g)` or `g.launch()`."""

    def __init__(self, stream: Stream):
        self.stream = stream
        self.native: _runtime.Graph | None = None
        self._exec: _runtime.GraphExec | None = None
        self._kept: list = []
        self._failed: BaseException | None = None

    def keep(self, *objects) -> None:
        """Keeps objects the recorded work uses alive as long as the graph."""
        self._kept.extend(objects)

    @property
    def node_count(self) -> int:
        """Operations recorded: launches, copies, event records and waits."""
        return self._native().node_count

    def _native(self) -> _runtime.Graph:
        if self._failed is not None:
            raise RuntimeError("the graph's capture ended with an exception; it cannot be launched") from self._failed
        if self.native is None:
            raise RuntimeError("the graph is still being captured (launch it after the `with` block)")
        return self.native

    def launch(self, stream: Stream | None = None) -> None:
        """Replays the graph on `stream` (default: none: it runs now, and this returns when it is done). The
        graph is instantiated on its first launch."""
        if self._exec is None:
            self._exec = self._native().instantiate()
        self._exec.launch(None if stream is None else stream.native)
        if stream is not None:
            stream.keep(self)  # the graph (and so its arrays) outlives the queued replay


@contextlib.contextmanager
def capture(stream: Stream | None = None, context: _runtime.Context | None = None):
    """Records the launches made in the block (on this thread, naming no stream) into a Graph. `stream`: the
    stream to record on (default: a new one of `context`, default the default context)."""
    s = stream or Stream(context=context or _rt.default_context())
    g = Graph(s)
    s.native.begin_capture()
    s.capture = g
    _push(s)
    try:
        yield g
    except BaseException as e:
        g._failed = e
        raise
    finally:
        _pop(s)
        s.capture = None
        g.native = s.native.end_capture()


def launch(g: Graph, stream: Stream | None = None) -> None:
    """Replays a captured graph (see Graph.launch)."""
    g.launch(stream)
