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
when `progress=True`. A schedule the target's kernel does not take (too much shared memory, a tile it has
no form of) is left out of the search, with its reason in `Result.refused`.

On sm_90a a flash attention the fused kernel computes is tuned too: BN is its keys per block, `stages` its
K/V ring's depth (its query tile is not searched: 192 rows at D = 64 with key blocks up to 128, else 128);
its record is keyed `flash_attention:<dtype>` (or `flash_attention_causal:<dtype>`) over (SQ, SK, D).
With persist=True a parameter none of the function's tunable ops takes (BM or BK of a function holding only a
fused attention) is left out of the space.

Where the compiler and the device are on different machines the search splits in three
(`export_candidates`, tessera/tune_run.py, `import_records`): one image per schedule compiled here, timed there
by the runtime alone, the times stored here under the keys of the compile that made the candidates — records
whose compiler hash is not this compiler's are refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import pathlib
import sys
import time
from dataclasses import dataclass, field

from . import executor, tune_run, tuning
from .compiler import compile_source, tuning_group
from .diagnostics import CompileError
from .numerics import profiles
from .options import CompileOptions
from .selection import backends_for
# the runtime-only half: what a split search's timing machine runs too (tessera/tune_run.py)
from .tune_run import context as _context, inputs as _inputs, time_function as _time

_KEYS = {"BM": "MB", "BN": "NC", "BK": "KC", "stages": "stages", "vector": "vector"}
_NAMES = {v: k for k, v in _KEYS.items()}


@dataclass
class Result:
    best: dict
    seconds: float
    trials: list = field(default_factory=list)   # (config, seconds), in search order
    stored: bool = False   # taken from the store, nothing timed (persist=True, the same space searched before)
    refused: list = field(default_factory=list)  # (config, why): schedules the target's kernels do not take

    def __getitem__(self, key):
        return self.best[key]


def _keys(source: str, filename: str, options: CompileOptions, name: str) -> tuple[list, str]:
    """The function's tunable ops' (dims, dtype) and the numerics profile it compiles under (its source's own
    request included), as the schedule phase sees them."""
    md = compile_source(source, filename, options, stop_after="schedule").metadata
    return md["matmuls"].get(name, []), md["numerics"]


@dataclass
class _Search:
    """A search's checked space, its trials' compile options and the store's keys of its tunable ops."""
    source: str
    names: list
    space: dict
    base: CompileOptions
    keys: list

    def configs(self) -> list[dict]:
        return [dict(zip(self.names, values)) for values in itertools.product(*self.space.values())]

    def compile(self, kernel, config: dict) -> tuple[bytes | None, str]:
        """`config`'s image, or None and why the target's kernels do not take it."""
        hints = tuple(sorted((_KEYS[k], int(v)) for k, v in config.items()))
        try:
            return compile_source(self.source, kernel.filename, dataclasses.replace(self.base, hints=hints)).image, ""
        except CompileError as e:
            return None, str(e)


def _prepare(kernel, params: dict, target: str, arch: str, persist: bool) -> _Search:
    unknown = sorted(set(params) - set(_KEYS))
    if unknown:
        raise ValueError(f"unknown search parameter(s) {unknown} (known: {', '.join(_KEYS)})")
    if target not in tune_run.DEVICES:
        raise ValueError(f"autotuning times schedules on {', '.join(tune_run.DEVICES)} targets, not {target!r}")
    profile = profiles.current()
    if profiles.deterministic(profile) and len(set(params.get("BK", ()))) > 1:
        raise ValueError(f"the '{profile}' numerics profile searches only schedules that keep every reduction's "
                         f"order, and BK (the K chunk) decides where a GEMM's partial sums are added: give one BK "
                         f"value, not {list(params['BK'])}")
    if persist and "vector" in params:
        raise ValueError("persist=True stores matmul schedules (BM, BN, BK, stages); 'vector' is the vectorize "
                         "phase's, for a whole function: search it without persist")
    with open(kernel.filename, encoding="utf-8") as f:
        source = f.read()
    names = list(params)
    space = {n: [int(v) for v in params[n]] for n in names}
    # trials never read the store: each times exactly its own schedule
    base = CompileOptions(kernels=(kernel.name,), target=target, arch=arch, tuned=False)
    keys = []
    if persist:
        tunable, numerics = _keys(source, kernel.filename, base, kernel.name)
        if not tunable:
            raise ValueError(f"'{kernel.name}' has no matmul (or fused attention) whose schedule could be "
                             f"remembered")
        grp = tuning_group(dataclasses.replace(base, numerics=numerics, tuned=True), backends_for(base))
        keys = [tuning.record_key(grp, dims, dtype) for dims, dtype in tunable]
        # a parameter no tunable op takes (BM, BK of a fused attention) would time one schedule again and again
        taken = {n for k in keys for n in tuning.settable(k)}
        names = [n for n in names if _KEYS[n] in taken]
        space = {n: space[n] for n in names}
        if not names:
            raise ValueError(f"'{kernel.name}' has only fused attentions, whose schedule is BN (keys per block) "
                             f"and stages: search those")
    return _Search(source, names, space, base, keys)


