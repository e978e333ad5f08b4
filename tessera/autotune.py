"""Autotuning (spec/execution-model.md §5): compile a kernel once per schedule in a search space, time each
on the target, keep the fastest.

    config = autotune.search(kernel=gemm_tc, params={"BM": [64, 128], "BN": [64, 128], "BK": [16, 32]},
                             objective="runtime")

`params` names tile sizes as the tile language does (BM, BN, BK; also `stages`, `vector`) and applies to every
GEMM of the program (the schedule phase's `MB`, `NC`, `KC`). Inputs come from `args`, or are random tensors
whose symbolic extents are `size` (default 512), or of the extents `shapes` gives per argument. Tile programs
and `@function` programs are timed through their launch plans; each trial is an ordinary, cached compilation
that reads no stored result.

Under a deterministic numerics profile (`numerics.profile("deterministic")` or "strict" around the search) only
schedules that keep every reduction's order are searched: BK, the K chunk, decides where the CPU GEMM adds a
chunk's partial sums into C (backends/cpu/gemm.py), so its result's rounding; a search over several BK values
is refused. BM, BN, stages and vector tile and stage the output and the copies, never a reduction.

Results are remembered with `persist=True` (or `tessera-tune`): the fastest schedule is stored for each matmul
of the function under its key — target and arch, shape bucket, dtype, numerics profile, compiler hash — in the
cache directory (tessera/tuning.py). Later compiles of any program with a matmul of that key, in any process,
take it where no hint speaks for that matmul (the image's kernel records say so: property `autotune`), and a
later `search(..., persist=True)` over the same space returns it without timing anything.

`target="ptx"` (or "amdgpu", with `arch=`) compiles for that target and times each schedule through the
runtime on such a device (CUDA, HIP): inputs copied once into device memory, each run waited for. Progress —
configurations tried of the total, the best so far, the time left — goes to stderr when it is a terminal, or
when `progress=True`.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import _runtime, executor, runtime, stream, tuning
from .compiler import compile_source, tuning_group
from .numerics import profiles
from .options import CompileOptions
from .selection import backends_for

_KEYS = {"BM": "MB", "BN": "NC", "BK": "KC", "stages": "stages", "vector": "vector"}
_NAMES = {v: k for k, v in _KEYS.items()}
# the runtime backend each target's code runs on
_DEVICES = {"cpu": "cpu", "ptx": "cuda", "amdgpu": "hip"}


@dataclass
class Result:
    best: dict
    seconds: float
    trials: list = field(default_factory=list)   # (config, seconds), in search order
    stored: bool = False   # taken from the store, nothing timed (persist=True, the same space searched before)

    def __getitem__(self, key):
        return self.best[key]


def _inputs(plan, size: int, seed: int, shapes=None) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if shapes is not None and len(shapes) != len(plan.args):
        raise ValueError(f"shapes gives {len(shapes)} shapes for {len(plan.args)} arguments ({', '.join(plan.params)})")
    arrays = []
    for i, vid in enumerate(plan.args):
        shape = list(shapes[i]) if shapes is not None else \
            [int(d) if d.isdigit() else size for d in plan.values[vid].dims]
        arrays.append(rng.standard_normal(shape).astype(executor.numpy_dtype(plan.values[vid])))
    return arrays


def _context(target: str):
    """The runtime context `target`'s code is timed in: the default one for the CPU, else a new one on the
    device the target runs on; a clear error where this machine has none."""
    backend = _DEVICES.get(target)
    if backend is None:
        raise ValueError(f"autotuning times schedules on {', '.join(_DEVICES)} targets, not {target!r}")
    if backend == "cpu":
        return runtime.default_context()
    if backend not in runtime.backends():
        raise ValueError(f"searching {target} schedules times them on a {backend} device, and this machine has "
                         f"none (runtime backends here: {', '.join(runtime.backends())})")
    return _runtime.Context(backend)


def _time(fn, inputs: list, repeat: int, context) -> float:
    """The fastest of `repeat` runs of `fn` on copies of `inputs` (outputs written in place start equal each
    time), after a warm-up run (page faults, first touch, module load)."""
    best = float("inf")
    if fn.device:   # in device memory, copied in once per run outside the timing; each run waited for
        arrays = [runtime.DeviceArray.from_numpy(a, context) for a in inputs]
        fn(*arrays)
        stream.synchronize(context)
        for _ in range(repeat):
            for d, a in zip(arrays, inputs):
                d.copy_from(a)
            stream.synchronize(context)
            t0 = time.perf_counter()
            fn(*arrays)
            stream.synchronize(context)
            best = min(best, time.perf_counter() - t0)
        return best
    fn(*[np.copy(a) for a in inputs])
    for _ in range(repeat):
        trial_inputs = [np.copy(a) for a in inputs]
        t0 = time.perf_counter()
        fn(*trial_inputs)
        best = min(best, time.perf_counter() - t0)
    return best


def _show(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def _report(out, name: str, done: int, total: int, best, started: float) -> None:
    elapsed = time.perf_counter() - started
    left = elapsed / done * (total - done)
    print(f"autotune {name}: {done}/{total} configurations, best {best[1] * 1e3:.3f} ms ({_show(best[0])}), "
          f"about {left:.0f} s left", file=out, flush=True)


def _keys(source: str, filename: str, options: CompileOptions, name: str) -> tuple[list, str]:
    """The function's matmuls' (dims, dtype) and the numerics profile it compiles under (its source's own
    request included), as the schedule phase sees them."""
    md = compile_source(source, filename, options, stop_after="schedule").metadata
    return md["matmuls"].get(name, []), md["numerics"]


def search(kernel, params: dict, objective: str = "runtime", args=None, size: int = 512, repeat: int = 3,
           seed: int = 0, target: str = "cpu", arch: str = "", shapes=None, persist: bool = False,
           progress: bool | None = None) -> Result:
    if objective != "runtime":
        raise ValueError(f"objective must be 'runtime' (the only one measured), got {objective!r}")
    unknown = sorted(set(params) - set(_KEYS))
    if unknown:
        raise ValueError(f"unknown search parameter(s) {unknown} (known: {', '.join(_KEYS)})")
    profile = profiles.current()
    if profiles.deterministic(profile) and len(set(params.get("BK", ()))) > 1:
        raise ValueError(f"the '{profile}' numerics profile searches only schedules that keep every reduction's "
                         f"order, and BK (the K chunk) decides where a GEMM's partial sums are added: give one BK "
                         f"value, not {list(params['BK'])}")
    if persist and "vector" in params:
        raise ValueError("persist=True stores matmul schedules (BM, BN, BK, stages); 'vector' is the vectorize "
                         "phase's, for a whole function: search it without persist")
    context = _context(target)
    with open(kernel.filename, encoding="utf-8") as f:
        source = f.read()
    names = list(params)
    space = {n: [int(v) for v in params[n]] for n in names}
    # trials never read the store: each times exactly its own schedule
    base = CompileOptions(kernels=(kernel.name,), target=target, arch=arch, tuned=False)
    stored_keys = []
    if persist:
        matmuls, numerics = _keys(source, kernel.filename, base, kernel.name)
        if not matmuls:
            raise ValueError(f"'{kernel.name}' has no matmul whose schedule could be remembered")
        grp = tuning_group(dataclasses.replace(base, numerics=numerics, tuned=True), backends_for(base))
        stored_keys = [tuning.record_key(grp, dims, dtype) for dims, dtype in matmuls]
        found = [tuning.record(k) for k in stored_keys]
        if all(r is not None and r.get("space") == space for r in found):
            return Result({_NAMES.get(k, k): v for k, v in found[0]["config"].items()}, found[0]["seconds"], [],
                          stored=True)
    show = sys.stderr.isatty() if progress is None else progress
    combos = list(itertools.product(*(params[n] for n in names)))
    trials = []
    started = time.perf_counter()
    for values in combos:
        config = dict(zip(names, values))
        hints = tuple(sorted((_KEYS[k], int(v)) for k, v in config.items()))
        image = compile_source(source, kernel.filename, dataclasses.replace(base, hints=hints)).image
        program = executor.load(image, context)
        if kernel.name not in program.functions:
            raise ValueError(f"'{kernel.name}' is a SIMT kernel: autotuning searches the schedules of tile "
                             f"programs and @function programs")
        fn = program.function(kernel.name)
        inputs = list(args) if args is not None else _inputs(fn.plan, size, seed, shapes)
        trials.append((config, _time(fn, inputs, repeat, context)))
        if show:
            _report(sys.stderr, kernel.name, len(trials), len(combos), min(trials, key=lambda t: t[1]), started)
    config, seconds = min(trials, key=lambda t: t[1])
    if persist:
        used = [list(a.shape) for a in inputs]
        for k in stored_keys:
            tuning.store(k, {_KEYS[n]: int(v) for n, v in config.items()}, seconds, len(trials), used, space)
    return Result(config, seconds, trials)
