"""Images of test_row_registers_gpu.py: layernorm, rmsnorm, softmax and log_softmax over bf16 and f32 rows of
2048 and 4096 columns (the register kernel, passes/kernelgen._register_row) and of 1000 (the generic kernel),
compiled for ptx sm_80 and sm_90a; built here (`python tests/gpu/row_registers_gpu.py OUTDIR`, or by
build_images.py where it calls `build`), or on the spot where the compiler is installed."""

import os
import sys

ARCHS = ("sm_80", "sm_90a")
COLS = (2048, 4096, 1000)
DTYPES = ("bf16", "f32")


def source() -> str:
    fns = []
    for dt in DTYPES:
        for c in COLS:
            fns.append(f"""
@function
def rows_{dt}_{c}(X: tensor[{dt}, "N", {c}], g: tensor[{dt}, {c}], b: tensor[{dt}, {c}]):
    return op.layernorm(X, gamma=g, beta=b), op.rmsnorm(X, gamma=g), op.softmax(X), op.log_softmax(X)
""")
    return "".join(fns)


def image_name(arch: str) -> str:
    return f"row_registers.{arch}.tessera"


def compile_image(arch: str) -> bytes:
    from tessera import compiler  # lazy: the compiler, where the images are built
    from tessera.options import CompileOptions  # lazy: as above
    return compiler.compile_source(source(), "row_registers.py", CompileOptions(target="ptx", arch=arch)).image


def build(out: str) -> None:
    for arch in ARCHS:
        with open(os.path.join(out, image_name(arch)), "wb") as f:
            f.write(compile_image(arch))
        print(f"{image_name(arch)} ({arch})")


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    build(sys.argv[1])