def _store(keys: list, config: dict, seconds: float, tried: int, shapes: list, space: dict,
           device: str | None = None) -> None:
    """Stores `config` (search names) for each key, as much of it as the key's op takes."""
    for k in keys:
        settable = tuning.settable(k)
        tuning.store(k, {_KEYS[n]: int(v) for n, v in config.items() if _KEYS[n] in settable}, seconds, tried,
                     shapes, space, device)


def _stored(keys: list, space: dict) -> Result | None:
    """The result a search over `space` stored for every one of `keys` before, or None."""
    found = [tuning.record(k) for k in keys]
    if not keys or not all(r is not None and r.get("space") == space for r in found):
        return None
    first = max(found, key=lambda r: len(r["config"]))   # a matmul's holds what an attention's leaves out
    return Result({_NAMES.get(k, k): v for k, v in first["config"].items()}, first["seconds"], [], stored=True)


def search(kernel, params: dict, objective: str = "runtime", args=None, size: int = 512, repeat: int = 3,
           seed: int = 0, target: str = "cpu", arch: str = "", shapes=None, persist: bool = False,
           progress: bool | None = None) -> Result:
    if objective != "runtime":
        raise ValueError(f"objective must be 'runtime' (the only one measured), got {objective!r}")
    plan = _prepare(kernel, params, target, arch, persist)
    context = _context(target)
    if persist and (found := _stored(plan.keys, plan.space)) is not None:
        return found
    show = sys.stderr.isatty() if progress is None else progress
    configs = plan.configs()
    trials, refused = [], []
    started = time.perf_counter()
    for config in configs:
        image, why = plan.compile(kernel, config)
        if image is None:
            refused.append((config, why))
            continue
        program = executor.load(image, context)
        if kernel.name not in program.functions:
            raise ValueError(f"'{kernel.name}' is a SIMT kernel: autotuning searches the schedules of tile "
                             f"programs and @function programs")
        fn = program.function(kernel.name)
        inputs = list(args) if args is not None else _inputs(fn.plan, size, seed, shapes)
        trials.append((config, _time(fn, inputs, repeat, context)))
        if show:
            tune_run.report(sys.stderr, kernel.name, len(trials) + len(refused), len(configs),
                            min(trials, key=lambda t: t[1]), started)
    if not trials:
        raise ValueError(f"the target's kernels take none of the {len(configs)} schedules searched; the first: "
                         f"{refused[0][1]}")
    config, seconds = min(trials, key=lambda t: t[1])
    if persist:
        _store(plan.keys, config, seconds, len(trials), [list(a.shape) for a in inputs], plan.space)
    return Result(config, seconds, trials, refused=refused)


def export_candidates(kernel, params: dict, directory, target: str = "cpu", arch: str = "", size: int = 512,
                      repeat: int = 3, seed: int = 0, shapes=None) -> dict:
    """The compiling half of a split search: one image per schedule of `params` in `directory` (and the
    schedules the target refuses, with why), named by `candidates.json` with the store's keys of this compile;
    `python -m tessera.tune_run directory` times them where the device is. Returns the candidates document."""
    plan = _prepare(kernel, params, target, arch, persist=True)
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    candidates, refused = [], []
    for i, config in enumerate(plan.configs()):
        image, why = plan.compile(kernel, config)
        if image is None:
            refused.append({"config": config, "why": why})
            continue
        name = f"candidate-{i:03d}.tessera"
        (directory / name).write_bytes(image)
        candidates.append({"config": config, "image": name, "sha256": hashlib.sha256(image).hexdigest()})
    if not candidates:
        raise ValueError(f"the target's kernels take none of the {len(refused)} schedules searched; the first: "
                         f"{refused[0]['why']}")
    found = {"format": tune_run.CANDIDATES_FORMAT, "version": tune_run.VERSION, "function": kernel.name,
             "target": target, "keys": plan.keys, "space": plan.space, "size": size, "seed": seed,
             "repeat": repeat, "shapes": [list(s) for s in shapes] if shapes is not None else None,
             "candidates": candidates, "refused": refused}
    (directory / tune_run.CANDIDATES).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n",
                                                  encoding="utf-8")
    return found


