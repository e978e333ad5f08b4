"""Helpers shared by the benchmarks: best-of-N wall time after a warm-up, the ratio line and its JSON record
(`--json PATH`, the schema in bench/README.md), and the GPU benchmarks' set-up (context, image, launches) and
interleaved timing."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import statistics
import sys
import time

SCHEMA = "tessera-bench/1"
# A unit's scale and the count it divides: a row's throughput is that count over its time.
UNITS = {"GFLOP/s": (1e9, "flops"), "TFLOP/s": (1e12, "flops"), "GOPS": (1e9, "flops"), "TOPS": (1e12, "flops"),
         "GB/s": (1e9, "bytes"), "TB/s": (1e12, "bytes")}


def best_time(fn, repeat: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def best_times(fns, rounds: int, budget: float = 0.2, settle: float = 0.3, clock=time.perf_counter) -> list[float]:
    """Best time per call of each function, calling them in turn each round (repeated to ~budget s of wall
    time; budget 0: one call a turn), measured by `clock` (time.process_time: the process's CPU time, every
    thread's, steadier than wall time where other processes load the machine).

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
            t0 = clock()
            for _ in range(reps[i]):
                fn()
            best[i] = min(best[i], (clock() - t0) / reps[i])
            time.sleep(settle)
    return best


def report_checks(name: str, checked, unchecked, rounds: int = 10) -> float:
    """Times a row compiled with bounds checks against the same row compiled without (alternating, so that a
    busy machine slows both alike; half the rounds in each order, as the first of a pair can be favoured) and
    prints the cost; returns checked / unchecked time."""
    first = best_times([checked, unchecked], rounds // 2 + 1, settle=0.05)
    second = best_times([unchecked, checked], rounds // 2 + 1, settle=0.05)
    r = record_row(name, {"checked": min(first[0], second[1]), "unchecked": min(first[1], second[0])},
                   note="bounds checks: checked against --no-bounds-checks")
    t_checked, t_unchecked = r["ours"]["time_s"], r["peers"][0]["time_s"]
    ratio = t_checked / t_unchecked
    print(f"{name:<28} checked {t_checked * 1e3:9.3f} ms   unchecked {t_unchecked * 1e3:9.3f} ms   "
          f"checked/unchecked {ratio:5.3f} ({(ratio - 1) * 100:+.1f}%)")
    return ratio


def machine() -> str:
    return f"{cpu_model()}, {os.cpu_count()} cores"


XLA_ABSENT = "XLA not measured: jax is not installed (pip install -e '.[bench]')"


def optional_jax(threads: int):
    """jax, where the optional `bench` extra installed it, with XLA's CPU pool matched to Tessera's `threads`;
    None (and a line saying so) where it is absent, so that the rest of a benchmark still runs.

    XLA's Eigen pool spans every core, as Tessera's pool does by default (TESSERA_NUM_THREADS); a one-thread
    run of ours gets a one-thread XLA (--xla_cpu_multi_thread_eigen=false), which XLA reads from XLA_FLAGS
    once, at its first import: call this before anything imports jax."""
    if threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    try:
        import jax  # lazy: the peer is an optional extra; CI's venv has no jax
    except ImportError:
        print(XLA_ABSENT)
        return None
    print(f"XLA peer: jax {jax.__version__}, {'1 thread' if threads == 1 else 'every core'}")
    return jax


def xla_call(jax, formula, *args, **kw):
    """A call of jax.jit of `formula(jax.numpy, *arrays, **kw)` on `args`, placed once (jax.device_put), each call
    waited for (it returns a new array, as XLA's dot does); None where `jax` is None (optional_jax's absent)."""
    if jax is None:
        return None
    jitted = jax.jit(lambda *a: formula(jax.numpy, *a, **kw))
    placed = [jax.device_put(a) for a in args]
    return lambda: jitted(*placed).block_until_ready()


def report_sides(workload: str, sides: dict, rounds: int, unit: str, amount: float, **row) -> dict:
    """Times the sides {name: call}, ours first, in alternation (best_times, best of `rounds`) and reports them
    (report_row); an XLA side of None (jax absent) is left out and the row's note says so."""
    if "XLA" in sides and sides["XLA"] is None:
        row["note"] = "no XLA: jax not installed"
    sides = {n: f for n, f in sides.items() if f is not None}
    return report_row(workload, dict(zip(sides, best_times(list(sides.values()), rounds))), unit, amount, **row)


def report(name: str, ours: float, peer: float, peer_name: str, unit: str, amount: float, **row) -> dict:
    """Prints and records (record_row) Tessera against one peer; `row` as record_row takes it."""
    return report_row(name, {"tessera": ours, peer_name: peer}, unit, amount, **row)


def report_row(workload: str, times: dict, unit: str | None = None, amount: float | None = None, **row) -> dict:
    """Records a row (record_row) and prints it from the record: each side's throughput (its time where there is
    no unit) and the ratio to each peer (and its paired ratio, where `row` has the rounds)."""
    r = record_row(workload, times, unit, amount, **row)
    sides = [r["ours"], *r["peers"]]
    if unit:
        line = "   ".join(f"{s['name']} {s['throughput']:9.2f} {unit}" for s in sides)
    else:
        line = "   ".join(f"{s['name']} {s['time_s'] * 1e6:9.2f} us" for s in sides)
    if len(r["peers"]) == 1:
        line += f"   ratio {r['ratio']:5.2f}x" + paired_text(r["peers"][0])
    else:
        line += "   ratio " + "  ".join(f"vs {s['name']} {s['ratio']:5.3f}" + paired_text(s) for s in r["peers"])
    print(f"{workload:<28} {line}" + (f"   ({r['note']})" if r["note"] else ""), flush=True)
    return r


def paired_text(peer: dict) -> str:
    """" paired 1.023 (0.998-1.041)": a recorded peer's paired ratio, median (min-max) over the rounds; "" for a
    peer timed best-of only."""
    if "paired_ratio" not in peer:
        return ""
    lo, hi = peer["paired_range"]
    return f" paired {peer['paired_ratio']:.3f} ({lo:.3f}-{hi:.3f})"


class _Results:
    """The rows of this run and where they go (--json PATH): the file is rewritten after each row, so that a run
    cut short (a device lease's time limit) keeps what it measured."""

    def __init__(self):
        self.path = None
        self.doc = None

    def start(self, path: str, bench: str, argv: list[str]) -> None:
        self.path = path
        self.doc = {"schema": SCHEMA, "bench": bench, "argv": argv, "machine": cpu_machine(), "commit": commit(),
                    "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "rows": []}
        self.write()

    def write(self) -> None:
        if self.path:
            tmp = self.path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.doc, f, indent=1)
                f.write("\n")
            os.replace(tmp, self.path)


RESULTS = _Results()


def parse_args(parser, argv: list[str] | None = None):
    """`parser.parse_args(argv)` with the shared --json PATH option; with it, this run's rows go to PATH (in a
    distributed run, rank 0's: the rank that prints)."""
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON (bench/README.md's schema)")
    args = parser.parse_args(argv)
    if args.json and os.environ.get("RANK", "0") == "0":
        RESULTS.start(args.json, os.path.splitext(os.path.basename(sys.argv[0]))[0],
                      sys.argv[1:] if argv is None else list(argv))
    return args


def commit() -> str | None:
    """The commit measured: TESSERA_BENCH_COMMIT where set (a GPU machine's copy of the tree has no .git), else
    git's HEAD of this checkout (with "-dirty" if it has changes), else None."""
    if os.environ.get("TESSERA_BENCH_COMMIT"):
        return os.environ["TESSERA_BENCH_COMMIT"]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=here, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def cpu_model() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return cpu


def cpu_machine() -> dict:
    """The JSON's machine for a CPU benchmark; the load average says how busy the machine was at the start."""
    return {"kind": "cpu", "cpu": cpu_model(), "cores": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}


def set_gpu_machine(name: str, arch: str, units: int, count: int | None = None) -> None:
    """Makes the JSON's machine the GPU a benchmark runs on, `count` of them (default: one per process of the
    run, WORLD_SIZE), the host CPU kept beside it."""
    if count is None:
        count = int(os.environ.get("WORLD_SIZE", "1"))
    if RESULTS.doc is not None:
        host = RESULTS.doc["machine"]
        RESULTS.doc["machine"] = {"kind": "gpu", "gpu": name, "arch": arch, "units": units, "count": count,
                                  "host_cpu": host.get("cpu", host.get("host_cpu"))}
        RESULTS.write()


def record_row(workload: str, times: dict, unit: str | None = None, amount: float | None = None, *,
               shape=None, dtype: str | None = None, flops: float | None = None, bytes: float | None = None,
               note: str = "", rounds: dict | None = None) -> dict:
    """One row: `times` {side: seconds}, ours first (its ratio to each peer is peer time / our time: above 1,
    ours is faster); `amount` of `unit` per call (GFLOP for GFLOP/s, GB for GB/s...) gives the row's count,
    FLOPs or bytes, and the other count where the caller knows it (`flops`, `bytes`: a roofline point needs
    both). `rounds` {side: [seconds per call in each round]} (interleaved_best's rounds_out, named as in
    `times`): each side keeps them (`rounds_s`) and each peer gets paired_ratio's median (`paired_ratio`) and
    its range (`paired_range`). Appended to --json's file, if any; returns the row."""
    if unit is not None and unit not in UNITS:
        raise ValueError(f"unit {unit!r}: not one of {', '.join(UNITS)}")
    counts = {"flops": flops, "bytes": bytes}
    if unit is not None:
        scale, key = UNITS[unit]
        counts[key] = amount * scale
    (ours, t_ours), *peers = times.items()

    rounds = rounds or {}

    def side(name, t):
        return {"name": name, "time_s": t, "throughput": None if unit is None else amount / t,
                **({"rounds_s": list(rounds[name])} if name in rounds else {})}

    def paired(name):
        if name not in rounds or ours not in rounds:
            return {}
        median, lo, hi = paired_ratio(rounds[name], rounds[ours])
        return {"paired_ratio": median, "paired_range": [lo, hi]}
    row = {"workload": workload, "shape": list(shape) if shape is not None else None, "dtype": dtype,
           "unit": unit, **counts, "ours": side(ours, t_ours),
           "peers": [{**side(n, t), "ratio": t / t_ours, **paired(n)} for n, t in peers],
           "ratio": peers[0][1] / t_ours if peers else None, "note": note}
    if RESULTS.doc is not None:
        RESULTS.doc["rows"].append(row)
        RESULTS.write()
    return row


def torch_sgd(value, params, lr: float):
    """PyTorch eager's SGD step after its forward: value.backward(), then p -= lr·p.grad for each leaf tensor of
    `params`; returns the loss and the updated parameters, detached."""
    import torch  # lazy: only the benchmarks with a PyTorch peer need it
    value.backward()
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    return (value.detach(), *(p.detach() for p in params))


def build_example_image(example: str, path: str, arch: str = "sm_90a") -> None:
    """Compiles the example file for `arch` (Hopper's sm_90a by default) into the image at `path`: where the
    compiler is, for a GPU machine that may have only the runtime."""
    import tessera
    with open(example, encoding="utf-8") as f:
        data = tessera.compile(f.read(), example, target="ptx", arch=arch)
    with open(path, "wb") as f:
        f.write(data)


def gpu_program(image_path, example, arch: str = "sm_90a"):
    """(CUDA context, loaded module, the image's launch plans) for a GPU benchmark: the image at `image_path`
    (built beforehand where the compiler is), or `example` compiled now for `arch`; prints the GPU."""
    import tempfile

    from tessera import image as images, plan as plans, runtime

    ctx = cuda_context()
    if not image_path:
        with tempfile.TemporaryDirectory() as d:
            build_example_image(example, os.path.join(d, "bench.tessera"), arch)
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
    set_gpu_machine(props["name"], props["arch"], props["compute_units"])
    return ctx


def attention_setup(doc: str, example: str, flags: dict | None = None):
    """The start of the attention benchmarks on a GPU: their command line (--image, --build-image, --arch of
    the image built, --shape B,H,S, and the benchmark's own on/off `flags`, {name: help}), then `example`'s
    program and a Tessera stream: (module, launch plans, stream, (B, H, S), the extents of the plans' grids,
    the parsed arguments). Under --build-image it writes the image and exits, as argparse does for --help."""
    import argparse

    from tessera import stream

    name = os.path.relpath(example, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--image", help=f"{name} built beforehand with --build-image")
    p.add_argument("--build-image", metavar="PATH", help="only write the image to PATH")
    p.add_argument("--shape", default="4,16,4096", help="B,H,S")
    p.add_argument("--arch", default="sm_90a", help="what --build-image (or a run without --image) compiles for; "
                                                    "a run's --image must have been built for the same")
    for flag, text in (flags or {}).items():
        p.add_argument(flag, action="store_true", help=text)
    args = parse_args(p)
    if args.build_image:
        build_example_image(example, args.build_image, args.arch)
        raise SystemExit(0)
    ctx, mod, functions = gpu_program(args.image, example, args.arch)
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


# the rounds of a bench that reports paired ratios (those on interleaved_best, bench/README.md): a median of 9 or
# more per-round ratios
PAIRED_ROUNDS = 9


def interleaved_rounds(sides, rounds: int = 5, calls: int = 10, warmup: float = 1.0, span: float = 0.02,
                       clock=time.perf_counter) -> dict:
    """The time per call of each side {name: (call, wait)} on an asynchronous device in each round, timed warm:
    {name: [seconds per call in round 0, round 1, ...]}, the same rounds for every side (interleaved_best takes
    each side's best; paired_ratio compares two sides round by round).

    First the sides run in turn for `warmup` seconds: a GPU's clocks settle under load, and an H200 ran the
    first tenths of a second of GEMMs up to 15 % faster than later (8192^3: 690-785 TFLOP/s for the same kernel
    between processes), which gave the side timed first the cool GPU. Then each round, each side once (waited
    for), then at least `calls` calls back to back, as many as fill `span` seconds, and one wait. The order
    rotates by one side each round, so each side is timed in every position: `rounds` is rounded up to a
    multiple of the number of sides, so that each side takes each position equally often."""
    names = list(sides)
    took = {n: 0.0 for n in names}
    t_end = clock() + warmup
    while True:
        for n, (fn, wait) in sides.items():
            t0 = clock()
            fn(), wait()
            took[n] = clock() - t0
        if clock() >= t_end:
            break
    reps = {n: max(calls, int(span / max(took[n], 1e-9))) for n in names}
    times = {n: [] for n in names}
    count = -(-max(rounds, len(names)) // len(names)) * len(names)
    for r in range(count):
        for n in names[r % len(names):] + names[:r % len(names)]:
            fn, wait = sides[n]
            fn(), wait()
            t0 = clock()
            for _ in range(reps[n]):
                fn()
            wait()
            times[n].append((clock() - t0) / reps[n])
    return times


def interleaved_best(sides, rounds: int = 5, calls: int = 10, warmup: float = 1.0, span: float = 0.02, *,
                     rounds_out: dict | None = None, clock=time.perf_counter) -> dict:
    """Best time per call of each side {name: (call, wait)} over the rounds of interleaved_rounds (the
    throughput a bench prints); with `rounds_out` (a dict), each side's time in every round is put there too,
    for paired_ratio."""
    times = interleaved_rounds(sides, rounds, calls, warmup, span, clock)
    if rounds_out is not None:
        rounds_out.update(times)
    return {n: min(ts) for n, ts in times.items()}


def paired_ratio(peer: list, ours: list) -> tuple[float, float, float]:
    """(median, min, max) over rounds of the peer's time / our time in the same round. The two sides of a round
    are timed back to back, so a change of the GPU's clocks between rounds hits both alike and cancels, where
    each side's best round (interleaved_best) can come from a different, luckier moment: the same attention image
    timed as two sides in one process on an H200 gave best-of 688.4 against 631.0 TFLOP/s (session 34)."""
    if len(peer) != len(ours) or not ours:
        raise ValueError(f"paired rounds: {len(peer)} against {len(ours)}")
    ratios = sorted(p / o for p, o in zip(peer, ours))
    return statistics.median(ratios), ratios[0], ratios[-1]


def pick(best: dict, rounds: dict, names: dict) -> tuple[dict, dict]:
    """The times and rounds of the sides `names` {label in the row: side timed}, for record_row/report_row's
    `times` and `rounds`: a row whose sides are named otherwise than the timed ones."""
    return {label: best[side] for label, side in names.items()}, {label: rounds[side] for label, side in names.items()}
