"""tessera-objdump: shows what a `.tessera` image holds — ABI version, sections, kernel metadata (as YAML, the
form of spec/system-architecture.md §11.2), the IR and plan versions it records (and what of it this release
refuses by docs/image-format.md's rule), its symbols and relocations (`.tessera.rel`), each function's
arguments and results as its launch plan takes them (and its operator parameters and results, as
TessOperatorDesc records), and the module's Graph IR."""

from __future__ import annotations

import argparse
import sys

from .. import dtypes
from ..abi import KIND_NAMES
from ..image import ImageError, read_image, symbols
from .. import plan
from ..image.format import (ARG_READONLY, BYTECODE_VERSION, FLAG_SIMT, IR_MAJOR, IR_MINOR, Versions, ir_refusal,
                            plan_refusal)
from .errors import ToolError, tool_main

_SHT = {1: "PROGBITS", 3: "STRTAB", 7: "NOTE"}


def _yaml_str(s: str) -> str:
    return s if s and all(c.isalnum() or c in "_-." for c in s) else '"' + s.replace('"', '\\"') + '"'


def kernel_yaml(k, dtype_name) -> list[str]:
    block = "any" if k.block == (0, 0, 0) else f"[{k.block[0]}, {k.block[1]}, {k.block[2]}]"
    lines = [f"  - name: {_yaml_str(k.name)}",
             f"    target: {k.target}",
             f"    arch: {k.arch}",
             f"    entry: {_yaml_str(k.entry)}",
             f"    section: {k.section}",
             f"    model: {'simt' if k.flags & FLAG_SIMT else 'tile'}",
             f"    launch: {{grid: from-arguments, block: {block}, warp_size: {k.warp_size}}}",
             f"    resources: {{regs_per_thread: {k.regs}, smem_per_cta: {k.smem_bytes}}}",
             "    args:"]
    for i, a in enumerate(k.args):
        entry = f"{{index: {i}, name: {_yaml_str(a.name)}, kind: {KIND_NAMES[a.kind]}, dtype: {dtype_name(a.dtype)}"
        if a.kind == 1:
            shape = ", ".join(str(d) if d >= 0 else _yaml_str(k.args[-d - 1].name) for d in a.dims)
            entry += f", shape: [{shape}], access: {'read' if a.flags & ARG_READONLY else 'read-write'}"
        lines.append(f"      - {entry}}}")
    if k.props:
        lines.append("    properties:")
        lines += [f"      {_yaml_str(key)}: {_yaml_str(v)}" for key, v in k.props.items()]
    return lines


def symbols_yaml(section: bytes) -> list[str]:
    """The image's symbol table and relocations (`.tessera.rel`), or why they cannot be read."""
    try:
        syms = symbols.Symbols.decode(section)
    except ImageError as e:
        return [f"symbols_refused: {_yaml_str(str(e))}"]
    out = ["symbols:"]
    out += [f"  - {{name: {_yaml_str(n)}, bind: export, signature: {_yaml_str(symbols.show_signature(sig))}}}"
            for n, sig in syms.exports.items()]
    out += [f"  - {{name: {_yaml_str(n)}, bind: import, module: {_yaml_str(imp['module'])}, "
            f"signature: {_yaml_str(symbols.show_signature(imp['signature']))}}}" for n, imp in syms.imports.items()]
    out.append("relocations:" + ("" if syms.relocations else " []"))
    out += [f"  - {{function: {_yaml_str(r.function)}, step: {r.step}, kind: call, symbol: {_yaml_str(r.symbol)}}}"
            for r in syms.relocations]
    return out


