"""Code generators, one package per target, and the registry the driver finds them in.

A target is a package that registers its `Backend` (contract.py) when imported. The built-in ones are
imported on first use, by name, so a compilation loads only its own targets' code; others register
themselves before compiling (`tessera.backends.register(MyBackend)`), or through the `tessera.backends`
entry-point group of an installed distribution, which is read only when a name is not known otherwise.
"""

from __future__ import annotations

import importlib

from .contract import Backend

# The built-in targets: packages under tessera.backends that register a backend of their name.
BUILTIN = ("cpu", "ptx", "amdgpu", "spirv")

_registry: dict[str, type[Backend]] = {}


class UnknownTarget(LookupError):
    pass


def register(cls: type[Backend]) -> type[Backend]:
    """Makes `cls` the backend of target `cls.name` (a later registration of a name replaces it)."""
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"{cls!r} is not a tessera.backends.Backend")
    _registry[cls.name] = cls
    return cls


def names() -> tuple[str, ...]:
    """Every target that can be named: the built-in ones, then those registered since."""
    return BUILTIN + tuple(n for n in _registry if n not in BUILTIN)


def get(name: str) -> type[Backend]:
    if name not in _registry:
        if name in BUILTIN:
            importlib.import_module(f"{__name__}.{name}")
        else:
            _from_entry_points(name)
    if name not in _registry:
        raise UnknownTarget(f"unknown target '{name}' (available: {', '.join(names())})")
    return _registry[name]


def for_arch(arch: str) -> str | None:
    """The target an architecture name (`sm_90a`, `gfx942`, `xe-hpc`) belongs to, by its prefix."""
    for name in names():
        if any(arch.startswith(p) for p in get(name).arch_prefixes):
            return name
    return None


def arch_prefixes() -> dict[str, str]:
    return {p: name for name in names() for p in get(name).arch_prefixes}


def _from_entry_points(name: str) -> None:
    from importlib.metadata import entry_points  # lazy: a fifth of a second, paid only for unknown names
    for ep in entry_points(group="tessera.backends"):
        if ep.name == name:
            register(ep.load())


__all__ = ["Backend", "BUILTIN", "UnknownTarget", "register", "names", "get", "for_arch", "arch_prefixes"]
