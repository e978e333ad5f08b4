"""The autotuning store: the schedules `autotune.search(..., persist=True)` (or `tessera-tune`) found fastest,
kept in the cache directory so that later compiles, in any process, use them without timing anything.

A record holds one matmul schedule (the schedule phase's MB, NC, MC, KC, stages) for one key:
  - the target and its arch (`CompileOptions.arch`, or `cpu` for the CPU target);
  - the shape bucket: M, N, K each rounded up to a power of two ("?" for an extent known only at run time);
  - the dtype: the operands' and the result's element types (`bf16xbf16->f32`);
  - the numerics profile the compile runs under (the source's own request included);
  - the compiler hash: cache.py's fingerprint of the package's modules and MLIR/LLVM versions, and the
    backend's hash (its options, tools and, for the CPU, the build machine and worker-thread count), so a
    new compiler or another machine never reads a schedule timed for an old one.

Records of one (target, arch, compiler hash, profile) share a folder, `<cache dir>/tune/<group>/`, one JSON
file per key, named by the key's hash. `group_digest` hashes the records of a target, arch and compiler hash:
it joins the compile cache's key, so a changed record recompiles.

Records are written as compile cache entries are (cache.py): to a temporary file renamed into place, in
private directories only. A record that cannot be read, of another version, or whose key is not the one its
name says is ignored with a `TuningWarning` (the compile uses the cost model), never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import tempfile
import warnings

from . import cache

VERSION = 1
# the schedule phase's names of what a record may set (options.HINT_LIMITS's matmul entries); a flash
# attention's record (dtype `flash_attention:…` or `flash_attention_causal:…`) sets its keys per block and
# stages only (passes/graph_phases.py)
KEYS = ("MB", "NC", "MC", "KC", "stages")
ATTENTION_KEYS = ("NC", "stages")


def settable(key: dict) -> tuple[str, ...]:
    """The schedule names a record of `key` may set."""
    return ATTENTION_KEYS if key["dtype"].startswith("flash_attention") else KEYS


class TuningWarning(UserWarning):
    """A stored autotuning record was ignored (damaged, of another version or key)."""


def directory() -> pathlib.Path:
    """`<cache dir>/tune`, or TESSERA_TUNE_DIR: the test suites point it at an empty place, so that what a
    developer tuned never changes the schedules their tests check."""
    return pathlib.Path(os.environ.get("TESSERA_TUNE_DIR") or cache.directory() / "tune")


def bucket(extent: int | None) -> str:
    """An extent's bucket: the next power of two, or "?" when only run time knows it."""
    if extent is None:
        return "?"
    return str(1 << max(0, int(extent) - 1).bit_length())


def group(target: str, arch: str, numerics: str, backend_hash: str) -> dict:
    """What a record's key holds beyond the matmul's own shape and dtype."""
    return {"target": target, "arch": arch or "default", "numerics": numerics,
            "compiler": hashlib.sha256(f"{cache.compiler_fingerprint()}\0{backend_hash}".encode()).hexdigest()}


def record_key(grp: dict, dims: tuple, dtype: str) -> dict:
    return {**grp, "bucket": "x".join(bucket(d) for d in dims), "dtype": dtype}


def _prefix(grp: dict) -> str:
    """The start of the folder names of `grp`'s target, arch and compiler hash, whatever the profile."""
    name = f"{grp['target']}-{grp['arch']}-{grp['compiler'][:24]}-"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _folder(grp: dict) -> pathlib.Path:
    return directory() / (_prefix(grp) + "".join(c if c.isalnum() else "_" for c in grp["numerics"]))


def _path(key: dict) -> pathlib.Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return _folder(key) / f"{digest[:32]}.json"


def _read(path: pathlib.Path) -> dict | None:
    """The record at `path`, or None with a TuningWarning when it is not a whole record of this version
    filed under its own key."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            if cache._unsafe(os.fstat(f.fileno()), "tuning record", path):
                return None
            record = json.loads(f.read().decode())
    except (OSError, ValueError) as e:
        warnings.warn(f"autotuning record {path} ignored: {e}", TuningWarning)
        return None
    if not isinstance(record, dict) or record.get("version") != VERSION:
        found = record.get("version") if isinstance(record, dict) else type(record).__name__
        warnings.warn(f"autotuning record {path} ignored: version {found}, this compiler reads {VERSION}",
                      TuningWarning)
        return None
    key, config = record.get("key"), record.get("config")
    if not isinstance(key, dict) or not isinstance(key.get("dtype"), str) or _path(key).name != path.name or \
            not isinstance(config, dict) or not config or \
            not all(k in settable(key) and type(v) is int and 0 < v <= 4096 for k, v in config.items()):
        warnings.warn(f"autotuning record {path} ignored: its key or configuration is not one this compiler "
                      f"wrote under that name", TuningWarning)
        return None
    return record


def record(key: dict) -> dict | None:
    """The stored record of `key` (record_key's): its config, seconds, tried, shapes and space; or None."""
    path = _path(key)
    if not path.exists() or not (cache._safe_dir(directory(), False) and cache._safe_dir(path.parent, False)):
        return None
    found = _read(path)
    return found if found is not None and found["key"] == key else None


def lookup(key: dict) -> dict | None:
    """The stored schedule for `key` (record_key's), or None."""
    found = record(key)
    return found["config"] if found is not None else None


def store(key: dict, config: dict, seconds: float, tried: int, shapes: list | None = None,
          space: dict | None = None, device: str | None = None) -> pathlib.Path | None:
    """Writes the record of `config` (schedule-phase names, settable(key)'s) for `key`, found fastest of
    `tried` schedules of the search `space` on inputs of `shapes`, timed on `device` (None: this machine);
    returns its path, or None when the store's directory is not usable (then nothing is remembered, as with
    the compile cache)."""
    path = _path(key)
    if not (cache._safe_dir(directory(), True) and cache._safe_dir(path.parent, True)):
        return None
    record = {"version": VERSION, "key": key, "config": {k: int(v) for k, v in config.items()},
              "seconds": seconds, "tried": tried, "shapes": shapes, "space": space,
              **({"device": device} if device else {})}
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # there only when the write failed
    return path


def group_digest(grp: dict) -> str:
    """A hash of every record stored for `grp`'s target, arch and compiler hash under any profile ("" when
    none): part of the compile cache's key, which is made before the source says which profile it asks for."""
    root = directory()
    if not root.is_dir():
        return ""
    h = hashlib.sha256()
    found = False
    for path in sorted(root.glob(_prefix(grp) + "*/*.json")):
        with contextlib.suppress(OSError):
            h.update(f"{path.parent.name}/{path.name}".encode() + b"\0" + path.read_bytes() + b"\0")
            found = True
    return h.hexdigest() if found else ""


def records() -> list[tuple[pathlib.Path, dict]]:
    """Every readable record in the store (the others warn)."""
    root = directory()
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.glob("*/*.json")):
        record = _read(path)
        if record is not None:
            out.append((path, record))
    return out


def clear() -> int:
    """Removes every record (and temporary file) of the store; returns how many records were removed."""
    root = directory()
    removed = 0
    if not root.is_dir():
        return 0
    for path in sorted(root.glob("*/*")):
        if path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()
                removed += path.suffix == ".json"
    for folder in root.iterdir():
        with contextlib.suppress(OSError):
            folder.rmdir()
    return removed
