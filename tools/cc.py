"""tessera-cc: compiles the @kernel functions of a Python source file into a `.tessera` image.

The source is read as an AST and never executed. A mistake in it is reported as file:line:col and the exit
status is 1; nothing is written then.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from .. import cache
from ..frontend.sources import keyed_source
from ..options import DEFAULT_BUCKET_BYTES, CompileOptions, parse_chunks
from ..selection import backends_for
from . import overwrite
from .errors import ToolError, check_writable, read_text, tool_main

# The file name extension of each stage's artifact in a --dump-ir-after-all directory (by the stage name's
# last dotted part); other stages print MLIR.
_DUMP_EXT = {"llir": "ll", "obj": "o", "so": "so", "ptx": "ptx", "hsaco": "hsaco", "spv": "spv", "image": "tessera"}
_DUMP_NAME = re.compile(r"\d{2,}-[\w.]+\.(%s|mlir)" % "|".join(_DUMP_EXT.values()))


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="tessera-cc", description=__doc__.splitlines()[0])
    p.add_argument("source", help="a Python file with @kernel functions")
    p.add_argument("-o", "--output", help="the image to write (default: SOURCE with .tessera)")
    p.add_argument("--target", default="cpu",
                   help="code target: cpu (default), ptx, amdgpu, spirv, or a comma-separated list "
                        "(cpu,ptx,amdgpu,spirv) for one image")
    p.add_argument("--kernel", action="append", default=[], help="compile only this kernel (repeatable)")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="find imported modules in DIR too, after the source's own directory (repeatable)")
    p.add_argument("--cpu", default="native", help="LLVM CPU name for the cpu target: native (default), generic, …")
    p.add_argument("--arch", default="",
                   help="GPU architecture(s), comma-separated, each for its target: sm_80 (ptx's default; runs "
                        "on every later GPU), sm_90a, …; gfx942 (amdgpu's default, MI300), gfx90a, gfx1100; "
                        "xe-hpc (spirv: declares Intel Xe-HPC's matrix hardware; default: none)")
    p.add_argument("--no-bounds-checks", dest="bounds_checks", action="store_false",
                   help="cpu target: omit the run-time checks of tensor accesses not provably in bounds")
    p.add_argument("--gpu-bounds-checks", action=argparse.BooleanOptionalAction, default=None,
                   help="ptx, amdgpu and spirv targets: check at run time the tensor accesses not "
                        "provably in bounds (what debug mode, TESSERA_DEBUG=1, needs; default: on where "
                        "TESSERA_DEBUG is set)")
    p.add_argument("--bucket-bytes", type=int, default=DEFAULT_BUCKET_BYTES, metavar="N",
                   help="data parallelism: all-reduce gradients in buckets of N bytes (default 25 MiB; "
                        "op.all_reduce(bucket=) sets its own bucket's)")
    p.add_argument("--collective-chunks", type=_chunks, default=0, metavar="K",
                   help="tensor parallelism: run a matmul feeding an all_reduce in K row chunks, each chunk's "
                        "all_reduce overlapping the next chunk's GEMM (default 0: the target's, 4 on ptx and "
                        "amdgpu, 1 elsewhere); weights such as 6:6:3:1 ask uneven chunks (a smaller last one)")
    p.add_argument("--profile", default=None, choices=["fast", "default", "deterministic", "strict"],
                   help="numerics profile (docs/portability.md, \"Numerics profiles\"): fast (the default), "
                        "deterministic or strict; a function's numerics= hint may make it stricter")
    p.add_argument("--input-precision", default="ieee", choices=["ieee", "tf32"],
                   help="how f32 matmul operands are multiplied on GPUs: ieee (the default: f32 products, FMA "
                        "units on ptx) or tf32 (tensor cores, operands cut to tf32's 10-bit fraction); a "
                        "function's input_precision= hint overrides it (docs/nvidia.md)")
    p.add_argument("-O", dest="opt_level", type=int, default=3, choices=[0, 1, 2, 3], help="optimization level")
    p.add_argument("--emit-header", metavar="H", help="also write a C header with a typed launcher per kernel and a call wrapper per @function")
    p.add_argument("--dump-ir-after-all", metavar="DIR", help="write every stage's IR into DIR")
    p.add_argument("--compile-to", metavar="STAGE", help="stop after STAGE and write its output to -o")
    p.add_argument("--from", dest="start_after", metavar="STAGE",
                   help="SOURCE is the .mlir a stage printed (--compile-to/--dump-ir-after-all): continue after it")
    p.add_argument("--list-stages", action="store_true", help="print the stages of the target and exit")
    return p.parse_args(argv)


def _chunks(value: str):
    """--collective-chunks: a count K, or uneven chunks' weights W0:W1:..."""
    try:
        return parse_chunks(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _write(path: str, artifact) -> None:
    mode = "wb" if isinstance(artifact, (bytes, bytearray)) else "w"
    with open(path, mode) as f:
        f.write(artifact)


@tool_main("tessera-cc")
def main(argv=None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    options = CompileOptions(target=args.target, kernels=tuple(args.kernel), include=tuple(args.include), cpu=args.cpu, arch=args.arch,
                             opt_level=args.opt_level, bounds_checks=args.bounds_checks, bucket_bytes=args.bucket_bytes,
                             collective_chunks=args.collective_chunks, input_precision=args.input_precision,
                             **({} if args.profile is None else {"numerics": args.profile}),
                             **({} if args.gpu_bounds_checks is None else {"gpu_bounds_checks": args.gpu_bounds_checks}))
    problem = None if args.list_stages else _overwrites_input(args)
    if problem:
        print(f"tessera-cc: error: {problem}", file=sys.stderr)
        return 1
    if not args.list_stages:
        read_text(args.source)
        _check_outputs(args)
    plain = not (args.list_stages or args.dump_ir_after_all or args.compile_to or args.start_after)
    if plain and _from_cache(args, options):
        return 0
    # lazy: the compiler loads MLIR and LLVM, which a cache hit does without
    from ..compiler import compile_file, compile_ir_file, stage_names
    if args.list_stages:
        print("\n".join(stage_names(options)))
        return 0
    for flag, stage in (("--from", args.start_after), ("--compile-to", args.compile_to)):
        if stage is not None and stage not in stage_names(options):
            raise ToolError(f"{flag} {stage}: no such stage (stages: {', '.join(stage_names(options))})")
    stages_seen: list[tuple[str, object]] = []

    def on_stage(name, artifact):
        stages_seen.append((name, artifact))

    want_stages = args.dump_ir_after_all or args.compile_to
    compile_ = compile_ir_file if args.start_after else compile_file
    extra = {"start_after": args.start_after} if args.start_after else {}
    result = compile_(args.source, options, stop_after=args.compile_to,
                      on_stage=on_stage if want_stages else None, **extra)
    stem = os.path.splitext(args.source)[0]
    if args.dump_ir_after_all:
        os.makedirs(args.dump_ir_after_all, exist_ok=True)
        for i, (name, artifact) in enumerate(stages_seen):
            ext = _DUMP_EXT.get(name.rpartition(".")[2], "mlir")
            _write(os.path.join(args.dump_ir_after_all, f"{i:02d}-{name}.{ext}"), artifact)
    if args.compile_to:
        name, artifact = stages_seen[-1]
        out = args.output or "-"
        if out == "-" and isinstance(artifact, str):
            sys.stdout.write(artifact)
        else:
            _write(out if out != "-" else f"{stem}.{name}", artifact)
        return 0
    _finish(args, result.image)
    return 0


def _check_outputs(args) -> None:
    """Every output can be written: said before compiling, not after the whole compilation."""
    stem = os.path.splitext(args.source)[0]
    if args.compile_to:
        if args.output not in (None, "-"):
            check_writable(args.output, "-o")
    else:
        check_writable(args.output or f"{stem}.tessera", "-o" if args.output else "the output")
        if args.emit_header:
            check_writable(args.emit_header, "--emit-header")
    if args.dump_ir_after_all:
        check_writable(args.dump_ir_after_all, "--dump-ir-after-all", directory=True)


def _overwrites_input(args) -> str | None:
    """Whether an output would replace the source (or another output): a sentence saying which, else None.
    Checked before compiling, so that a refused command writes nothing."""
    stem = os.path.splitext(args.source)[0]
    if args.compile_to:
        # without -o (or with -o -) a text stage goes to standard output, a binary one to STEM.STAGE
        binary = args.compile_to.rpartition(".")[2] in {"obj", "so", "hsaco", "spv", "image"}
        output = args.output if args.output not in (None, "-") else f"{stem}.{args.compile_to}" if binary else "-"
    else:
        output = args.output or f"{stem}.tessera"
    problem = overwrite.clash({"the source": args.source},
                              {"-o" if args.output else "the default output": output,
                               "--emit-header": None if args.compile_to else args.emit_header})
    dump = args.dump_ir_after_all
    if problem or not dump or not os.path.isdir(dump):
        return problem
    for name in sorted(os.listdir(dump)):
        path = os.path.join(dump, name)
        if _DUMP_NAME.fullmatch(name) and overwrite.same_file(path, args.source):
            return (f"--dump-ir-after-all {dump} would overwrite {path}, which is the source ({args.source}); "
                    f"refusing to overwrite an input")
    return None


def _finish(args, image: bytes) -> None:
    _write(args.output or f"{os.path.splitext(args.source)[0]}.tessera", image)
    if args.emit_header:
        # from the image, whether compiled now or served from the cache: its kernels' and its functions' records
        from ..cheader import image_header  # lazy: --emit-header only
        _write(args.emit_header, image_header(image, args.source, os.path.basename(args.emit_header)))


def _from_cache(args, options) -> bool:
    """Serves a whole compilation from the compile cache without loading MLIR or LLVM."""
    if not cache.enabled():
        return False
    try:
        with open(args.source, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return False  # the normal path reports it
    try:
        backends = backends_for(options)
    except Exception:  # an unknown target or architecture: the normal path reports it at its place
        return False
    image = cache.lookup(cache.key(keyed_source(source, args.source, options.include), args.source, options,
                                   [b.hash() for b in backends]))
    if image is None:
        return False
    _finish(args, image)
    return True

if __name__ == "__main__":
    sys.exit(main())
