"""Timing helpers shared by the benchmarks: best-of-N wall time after a warm-up, and the ratio line."""

from __future__ import annotations

import os
import platform
import time


def best_time(fn, repeat: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def report(name: str, ours: float, peer: float, peer_name: str, unit: str, amount: float) -> None:
    print(f"{name:<28} tessera {amount / ours:9.2f} {unit}   {peer_name} {amount / peer:9.2f} {unit}   "
          f"ratio {peer / ours:5.2f}x")
