"""Builds the GPU tests' images where the compiler is installed, for a GPU machine that has only the runtime.

    python tests/gpu/build_images.py OUTDIR
    # there:  TESSERA_GPU_IMAGES=OUTDIR pytest -m gpu tests/gpu
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from kernels import OPTIONS, SOURCES  # noqa: E402

from tessera import compiler  # noqa: E402
from tessera.options import CompileOptions  # noqa: E402


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for name, (source, arch) in SOURCES.items():
        result = compiler.compile_source(source, f"{name}.py", CompileOptions(target="ptx", arch=arch,
                                                                                   **OPTIONS.get(name, {})))
        with open(os.path.join(out, f"{name}.tessera"), "wb") as f:
            f.write(result.image)
        print(f"{name}.tessera ({arch})")


if __name__ == "__main__":
    main(sys.argv[1])
