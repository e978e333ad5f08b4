"""Helpers shared by the benchmarks: best-of-N wall time after a warm-up, the ratio line, and the GPU
benchmarks' set-up (context, image, launches) and interleaved timing."""

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


def best_times(fns, rounds: int, budget: float = 0.2, settle: float = 0.3) -> list[float]:
    """Best time per call of each function, calling them in turn each round (repeated to ~budget s).

    After each turn the machine gets `settle` seconds: OpenBLAS's threads spin for about 0.1 s after a call
    (its THREAD_TIMEOUT, 2^28 cycles) and would take a core from whatever is timed next; on two cores that
    cost the side timed after numpy up to a third of its speed.
    """
    for fn in fns:
        fn()
    reps = []
    for fn in fns:
        t0 = time.perf_counter()
        fn()
        reps.append(max(1, int(budget / max(time.perf_counter() - t0, 1e-6))))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(reps[i]):
                fn()
            best[i] = min(best[i], (time.perf_counter() - t0) / reps[i])
            time.sleep(settle)
    return best


def report_checks(name: str, checked, unchecked, rounds: int = 10) -> float:
    """Times a row compiled with bounds checks against the same row compiled without (alternating, so that a
    busy machine slows both alike; half the rounds in each order, as the first of a pair can be favoured) and
    prints the cost; returns checked / unchecked time."""
    first = best_times([checked, unchecked], rounds // 2 + 1, settle=0.05)
    second = best_times([unchecked, checked], rounds // 2 + 1, settle=0.05)
    t_checked, t_unchecked = min(first[0], second[1]), min(first[1], second[0])
    ratio = t_checked / t_unchecked
    print(f"{name:<28} checked {t_checked * 1e3:9.3f} ms   unchecked {t_unchecked * 1e3:9.3f} ms   "
          f"checked/unchecked {ratio:5.3f} ({(ratio - 1) * 100:+.1f}%)")
    return ratio


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


def torch_sgd(value, params, lr: float):
    """PyTorch eager's SGD step after its forward: value.backward(), then p -= lr·p.grad for each leaf tensor of
    `params`; returns the loss and the updated parameters, detached."""
    import torch  # lazy: only the benchmarks with a PyTorch peer need it
    value.backward()
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    return (value.detach(), *(p.detach() for p in params))


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

    from tessera import image as images, plan as plans, runtime

    ctx = cuda_context()
    if not image_path:
        with tempfile.TemporaryDirectory() as d:
            build_example_image(example, os.path.join(d, "bench.tessera"))
            return gpu_program(os.path.join(d, "bench.tessera"), example)
    with open(image_path, "rb") as f:
        data = f.read()
    return ctx, runtime.load(data), plans.decode(images.read_image(data).section(plans.SECTION))



def cuda_context():
    """The CUDA context of a GPU benchmark; prints the GPU and PyTorch's version."""
    import torch
    from tessera import runtime

    ctx = runtime.select_backend("cuda")
    props = ctx.properties
    print(f"GPU: {props['name']} ({props['arch']}, {props['compute_units']} SMs); PyTorch {torch.__version__}")
    return ctx


def attention_setup(doc: str, example: str, flags: dict | None = None):
    """The start of the attention benchmarks on a GPU: their command line (--image, --build-image, --shape
    B,H,S, and the benchmark's own on/off `flags`, {name: help}), then `example`'s program and a Tessera stream:
    (module, launch plans, stream, (B, H, S), the extents of the plans' grids, the parsed arguments). Under
    --build-image it writes the image and exits, as argparse does for --help."""
    import argparse

    from tessera import stream

    name = os.path.relpath(example, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--image", help=f"{name} built beforehand with --build-image")
    p.add_argument("--build-image", metavar="PATH", help="only write the image to PATH")
    p.add_argument("--shape", default="4,16,4096", help="B,H,S")
    for flag, text in (flags or {}).items():
        p.add_argument(flag, action="store_true", help=text)
    args = p.parse_args()
    if args.build_image:
        build_example_image(example, args.build_image)
        raise SystemExit(0)
    ctx, mod, functions = gpu_program(args.image, example)
    B, H, S = (int(x) for x in args.shape.split(","))
    env = {"BH": B * H, "SQ": S, "SK": S, "DEVICE_UNITS": ctx.properties["compute_units"]}
    return mod, functions, stream.new(context=ctx), (B, H, S), env, args


def launcher(mod, step, env, views, s):
    """A call that launches the kernel of a launch plan's step on the arrays `views`, on stream `s`, its grid
    evaluated at the extents `env`."""
    from tessera import plan as plans

    kernel = mod.kernel(step.kernel)
    grid = tuple(plans.evaluate(g, env) for g in step.grid)
    return lambda: kernel(*views, grid=grid, block=step.block, smem_bytes=step.smem, stream=s)


def interleaved_best(sides, rounds: int = 5, calls: int = 10) -> dict:
    """Best time per call of each side {name: (call, wait)} on an asynchronous device: each round, each side
    once (warm, waited for), then `calls` calls back to back and one wait; the best of `rounds` rounds."""
    best = {n: float("inf") for n in sides}
    for _ in range(rounds):
        for n, (fn, wait) in sides.items():
            fn(), wait()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            wait()
            best[n] = min(best[n], (time.perf_counter() - t0) / calls)
    return best
