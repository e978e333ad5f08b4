"""Builds the GPU tests' images where the compiler is installed, for a GPU machine that has only the runtime.

    python tests/gpu/build_images.py OUTDIR
    # there:  TESSERA_GPU_IMAGES=OUTDIR pytest -m gpu tests/gpu
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from compile_env import environment  # noqa: E402
from kernels import CPU_TWINS, LINKED, OPTIONS, SOURCES, build_cpu, build_linked  # noqa: E402
import collectives_gpu  # noqa: E402
import data_parallel_gpu  # noqa: E402
import examples_gpu  # noqa: E402
import fp8_memory_gpu  # noqa: E402
import row_registers_gpu  # noqa: E402
import tune_split_gpu  # noqa: E402

from tessera import compiler  # noqa: E402
from tessera.options import CompileOptions  # noqa: E402


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for name, (source, arch) in SOURCES.items():
        with environment(name):
            result = compiler.compile_source(source, f"{name}.py", CompileOptions(target="ptx", arch=arch,
                                                                                       **OPTIONS.get(name, {})))
        with open(os.path.join(out, f"{name}.tessera"), "wb") as f:
            f.write(result.image)
        print(f"{name}.tessera ({arch})")
    for name in CPU_TWINS:
        with open(os.path.join(out, f"{name}.cpu.tessera"), "wb") as f:
            f.write(build_cpu(name))
        print(f"{name}.cpu.tessera (cpu)")
    for name in LINKED:
        for target in ("ptx", "cpu"):
            with tempfile.TemporaryDirectory() as work:
                image = build_linked(name, target, work)
            with open(os.path.join(out, f"{name}.{target}.tessera"), "wb") as f:
                f.write(image)
            print(f"{name}.{target}.tessera (linked)")
    collectives_gpu.build(out)   # test_collectives_gpu's images and the interpreter's values, for 2 and 4 ranks
    data_parallel_gpu.build(out)  # test_data_parallel_gpu's images
    fp8_memory_gpu.build(out)    # test_fp8_memory_gpu's images
    examples_gpu.build(out)      # test_examples_gpu's: every examples/ file for sm_90a, the interpreter's results
    #                              (a file of @kernels: the arrays its declared launches(rng) must produce)
    tune_split_gpu.build(out)    # test_tune_split_gpu's autotuning candidates (sm_90a)
    row_registers_gpu.build(out)  # test_row_registers_gpu's (sm_80, sm_90a)


if __name__ == "__main__":
    main(sys.argv[1])
