"""tessera-gemm: compiles one fast CPU GEMM kernel (backends/cpu/gemm.py) into a `.tessera` image.

    tessera-gemm --name mlp_up --epilogue bias,gelu --shape 2048,2048,2048 -o mlp_up.tessera
    tessera-gemm --epilogue bias,gelu --compile-to=ttir            # the generated kernel, as MLIR
    tessera-gemm --schedule 48,64,24,32,6,16,8 --compile-to=llir    # MB,NC,MC,KC,MR,NR,VW by hand

The kernel's launch grid is `gemm_grid(spec, M, N)`: (ceil(N/NC), ceil(M/MB), 1); the image records the
block as the kernel property `block` (MBxNC).
"""

from __future__ import annotations

import argparse
import sys

from .errors import ToolError, check_writable, tool_main


def _ints(text: str, count: int, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != count:
        raise argparse.ArgumentTypeError(f"{what} takes {count} comma-separated integers, got '{text}'")
    return values


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="tessera-gemm", description=__doc__.splitlines()[0])
    p.add_argument("--name", default="gemm", help="kernel name (default: gemm)")
    p.add_argument("--dtype", default="f32", help="dtype of A and B: f32 (default), f16, bf16")
    p.add_argument("--epilogue", default="", help="comma-separated steps: scale, bias, relu, gelu, gelu_tanh, "
                                                    "silu, sigmoid, tanh, add")
    p.add_argument("--shape", type=lambda t: _ints(t, 3, "--shape"), metavar="M,N,K",
                   help="the problem the schedule is chosen for (default: 1024,1024,1024)")
    p.add_argument("--schedule", type=lambda t: _ints(t, 7, "--schedule"), metavar="MB,NC,MC,KC,MR,NR,VW",
                   help="a schedule instead of the chosen one")
    p.add_argument("--cpu", default="native", help="LLVM CPU name: native (default), generic, …")
    p.add_argument("-O", dest="opt_level", type=int, default=3, choices=[0, 1, 2, 3], help="optimization level")
    p.add_argument("--compile-to", metavar="STAGE", help="stop after STAGE and write its output")
    p.add_argument("-o", "--output", help="where to write (default: stdout for text stages, else NAME.STAGE or "
                                            "NAME.tessera)")
    return p.parse_args(argv)


@tool_main("tessera-gemm")
def main(argv=None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    # lazy: --help and argument errors answer without loading MLIR and LLVM
    from ..backends.cpu import gemm, gemm_schedule, target
    from ..compiler import CompileOptions
    from .kernels import compile_built

    options = CompileOptions(cpu=args.cpu, opt_level=args.opt_level)
    try:
        if args.schedule:
            mb, nc, mc, kc, mr, nr, vw = args.schedule
            fma = gemm_schedule.vector_isa(target.host(args.cpu)).fma
            schedule = gemm_schedule.Schedule(mb=mb, nc=nc, mc=mc, kc=kc, mr=mr, nr=nr, vector_width=vw, fma=fma)
        else:
            # for the worker threads and caches the CPU backend's options default to
            schedule = gemm_schedule.choose_schedule(*(args.shape or (1024, 1024, 1024)), target.host(args.cpu),
                                                     target.worker_threads(), target.cache_sizes())
        steps = tuple((s.strip(),) for s in args.epilogue.split(",") if s.strip())
        spec = gemm.GemmSpec(args.name, dtype=args.dtype, epilogue=steps, schedule=schedule)
    except ValueError as e:
        raise ToolError(str(e)) from None
    if args.output not in (None, "-"):
        check_writable(args.output, "-o")
    seen: list = []
    result = compile_built(lambda m: gemm.build_gemm(m, spec), options, gemm.image_metadata(spec),
                           stop_after=args.compile_to, on_stage=lambda n, a: seen.append(a))
    artifact = seen[-1] if args.compile_to else result.image
    out = args.output or ("-" if isinstance(artifact, str) else f"{args.name}.{args.compile_to or 'tessera'}")
    if out == "-":
        (sys.stdout if isinstance(artifact, str) else sys.stdout.buffer).write(artifact)
    else:
        with open(out, "w" if isinstance(artifact, str) else "wb") as f:
            f.write(artifact)
    return 0


if __name__ == "__main__":
    sys.exit(main())