def current_group(key: dict) -> dict | None:
    """The target, arch, profile and compiler hash this compiler, on this machine, keys `key`'s target, arch
    and profile under (tuning.group's), or None for a target or profile it does not know."""
    arch = "" if key["arch"] == "default" else key["arch"]
    try:
        options = CompileOptions(target=key["target"], numerics=key["numerics"],
                                 **({"cpu": arch} if key["target"] == "cpu" else {"arch": arch}))
        return tuning_group(options, backends_for(options))
    except (ValueError, TypeError, KeyError, CompileError):
        return None


def _mismatch(key: dict) -> str:
    """How `key` differs from this compiler's key of its target, arch and profile ("" where it does not)."""
    mine = current_group(key)
    if mine is None:
        return (f"{key.get('target')} {key.get('arch')} under the '{key.get('numerics')}' profile, which this "
                f"compiler does not know")
    theirs = {n: key.get(n) for n in mine}
    return ", ".join(f"{n} {str(theirs[n])[:16]} (this compiler: {str(mine[n])[:16]})"
                     for n in mine if theirs[n] != mine[n])


def _same_images(records: dict, candidates: dict) -> list | None:
    """`candidates`' keys (an export by this compiler) where they name the ops `records` timed and every
    image timed is one of theirs, byte for byte, of the same schedule — code this compiler makes too, so the
    times hold for it; else None."""
    ops = lambda keys: [(k.get("target"), k.get("arch"), k.get("numerics"), k.get("bucket"), k.get("dtype"))
                        for k in keys]   # noqa: E731
    made = {(json.dumps(c["config"], sort_keys=True), c["sha256"]) for c in candidates.get("candidates", ())}
    if ops(candidates.get("keys", [])) != ops(records["keys"]) or \
            any(_mismatch(k) for k in candidates["keys"]) or \
            any((json.dumps(t.get("config"), sort_keys=True), t.get("sha256")) not in made for t in records["trials"]):
        return None
    return candidates["keys"]


def import_records(records: dict, candidates: dict | None = None) -> list[tuple[dict, dict]]:
    """The last half of a split search: stores the fastest trial of `records` (python -m tessera.tune_run's
    document) under each of its keys, after checking that they are this compiler's — a record timed on
    candidates another compiler (or build machine, or backend's tools) made is refused, not stored, unless
    `candidates` (this compiler's export of the same search) holds every image timed, byte for byte: then under
    its keys. Returns (key, config) per key stored."""
    if not isinstance(records, dict) or records.get("format") != tune_run.RECORDS_FORMAT or \
            records.get("version") != tune_run.VERSION:
        raise ValueError(f"not a version {tune_run.VERSION} records file of python -m tessera.tune_run")
    keys, space, trials = records.get("keys"), records.get("space"), records.get("trials")
    if not keys or not isinstance(space, dict) or not trials or not all(isinstance(t, dict) for t in trials):
        raise ValueError("the records file names no key, search space or timed candidate")
    differ = "; ".join(filter(None, map(_mismatch, keys)))
    if differ:
        keys = _same_images(records, candidates) if candidates is not None else None
        if keys is None:
            again = "the images of the candidates given are not those timed" if candidates is not None else \
                "export the candidates again with this compiler (tessera-tune --export-candidates) and time them"
            raise ValueError(f"the records of {records.get('function')} were timed on candidates that another "
                             f"compile made ({differ}): {again}; nothing imported")
    def timed(t, name):
        return isinstance(t.get(name), (int, float)) and math.isfinite(t[name]) and t[name] > 0
    for t in trials:
        config = t.get("config")
        if not isinstance(config, dict) or set(config) - set(_KEYS) or "vector" in config or \
                any(v not in space.get(n, ()) for n, v in config.items()) or not timed(t, "seconds") or \
                ("confirmed" in t and not timed(t, "confirmed")):
            raise ValueError(f"the records file's trial {t!r} is not a schedule of its search space {space} with "
                             f"a time; nothing imported")
    best = tune_run.fastest(trials)
    _store(keys, best["config"], best.get("confirmed", best["seconds"]), len(trials), records.get("shapes"), space,
           records.get("device"))
    return [(k, tuning.lookup(k)) for k in keys]
