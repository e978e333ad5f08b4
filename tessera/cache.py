"""The compile cache: images stored by the hash of everything that determines them.

The key (`key`) covers:
  - the compiler itself: the bytes of every module of the package and its mapped subpackages, and the
    versions of MLIR (torch_mlir) and LLVM (llvmlite) it uses;
  - the source text and its file name (locations are part of the IR);
  - the compile options (`CompileOptions.hash()`: target, kernels, cpu, arch, opt_level, warp_size, hints,
    tuned, numerics profile);
  - each backend's hash (backends/contract.py `Backend.hash`): its own options, which carry what it reads
    from the machine (the CPU GEMM cost model's thread count, from TESSERA_NUM_THREADS or the core count,
    and cache sizes), the identity of the external tools whose output lands in the image or that decide
    whether one is made, and for the CPU the build machine (`native` code and every CPU target's GEMM
    register tile are fitted to it);
  - the stored autotuning results the schedule phase may take (tuning.py `group_digest`, which
    compiler.compile_source adds to the backends' hashes): a stored, changed or cleared one recompiles.

Environment variables read at compile time, and where the key covers each. The ones that name tools change
an image only through the tool found, so the key holds that tool's identity — its path and release — as
the backend's `tool_versions()` reports it, never the variable itself:
  TESSERA_PTXAS        ptxas, whose registers/shared memory/spills go into the PTX kernels' records
                       (backends/ptx/ptxas.py `version`)
  CC                   the CPU shared object's linker driver (backends/cpu/link.py)
  TESSERA_LD_LLD       ld.lld, which links AMDGPU code objects (backends/amdgpu/link.py `identity`)
  TESSERA_SPIRV_VAL    spirv-val, which refuses a module it finds invalid (backends/spirv/spirv_val.py)
  TESSERA_NUM_THREADS  the CPU backend's options (the GEMM blocking fits the thread count)
  TESSERA_CACHE, TESSERA_CACHE_DIR   whether and where the cache is; an image only through the stored
                       autotuning results the directory holds (tuning.py), whose digest is in the key
  TESSERA_TUNE_DIR     where those results are instead (default <cache dir>/tune): the same digest
  TESSERA_SM90_*       benchmarks' overrides of the sm_90a kernels' settings: the PTX backend's options
                       (every name in backends/ptx/options.py OVERRIDE_ENVS), so a variant's image is cached apart
The numerics profile is no environment variable: `numerics.profile()` sets `CompileOptions.numerics`.

An entry is the image after a header naming its key and the image's sha256 (`_entry`): a look-up serves an
entry only when both match, so an empty, truncated or damaged file, an entry of another key, or an image
planted under the key without its header is a miss, and the compile that follows replaces it. Entries are
written to a temporary file and renamed into place, so concurrent compiles of the same program never see a
partial entry; the last writer wins with identical bytes, and a failed write (a full disk) removes its
temporary file.

Who may write the cache decides which code a compile returns (and a launch loads), so the cache is used only
in directories of this user that no one else may write: missing ones are created 0700 whatever the umask,
and a directory (or entry) owned by another user, or writable by group or others, turns the cache off with a
`CacheWarning` naming it and what to do. `TESSERA_CACHE_DIR` moves the cache (default ~/.cache/tessera);
`TESSERA_CACHE=0` turns it off.

Nothing here imports MLIR or a backend: the caller hands over the backends' hashes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import pathlib
import stat
import tempfile
import warnings

_PACKAGE = pathlib.Path(__file__).resolve().parent


def enabled() -> bool:
    return os.environ.get("TESSERA_CACHE", "1") not in ("0", "off", "false", "no")


def directory() -> pathlib.Path:
    root = os.environ.get("TESSERA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tessera")
    return pathlib.Path(root)


def _source_roots() -> list[pathlib.Path]:
    """Where the compiler's modules live: the package, and its subpackages wherever they are mapped from
    (in a source checkout or an editable install, dialects/, passes/ … sit beside tessera/)."""
    roots = {_PACKAGE}
    for sub in ("dialects", "passes", "backends", "tools"):
        spec = importlib.util.find_spec(f"tessera.{sub}")
        if spec is not None and spec.submodule_search_locations:
            roots.add(pathlib.Path(list(spec.submodule_search_locations)[0]).resolve())
    return sorted(roots)


@functools.cache
def compiler_fingerprint() -> str:
    h = hashlib.sha256()
    for root in _source_roots():
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    for package in ("torch_mlir", "llvmlite"):
        h.update(_installed_version(package).encode())
    return h.hexdigest()


def _installed_version(package: str) -> str:
    """`name-version` from the package's dist-info folder — importlib.metadata would cost a fifth of a
    second of imports, which a cache hit cannot afford."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return f"{package}=none"
    site = pathlib.Path(list(spec.submodule_search_locations)[0]).parent
    infos = sorted(p.name for p in site.glob(f"{package}-*.dist-info"))
    return infos[-1] if infos else f"{package}=unknown"


