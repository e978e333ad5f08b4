"""tessera-opt: runs passes over MLIR files with Tessera's dialects loaded, as mlir-opt does.

    tessera-opt in.mlir --pass-pipeline='builtin.module(tessera-simt-to-warps,canonicalize)'
    tessera-opt in.mlir --tessera-simt-to-warps --canonicalize      # passes as flags, in order
    tessera-opt in.mlir --split-input-file --verify-diagnostics     # verifier tests
"""

from __future__ import annotations

import argparse
import sys

from ..diagnostics import parse_location
from . import overwrite
from .errors import ToolError, check_writable, read_text, tool_main


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="tessera-opt", description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="?", default="-", help="an .mlir file, or - for standard input")
    p.add_argument("-o", dest="output", default="-", help="where to write the result (default: stdout)")
    p.add_argument("--pass-pipeline", "-p", default=None, help="a textual pipeline, e.g. builtin.module(cse)")
    p.add_argument("--split-input-file", action="store_true", help="treat '// -----' as separating inputs")
    p.add_argument("--verify-diagnostics", action="store_true", help="check errors against expected-error")
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument("--list-passes", action="store_true", help="list Tessera's own passes")
    args, rest = p.parse_known_args(argv)
    flags = []
    for r in rest:  # mlir-opt style: every other --flag is a pass, run in the order given
        if not r.startswith("--"):
            p.error(f"unexpected argument '{r}'")
        name, _, opts = r[2:].partition("=")
        flags.append(f"{name}{{{opts}}}" if opts else name)
    if args.pass_pipeline and flags:
        p.error("give either --pass-pipeline or pass flags, not both")
    return args, flags


@tool_main("tessera-opt")
def main(argv=None) -> int:
    args, flags = _parse_args(sys.argv[1:] if argv is None else argv)
    problem = overwrite.clash({"the input": args.input}, {"-o": args.output})
    if problem:
        raise ToolError(problem)
    text = sys.stdin.read() if args.input == "-" else read_text(args.input)
    if args.output != "-":
        check_writable(args.output, "-o")
    # lazy: --help and argument errors answer without loading MLIR
    from ..dialects import make_context
    from ..mlir import ir
    from ..passes.registry import PASSES, build_pass_manager
    from . import diagnostics

    if args.list_passes:
        for info in PASSES.values():
            print(f"  --{info.name}: {info.summary}")
        return 0
    filename = "<stdin>" if args.input == "-" else args.input
    chunks = text.split("// -----") if args.split_input_file else [text]
    pipeline = args.pass_pipeline or ",".join(flags)
    outputs, failed, line_base = [], False, 0
    for chunk in chunks:
        with make_context():
            errors: list[tuple[str, str]] = []
            module = None
            try:
                module = ir.Module.parse(chunk)
                if pipeline:
                    build_pass_manager(pipeline).run(module.operation)
            except ir.MLIRError as e:
                errors = [(str(d.location), d.message) for d in e.error_diagnostics]
                module = None
            except ValueError as e:  # a pipeline that does not parse (its first line says where)
                raise ToolError(str(e).strip().splitlines()[0]) from None
            if args.verify_diagnostics:
                problems = diagnostics.check(chunk, errors, line_base, filename)
                for pr in problems:
                    print(pr, file=sys.stderr)
                failed |= bool(problems)
            elif errors:
                for loc, msg in errors:
                    print(f"{_where(loc, filename, line_base)}: error: {msg}", file=sys.stderr)
                failed = True
            if module is not None:
                outputs.append(module.operation.get_asm(enable_debug_info=args.mlir_print_debuginfo))
        line_base += chunk.count("\n")
    if not args.verify_diagnostics:
        out = "\n// -----\n".join(outputs)
        if args.output == "-":
            sys.stdout.write(out)
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(out)
    return 1 if failed else 0


def _where(loc: str, filename: str, line_base: int) -> str:
    where = parse_location(loc)
    if where is None:
        return filename
    f, line, col = where
    f = filename if f in ("-", "") else f
    return f"{f}:{line + (line_base if f == filename else 0)}:{col}"


if __name__ == "__main__":
    sys.exit(main())
