"""The frontend's normative interfaces (spec/system-architecture.md §3.1):

    tessera_frontend_compile(src, opts) -> ModuleIR
    tessera_validate_shapes(ir, policy) -> Report
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from ..diagnostics import parse_location
from ..dialects import make_context
from ..interpret import run
from ..mlir import ir
from .module import build_module


@dataclass
class ModuleIR:
    """A verified Graph IR module and the MLIR context that owns it."""

    module: ir.Module
    context: ir.Context
    filename: str

    def _names(self, attr: str) -> list[str]:
        return [ir.StringAttr(op.attributes["sym_name"]).value for op in self.module.body.operations
                if op.operation.name == "func.func" and attr in op.attributes]

    @property
    def functions(self) -> list[str]:
        return self._names("tessera.function")

    @property
    def kernels(self) -> list[str]:
        return self._names("tessera.kernel")

    def bytecode(self) -> bytes:
        buf = io.BytesIO()
        self.module.operation.write_bytecode(buf)
        return buf.getvalue()

    def text(self, locations: bool = False) -> str:
        with self.context:
            return self.module.operation.get_asm(enable_debug_info=locations)

    __str__ = text

    def interpret(self, name: str, *args, world: int = 1):
        return run(self.module, name, *args, world=world)


@dataclass
class Issue:
    filename: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}: {self.message}"


@dataclass
class Report:
    ok: bool
    issues: list[Issue] = field(default_factory=list)

    def __str__(self) -> str:
        return "shapes OK" if self.ok else "\n".join(map(str, self.issues))


POLICIES = ("symbolic", "static")


def tessera_frontend_compile(src: str, opts: dict | None = None) -> ModuleIR:
    """Compiles Python source text to verified Graph IR. `opts`: ``filename`` (for locations) and
    ``functions`` (names to keep; default all), ``include`` (directories to find imported modules in, after
    the file's own) and ``define_imports`` (build imported functions whole, for the interpreter, rather than
    declare them) and ``derivatives`` ((name, kind, of, argnums) tuples: derivatives added to the file's own,
    see frontend/derivatives.py). Raises CompileError at the user's file:line:col."""
    opts = dict(opts or {})
    filename = opts.pop("filename", "<string>")
    only = opts.pop("functions", None)
    include = tuple(opts.pop("include", ()))
    define = bool(opts.pop("define_imports", False))
    derived = tuple(opts.pop("derivatives", ()))
    if opts:
        raise TypeError(f"unknown frontend option(s): {', '.join(sorted(opts))}")
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = build_module(src, filename, list(only) if only else None, include, define, derived)
    return ModuleIR(module, ctx, filename)


def tessera_validate_shapes(module: ModuleIR, policy: str = "symbolic") -> Report:
    """Checks every op's shapes against its rules (the verifiers). Policy ``symbolic`` accepts extents known
    only at run time; ``static`` also reports every tensor value whose shape is not fully static."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    issues: list[Issue] = []
    with module.context:
        try:
            module.module.operation.verify()
        except ir.MLIRError as e:
            for d in e.error_diagnostics:
                issues.append(_issue(str(d.location), d.message, module.filename))
        if policy == "static":
            for op in _walk(module.module.operation):
                for r in op.results:
                    if isinstance(r.type, ir.RankedTensorType) and not r.type.has_static_shape:
                        issues.append(_issue(str(op.location), f"'{op.operation.name}' produces {r.type}, "
                                                               f"whose shape is not static", module.filename))
    return Report(not issues, issues)


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner
                yield from _walk(inner)


def _issue(loc: str, message: str, filename: str) -> Issue:
    where = parse_location(loc)
    return Issue(filename, 0, 0, message) if where is None else Issue(*where, message)


__all__ = ["ModuleIR", "Report", "Issue", "tessera_frontend_compile", "tessera_validate_shapes"]
