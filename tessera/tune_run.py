"""Times autotuning candidates through the runtime alone: the half of a split search that runs on the machine
with the device, where no compiler (MLIR) need be installed (docs/pipeline.md "A search split across two
machines").

    tessera-tune model.py mm --target ptx --arch sm_90a --export-candidates DIR    # where the compiler is
    python -m tessera.tune_run DIR --out records.json                              # where the device is
    tessera-tune --import records.json                                             # where the compiler is

DIR holds one image per candidate schedule and `candidates.json`, which names them with their configurations,
the inputs' shapes and the store's keys (target and arch, shape bucket, dtype, profile, compiler hash) of the
compile that made them. This module times each image's function on the device the target runs on (inputs
copied once into device memory, each run waited for; the fastest of `repeat` runs after a warm-up), times the
three fastest again in turn (`confirmed`), and writes the keys unchanged, the device's name and arch and each
candidate's times to the records file; `tessera-tune --import` checks the keys against its own compiler before
storing the fastest confirmed one. autotune.search times its
trials with the same functions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pathlib
import sys
import time

import numpy as np

from . import _runtime, executor, runtime, stream

CANDIDATES = "candidates.json"
CANDIDATES_FORMAT = "tessera-tune-candidates"
RECORDS_FORMAT = "tessera-tune-records"
VERSION = 1
# the runtime backend each target's code runs on
DEVICES = {"cpu": "cpu", "ptx": "cuda", "amdgpu": "hip"}


def context(target: str):
    """The runtime context `target`'s code is timed in: the default one for the CPU, else a new one on the
    device the target runs on; a clear error where this machine has none."""
    backend = DEVICES.get(target)
    if backend is None:
        raise ValueError(f"autotuning times schedules on {', '.join(DEVICES)} targets, not {target!r}")
    if backend == "cpu":
        return runtime.default_context()
    if backend not in runtime.backends():
        raise ValueError(f"searching {target} schedules times them on a {backend} device, and this machine has "
                         f"none (runtime backends here: {', '.join(runtime.backends())})")
    return _runtime.Context(backend)


def inputs(plan, size: int, seed: int, shapes=None) -> list[np.ndarray]:
    """Random inputs for `plan`'s arguments: of `shapes` (one per argument), else of its extents with each
    symbolic one `size`."""
    rng = np.random.default_rng(seed)
    if shapes is not None and len(shapes) != len(plan.args):
        raise ValueError(f"shapes gives {len(shapes)} shapes for {len(plan.args)} arguments ({', '.join(plan.params)})")
    arrays = []
    for i, vid in enumerate(plan.args):
        shape = list(shapes[i]) if shapes is not None else \
            [int(d) if d.isdigit() else size for d in plan.values[vid].dims]
        arrays.append(rng.standard_normal(shape, np.float32).astype(executor.numpy_dtype(plan.values[vid])))
    return arrays


def stored(fn, arrays: list) -> list[np.ndarray]:
    """`arrays` (inputs') as `fn`'s device arrays hold them (bf16 as bit patterns; the same arrays on the
    CPU), so that timing many candidates converts them once."""
    if not fn.device:
        return arrays
    return [executor.storage(fn.plan.values[vid], a) for vid, a in zip(fn.plan.args, arrays)]


def time_function(fn, arrays: list, repeat: int, ctx) -> float:
    """The fastest of `repeat` runs of `fn` on copies of `arrays` (outputs written in place start equal each
    time), after a warm-up run (page faults, first touch, module load). On a device a run is `calls` calls
    back to back, then a wait, over `calls`: enough calls for a millisecond, so that a kernel of microseconds
    is not timed as one launch's and one wait's latency."""
    best = float("inf")
    if fn.device:   # in device memory, copied in once per run outside the timing
        arrays = stored(fn, arrays)   # a no-op on arrays stored already
        on_device = [runtime.DeviceArray.from_numpy(a, ctx) for a in arrays]
        fn(*on_device)
        stream.synchronize(ctx)
        t0 = time.perf_counter()
        fn(*on_device)
        stream.synchronize(ctx)
        calls = max(1, min(50, int(1e-3 / max(time.perf_counter() - t0, 1e-6))))
        for _ in range(repeat):
            for d, a in zip(on_device, arrays):
                d.copy_from(a)
            stream.synchronize(ctx)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(*on_device)
            stream.synchronize(ctx)
            best = min(best, (time.perf_counter() - t0) / calls)
        return best
    fn(*[np.copy(a) for a in arrays])
    for _ in range(repeat):
        trial = [np.copy(a) for a in arrays]
        t0 = time.perf_counter()
        fn(*trial)
        best = min(best, time.perf_counter() - t0)
    return best


def show(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def report(out, name: str, done: int, total: int, best: tuple, started: float) -> None:
    """One line of a search's progress: configurations tried of the total, the best so far, the time left."""
    elapsed = time.perf_counter() - started
    left = elapsed / done * (total - done)
    print(f"autotune {name}: {done}/{total} configurations, best {best[1] * 1e3:.3f} ms ({show(best[0])}), "
          f"about {left:.0f} s left", file=out, flush=True)


def _manifest(directory: pathlib.Path) -> dict:
    path = directory / CANDIDATES
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a candidates file of tessera-tune --export-candidates ({e})") from None
    if not isinstance(found, dict) or found.get("format") != CANDIDATES_FORMAT or found.get("version") != VERSION:
        raise ValueError(f"{path}: not a version {VERSION} candidates file of tessera-tune --export-candidates")
    if not found.get("candidates"):
        raise ValueError(f"{path}: no candidate compiled (every configuration was refused)")
    return found


def _same_device(target: str, arch: str, ctx) -> str:
    """The device's name and arch; refuses a GPU of another arch than the candidates were compiled for (the
    key says which: its times would be stored for the wrong one)."""
    props = ctx.properties
    device = f"{props['name']} ({props['arch']})"
    if target != "cpu" and arch not in (props["arch"], props["arch"] + "a"):
        raise ValueError(f"the candidates were compiled for {arch}, and this device is {device}: time them on "
                         f"a {arch} device")
    return device


def fastest(trials: list) -> dict:
    """The trial a search keeps: the fastest of those timed again in alternation (`confirmed`) where any
    were, else of all."""
    confirmed = [t for t in trials if "confirmed" in t]
    return min(confirmed or trials, key=lambda t: t.get("confirmed", t["seconds"]))


def run(directory, repeat: int | None = None, progress: bool = False, confirm: int = 3, rounds: int = 3) -> dict:
    """Times every candidate of `directory` (export_candidates'), then the `confirm` fastest again, in turn for
    `rounds` rounds (their `confirmed` times), so that one lucky or unlucky pass — a GPU's clocks move between
    candidates — does not pick the schedule; returns the records document."""
    directory = pathlib.Path(directory)
    found = _manifest(directory)
    keys, target = found["keys"], found["target"]
    ctx = context(target)
    device = _same_device(target, keys[0]["arch"], ctx)
    repeat = repeat or found["repeat"]
    trials, fns, arrays, started = [], [], None, time.perf_counter()
    for c in found["candidates"]:
        data = (directory / c["image"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != c["sha256"]:
            raise ValueError(f"{directory / c['image']}: not the image the candidates file names (its hash differs)")
        fn = executor.load(data, ctx).function(found["function"])
        if arrays is None:   # one function's: the same arguments for every candidate, stored once
            arrays = stored(fn, inputs(fn.plan, found["size"], found["seed"], found["shapes"]))
        seconds = time_function(fn, arrays, repeat, ctx)
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"{c['image']}: timed {seconds} s")
        trials.append({"config": c["config"], "seconds": seconds, "image": c["image"], "sha256": c["sha256"]})
        fns.append(fn)
        if progress:
            best = min(trials, key=lambda t: t["seconds"])
            report(sys.stderr, found["function"], len(trials), len(found["candidates"]),
                   (best["config"], best["seconds"]), started)
    top = sorted(range(len(trials)), key=lambda i: trials[i]["seconds"])[:confirm] if confirm > 1 else []
    if len(top) > 1:
        if progress:
            print(f"autotune {found['function']}: the {len(top)} fastest again, in turn, {rounds} rounds",
                  file=sys.stderr, flush=True)
        again = dict.fromkeys(top, float("inf"))
        for _ in range(rounds):
            for i in top:
                again[i] = min(again[i], time_function(fns[i], arrays, repeat, ctx))
        for i in top:
            trials[i]["confirmed"] = again[i]
    return {"format": RECORDS_FORMAT, "version": VERSION, "function": found["function"], "target": target,
            "keys": keys, "space": found["space"], "device": device, "repeat": repeat,
            "shapes": [list(a.shape) for a in arrays], "trials": trials}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tessera.tune_run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", help="the candidates tessera-tune --export-candidates wrote")
    p.add_argument("--out", required=True, help="the records file tessera-tune --import reads")
    p.add_argument("--repeat", type=int, default=0, help="runs per candidate (default: the export's)")
    p.add_argument("--confirm", type=int, default=3,
                   help="time the N fastest again, in turn, to choose among them (default 3; 0: the pass alone)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    a = p.parse_args(argv)
    try:
        records = run(a.directory, a.repeat, progress=not a.quiet, confirm=a.confirm)
    except (ValueError, OSError, runtime.Error) as e:
        print(f"tessera.tune_run: error: {e}", file=sys.stderr)
        return 1
    pathlib.Path(a.out).write_text(json.dumps(records, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    best = fastest(records["trials"])
    print(f"{records['function']} on {records['device']}: {len(records['trials'])} candidates timed, best "
          f"{best.get('confirmed', best['seconds']) * 1e3:.3f} ms ({show(best['config'])}); records in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