def key(source: str, filename: str, options, backend_hashes: list[str]) -> str:
    """The cache key of compiling `source` (named `filename`) with `options` by backends of these hashes
    (`[b.hash() for b in backends]`, in the order of the options' targets)."""
    h = hashlib.sha256()
    parts = (compiler_fingerprint(), filename, options.hash(), *backend_hashes)
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    h.update(source.encode())
    return h.hexdigest()


MAGIC = b"TSRCACHE"  # then the key (64 hex digits), the image's sha256 (32 bytes), the image
_HEADER = len(MAGIC) + 64 + 32


class CacheWarning(UserWarning):
    """The cache is not used: its directory is not safe to take code from."""


def _entry(k: str, image: bytes) -> bytes:
    return MAGIC + k.encode() + hashlib.sha256(image).digest() + image


def _image(k: str, entry: bytes) -> bytes | None:
    """The image `entry` holds for key `k`; None when it is not a whole, undamaged entry of that key."""
    image = entry[_HEADER:]
    if len(entry) < _HEADER or entry[:_HEADER - 32] != MAGIC + k.encode() or \
            entry[_HEADER - 32:_HEADER] != hashlib.sha256(image).digest():
        return None
    return image


def _unsafe(st: os.stat_result, what: str, path) -> bool:
    """Whether `st` (of `path`, a cache directory or entry) is another user's or writable by others: then
    warns, and the cache is not used."""
    if st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    who = "owned by another user" if st.st_uid != os.geteuid() else "writable by group or others"
    warnings.warn(f"compile cache not used: {what} {path} is {who}, so others could plant code in it "
                  f"(use a directory of your own, mode 0700: set TESSERA_CACHE_DIR, or TESSERA_CACHE=0)",
                  CacheWarning)
    return True


def _make_private(d: pathlib.Path) -> None:
    """Creates `d` and its missing parents 0700, whatever the umask."""
    missing = []
    while not d.exists():
        missing.append(d)
        d = d.parent
    for m in reversed(missing):
        try:
            m.mkdir(mode=0o700)
        except FileExistsError:
            continue  # a concurrent compile made it
        os.chmod(m, 0o700)


def _safe_dir(d: pathlib.Path, create: bool) -> bool:
    """Whether directory `d` (the cache's, or one of its subdirectories) exists, or was created, and may hold
    the cache."""
    try:
        if create:
            _make_private(d)
        st = os.stat(d)
    except OSError:
        return False  # missing, or not ours to create: a cache that cannot be used is only slower
    return stat.S_ISDIR(st.st_mode) and not _unsafe(st, "directory", d)


def _path(k: str) -> pathlib.Path:
    return directory() / k[:2] / f"{k}.tessera"


def lookup(k: str) -> bytes | None:
    """The image stored under key `k`, or None (a miss): missing, damaged, of another key, or in an unsafe
    directory."""
    path = _path(k)
    if not path.exists() or not (_safe_dir(path.parent.parent, False) and _safe_dir(path.parent, False)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if _unsafe(os.fstat(fd), "entry", path):
            return None
        return _image(k, f.read())


def store(k: str, image: bytes) -> None:
    path = _path(k)
    if not (_safe_dir(path.parent.parent, True) and _safe_dir(path.parent, True)):
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_entry(k, image))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written (a full disk) is only slower, never wrong
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # there only when the write failed: once renamed it is gone
