"""tessera-link: links `.tessera` images into one, resolving each image's imported functions against the others'
exports (docs/image-format.md, "Symbols and relocations").

The linked image holds every input's kernels (each input's code sections stay separate objects, renamed
`.tessera.code.<target>.<n>` for the n-th input after the first; a kernel whose name another input took is
renamed `<name>__<n>`, its plan steps with it), every input's launch plans in one document (a function that is
not exported and whose name another input or a symbol took is renamed `<name>__<n>`), their Graph IR in one
module (an import's declaration gives way to the definition that resolves it) and one symbol table: the
exports of all, the imports none of them resolves. A call step of a resolved import now runs the exporting
input's function, in the same module.

Refused, naming the symbol and both images: a symbol exported twice, an import no input exports (unless
--allow-unresolved, which keeps it an import of the output for a later link), an export whose signature is not
the import's, images of different ABI versions, and images for different targets or architectures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from .. import plan
from ..image import ImageError, read_image, symbols, write_image
from ..image.format import CODE_PREFIX, SEC_OPS, ir_refusal
from . import overwrite
from .errors import ToolError, tool_main


@dataclasses.dataclass
class Input:
    path: str
    img: object
    plans: dict
    syms: symbols.Symbols

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def _read(path: str) -> Input:
    with open(path, "rb") as f:
        return _read_bytes(path, f.read())


def _read_bytes(path: str, data: bytes) -> Input:
    """The input of image `data`, named `path` in messages."""
    try:
        img = read_image(data)
        doc = img.plan
        plans = plan.decode(doc) if doc is not None else {}
        rel = img.section(symbols.SECTION)
        syms = symbols.Symbols.decode(rel) if rel is not None else symbols.Symbols()
    except (ImageError, plan.PlanError) as e:
        raise ToolError(f"{path}: {e}") from None
    return Input(path, img, plans, syms)


def _targets(i: Input) -> set[tuple[str, str]]:
    return {(k.target, k.arch) for k in i.img.kernels}


def _show_targets(t: set) -> str:
    return ", ".join(f"{target} ({arch})" for target, arch in sorted(t)) or "no target"


def check(inputs: list[Input], allow_unresolved: bool) -> dict[str, tuple[Input, dict]]:
    """The exports of all inputs, name -> (input, signature); ToolError for each refusal of the module doc."""
    first = inputs[0]
    for i in inputs[1:]:
        if i.img.abi != first.img.abi:
            raise ToolError(f"ABI version mismatch: {first.name} is ABI {first.img.abi[0]}.{first.img.abi[1]}, "
                            f"{i.name} is ABI {i.img.abi[0]}.{i.img.abi[1]}")
    with_code = [i for i in inputs if i.img.kernels]
    for i in with_code[1:]:
        if _targets(i) != _targets(with_code[0]):
            raise ToolError(f"target mismatch: {with_code[0].name} is for {_show_targets(_targets(with_code[0]))}, "
                            f"{i.name} for {_show_targets(_targets(i))}")
    for i in inputs:
        if i.img.ops is not None and (why := ir_refusal(i.img.versions)):
            raise ToolError(f"{i.name}: {SEC_OPS}: {why}")
    exports: dict[str, tuple[Input, dict]] = {}
    for i in inputs:
        for name, sig in i.syms.exports.items():
            if name in exports:
                raise ToolError(f"duplicate symbol '{name}': exported by {exports[name][0].name} and by {i.name}")
            exports[name] = (i, sig)
    for i in inputs:
        for name, imp in i.syms.imports.items():
            if name not in exports:
                if allow_unresolved:
                    continue
                others = ", ".join(o.name for o in inputs if o is not i) or "no other image"
                raise ToolError(f"unresolved import '{name}' of {i.name} (from module '{imp['module']}'): no image "
                                f"exports it ({others}); link the image that does, or pass --allow-unresolved")
            src, sig = exports[name]
            if src is i:
                raise ToolError(f"'{name}' is both imported and exported by {i.name}")
            why = symbols.mismatch(imp["signature"], sig)
            if why:
                raise ToolError(f"signature mismatch for '{name}': {i.name} imports "
                                f"{symbols.show_signature(imp['signature'])} (from module '{imp['module']}'), "
                                f"{src.name} exports {symbols.show_signature(sig)}")
    return exports


def _unique(name: str, n: int, taken: set[str]) -> str:
    new, k = f"{name}__{n}", 1
    while new in taken:
        k += 1
        new = f"{name}__{n}_{k}"
    return new


def _rename_step(step, kernels: dict[str, str], functions: dict[str, str]):
    if isinstance(step, plan.CallStep):
        return dataclasses.replace(step, call=functions.get(step.call, step.call))
    if isinstance(step, (plan.AliasStep, plan.CollectiveStep)):   # no kernel to rename
        return step
    step = dataclasses.replace(step, kernel=kernels.get(step.kernel, step.kernel))
    if isinstance(step, plan.ArgsStep) and step.prefer:
        step = dataclasses.replace(step, prefer=tuple(dataclasses.replace(a, kernel=kernels.get(a.kernel, a.kernel))
                                                      for a in step.prefer))
    return step


def link(inputs: list[Input], allow_unresolved: bool = False) -> bytes:
    """The linked image of `inputs` (in order); ToolError where it is refused."""
    exports = check(inputs, allow_unresolved)
    symbol_names = set(exports) | {n for i in inputs for n in i.syms.imports}
    kernels, sections, plans = [], {}, {}
    taken_kernels: set[str] = set()
    renamed_functions: list[dict[str, str]] = []
    for n, i in enumerate(inputs):
        suffix = "" if n == 0 else f".{n}"
        section_names = {}
        for s in i.img.sections:
            if s.name.startswith(CODE_PREFIX):
                section_names[s.name] = s.name + suffix
                sections[s.name + suffix] = s.data
        knames = {}
        for k in i.img.kernels:
            if k.name not in knames:   # one name may have a record per target
                knames[k.name] = k.name if k.name not in taken_kernels else _unique(k.name, n, taken_kernels)
            kernels.append(dataclasses.replace(k, name=knames[k.name], section=section_names[k.section]))
        taken_kernels |= set(knames.values())
        fnames = {}
        for name in i.plans:
            clash = name in plans or (name in symbol_names and name not in i.syms.exports)
            fnames[name] = _unique(name, n, set(plans) | symbol_names | set(i.plans)) if clash else name
        for name, p in i.plans.items():
            plans[fnames[name]] = dataclasses.replace(p, steps=tuple(_rename_step(s, knames, fnames) for s in p.steps))
        renamed_functions.append({a: b for a, b in fnames.items() if a != b})
    imports = {name: imp for i in inputs for name, imp in i.syms.imports.items() if name not in exports}
    relocations = [symbols.Relocation(f, s, callee) for f, s, callee in plan.calls(plans) if callee in imports]
    sections[plan.SECTION] = plan.encode(plans)
    sections[symbols.SECTION] = symbols.Symbols({n: sig for n, (_, sig) in exports.items()}, imports,
                                                relocations).encode()
    ops = _graph_ir(inputs, renamed_functions)
    return write_image(kernels, sections, ops=ops, abi=inputs[0].img.abi)


def _graph_ir(inputs: list[Input], renamed: list[dict[str, str]]) -> bytes | None:
    """One Graph IR module of the inputs' modules: their functions, renamed as their plans are, an import's
    declaration left out where an input defines the function."""
    if not any(i.img.ops is not None for i in inputs):
        return None
    # lazy: MLIR loads only to merge Graph IR
    from ..compiler import _bytecode
    from ..dialects import make_context
    from ..mlir import ir
    with make_context(), ir.Location.unknown():
        out = ir.Module.create()
        defined: set[str] = set()
        declarations = []
        for i, names in zip(inputs, renamed):
            if i.img.ops is None:
                continue
            m = ir.Module.parse(i.img.ops)
            for old, new in names.items():
                ir.SymbolTable.replace_all_symbol_uses(old, new, m.operation)
                for op in m.body.operations:
                    if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == old:
                        op.attributes["sym_name"] = ir.StringAttr.get(new)
            for op in list(m.body.operations):
                name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None
                if op.operation.name == "func.func" and "tessera.import" in op.attributes:
                    declarations.append((name, op))
                    continue
                defined.add(name)
                out.body.append(op.operation)
        seen = set()
        for name, op in declarations:
            if name not in defined and name not in seen:
                seen.add(name)
                out.body.append(op.operation)
        return _bytecode(out)


@tool_main("tessera-link")
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tessera-link", description=__doc__.splitlines()[0])
    p.add_argument("images", nargs="+", help="the .tessera images to link, in order")
    p.add_argument("-o", "--output", required=True, help="the linked image to write")
    p.add_argument("--allow-unresolved", action="store_true",
                   help="keep imports no input exports as imports of the output (a later link resolves them)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    problem = overwrite.clash({f"input {k + 1}": path for k, path in enumerate(args.images)}, {"-o": args.output})
    if problem:
        raise ToolError(problem)
    for a in range(len(args.images)):
        for b in range(a):
            if overwrite.same_file(args.images[a], args.images[b]):
                raise ToolError(f"{args.images[a]} is given twice: each image links once")
    data = link([_read(path) for path in args.images], args.allow_unresolved)
    with open(args.output, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
