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


def build_example_image(example: str, path: str) -> None:
    """Compiles the example file for Hopper (sm_90a) into the image at `path`: where the compiler is, for a
    GPU machine that may have only the runtime."""
    import tessera
    with open(example, encoding="utf-8") as f:
        data = tessera.compile(f.read(), example, target="ptx", arch="sm_90a")
    with open(path, "wb") as f:
        f.write(data)


def gpu_program(image_path, example):
    """(CUDA context, loaded module, the image's launch plans) for a GPU benchmark: the image at `image_path`
    (built beforehand where the compiler is), or `example` compiled now; prints the GPU."""
    import tempfile

    import torch
    from tessera import image as images, plan as plans, runtime

    ctx = runtime.select_backend("cuda")
    props = ctx.properties
    print(f"GPU: {props['name']} ({props['arch']}, {props['compute_units']} SMs); PyTorch {torch.__version__}")
    if not image_path:
        with tempfile.TemporaryDirectory() as d:
            build_example_image(example, os.path.join(d, "bench.tessera"))
            return gpu_program(os.path.join(d, "bench.tessera"), example)
    with open(image_path, "rb") as f:
        data = f.read()
    return ctx, runtime.load(data), plans.decode(images.read_image(data).section(plans.SECTION))