def functions_yaml(section: bytes) -> list[str]:
    """Each function's arguments and results as a call passes them (its launch plan's values): the dtype and
    extents in memory, and the dtype declared where they differ (an fp8 parameter taken as f32 values, an i4
    tensor as its bytes, u8 with the last extent halved)."""
    try:
        plans = plan.decode(section)
    except plan.PlanError as e:
        return [f"functions_refused: {_yaml_str(str(e))}"]

    def value(name: str, vid: str) -> str:
        v = plans[fn].values[vid]
        declared = f", declared: {v.declared}" if v.declared else ""
        dims = ", ".join(map(_yaml_str, v.dims))
        return f"      - {{name: {_yaml_str(name)}, dtype: {v.dtype}, dims: [{dims}]{declared}}}"
    out = ["functions:"]
    for fn, p in plans.items():
        out += [f"  - name: {_yaml_str(fn)}", "    args:"]
        out += [value(n, vid) for n, vid in zip(p.params, p.args)]
        out.append("    results:")
        out += [value(f"result{i}", vid) for i, vid in enumerate(p.results)]
        if p.operators:
            out.append("    operators:")
            out += [operator_yaml(o, p.params if o.role == "param" else
                                  [f"result{i}" for i in range(len(p.results))]) for o in p.operators]
    return out


def operator_yaml(o: plan.OperatorRecord, names) -> str:
    """An operator parameter or result as its TessOperatorDesc (runtime/include/tessera/operator.h) describes
    it, its payload named by the parameters or results that carry it, and the ABI spec's §5.3 contracts."""
    entry = (f"      - {{name: {_yaml_str(o.name)}, role: {o.role}, repr: {o.repr}, tag: {o.tag}, "
             f"flags: [{', '.join(o.flags)}], payload: [{', '.join(_yaml_str(names[i]) for i in o.payload)}]")
    if o.decomposition is not None:
        entry += f", decomposition: {o.decomposition}"
    if o.frame_bytes is not None:
        entry += f", frame_bytes: {o.frame_bytes}, depth: {o.depth}"
    return entry + "}"


def render(img, show_ir: bool = True) -> str:
    out = [f"abi_version: {img.abi[0]}.{img.abi[1]}", "sections:"]
    for s in img.sections:
        out.append(f"  - {{name: {s.name}, type: {_SHT.get(s.type, s.type)}, offset: {s.offset}, size: {s.size}}}")
    out.append("kernels:")
    for k in img.kernels:
        out += kernel_yaml(k, lambda c: dtypes.BY_CODE[c].name if c in dtypes.BY_CODE else f"code{c}")
    v = img.versions
    if v == Versions.NONE:
        out.append("versions: none  # made before images recorded them: IR and plan version 0")
    else:
        out.append(f"versions: {{ir: {v.ir[0]}.{v.ir[1]}, bytecode: {v.bytecode}, plan: {v.plan}}}")
    # what this release does with the image's Graph IR and plans (docs/image-format.md, "Versions")
    out.append(f"reader: {{ir: {IR_MAJOR}.{IR_MINOR}, bytecode: {BYTECODE_VERSION}, plan: {plan.VERSION}}}")
    for what, why in (("graph_ir", ir_refusal(v)), ("plan", plan_refusal(v, plan.READS))):
        if why:
            out.append(f"refused_{what}: {_yaml_str(why)}")
    rel = img.section(symbols.SECTION)
    if rel is not None:
        out += symbols_yaml(rel)
    plans = img.section(plan.SECTION)
    if plans is not None and not plan_refusal(v, plan.READS):
        out += functions_yaml(plans)
    if show_ir and img.ops is not None and not ir_refusal(v):
        # lazy: MLIR loads only to print the Graph IR
        from ..dialects import make_context
        from ..mlir import ir
        with make_context():
            text = str(ir.Module.parse(img.ops))
        out.append("graph_ir: |")
        out += ["  " + line for line in text.rstrip().splitlines()]
    return "\n".join(out) + "\n"


@tool_main("tessera-objdump")
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tessera-objdump", description=__doc__.splitlines()[0])
    p.add_argument("image")
    p.add_argument("--no-ir", action="store_true", help="leave out the Graph IR")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    with open(args.image, "rb") as f:
        data = f.read()
    try:
        img = read_image(data)
    except ImageError as e:
        raise ToolError(f"{args.image}: {e}") from None
    sys.stdout.write(render(img, not args.no_ir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
