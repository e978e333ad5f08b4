"""tessera-tune: autotunes a source file's function for given shapes and stores the fastest schedule, which
later compiles of a matmul of the same key take (tessera/tuning.py, docs/pipeline.md "Hints, specializations
and autotuning").

    tessera-tune model.py mlp --shape 1024x1024 --shape 1024x1024 --param BN=64,128,256 --param BK=128,256
    tessera-tune --list          # the stored results
    tessera-tune --clear         # forget them all

Without --param the space is BM and BN of 64, 128 and 256 and BK of 128 and 256 (BK left to the cost model
under a deterministic profile, which refuses several K chunks); for a GPU target (ptx, amdgpu) BM of 64 and
128, BN of 64, 128 and 256 and stages of 3, 4 and 6 — the sm_90a GEMM's tile and ring, and for a fused
attention its keys per block and ring (BM left as it is).

Where the device is on another machine, without a compiler, the search splits in three:

    tessera-tune model.py mm --target ptx --arch sm_90a --export-candidates DIR   # an image per schedule
    python -m tessera.tune_run DIR --out records.json                             # there: times them
    tessera-tune --import records.json                                            # here: stores the fastest

The import refuses records whose keys (the compiler hash above all) are not this compiler's; where the
compiler changed since the export, `--candidates DIR2` (a new export of the same search) vouches for them when
DIR2's images are byte for byte those timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import types

from .. import autotune, tune_run, tuning
from ..numerics import profiles
from .errors import ToolError, read_text, tool_main

DEFAULT_SPACE = {"BM": [64, 128, 256], "BN": [64, 128, 256], "BK": [128, 256]}
DEFAULT_GPU_SPACE = {"BM": [64, 128], "BN": [64, 128, 256], "stages": [3, 4, 6]}


def _shape(text: str) -> list[int]:
    try:
        dims = [int(d) for d in text.lower().split("x")]
    except ValueError:
        dims = []
    if not dims or any(d < 0 for d in dims):
        raise ToolError(f"--shape {text!r}: give the extents joined by x (1024x512)")
    return dims


def _param(text: str) -> tuple[str, list[int]]:
    name, _, values = text.partition("=")
    try:
        return name, [int(v) for v in values.split(",")]
    except ValueError:
        raise ToolError(f"--param {text!r}: give NAME=V1,V2,… (BN=64,128)") from None


def _current(key: dict) -> bool:
    """Whether this compiler, on this machine, reads the record of `key` (its compiler hash is today's)."""
    mine = autotune.current_group(key)
    return mine is not None and mine["compiler"] == key["compiler"]


def _list() -> None:
    found = tuning.records()
    if not found:
        print(f"no stored autotuning results in {tuning.directory()}")
    for path, r in found:
        k = r["key"]
        config = " ".join(f"{n}={v}" for n, v in sorted(r["config"].items()))
        used = "" if _current(k) else ", another compiler's: not used"
        device = f" on {r['device']}" if r.get("device") else ""
        print(f"{k['target']} {k['arch']} {k['numerics']} {k['bucket']} {k['dtype']}: {config} "
              f"({r['seconds'] * 1e3:.3f} ms{device}, best of {r['tried']}; compiler {k['compiler'][:12]}{used}) "
              f"{path}")


def _import(path: str, candidates: str | None) -> None:
    try:
        records = json.loads(read_text(path))
        fresh = json.loads(read_text(f"{candidates}/{tune_run.CANDIDATES}")) if candidates else None
        stored = autotune.import_records(records, fresh)
    except ValueError as e:
        raise ToolError(f"{path}: {e}") from None
    for key, config in stored:
        shown = " ".join(f"{n}={v}" for n, v in sorted((config or {}).items())) or "not stored (no usable store)"
        print(f"{key['target']} {key['arch']} {key['bucket']} {key['dtype']}: {shown} (timed on "
              f"{records.get('device')}, best of {len(records['trials'])})")


@tool_main("tessera-tune")
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tessera-tune", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", nargs="?", help="the source file")
    p.add_argument("function", nargs="?", help="the @function (or tile program) to tune")
    p.add_argument("--shape", action="append", type=_shape, help="one argument's extents, in order (1024x512)")
    p.add_argument("--param", action="append", type=_param, help="NAME=V1,V2,… (BM, BN, BK, stages)")
    p.add_argument("--target", default="cpu", help="cpu (default), ptx or amdgpu: timed on such a device")
    p.add_argument("--arch", default="", help="the GPU architecture (sm_90a, gfx942)")
    p.add_argument("--size", type=int, default=512, help="symbolic extents without --shape (default 512)")
    p.add_argument("--repeat", type=int, default=3, help="runs per schedule, the fastest kept (default 3)")
    p.add_argument("--profile", default="", help="the numerics profile (default: fast)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--export-candidates", metavar="DIR",
                   help="compile each schedule into DIR for python -m tessera.tune_run to time elsewhere")
    p.add_argument("--import", dest="records", metavar="FILE",
                   help="store the fastest of python -m tessera.tune_run's records")
    p.add_argument("--candidates", metavar="DIR",
                   help="with --import: this compiler's export of the same search, whose images, where they "
                        "are those timed, vouch for records another compile's keys name")
    p.add_argument("--list", action="store_true", help="show the stored results")
    p.add_argument("--clear", action="store_true", help="remove every stored result")
    a = p.parse_args(argv)
    if a.list or a.clear or a.records:
        if a.file:
            raise ToolError("--list, --clear and --import take no source file")
        if a.records:
            _import(a.records, a.candidates)
            return 0
        if a.clear:
            print(f"removed {tuning.clear()} stored autotuning result(s) from {tuning.directory()}")
        else:
            _list()
        return 0
    if not a.file or not a.function:
        raise ToolError("give a source file and the function to tune (or --list, --clear)")
    read_text(a.file)  # a missing, unreadable or non-UTF-8 file said as such
    with profiles.profile(a.profile or profiles.current()):
        default = DEFAULT_SPACE if a.target == "cpu" else DEFAULT_GPU_SPACE
        space = dict(a.param) if a.param else \
            {k: v for k, v in default.items() if k != "BK" or not profiles.deterministic(profiles.current())}
        kernel = types.SimpleNamespace(filename=a.file, name=a.function)
        try:
            if a.export_candidates:
                found = autotune.export_candidates(kernel, space, a.export_candidates, target=a.target,
                                                   arch=a.arch, size=a.size, repeat=a.repeat, shapes=a.shape)
                print(f"{a.function}: {len(found['candidates'])} candidate(s) in {a.export_candidates} "
                      f"({len(found['refused'])} schedule(s) the target refuses); time them with "
                      f"python -m tessera.tune_run {a.export_candidates} --out records.json")
                return 0
            result = autotune.search(kernel, space,
                                     size=a.size, repeat=a.repeat, target=a.target, arch=a.arch, shapes=a.shape,
                                     persist=True, progress=not a.quiet)
        except ValueError as e:
            raise ToolError(str(e)) from None
    config = " ".join(f"{k}={v}" for k, v in result.best.items())
    how = "stored before, nothing timed" if result.stored else f"best of {len(result.trials)}, stored"
    print(f"{a.function}: {config} ({result.seconds * 1e3:.3f} ms; {how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
