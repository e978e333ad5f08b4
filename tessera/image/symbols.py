"""The `.tessera.rel` section: an image's symbol table (the functions it exports, the functions it imports,
each with its signature) and its relocations (the plan call steps that call an import). Format:
docs/image-format.md, "Symbols and relocations"; `tessera-link` resolves imports against other images'
exports with it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .format import ImageError

SECTION = ".tessera.rel"
VERSION = 1


@dataclass(frozen=True)
class Relocation:
    function: str   # the caller, a function of the plan document
    step: int       # the index of its call step
    symbol: str     # the import it calls


@dataclass
class Symbols:
    exports: dict[str, dict] = field(default_factory=dict)   # name -> signature
    imports: dict[str, dict] = field(default_factory=dict)   # name -> {"module": str, "signature": signature}
    relocations: list[Relocation] = field(default_factory=list)

    def encode(self) -> bytes:
        return json.dumps({"version": VERSION, "exports": self.exports, "imports": self.imports,
                           "relocations": [[r.function, r.step, r.symbol] for r in self.relocations]},
                          sort_keys=True).encode()

    @staticmethod
    def decode(data: bytes) -> "Symbols":
        """The symbols of a `.tessera.rel` section; ImageError, naming what is wrong, where it is not one."""
        try:
            doc = json.loads(data.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ImageError(f"{SECTION} is not valid JSON: {e}") from None
        if not isinstance(doc, dict) or set(doc) != {"version", "exports", "imports", "relocations"}:
            raise ImageError(f"{SECTION} must be an object of version, exports, imports and relocations")
        if doc["version"] != VERSION:
            raise ImageError(f"{SECTION} is version {doc['version']!r}; this reader reads version {VERSION}")
        exports, imports, relocs = doc["exports"], doc["imports"], doc["relocations"]
        if not isinstance(exports, dict) or not all(_is_signature(s) for s in exports.values()):
            raise ImageError(f"{SECTION}: 'exports' must map names to signatures")
        if not isinstance(imports, dict) or not all(
                isinstance(i, dict) and set(i) == {"module", "signature"} and isinstance(i["module"], str)
                and _is_signature(i["signature"]) for i in imports.values()):
            raise ImageError(f"{SECTION}: 'imports' must map names to {{module, signature}}")
        if not isinstance(relocs, list) or not all(
                isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and type(r[1]) is int and r[1] >= 0
                and isinstance(r[2], str) and r[2] in imports for r in relocs):
            raise ImageError(f"{SECTION}: 'relocations' must be [function, step, symbol] entries naming imports")
        return Symbols(exports, imports, [Relocation(*r) for r in relocs])


def _is_signature(sig) -> bool:
    def tensors(items, named: bool) -> bool:
        return isinstance(items, list) and all(
            isinstance(t, dict) and set(t) == ({"name", "dtype", "dims"} if named else {"dtype", "dims"})
            and isinstance(t["dtype"], str) and isinstance(t["dims"], list)
            and all(isinstance(d, str) for d in t["dims"]) and (not named or isinstance(t["name"], str))
            for t in items)
    return isinstance(sig, dict) and set(sig) == {"params", "results"} and tensors(sig["params"], True) \
        and tensors(sig["results"], False)


def show_signature(sig: dict) -> str:
    """`(X: f32[M, K], W: f32[K, N]) -> f32[M, N]`, for messages and tessera-objdump."""
    def t(x) -> str:
        return f"{x['dtype']}[{', '.join(x['dims'])}]"
    return "(" + ", ".join(f"{p['name']}: {t(p)}" for p in sig["params"]) + ") -> " + \
        ", ".join(t(r) for r in sig["results"])


def mismatch(want: dict, have: dict) -> str | None:
    """How signature `have` (an export) differs from `want` (what an import declares), or None where they agree:
    the same parameters' dtypes and extents and the same results' dtypes and extents, extent names included
    (a caller sizes the results it allocates by them); only parameter names may differ."""
    def strip(sig):
        return ([(p["dtype"], p["dims"]) for p in sig["params"]], [(r["dtype"], r["dims"]) for r in sig["results"]])
    if strip(want) != strip(have):
        return f"{show_signature(have)} is not {show_signature(want)}"
    return None
