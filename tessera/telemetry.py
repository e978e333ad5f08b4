"""Telemetry (architecture §3.6, §8): the metrics log, NVTX trace ranges, and reading logs back.

    from tessera import telemetry

    telemetry.enable("run.jsonl")            # or TESSERA_METRICS=run.jsonl (or .csv) in the environment
    mod.gemm(A, B, C, grid=..., block=..., flops=2 * m * n * k, nbytes=4 * (m * k + k * n + m * n))
    with telemetry.range("host", "step 3"):  # an NVTX range, when libnvToolsExt is loaded
        ...
    telemetry.record("step", seconds, flops=...)   # host-side work into the same log
    telemetry.disable()
    rows = telemetry.load("run.jsonl")       # list of dicts

Every kernel launch and copy the runtime runs is one record: kind ("kernel", "copy", "host"), name, stream,
grid and block, time_ms, gflops and gbps (when the counts were given), p95_ms (of that name over the last
`window` records) and the status. The log is process-wide, written by libtessera itself, so C hosts get the
same records.
"""

from __future__ import annotations

import contextlib
import csv
import json

from . import _runtime

PHASES = tuple(_runtime.PHASE)   # the standard NVTX range names: copy, mma, reduce, comm, host


def enable(path: str, window: int = 100) -> None:
    """Starts writing the metrics log to `path` (.jsonl or .csv), replacing any open log."""
    _runtime.metrics_open(str(path), window)


def disable() -> None:
    """Flushes and closes the metrics log."""
    _runtime.metrics_close()


def record(name: str, seconds: float, flops: float | None = None, nbytes: float | None = None) -> None:
    """Writes a record for host-side work (a step of a training loop, …) to the open log, if any."""
    _runtime.metrics_record(name, float(seconds), float(flops or 0), float(nbytes or 0))


def nvtx_available() -> bool:
    """Whether an NVTX library (libnvToolsExt.so.1, or $TESSERA_NVTX_LIBRARY) was loaded."""
    return _runtime.trace_active()


@contextlib.contextmanager
def range(phase: str, detail: str | None = None):  # noqa: A001 — NVTX's own word for it
    """An NVTX range named "<phase>" or "<phase>:<detail>" around the block; `phase` is one of PHASES. A no-op
    without an NVTX library."""
    if phase not in _runtime.PHASE:
        raise ValueError(f"unknown trace phase {phase!r}; the phases are {', '.join(PHASES)}")
    _runtime.trace_push(_runtime.PHASE[phase], detail)
    try:
        yield
    finally:
        _runtime.trace_pop()


_NUMBERS = ("ts", "time_ms", "gflops", "gbps", "p95_ms")


def load(path: str) -> list[dict]:
    """The records of a metrics log, JSONL or CSV, as dicts (CSV numbers converted, empty fields None)."""
    path = str(path)
    with open(path, newline="") as f:
        if path.lower().endswith(".csv"):
            rows = []
            for row in csv.DictReader(f):
                for key in _NUMBERS:
                    row[key] = float(row[key]) if row[key] else None
                row["stream"] = int(row["stream"])
                row["samples"] = int(row["samples"])
                rows.append(row)
            return rows
        return [json.loads(line) for line in f if line.strip()]
