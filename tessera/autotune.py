"""Autotuning (spec/execution-model.md §5): compile a kernel once per schedule in a search space, time each
on the target, keep the fastest.

    config = autotune.search(kernel=gemm_tc, params={"BM": [64, 128], "BN": [64, 128], "BK": [16, 32]},
                             objective="runtime")

`params` names tile sizes as the tile language does (BM, BN, BK; also `stages`, `vector`) and applies to every
GEMM of the program (the schedule phase's `MB`, `NC`, `KC`). Inputs come from `args`, or are random tensors
whose symbolic extents are `size` (default 512). Tile programs and `@function` programs are tuned on the CPU
through their launch plans; each trial is an ordinary, cached compilation.

Under a deterministic numerics profile (`numerics.profile("deterministic")` or "strict" around the search) only
schedules that keep every reduction's order are searched: BK, the K chunk, decides where the CPU GEMM adds a
chunk's partial sums into C (backends/cpu/gemm.py), so its result's rounding; a search over several BK values
is refused. BM, BN, stages and vector tile and stage the output and the copies, never a reduction.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from . import executor
from .compiler import compile_source
from .numerics import profiles
from .options import CompileOptions

_KEYS = {"BM": "MB", "BN": "NC", "BK": "KC", "stages": "stages", "vector": "vector"}


@dataclass
class Result:
    best: dict
    seconds: float
    trials: list = field(default_factory=list)   # (config, seconds), in search order

    def __getitem__(self, key):
        return self.best[key]


def _inputs(plan, size: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for vid in plan.args:
        shape = [int(d) if d.isdigit() else size for d in plan.values[vid].dims]
        arrays.append(rng.standard_normal(shape).astype(executor.numpy_dtype(plan.values[vid])))
    return arrays


def search(kernel, params: dict, objective: str = "runtime", args=None, size: int = 512, repeat: int = 3,
           seed: int = 0) -> Result:
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
    with open(kernel.filename, encoding="utf-8") as f:
        source = f.read()
    names = list(params)
    trials = []
    for values in itertools.product(*(params[n] for n in names)):
        config = dict(zip(names, values))
        hints = tuple(sorted((_KEYS[k], int(v)) for k, v in config.items()))
        image = compile_source(source, kernel.filename, CompileOptions(kernels=(kernel.name,), hints=hints)).image
        program = executor.load(image)
        if kernel.name not in program.functions:
            raise ValueError(f"'{kernel.name}' is a SIMT kernel: autotuning searches the schedules of tile "
                             f"programs and @function programs")
        fn = program.function(kernel.name)
        inputs = list(args) if args is not None else _inputs(fn.plan, size, seed)
        fn(*[np.copy(a) for a in inputs])   # warm-up (page faults, first-touch)
        best = float("inf")
        for _ in range(repeat):
            trial_inputs = [np.copy(a) for a in inputs]   # outputs written in place start equal each time
            t0 = time.perf_counter()
            fn(*trial_inputs)
            best = min(best, time.perf_counter() - t0)
        trials.append((config, best))
    config, seconds = min(trials, key=lambda t: t[1])
    return Result(config, seconds, trials)
