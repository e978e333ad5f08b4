"""Rebuilds the version fixtures of tests/data (README.md there): `python tests/data/make_fixtures.py [NAME...]`.

Only a release that changes what the fixtures promise rebuilds them (docs/image-format.md, "Versions"): the
fixtures are the images an older release built, which every later release loads and runs or refuses by the
rule. The compile cache is bypassed, and the CPU code is built for x86-64-v3 (AVX2, FMA: AMD Zen 3 and Intel
Xeons from Haswell on), not for the building machine."""

from __future__ import annotations

import os
import pathlib
import sys

os.environ["TESSERA_CACHE"] = "0"

from tessera import compiler  # noqa: E402
from tessera.options import CompileOptions  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
CPU = "x86-64-v3"
FIXTURES = {  # image: (source, options)
    "saxpy.cpu.tessera": ("kernels.py", dict(target="cpu", cpu=CPU)),
    "saxpy.cpu-ptx.tessera": ("kernels.py", dict(target="cpu,ptx", cpu=CPU, arch="sm_80")),
    "function.cpu.tessera": ("small_function.py", dict(target="cpu", cpu=CPU)),
    # Plan format 6 (alias steps with offsets) and Graph IR 1.1, made later (issues 16 and 17)
    "pipelined.cpu.tessera": ("pipelined.py", dict(target="cpu", cpu=CPU)),
    # Plan format 7 (a function's broadcasts) and Graph IR 1.2 (quantize, dequantize), made later still (issue 17)
    "quantized.cpu.tessera": ("quantized.py", dict(target="cpu", cpu=CPU)),
}
# Plan format 4 (call steps), .tessera.rel: two modules compiled apart and linked by tessera-link.
LINKED = {"linked.cpu.tessera": (("module_caller.py", "module_callee.py"), dict(target="cpu", cpu=CPU))}


def main(argv: list[str]) -> int:
    """Rebuilds the fixtures named in `argv` (all of them without names)."""
    from tessera.tools import link
    for name, (source, options) in FIXTURES.items():
        if argv and name not in argv:
            continue
        result = compiler.compile_file(str(HERE / source), CompileOptions(**options))
        (HERE / name).write_bytes(result.image)
        print(f"{name}: {len(result.image)} bytes")
    for name, (sources, options) in LINKED.items():
        if argv and name not in argv:
            continue
        inputs = [link._read_bytes(src, compiler.compile_file(str(HERE / src), CompileOptions(**options)).image)
                  for src in sources]
        (HERE / name).write_bytes(link.link(inputs))
        print(f"{name}: {(HERE / name).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
