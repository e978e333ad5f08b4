"""The compile cache: images stored by the hash of everything that determines them.

The key (`key`) covers:
  - the compiler itself: the bytes of every module of the package and its mapped subpackages, and the
    versions of MLIR (torch_mlir) and LLVM (llvmlite) it uses;
  - the source text and its file name (locations are part of the IR);
  - the compile options (`CompileOptions.hash()`: target, kernels, cpu, arch, opt_level, warp_size, hints,
    numerics profile);
  - each backend's hash (backends/contract.py `Backend.hash`): its own options, which carry what it reads
    from the machine (the CPU GEMM cost model's thread count, from TESSERA_NUM_THREADS or the core count,
    and cache sizes), the identity of the external tools whose output lands in the image or that decide
    whether one is made, and for the CPU the build machine (`native` code and every CPU target's GEMM
    register tile are fitted to it).

Environment variables read at compile time, and where the key covers each. The ones that name tools change
an image only through the tool found, so the key holds that tool's identity — its path and release — as
the backend's `tool_versions()` reports it, never the variable itself:
  TESSERA_PTXAS        ptxas, whose registers/shared memory/spills go into the PTX kernels' records
                       (backends/ptx/ptxas.py `version`)
  CC                   the CPU shared object's linker driver (backends/cpu/link.py)
  TESSERA_LD_LLD       ld.lld, which links AMDGPU code objects (backends/amdgpu/link.py `identity`)
  TESSERA_SPIRV_VAL    spirv-val, which refuses a module it finds invalid (backends/spirv/spirv_val.py)
  TESSERA_NUM_THREADS  the CPU backend's options (the GEMM blocking fits the thread count)
  TESSERA_CACHE, TESSERA_CACHE_DIR   whether and where the cache is; never an image
The numerics profile is no environment variable: `numerics.profile()` sets `CompileOptions.numerics`.

Entries are written to a temporary file and renamed into place, so concurrent compiles of the same program
never see a partial entry; the last writer wins with identical bytes. `TESSERA_CACHE_DIR` moves the cache
(default ~/.cache/tessera); `TESSERA_CACHE=0` turns it off.

Nothing here imports MLIR or a backend: the caller hands over the backends' hashes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pathlib
import tempfile

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


def _path(k: str) -> pathlib.Path:
    return directory() / k[:2] / f"{k}.tessera"


def lookup(k: str) -> bytes | None:
    try:
        return _path(k).read_bytes()
    except OSError:
        return None


def store(k: str, image: bytes) -> None:
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(image)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written is only slower, never wrong
