"""Which backends a compilation's options name: `--target` (one target or a comma-separated list) and
`--arch` (architectures, each routed to its target by the prefixes the backends register).

Kept apart from the driver so that a compile-cache look-up, which hashes the backends, loads no MLIR.
"""

from __future__ import annotations

from . import backends as registry
from .diagnostics import CompileError
from .options import CompileOptions


def _archs(options: CompileOptions, names: list[str]) -> dict[str, str]:
    """Per target, the architecture `options.arch` (one name or a comma-separated list) asks for it."""
    out: dict[str, str] = {}
    for a in filter(None, (a.strip() for a in options.arch.split(","))):
        target = registry.for_arch(a)
        if target is None or target not in names:
            known = ", ".join(f"{p}… for {t}" for p, t in registry.arch_prefixes().items())
            raise CompileError(f"architecture '{a}' is for none of the targets {','.join(names)} ({known})")
        if target in out:
            raise CompileError(f"architectures '{out[target]}' and '{a}' both name the {target} target")
        out[target] = a
    return out


def backends_for(options: CompileOptions) -> list[registry.Backend]:
    """The backends of `options.target`, a target or a comma-separated list of them."""
    names = [t.strip() for t in options.target.split(",")]
    if len(set(names)) != len(names):
        raise CompileError(f"target list '{options.target}' names a target twice")
    try:
        classes = [registry.get(n) for n in names]
    except registry.UnknownTarget as e:
        raise CompileError(str(e)) from None
    archs = _archs(options, names)
    try:
        return [cls.from_options(options, archs.get(cls.name)) for cls in classes]
    except ValueError as e:
        raise CompileError(str(e)) from None
